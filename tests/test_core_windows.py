"""Member windows (dgdm_tf.core.windows): crops and placement against NumPy slicing,
and the model's grids reach exactly each member's footprint."""

from __future__ import annotations

import numpy as np
import pytest

from dgdm_tf.core import windows as mw
from dgdm_tf.core.model import DeepModel


def test_crop_and_place_against_numpy():
    rng = np.random.default_rng(0)
    plane = rng.normal(size=(2, 11, 9, 3)).astype(np.float32)
    grid = mw.Grid(start_h=1, start_w=2, stride_h=4, stride_w=5, size_h=3, size_w=4, n_h=3, n_w=2)
    real = np.array([0, 1, 2, 4])  # slot 3 = (1, 1) and 5 = (2, 1) are padding
    win = mw.crop(plane, grid, real).numpy()
    assert win.shape == (2 * 4, 3, 4, 3)
    padded = np.pad(plane, [(0, 0), (0, 4), (0, 4), (0, 0)])
    for n in range(2):
        for i, s in enumerate(real):
            th, tw = divmod(int(s), 2)
            r, c = 1 + 4 * th, 2 + 5 * tw
            np.testing.assert_array_equal(win[n * 4 + i], padded[n, r: r + 3, c: c + 4])
    back = mw.place(win, grid, real, 11, 9).numpy()
    keep = np.zeros_like(plane)
    for s in real:
        th, tw = divmod(int(s), 2)
        r, c = 1 + 4 * th, 2 + 5 * tw
        keep[:, r: r + 3, c: c + 4] = plane[:, r: r + 3, c: c + 4]
    np.testing.assert_array_equal(back, keep)
    vals = rng.normal(size=(2, 3, 2, 5)).astype(np.float32)
    per = mw.per_member(vals, real).numpy()
    np.testing.assert_array_equal(per, vals.reshape(2, 6, 5)[:, real].reshape(-1, 5))
    grid_back = mw.to_grid(per, real, 3, 2).numpy().reshape(2, 6, 5)
    np.testing.assert_array_equal(grid_back[:, real], vals.reshape(2, 6, 5)[:, real])
    assert not grid_back[:, [3, 5]].any()


def test_overlapping_windows_are_refused():
    with pytest.raises(ValueError, match="overlap"):
        mw.Grid(0, 0, 3, 3, 4, 2, 2, 2)


@pytest.mark.parametrize("layers", [
    [{"dict_size": 3, "n_dict": 2, "pool": 2}, {"dict_size": 3, "n_dict": 2, "pool": 2},
     {"dict_size": 2, "n_dict": 2, "pool": 2}, {"dict_size": 2, "n_dict": 2, "pool": 1}],
    [{"dict_size": 5, "n_dict": 2, "pool": 4}, {"dict_size": 5, "n_dict": 2, "pool": 2},
     {"dict_size": 3, "n_dict": 2, "pool": 2}, {"dict_size": 3, "n_dict": 2, "pool": 1}],
])
def test_data_plane_windows_are_the_footprints(layers):
    """The data-plane window of every member is its colouring footprint (ext, at the
    colouring's step), and every member's whole image through the layers lies inside it:
    a unit of S[l] at each corner of its block, pushed down with every unpooling
    position on (the widest image it can have), is zero outside the window."""
    import tensorflow as tf

    from dgdm_tf.core.model import down_from
    from dgdm_tf.core.ops import full_conv

    shape = (60, 52, 1) if layers[0]["pool"] == 2 else (92, 92, 1)
    model = DeepModel(shape, layers)
    ds = [tf.ones([g.dh, g.dw, g.c, g.k]) for g in model.geoms]
    for l in range(1, model.n_layers):
        g, col = model.geoms[l], model.colourings[l]
        zd = [tf.ones([1, gj.hs, gj.ws, gj.k]) for gj in model.geoms[:l]]
        for a, b in col.colours()[:2]:
            _, data = model.member_grids(l, a, b)
            assert (data.size_h, data.size_w) == (col.ext_h, col.ext_w)
            assert (data.start_h, data.start_w) == (a * col.step_h, b * col.step_w)
            s = np.zeros((1, g.hs, g.ws, 1), np.float32)
            blocks = col.member_mask(a, b)
            for u, v in np.argwhere(blocks):
                s[0, u * col.unit: (u + 1) * col.unit, v * col.unit: (v + 1) * col.unit, 0] = 1.0
            img = down_from(full_conv(tf.constant(s), ds[l][..., :1]), l, model, ds, zd).numpy()
            inside = mw.place(mw.crop(img, data, np.flatnonzero(col.real(a, b).ravel())), data,
                              np.flatnonzero(col.real(a, b).ravel()), shape[0], shape[1]).numpy()
            np.testing.assert_array_equal(inside, img)
