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
    ``chunk`` None (or at least N): one call on every image."""
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
    chunk c, joined in image order. ``chunk`` None (or at least N): one call."""
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
