"""The batched window passes of the top units (:mod:`dgdm_tf.topdown.top_units`) and
of the blocks of layers l >= 1 (:mod:`dgdm_tf.topdown.unpooling`): each candidate's image
pushed down to the data plane inside its member's footprint window only
(:mod:`dgdm_tf.core.windows`), the candidates of several maps in one pass."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from dgdm_tf.core import windows as mw
from dgdm_tf.core.model import DeepModel, unpool_blocks
from dgdm_tf.core.ops import full_conv
from dgdm_tf.topdown.scan import per_colour
from dgdm_tf.topdown.state import masked

WINDOW_FLOATS_PER_IMAGE = 1 << 20
"""Memory of the windowed passes: the candidate images of as many maps as fit in this
many floats per image (4 MB) are pushed down in one batched pass; the sequential,
residual-dependent part then runs map after map. The draws do not depend on it.
Larger passes trade memory for a little speed on a CPU (the convolutions' workspaces
grow with the batch); docs/benchmarks/mcem_one_device.md has the measured trade-off."""


def maps_per_pass(model: DeepModel, s_grids: dict, data, cands: int, members: int, k: int) -> int:
    """How many maps' candidates one batched pass pushes down (:data:`WINDOW_FLOATS_PER_IMAGE`)."""
    areas = [gr.size_h * gr.size_w * model.geoms[j].k for j, gr in s_grids.items()]
    areas.append(data.size_h * data.size_w * model.image_shape[2])
    return int(max(1, min(k, WINDOW_FLOATS_PER_IMAGE // max(1, cands * members * max(areas)))))


def window_starts(grids: list, ci):
    """Where colour ci's member windows start on each plane below ({j: (row, col)} on
    S[j], (row, col) on the data plane), picked at run time; None for an int ci (the
    static grids are its own). ``grids``: :meth:`DeepModel.member_grids` per colour. A
    colour's first member is a real block, so its windows start inside every plane (as
    :func:`dgdm_tf.core.windows.crop` needs of a run-time start)."""
    if isinstance(ci, int):
        return None, None

    def pick(gs):
        return tf.unstack(per_colour(np.array([[g.start_h, g.start_w] for g in gs], np.int32), ci))
    return ({j: pick([sg[j] for sg, _ in grids]) for j in grids[0][0]},
            pick([data for _, data in grids]))


def push_windows(x_win, zw: dict, model: DeepModel, d, l: int, mwin=None):
    """Windows of X[l] (B, h, w, K_{l-1}) pushed down to the data plane through the
    cropped unpooling ``zw[j]`` and D[j], j = l-1 .. 0 (``zw`` and ``mwin`` already
    tiled to B: they are fixed while a layer is drawn, so callers tile them once)."""
    for j in range(l - 1, -1, -1):
        x_win = full_conv(unpool_blocks(x_win, zw[j], model.geoms[j].p), d[j])
    return masked(x_win, mwin)


def tiled_crops(zd, mask, s_grids: dict, data, real, reps: int, s_starts=None, d_start=None):
    """The unpooling below a colour's members and the mask, cropped to their windows and
    tiled ``reps`` times (one copy per candidate of a batched pass); ``s_starts``,
    ``d_start``: :func:`window_starts` of a colour picked at run time."""
    zw = {j: tf.tile(mw.crop(zd[j], s_grids[j], real, None if s_starts is None else s_starts[j]),
                     [reps, 1, 1, 1]) for j in s_grids}
    mwin = None if mask is None else tf.tile(mw.crop(mask, data, real, d_start), [reps, 1, 1, 1])
    return zw, mwin
