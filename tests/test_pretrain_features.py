"""Feature inference with the dictionaries fixed: it recovers the true pooled codes of
data drawn from the model, is reproducible, and has the documented shape."""

import numpy as np
import pytest

from _layer_features import layer_features
from dgdm_tf.pretrain.features import infer_features
from dgdm_tf.pretrain.options import FeatureOptions, Pretrained
from dgdm_tf.pretrain.ridge_start import RidgeStart
from dgdm_tf.core.ops import full_conv, pool


def _model_data(n=200, seed=0):
    rng = np.random.default_rng(seed)
    k, d_side, p, side = 3, 4, 2, 13
    d = rng.normal(size=(d_side, d_side, 1, k)).astype(np.float32)
    d *= d_side / np.linalg.norm(d.reshape(-1, k), axis=0)
    hs = side - d_side + 1  # 10: a 5 x 5 block grid
    s = np.zeros((n, hs, hs, k), np.float32)
    for i in range(n):
        for bi in range(hs // p):
            for bj in range(hs // p):
                for kk in range(k):
                    if rng.random() < 0.15:
                        s[i, bi * p + rng.integers(0, p), bj * p + rng.integers(0, p), kk] = (
                            rng.choice([-1, 1]) * (0.5 + rng.random()))
    x = full_conv(s, d).numpy() + 0.05 * rng.normal(size=(n, side, side, 1))
    return x.astype(np.float32), d, s, p


@pytest.mark.slow
def test_posterior_mean_features_recover_the_true_pooled_codes():
    x, d, s, p = _model_data()
    truth = pool(s, p).numpy()
    est = layer_features(x, d, p, 1, gamma_e_init=400.0, burn_in=5, collect=5, batch_size=64)
    assert est.shape == truth.shape
    corr = np.corrcoef(est.ravel(), truth.ravel())[0, 1]
    assert corr > 0.9, corr


def test_features_are_reproducible_and_shaped():
    x, d, s, p = _model_data(n=16)  # two full batches: one trace per layer
    d2 = np.random.default_rng(3).normal(size=(3, 3, 3, 4)).astype(np.float32)
    model = Pretrained([d, d2], [p, 1], [1.0, 1.0])
    # XLA's compile time is the per-layer test's business
    opts = FeatureOptions(burn_in=2, collect=2, batch_size=8, jit_compile=False, start=RidgeStart())
    a = infer_features(x, model, opts, seed=4, progress=None)
    b = infer_features(x, model, opts, seed=4, progress=None)
    c = infer_features(x, model, opts, seed=5, progress=None)
    assert a.shape == (16, 3 * 3 * 4)  # 5x5 pooled -> 3x3 top maps, 4 elements
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


@pytest.mark.slow
def test_jit_compile_per_layer_compiles_only_the_layers_it_names():
    """A per-layer list reaches each layer: layer 1 in graph mode gives bitwise the
    features of an all-graph run; layer 2 under XLA runs the same conditionals but XLA
    generates the stateless random numbers its own way, so its draws are others (that
    they repeat for a seed: tests/test_pretrain_kernel.py). Layer 2 has 2 x 2 positions,
    four colours: a short compile."""
    x, d, s, p = _model_data(n=8)
    d2 = np.random.default_rng(3).normal(size=(4, 4, 3, 4)).astype(np.float32)
    model = Pretrained([d, d2], [p, 1], [1.0, 1.0])
    kw = dict(burn_in=1, collect=1, batch_size=8, start=RidgeStart())
    outs = {}
    for jit in (False, [False, True]):
        layers = []
        outs[str(jit)] = (infer_features(x, model, FeatureOptions(jit_compile=jit, **kw), seed=4,
                                         layer_outputs=layers, progress=None), layers[0])
    (graph, graph_l1), (mixed, mixed_l1) = outs["False"], outs["[False, True]"]
    np.testing.assert_array_equal(graph_l1, mixed_l1)
    assert mixed.shape == graph.shape == (8, 2 * 2 * 4) and np.all(np.isfinite(mixed))
    assert not np.array_equal(mixed, graph)
    with pytest.raises(ValueError, match="one per layer"):
        infer_features(x, model, FeatureOptions(jit_compile=[True], **kw), seed=4, progress=None)


def test_mismatched_channels_are_refused():
    x, d, s, p = _model_data(n=4)
    with pytest.raises(ValueError, match="expects 5 input channels, the input has 3"):
        infer_features(x, Pretrained([d, np.zeros((3, 3, 5, 2), np.float32)], [p, 1], [1.0, 1.0]),
                       FeatureOptions(burn_in=1, collect=1, batch_size=4), seed=0, progress=None)


def test_one_gamma_e_start_per_layer_is_required():
    x, d, s, p = _model_data(n=4)
    with pytest.raises(ValueError, match="gamma_e start per dictionary"):
        Pretrained([d], [p], [1.0], [1.0, 2.0])


def test_chains_are_seeded_and_validated():
    """Several chains: reproducible from the seed, a different estimate from one chain,
    a half-distance only with two chains or more; zero chains are refused."""
    rng = np.random.default_rng(0)
    x = rng.random((5, 10, 10, 1)).astype(np.float32)
    d = rng.normal(size=(3, 3, 1, 2)).astype(np.float32)
    kw = dict(gamma_e_init=None, burn_in=1, collect=1, batch_size=3)
    st = {}
    a = layer_features(x, d, 2, 0, chains=3, stats=st, **kw)
    np.testing.assert_array_equal(a, layer_features(x, d, 2, 0, chains=3, **kw))
    assert a.shape == (5, 4, 4, 2) and np.isfinite(a).all() and st["half_distance"] > 0
    # each chain's traced scalars, batch by batch (3 + 2 images): pooled, chain c's mean
    # feature at its one collected sweep is the mean of its features
    from dgdm_tf.mcmc.diagnostics import pooled_traces
    from dgdm_tf.pretrain.features import TRACE_SCALARS

    assert st["trace_sums"].shape == (2, 3, len(TRACE_SCALARS), 2)
    np.testing.assert_array_equal(st["trace_images"], [3, 2])
    traces = pooled_traces(st["trace_sums"], st["trace_images"], TRACE_SCALARS)
    np.testing.assert_allclose(np.mean([t["feature_mean"][-1] for t in traces]), a.mean(), rtol=1e-5)
    assert st["chain_mixing"]["n_chains"] == 3 and set(st["chain_mixing"]["scalars"]) == set(TRACE_SCALARS)
    st1 = {}
    one = layer_features(x, d, 2, 0, chains=1, stats=st1, **kw)
    assert not np.array_equal(a, one) and "half_distance" not in st1
    with pytest.raises(ValueError, match="chains must be at least 1"):
        layer_features(x, d, 2, 0, chains=0, **kw)
