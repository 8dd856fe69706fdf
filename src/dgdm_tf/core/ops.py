"""The model's linear operators (Sec. 2.1-2.2), NHWC, K on the last axis.

- ``full_conv(S, D)``: X = sum_k D_k * S_k, a full 2-D convolution (Hx = Hs + dh - 1).
- ``full_conv_adjoint(R, D)``: the paper's correlation R (*) D_k, the adjoint of
  ``full_conv`` (the gradient of ||X - full_conv(S, D)||^2 / 2 wrt S is -adjoint(R, D)).
- ``unpool(X, Z, p)``: S[i, j] = X[ceil(i/p), ceil(j/p)] * Z[i, j] (1-based), cropped to Hs.
- ``pool(S, p)``: each block's single non-zero value (0 when off) -- the block sum,
  which equals it because a block holds at most one non-zero entry.
"""

from __future__ import annotations

import math

import tensorflow as tf


def full_conv(s: tf.Tensor, d: tf.Tensor) -> tf.Tensor:
    """X[n, i, j, c] = sum_{k, t} S[n, i - t, k] D[t, c, k] (full convolution)."""
    s = tf.convert_to_tensor(s)
    d = tf.convert_to_tensor(d, dtype=s.dtype)
    n = tf.shape(s)[0]
    hx = tf.shape(s)[1] + tf.shape(d)[0] - 1
    wx = tf.shape(s)[2] + tf.shape(d)[1] - 1
    # conv2d_transpose's filter is (h, w, out_channels, in_channels) = (dh, dw, C, K): D as is.
    return tf.nn.conv2d_transpose(s, d, output_shape=tf.stack([n, hx, wx, tf.shape(d)[2]]),
                                  strides=1, padding="VALID")


def full_conv_adjoint(r: tf.Tensor, d: tf.Tensor) -> tf.Tensor:
    """A[n, i, j, k] = sum_{t, c} R[n, i + t, c] D[t, c, k] (valid correlation)."""
    r = tf.convert_to_tensor(r)
    d = tf.convert_to_tensor(d, dtype=r.dtype)
    return tf.nn.conv2d(r, d, strides=1, padding="VALID")


def unpool(x: tf.Tensor, z: tf.Tensor, p: int) -> tf.Tensor:
    """Nearest-neighbour upsampling of X by p, cropped to Z's size, times Z."""
    x = tf.convert_to_tensor(x)
    z = tf.convert_to_tensor(z, dtype=x.dtype)
    up = tf.repeat(tf.repeat(x, p, axis=1), p, axis=2)
    return up[:, : tf.shape(z)[1], : tf.shape(z)[2], :] * z


def pool(s: tf.Tensor, p: int) -> tf.Tensor:
    """Block sums over p x p blocks (partial blocks at the edge included)."""
    s = tf.convert_to_tensor(s)
    if p == 1:
        return s
    n, hs, ws, k = s.shape
    nbh, nbw = math.ceil(hs / p), math.ceil(ws / p)
    s = tf.pad(s, [[0, 0], [0, nbh * p - hs], [0, nbw * p - ws], [0, 0]])
    s = tf.reshape(s, [-1, nbh, p, nbw, p, k])
    return tf.reduce_sum(s, axis=[2, 4])
