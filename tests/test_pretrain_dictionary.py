"""D's draw in the layer-wise model by its two routes (dgdm_tf.pretrain.dictionary): the
same draw to round-off from the same seed, a residual that stays current, and the route
`auto` picks at the default MNIST shapes. Each route's draw against the exact Gaussian
conditional: tests/test_pretrain_kernel.py::test_d_conditional_matches_exact_gaussian."""

import numpy as np
import pytest
import tensorflow as tf

from dgdm_tf.core.layout import LayerGeometry, layer_geometries
from dgdm_tf.pretrain import dictionary as PD, kernel as P, layer_model as PM
from dgdm_tf.pretrain.blocks import pad_input, reconstruction


def _chain_state(geom, n=5, seed=0):
    """A state three sweeps into a chain: blocks on, D moved from its start."""
    model = PM.LayerModel(geom, PM.Hyper(), top=geom.p == 1, n_images=n)
    x = np.random.default_rng(seed).normal(size=(n, geom.hx, geom.wx, geom.c)).astype(np.float32)
    st = PM.init_state(x, model, tf.constant([1, 2]))
    fn = P.make_sweep_fn(model)
    for _ in range(3):
        st = fn(st, tf.constant(x))
    return model, x, st


@pytest.mark.parametrize("geom", [LayerGeometry(hx=12, wx=11, c=2, dh=3, dw=3, k=4, p=2),
                                  LayerGeometry(hx=6, wx=7, c=5, dh=3, dw=4, k=6, p=1)],
                         ids=["pooled", "top"])
def test_routes_draw_the_same_d_and_keep_the_residual(geom):
    model, x, st = _chain_state(geom)
    assert np.abs(st.s.numpy()).max() > 0  # blocks are on: the correlations are not trivial
    seed = tf.constant([5, 6])
    xt = tf.constant(x)
    loop = PD.resample_d(st, xt, model, seed, route="loop")
    stats = PD.resample_d(st, xt, model, seed, route="statistics")
    scale = np.abs(loop.d.numpy()).max()
    np.testing.assert_allclose(stats.d.numpy(), loop.d.numpy(), atol=1e-5 * scale)
    assert np.abs(stats.d.numpy() - st.d.numpy()).max() > 1e-2 * scale  # D moved
    for new in (loop, stats):  # the residual is X minus the new D's reconstruction
        want = pad_input(x - reconstruction(new.s, new.d, geom), geom).numpy()
        np.testing.assert_allclose(new.resid.numpy(), want, atol=1e-4 * np.abs(x).max())
    other = PD.resample_d(st, xt, model, tf.constant([5, 7]), route="statistics")
    assert np.abs(other.d.numpy() - stats.d.numpy()).max() > 1e-3 * scale  # the seed decides


def test_auto_route_at_the_default_mnist_shapes():
    """Layer 1 (C = 1, K = 50) keeps the loop, layer 2 (C = 50, K = 200 or pruned) takes
    the statistics: the faster route at each (docs/scaling.md)."""
    layers = [dict(dict_size=8, n_dict=50, pool=3), dict(dict_size=6, n_dict=200, pool=1)]
    g1, g2 = layer_geometries((28, 28, 1), layers)
    assert PD.route_for(g1) == "loop"
    assert PD.route_for(g2) == "statistics"
    assert PD.route_for(g1, "statistics") == "statistics"
    with pytest.raises(ValueError, match="route"):
        PD.route_for(g1, "fourier")
