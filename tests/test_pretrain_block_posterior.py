"""dgdm_tf.pretrain.block_posterior: each block's posterior given the image alone is the
sampler's own block conditional at the all-off state, and it shifts with the image."""

import numpy as np
import pytest
import tensorflow as tf

from dgdm_tf.pretrain import block_posterior as B
from dgdm_tf.pretrain import kernel as P, layer_model as PM
from dgdm_tf.core.layout import LayerGeometry


def _data(n=6, side=14, k=3, dh=4, c=2, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, side, side, c)).astype(np.float32)
    d = rng.normal(size=(dh, dh, c, k)).astype(np.float32)
    return x, d


@pytest.mark.parametrize("side", [14, 15])  # 15: partial edge blocks (Hs = 12 -> 11 + 1)
def test_equals_the_samplers_block_conditional_at_the_all_off_state(side):
    """The first colour a sweep visits sees the whole image as its residual (every block
    starts off, theta at its start): its Rao-Blackwellised pooled values must be the
    isolated block posteriors at those cells."""
    x, d = _data(side=side)
    p, gw, ge = 3, 2.0, 5.0
    geom = LayerGeometry(hx=side, wx=side, c=2, dh=4, dw=4, k=3, p=p)
    # the fixed scan: its first colour and first map are known
    model = PM.LayerModel(geom, PM.Hyper(), top=False, n_images=len(x), scan="fixed")
    st = PM.init_state(x, model, tf.constant([1, 2]))
    st = st._replace(d=tf.constant(d), gamma_w=tf.constant(gw),
                     gamma_e=tf.constant(np.full(len(x), ge, np.float32)))
    _, expected = P.resample_zw(st, tf.constant(x), model, tf.constant([3, 4]),
                                return_expected_pool=True)
    got = B.block_posterior_layer(x, d, p, gamma_w=gw, gamma_e=ge, off=0.9)
    assert got.shape == expected.shape
    # the first colour's blocks (every (gh, gw)-th cell) of the first map
    a, b = model.colour_order[0]
    cells = (slice(None), slice(a, None, geom.gh), slice(b, None, geom.gw), 0)
    np.testing.assert_allclose(got[cells], np.asarray(expected)[cells], rtol=2e-4, atol=1e-6)
    # later maps and colours saw a residual that earlier ones had explained: not isolated
    assert not np.allclose(got, np.asarray(expected), rtol=1e-2, atol=1e-4)


def test_shifting_the_image_by_one_block_shifts_the_features_by_one_cell():
    x, d = _data(side=20)
    p = 2
    shifted = np.zeros_like(x)
    shifted[:, p:, p:] = x[:, :-p, :-p]
    f = B.block_posterior_layer(x, d, p, gamma_w=1.0, gamma_e=3.0)
    g = B.block_posterior_layer(shifted, d, p, gamma_w=1.0, gamma_e=3.0)
    # Hs = 17: 9 cells, the last one partial; g's cell u + 1 is f's cell u wherever
    # neither touches the zero border of the shifted image or a partial block
    np.testing.assert_allclose(g[:, 1:-1, 1:-1], f[:, :-2, :-2], rtol=1e-5, atol=1e-6)


def test_two_layers_and_bad_input():
    x, d = _data()
    d2 = np.random.default_rng(5).normal(size=(2, 2, 3, 4)).astype(np.float32)
    per_layer = []
    f = B.block_posterior_features(x, [d, d2], [2, 1], gamma_ws=[1.0, 1.0], gamma_es=[2.0, 2.0],
                                   batch_size=4, layer_outputs=per_layer)
    assert f.shape == (6, 5 * 5 * 4)  # 14 - 4 + 1 = 11 -> 6x6 pooled -> 6 - 2 + 1 = 5
    np.testing.assert_array_equal(per_layer[0], B.block_posterior_layer(
        x, d, 2, gamma_w=1.0, gamma_e=2.0, batch_size=4))
    np.testing.assert_array_equal(per_layer[1].reshape(6, -1), f)
    with pytest.raises(ValueError, match="expects 2 input channels"):
        B.block_posterior_layer(x[..., :1], d, 2, gamma_w=1.0, gamma_e=1.0)
    with pytest.raises(ValueError, match="one pooling size"):
        B.block_posterior_features(x, [d, d2], [2], gamma_ws=[1.0], gamma_es=[1.0])
