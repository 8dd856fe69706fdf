"""The windows of one colour's members on a plane: crop them out as a batch, place them
back.

The members of one colour of layer l (:class:`dgdm_tf.core.model.Colouring`) sit on a
regular grid: member t along H spans rows [start + t * stride, start + t * stride + size)
of every plane below it (S[j], X[j], the data plane), with size <= stride, so their
windows never overlap. A candidate's image through the layers below is non-zero only in
its member's window, so the sampler pushes windows down instead of whole planes: the
same numbers at (real members x window area) / (plane area) of the cost
(:func:`dgdm_tf.topdown.unpooling.resample_z`). Members of the padded grid that are not real
blocks are left out.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class Grid:
    """n_h x n_w windows of size_h x size_w, the first at (start_h, start_w), stride apart."""

    start_h: int
    start_w: int
    stride_h: int
    stride_w: int
    size_h: int
    size_w: int
    n_h: int
    n_w: int

    def __post_init__(self) -> None:
        if (self.n_h > 1 and self.size_h > self.stride_h) or (self.n_w > 1 and self.size_w > self.stride_w):
            raise ValueError(f"member windows overlap: {self}")

    @property
    def step_h(self) -> int:
        """Rows between window starts as laid out here (a lone window needs no stride)."""
        return self.stride_h if self.n_h > 1 else self.size_h

    @property
    def step_w(self) -> int:
        return self.stride_w if self.n_w > 1 else self.size_w

    def scaled(self, p: int) -> "Grid":
        """The same windows one unpooling (factor p) further down."""
        return Grid(self.start_h * p, self.start_w * p, self.stride_h * p, self.stride_w * p,
                    self.size_h * p, self.size_w * p, self.n_h, self.n_w)

    def grown(self, extra_h: int, extra_w: int) -> "Grid":
        """The same windows after a full convolution (``extra`` = dictionary size - 1)."""
        return dataclasses.replace(self, size_h=self.size_h + extra_h, size_w=self.size_w + extra_w)


def _slots(real: np.ndarray, n_slots: int) -> np.ndarray:
    """For each slot of the member grid, its index among the real members; padded slots
    point one past the last (a zero entry the callers append)."""
    slots = np.full(n_slots, len(real), np.int32)
    slots[np.asarray(real, np.int64)] = np.arange(len(real), dtype=np.int32)
    return slots


def crop(plane: tf.Tensor, grid: Grid, real: np.ndarray, start=None) -> tf.Tensor:
    """(N, H, W, C) -> (N * M, size_h, size_w, C): the windows of the M ``real`` members
    (flat indices into the n_h x n_w grid), image-major; outside the plane is 0.
    ``start``: (row, column) of the first window in place of the grid's, scalar tensors
    (a colour picked at run time), at most the plane's size."""
    h, w, c = plane.shape[1], plane.shape[2], plane.shape[3]
    sh, sw = grid.step_h, grid.step_w
    if start is None:
        end_h, end_w = grid.start_h + grid.n_h * sh, grid.start_w + grid.n_w * sw
        y = tf.pad(plane, [[0, 0], [0, max(0, end_h - h)], [0, max(0, end_w - w)], [0, 0]])
        y = y[:, grid.start_h: end_h, grid.start_w: end_w, :]
    else:  # padded for any start up to the plane's size
        y = tf.pad(plane, [[0, 0], [0, grid.n_h * sh], [0, grid.n_w * sw], [0, 0]])
        # a roll to the start, then a static slice: under XLA a slice whose start is
        # only known at run time recompiles on every call
        y = tf.roll(y, tf.stack([-start[0], -start[1]]), axis=[1, 2])
        y = y[:, : grid.n_h * sh, : grid.n_w * sw, :]
    y = tf.reshape(y, [-1, grid.n_h, sh, grid.n_w, sw, c])[:, :, : grid.size_h, :, : grid.size_w, :]
    y = tf.reshape(tf.transpose(y, [0, 1, 3, 2, 4, 5]),
                   [-1, grid.n_h * grid.n_w, grid.size_h, grid.size_w, c])
    y = tf.gather(y, np.asarray(real, np.int32), axis=1)
    return tf.reshape(y, [-1, grid.size_h, grid.size_w, c])


def place(windows: tf.Tensor, grid: Grid, real: np.ndarray, out_h: int, out_w: int,
          start=None) -> tf.Tensor:
    """Inverse of :func:`crop`: (N * M, size_h, size_w, C) -> (N, out_h, out_w, C), zeros
    outside the windows (which are disjoint, so nothing is summed); ``start`` as there."""
    m, c = len(real), windows.shape[-1]
    sh, sw = grid.step_h, grid.step_w
    y = tf.reshape(windows, [-1, m, grid.size_h, grid.size_w, c])
    y = tf.gather(tf.concat([y, tf.zeros_like(y[:, :1])], axis=1),
                  _slots(real, grid.n_h * grid.n_w), axis=1)  # padded slots: the zero window
    y = tf.reshape(y, [-1, grid.n_h, grid.n_w, grid.size_h, grid.size_w, c])
    y = tf.pad(y, [[0, 0], [0, 0], [0, 0], [0, sh - grid.size_h], [0, sw - grid.size_w], [0, 0]])
    y = tf.reshape(tf.transpose(y, [0, 1, 3, 2, 4, 5]), [-1, grid.n_h * sh, grid.n_w * sw, c])
    if start is None:
        y = tf.pad(y, [[0, 0], [grid.start_h, max(0, out_h - grid.start_h - grid.n_h * sh)],
                       [grid.start_w, max(0, out_w - grid.start_w - grid.n_w * sw)], [0, 0]])
    else:  # onto a canvas out + grid rows (cols) high, so that any start <= out fits
        # static padding, then a roll to the start (XLA needs a pad's widths at compile
        # time); the zeros padded below and right are at least the start, so only zeros
        # wrap around
        y = tf.pad(y, [[0, 0], [0, out_h], [0, out_w], [0, 0]])
        y = tf.roll(y, tf.stack([start[0], start[1]]), axis=[1, 2])
    return y[:, :out_h, :out_w, :]


def per_member(values: tf.Tensor, real: np.ndarray) -> tf.Tensor:
    """(N, n_h, n_w, ...) member-grid values -> (N * M, ...) of the real members."""
    shape = values.shape
    v = tf.reshape(values, [-1, shape[1] * shape[2], *shape[3:]])
    return tf.reshape(tf.gather(v, np.asarray(real, np.int32), axis=1), [-1, *shape[3:]])


def to_grid(values: tf.Tensor, real: np.ndarray, n_h: int, n_w: int) -> tf.Tensor:
    """Inverse of :func:`per_member`: (N * M, ...) -> (N, n_h, n_w, ...), padded slots 0."""
    m = len(real)
    rest = values.shape[1:]
    v = tf.reshape(values, [-1, m, *rest])
    v = tf.gather(tf.concat([v, tf.zeros_like(v[:, :1])], axis=1), _slots(real, n_h * n_w), axis=1)
    return tf.reshape(v, [-1, n_h, n_w, *rest])
