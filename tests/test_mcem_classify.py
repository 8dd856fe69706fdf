"""mcem.classify: each model's features come from the route's own inference with that
model's seed, its decision values are beta^T [standardised s, 1], and the scores are
their average over the models (on a tiny two-layer model, 4 images)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from dgdm_tf.core.model import DeepModel, generate
from dgdm_tf.mcem.classify import KeptModels, classify
from dgdm_tf.mcem.options import MapOptions, topdown_route
from dgdm_tf.mcem.test_time import infer_map
from dgdm_tf.supervised.joint_svm import decision_values
from dgdm_tf.topdown.chain import infer_topdown
from dgdm_tf.topdown.options import Start, TopdownOptions

HYPER = {"a_e": 3.0, "b_e": 0.3, "a_w": 3.0, "b_w": 3.0, "dict_prior_precision": 1.0}
LAYERS = [{"dict_size": 3, "n_dict": 1, "pool": 2}, {"dict_size": 2, "n_dict": 2, "pool": 1}]


def _models_and_images(n=4, n_models=2, n_classes=3):
    model = DeepModel((6, 6, 1), LAYERS, HYPER)
    rng = np.random.default_rng(0)
    models = []
    for _ in range(n_models):
        d = [rng.normal(size=(g.dh, g.dw, g.c, g.k)).astype(np.float32) for g in model.geoms]
        models.append((d, rng.normal(size=(n_classes, model.top.hs * model.top.ws * model.top.k + 1))))
    gt, g0 = model.top, model.geoms[0]
    s = rng.normal(size=(n, gt.hs, gt.ws, gt.k))
    z = rng.integers(0, g0.n_states, size=(n, g0.nbh, g0.nbw, g0.k)).astype(np.int32)
    x = np.asarray(generate(tf.constant(s, tf.float32), model,
                            [tf.constant(v) for v in models[0][0]], [tf.constant(z)]))
    x = (x + 0.3 * rng.normal(size=x.shape)).astype(np.float32)
    f = gt.hs * gt.ws * gt.k
    return models, x, rng.normal(size=f), 1.0 + rng.random(f)


@pytest.mark.slow
@pytest.mark.parametrize("route, chains", [("mcem", 1), ("gibbs", 1), ("gibbs", 2)])
def test_scores_average_each_models_own_decision_values(route, chains):
    models, x, mean, std = _models_and_images()
    kept = KeptModels([d for d, _ in models], [b for _, b in models], mean, std, LAYERS, HYPER,
                      gamma_s_init=1.0, gamma_e_init=10.0)
    kw = dict(burn_in=2, batch_size=len(x), scan="fixed")
    opts = (MapOptions(iterations=2, **kw) if route == "mcem"
            else TopdownOptions(collect=2, chains=chains, start=None, **kw))
    out = classify(x, kept, opts, seeds=[7, 8], progress=None)
    for j, (d, beta) in enumerate(models):
        start = Start(d, LAYERS, HYPER, gamma_e_init=10.0, gamma_s_init=1.0)
        if route == "mcem":
            f = infer_map(x, start, opts, seed=7 + j, progress=None)["features"]
        else:
            f = infer_topdown(x, start, opts, seed=7 + j, progress=None)["features"]
            if chains > 1:  # the chains reached infer_topdown: one chain alone differs
                one = infer_topdown(x, start, TopdownOptions(collect=2, chains=1, start=None, **kw),
                                    seed=7 + j, progress=None)["features"]
                assert not np.array_equal(f, one)
        np.testing.assert_array_equal(out.per_model[j], decision_values([beta], mean, std, f))
    assert not np.array_equal(out.per_model[0], out.per_model[1])
    np.testing.assert_allclose(out.scores, (out.per_model[0] + out.per_model[1]) / 2, rtol=1e-12)
    assert (len(out.q_traces) == 2) == (route == "mcem")
    assert (out.layer1_pooled is not None) == (route == "gibbs") and out.seconds > 0


def test_options_of_no_route_and_seeds_not_one_a_model_are_refused():
    models, x, mean, std = _models_and_images(n_models=1)
    kept = KeptModels([d for d, _ in models], [b for _, b in models], mean, std, LAYERS)
    with pytest.raises(TypeError, match="MapOptions .* or TopdownOptions"):
        classify(x, kept, {"route": "mcem"}, seeds=[0])
    with pytest.raises(ValueError, match="2 seeds for 1 models"):
        classify(x, kept, MapOptions(), seeds=[0, 1])


def test_topdown_route_is_the_options_of_a_topdown_features_blocks_route():
    block = {"route": "alg2", "scan": "matched",
             "alg2": {"burn_in": 1, "max_iterations": 3, "tol": 0.01, "batch_size": 16,
                      "rmsprop_lr": 0.001, "rmsprop_decay": 0.95, "rmsprop_steps": 1}}
    assert topdown_route(block) == MapOptions(burn_in=1, iterations=3, tol=0.01, batch_size=16,
                                              rmsprop_lr=0.001, rmsprop_decay=0.95, rmsprop_steps=1,
                                              scan="matched")
    chain = topdown_route({**block, "route": "chain", "chains": 3})
    assert chain == TopdownOptions(chains=3, scan="matched") and chain.ridge_start is None
    with pytest.raises(ValueError, match="'alg2' or 'chain'"):
        topdown_route({**block, "route": "map"})
    with pytest.raises(ValueError, match="alg2: unknown key 'iterations'"):
        topdown_route({**block, "alg2": {"iterations": 3}})
