"""mcem.classify: each model's features come from the route's own inference with that
model's seed, its decision values are beta^T [standardised s, 1], and the scores are
their average over the models (on a tiny two-layer model, 4 images)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from dgdm_tf.core.model import DeepModel, generate
from dgdm_tf.mcem.classify import alg2_route, classify
from dgdm_tf.mcem.test_time import infer_map
from dgdm_tf.supervised.joint_svm import decision_values
from dgdm_tf.topdown.chain import infer_topdown

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
    kw = dict(burn_in=2, batch_size=len(x), gamma_s=1.0, gamma_e_init=10.0, hyper=HYPER,
              scan="fixed", progress=None)
    out = classify(x, models, mean, std, LAYERS, route=route, seeds=[7, 8], collect=2,
                   chains=chains, iterations=2, rmsprop={"lr": 1e-3, "decay": 0.95, "steps": 1},
                   **kw)
    for j, (d, beta) in enumerate(models):
        if route == "mcem":
            f = infer_map(x, d, LAYERS, seed=7 + j, iterations=2, **kw)["features"]
        else:
            f = infer_topdown(x, d, LAYERS, seed=7 + j, collect=2, chains=chains, **kw)["features"]
            if chains > 1:  # the chains reached infer_topdown: one chain alone differs
                one = infer_topdown(x, d, LAYERS, seed=7 + j, collect=2, **kw)["features"]
                assert not np.array_equal(f, one)
        np.testing.assert_array_equal(out.per_model[j], decision_values([beta], mean, std, f))
    assert not np.array_equal(out.per_model[0], out.per_model[1])
    np.testing.assert_allclose(out.scores, (out.per_model[0] + out.per_model[1]) / 2, rtol=1e-12)
    assert (len(out.q_traces) == 2) == (route == "mcem")
    assert (out.layer1_pooled is not None) == (route == "gibbs") and out.seconds > 0


@pytest.mark.parametrize("route, says", [("map", "route must be"), ("mcem", "needs iterations"),
                                         ("gibbs", "needs collect")])
def test_a_route_without_its_settings_is_refused(route, says):
    models, x, mean, std = _models_and_images(n_models=1)
    with pytest.raises(ValueError, match=says):
        classify(x, models, mean, std, LAYERS, route=route, seeds=[0], burn_in=1, batch_size=4,
                 gamma_s=1.0, scan="fixed")


def test_alg2_route_is_infer_maps_settings_of_a_topdown_features_block():
    block = {"route": "alg2", "scan": "fixed",
             "alg2": {"burn_in": 1, "max_iterations": 3, "tol": 0.01, "batch_size": 16,
                      "rmsprop_lr": 0.001, "rmsprop_decay": 0.95, "rmsprop_steps": 1}}
    assert alg2_route(block, hyper=None) == {
        "route": "mcem", "burn_in": 1, "iterations": 3, "tol": 0.01, "batch_size": 16,
        "rmsprop": {"lr": 0.001, "decay": 0.95, "steps": 1}, "hyper": None, "scan": "fixed"}
    with pytest.raises(ValueError, match="route 'alg2'"):
        alg2_route({**block, "route": "chain"}, hyper=None)
