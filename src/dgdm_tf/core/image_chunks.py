"""Sums and maps over images, a chunk of images at a time, inside compiled functions.

The global steps of a chain (the dictionaries' draws, the residual they leave) read every
image; done in one call, their working set grows with the images (a dense S[0] alone is
N x 24 x 24 x K floats at MNIST's layer 1). Over chunks, the working set is one chunk's,
and the result is the same sum up to the order of the floating-point additions. One
``tf.while_loop`` over the full chunks (run one at a time: ``parallel_iterations=1``, or
graph mode would hold several chunks at once), the remainder after it: the chunk function
is traced twice, whatever the number of images.
"""

from __future__ import annotations

from typing import Callable, Sequence

import tensorflow as tf

from dgdm_tf.core.cluster import all_gather


def chunk_size(chunk) -> int | None:
    """Images per chunk of a ``chunk`` argument (None, an int or a :class:`Shards`)."""
    return chunk.size if isinstance(chunk, Shards) else (None if chunk is None else int(chunk))


def _take(tensors: Sequence[tf.Tensor], lo, size: int) -> list:
    """Images [lo, lo + size) of each tensor (leading axis), with static shapes."""
    out = []
    for t in tensors:
        rest = t.shape[1:].as_list()
        out.append(tf.slice(t, tf.concat([[lo], tf.zeros([len(rest)], tf.int32)], 0),
                            [size] + rest))
    return out


def _after(tensors: Sequence[tf.Tensor], deps) -> list:
    """``tensors``, readable only once ``deps`` (a nest of tensors) are computed: a chunk's
    work waits for the chunk before it. Graph mode lowers the loop to dataflow, where a
    chunk whose inputs are ready would otherwise run beside the one before it, holding
    two chunks' working sets (or more: the first chunk and the remainder are outside
    the loop)."""
    with tf.control_dependencies(tf.nest.flatten(deps)):
        return [tf.identity(t) for t in tensors]


def _check(tensors: Sequence[tf.Tensor], chunk) -> int:
    n = int(tensors[0].shape[0])
    if any(int(t.shape[0]) != n for t in tensors):
        raise ValueError(f"every per-image tensor needs the same first axis, got "
                         f"{[int(t.shape[0]) for t in tensors]}")
    if chunk is not None and int(chunk) < 1:
        raise ValueError(f"chunk must be a positive number of images, got {chunk}")
    return n


def sum_over_chunks(fn: Callable, per_image: Sequence[tf.Tensor], chunk: int | None,
                    shared: Sequence[tf.Tensor] = ()):
    """sum over chunks c of ``fn(*shared, *[t[c] for t in per_image])`` (a nest of tensors).

    ``shared`` go into the loop as loop variables, so that a ``tf.GradientTape`` inside
    ``fn`` can watch them (the gradient of a sum over images, one chunk at a time).
    ``chunk`` None (or at least N): one call on every image; a :class:`Shards`: its
    chunks, over its workers."""
    if isinstance(chunk, Shards):
        return chunk.total(fn, per_image, shared)
    n = _check(per_image, chunk)
    shared = list(shared)
    if chunk is None or int(chunk) >= n:
        return fn(*shared, *per_image)
    chunk = int(chunk)
    n_full, rest = divmod(n, chunk)
    acc = fn(*shared, *_take(per_image, n_full * chunk, rest)) if rest else None
    start = 0
    if acc is None:  # no remainder: the first chunk starts the sum
        acc, start = fn(*shared, *_take(per_image, 0, chunk)), 1

    def body(i, acc, *sh):
        out = fn(*sh, *_after(_take(per_image, i * chunk, chunk), acc))
        return (i + 1, tf.nest.map_structure(tf.add, acc, out), *sh)

    if start < n_full:
        acc = tf.while_loop(lambda i, *_: i < n_full, body, (tf.constant(start), acc, *shared),
                            parallel_iterations=1)[1]
    return acc


def map_over_chunks(fn: Callable, per_image: Sequence[tf.Tensor], chunk: int | None) -> tf.Tensor:
    """``fn(*[t[c] for t in per_image])`` (one tensor, images on its leading axis) for each
    chunk c, joined in image order. ``chunk`` None (or at least N): one call; a
    :class:`Shards`: its chunks, over its workers."""
    if isinstance(chunk, Shards):
        return chunk.map(fn, per_image)
    n = _check(per_image, chunk)
    if chunk is None or int(chunk) >= n:
        return fn(*per_image)
    chunk = int(chunk)
    n_full, rest = divmod(n, chunk)
    first = fn(*_take(per_image, 0, chunk))
    parts = tf.TensorArray(first.dtype, size=n_full, element_shape=first.shape)
    parts = parts.write(0, first)

    def body(i, parts):
        return i + 1, parts.write(i, fn(*_after(_take(per_image, i * chunk, chunk), parts.flow)))

    _, parts = tf.while_loop(lambda i, _: i < n_full, body, (tf.constant(1), parts),
                             parallel_iterations=1)
    out = tf.reshape(parts.stack(), [n_full * chunk] + first.shape[1:].as_list())
    if rest:
        out = tf.concat([out, fn(*_after(_take(per_image, n_full * chunk, rest), out))], 0)
    return out


class Shards:
    """A chain's images in chunks of ``size`` (the last one shorter), chunk c swept by
    worker c mod W of ``workers`` (:class:`dgdm_tf.core.cluster.Workers`). The chunks, and
    so every chunk's seeds and sums, do not depend on the workers: a worker computes its
    own chunks' values, an all-gather hands every worker every chunk's values bit for
    bit, and each worker sums them in :func:`sum_over_chunks`'s order (the last, short
    chunk first, then chunk 0, 1, ...). So 1, 2 or W workers compute the same sums.

    Used as the ``chunk`` of :func:`sum_over_chunks` and :func:`map_over_chunks`."""

    def __init__(self, size: int, workers):
        if int(size) < 1:
            raise ValueError(f"chunk must be a positive number of images, got {size}")
        self.size, self.workers = int(size), workers

    def cache_key(self):
        return (self.size, self.workers.cache_key())

    def spans(self, n: int) -> list[tuple[int, int, int]]:
        """(chunk index, first image, end) of every chunk of ``n`` images, in order."""
        return [(c, lo, min(lo + self.size, n)) for c, lo in enumerate(range(0, n, self.size))]

    def owned(self, n: int) -> list[tuple[int, int, int]]:
        """The spans this worker sweeps: chunks index, index + W, ..."""
        w = self.workers
        spans = self.spans(n)
        if len(spans) < w.count:
            raise ValueError(f"{n} images in chunks of {self.size} make {len(spans)} chunks, "
                             f"fewer than the {w.count} workers: use smaller chunks")
        return spans[w.index::w.count]

    def _slots(self, n: int) -> int:
        return -(-len(self.spans(n)) // self.workers.count)

    def _gather(self, own: list, n: int, per_image: bool) -> list:
        """Every chunk's nest from each worker's nests of its own chunks (``own``, in the
        order of :meth:`owned`), exactly; per-image leaves are padded to ``size`` rows
        for the gather and cut back after."""
        spans, count = self.spans(n), self.workers.count
        slots = self._slots(n)
        leaves = [tf.nest.flatten(v) for v in own]
        out = [[] for _ in spans]
        for i, first in enumerate(leaves[0]):
            rows = []
            for v in leaves:
                t = v[i]
                if per_image and int(t.shape[0]) < self.size:
                    t = tf.pad(t, [[0, self.size - int(t.shape[0])]] + [[0, 0]] * (t.shape.rank - 1))
                rows.append(t)
            shape = rows[0].shape
            rows += [tf.zeros(shape, first.dtype)] * (slots - len(rows))
            got = all_gather(tf.stack(rows), count)  # W, slots, ...
            for c, lo, hi in spans:
                t = got[c % count, c // count]
                out[c].append(t[: hi - lo] if per_image else t)
        return [tf.nest.pack_sequence_as(own[0], v) for v in out]

    def exchange(self, own: list, n: int) -> list:
        """Every chunk's per-image nest (images on the leading axis) from each worker's
        own chunks' (in the order of :meth:`owned`): what each worker swept, on every
        worker."""
        return self._gather(own, n, per_image=True)

    def _own_values(self, fn, per_image, shared, n) -> list:
        """``fn`` on each of this worker's chunks, one after the other (each chunk's work
        waits for the one before it, as in :func:`sum_over_chunks`)."""
        outs = []
        for _, lo, hi in self.owned(n):
            parts = _take(per_image, lo, hi - lo)
            if outs:
                parts = _after(parts, outs[-1])
            outs.append(fn(*shared, *parts))
        return outs

    def total(self, fn: Callable, per_image: Sequence[tf.Tensor], shared=()):
        """:func:`sum_over_chunks` over the workers: the same chunks, the same order."""
        n = _check(per_image, self.size)
        every = self._gather(self._own_values(fn, per_image, list(shared), n), n, per_image=False)
        n_full, rest = divmod(n, self.size)
        order = ([n_full] if rest else []) + list(range(n_full))
        acc = every[order[0]]
        for c in order[1:]:
            acc = tf.nest.map_structure(tf.add, acc, every[c])
        return acc

    def map(self, fn: Callable, per_image: Sequence[tf.Tensor]) -> tf.Tensor:
        """:func:`map_over_chunks` over the workers: every image's value on every worker."""
        n = _check(per_image, self.size)
        return tf.concat(self.exchange(self._own_values(fn, per_image, [], n), n), 0)
