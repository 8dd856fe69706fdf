"""topdown.ridge_start: the top layer's order-free start. Through the whole model, given
the lower layers' unpooling states, the ridge fit recovers top-layer weights drawn from
the model (so J and its adjoint agree); the start depends on the image and the model
only (not on the seed, hence not on any scan order); missing pixels do not enter it."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from dgdm_tf.core.model import DeepModel, dense_indicators, generate, layer_inputs
from dgdm_tf.pretrain.ridge_start import RidgeStart
from dgdm_tf.topdown.ridge_start import top_ridge_fit
from dgdm_tf.topdown.state import init_state

HYPER = {"a_e": 1e-6, "b_e": 1e-6, "a_w": 1e-6, "b_w": 1e-6, "dict_prior_precision": 1.0}
LAYERS = [{"dict_size": 3, "n_dict": 4, "pool": 2}, {"dict_size": 3, "n_dict": 6, "pool": 1}]


def _draws(n=8, noise=0.0, seed=0):
    model = DeepModel((12, 12, 1), LAYERS, HYPER)
    rng = np.random.default_rng(seed)
    d = [rng.normal(size=(g.dh, g.dw, g.c, g.k)).astype(np.float32) for g in model.geoms]
    gt, g0 = model.top, model.geoms[0]
    s = rng.normal(size=(n, gt.hs, gt.ws, gt.k)) * (rng.random((n, gt.hs, gt.ws, gt.k)) < 0.3)
    z = rng.integers(0, g0.n_states, size=(n, g0.nbh, g0.nbw, g0.k)).astype(np.int32)
    x = np.asarray(generate(tf.constant(s, tf.float32), model, [tf.constant(v) for v in d],
                            [tf.constant(z)]))
    return model, d, s.astype(np.float32), z, (x + noise * rng.normal(size=x.shape)).astype(np.float32)


@pytest.mark.slow
def test_the_fit_through_the_model_recovers_the_top_layer_given_z():
    """Every unit on (threshold 0), the true Z, noiseless images: the weights come back
    to a relative error of 1e-2 (the ridge's bias and 200 CG steps in float32)."""
    model, d, s, z, x = _draws()
    zd = [dense_indicators(tf.constant(z), model.geoms[0])]
    dt = [tf.constant(v) for v in d]
    top_input = layer_inputs(tf.constant(s), model, dt, zd)[1]
    fit, on = top_ridge_fit(tf.constant(x), top_input, model, dt, zd,
                            RidgeStart(threshold=0.0, ridge=1e-6, iterations=200))
    assert float(np.mean(on)) == 1.0
    err = np.linalg.norm(np.asarray(fit) - s) / np.linalg.norm(s)
    assert err < 1e-2, err


def test_the_start_is_the_same_for_every_seed_and_fits_the_image():
    model, d, _, _, x = _draws(noise=0.05)
    start = RidgeStart(threshold=0.5, ridge=0.01, iterations=20)
    a = init_state(x, model, d, [1, 2], start=start)
    b = init_state(x, model, d, [7, 9], start=start)
    np.testing.assert_array_equal(np.asarray(a.s_top), np.asarray(b.s_top))
    np.testing.assert_array_equal(np.asarray(a.gamma_e), np.asarray(b.gamma_e))
    off = init_state(x, model, d, [1, 2])
    fit = float(np.sum(np.square(a.resid)) / np.sum(np.square(off.resid)))
    assert float(np.mean(off.on)) == 0.0 and 0 < float(np.mean(a.on)) < 1 and fit < 0.7, fit
    assert np.all(np.asarray(a.on)[np.asarray(a.s_top) != 0] == 1)


def test_missing_pixels_do_not_enter_the_start():
    model, d, _, _, x = _draws(noise=0.05)
    mask = np.ones_like(x)
    mask[:, 6:] = 0.0
    other = x.copy()
    other[:, 6:] = 5.0 * np.random.default_rng(1).normal(size=other[:, 6:].shape)
    start = RidgeStart(threshold=0.5, ridge=0.01, iterations=20)
    a = init_state(x, model, d, [1, 2], mask=mask, start=start)
    b = init_state(other, model, d, [1, 2], mask=mask, start=start)
    np.testing.assert_allclose(np.asarray(a.s_top), np.asarray(b.s_top), rtol=0, atol=1e-6)
    np.testing.assert_allclose(np.asarray(a.gamma_e), np.asarray(b.gamma_e), rtol=1e-6)


def test_the_start_in_chunks_is_the_same_state():
    """init_state(chunk=c): each image's start depends on that image alone, so chunks of
    3 of 8 images (a short last chunk) give the state of all at once, with the ridge
    start and a mask as without them."""
    model, d, _, _, x = _draws(noise=0.05)
    mask = np.ones_like(x)
    mask[:, 6:] = 0.0
    for kw in ({}, {"start": RidgeStart(threshold=0.5, ridge=0.01, iterations=20), "mask": mask}):
        whole = init_state(x, model, d, [1, 2], gamma_e_init=None, **kw)
        parts = init_state(x, model, d, [1, 2], gamma_e_init=None, chunk=3, **kw)
        assert type(parts) is type(whole)
        for name, a, b in zip(whole._fields, whole, parts):
            for u, v in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
                assert u.shape == v.shape, name
                np.testing.assert_allclose(np.asarray(v), np.asarray(u), rtol=1e-5, atol=1e-6,
                                           err_msg=name)
