"""The colour loop of the samplers (:func:`dgdm_tf.topdown.scan.over_colours` and the
pretraining kernel's): a traced sweep holds one colour's step whatever the number of
colours, so tracing and graph optimisation, most of a job's first sweep, do not grow
with the colours; and the looped top-down steps draw what the unrolled ones draw, bit
for bit."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from dgdm_tf.core.layout import LayerGeometry
from dgdm_tf.core.model import DeepModel
from dgdm_tf.pretrain import kernel as P, layer_model as PM
from dgdm_tf.topdown import scan, top_units, unpooling
from dgdm_tf.topdown.state import init_state
from dgdm_tf.topdown.sweep import local_steps


def _nodes(concrete) -> int:
    """Nodes of a traced function, its while loops' bodies (the function library) included."""
    gd = concrete.graph.as_graph_def()
    return len(gd.node) + sum(len(f.node_def) for f in gd.library.function)


def _topdown_nodes(dict_sizes, fast: bool, order: str) -> tuple[int, int]:
    """(graph nodes of local_steps, colours of both layers) of a two-layer 16 x 16 model."""
    model = DeepModel((16, 16, 1), [{"dict_size": dict_sizes[0], "n_dict": 3, "pool": 2},
                                    {"dict_size": dict_sizes[1], "n_dict": 2, "pool": 1}], scan=order)
    rng = np.random.default_rng(0)
    ds = [rng.normal(size=(g.dh, g.dw, g.c, g.k)).astype(np.float32) for g in model.geoms]
    x = rng.normal(size=(2, 16, 16, 1)).astype(np.float32)
    st = init_state(x, model, ds, [1, 2])
    fn = tf.function(lambda st: local_steps(st, x, model, tf.constant([5, 6]), tf.constant([7, 8]),
                                            fast_bottom=fast))
    colours = sum(c.g_h * c.g_w for c in model.colourings)
    return _nodes(fn.get_concrete_function(st)), colours


def test_a_traced_topdown_sweep_does_not_grow_with_the_colours():
    """Footprints 5 and 3 (9 + 16 colours) against 3 and 2 (4 + 9): the same graph size
    within 10 %, on the fast and the generic paths, random and fixed scan."""
    for fast in (True, False):
        for order in ("random", "fixed"):
            small, c_small = _topdown_nodes((3, 2), fast, order)
            large, c_large = _topdown_nodes((5, 3), fast, order)
            assert (c_small, c_large) == (13, 25)
            assert large < 1.1 * small, (fast, order, small, large)


def test_a_traced_pretraining_sweep_does_not_grow_with_the_colours():
    """The pretraining kernel's sweep at footprint 5 (9 colours) against 3 (4 colours)."""
    sizes = []
    for dh in (3, 5):
        geom = LayerGeometry(hx=12, wx=12, c=1, dh=dh, dw=dh, k=3, p=2)
        assert geom.gh * geom.gw == {3: 4, 5: 9}[dh]
        model = PM.LayerModel(geom, PM.Hyper.from_dict(None), top=False, n_images=2)
        x = np.random.default_rng(0).random((2, 12, 12, 1)).astype(np.float32)
        st = PM.init_state(x, model, tf.constant([1, 2]))
        fn = tf.function(lambda st, x: P.resample_zw(st, x, model, tf.constant([3, 4])))
        sizes.append(_nodes(fn.get_concrete_function(st, tf.constant(x))))
    assert sizes[1] < 1.1 * sizes[0], sizes


@pytest.mark.parametrize("fast, scan_order", [(True, "random"), (False, "fixed")],
                         ids=["fast-random", "generic-fixed"])
def test_looped_colours_draw_what_unrolled_colours_draw(monkeypatch, fast, scan_order):
    """local_steps (the top units, then layer 0's blocks) with the colours in one while
    loop and with them unrolled (``over_colours(..., loop=False)``), with a mask: the
    same state, bit for bit, on the fast paths under the random scan and on the generic
    paths under the fixed one."""
    model = DeepModel((16, 16, 1), [{"dict_size": 5, "n_dict": 3, "pool": 2},
                                    {"dict_size": 3, "n_dict": 2, "pool": 1}], scan=scan_order)
    rng = np.random.default_rng(1)
    ds = [rng.normal(size=(g.dh, g.dw, g.c, g.k)).astype(np.float32) for g in model.geoms]
    x = rng.normal(size=(3, 16, 16, 1)).astype(np.float32)
    mask = (rng.random(x.shape) < 0.8).astype(np.float32)
    st = init_state(x, model, ds, [1, 2], mask=mask)

    def run():
        fn = tf.function(lambda st: local_steps(st, x, model, tf.constant([5, 6]), tf.constant([7, 8]),
                                                mask=mask, fast_bottom=fast))
        out, expected = fn(st)
        return [np.asarray(v) for v in tf.nest.flatten(out)] + [expected.numpy()]

    looped = run()
    unrolled = lambda *a, loop: scan.over_colours(*a, loop=False)  # noqa: E731
    monkeypatch.setattr(top_units, "over_colours", unrolled)
    monkeypatch.setattr(unpooling, "over_colours", unrolled)
    for a, b in zip(looped, run()):
        np.testing.assert_array_equal(a, b)
