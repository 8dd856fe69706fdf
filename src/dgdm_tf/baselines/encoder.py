"""A deterministic encoder on a learned dictionary: what the dictionary alone carries.

Method ``encoder_svm`` (a reference row of ``results/tables.md``, not a method of the
paper): the pretrained layer-1 dictionary D, the soft-threshold encoder of Coates & Ng
(ICML 2011, "The importance of encoding versus training with sparse coding and vector
quantization"), then the same Bayesian SVM as ``pretrained_svm`` on the same images.
No sampling: the features are a fixed function of the image and D, so the gap between
this row and ``pretrained_svm`` is what the Gibbs inference of the features adds (or
costs) over a plain encoder of the same dictionary.

For an image X (H, W, C) and D (dh, dw, C, K):

1. correlate X with each unit-norm atom, VALID: ``c[i, j, k] = sum_{t, c} X[i + t, c]
   D[t, c, k] / ||D_k||`` (``tf.nn.conv2d``), shape (Hs, Ws, K) with Hs = H - dh + 1;
2. split the polarity into 2K maps: ``max(c - alpha, 0)`` (maps 0..K-1), then
   ``max(-c - alpha, 0)`` (maps K..2K-1);
3. max-pool over p x p blocks aligned at the top-left corner, p = layer 1's pool;
   partial blocks at the bottom / right edge are pooled too (ceil(Hs / p) x ceil(Ws / p)
   cells; the padding is zeros, which changes nothing since every value is >= 0);
4. flatten (cell-major, then the 2K maps: ``reshape(N, -1)`` of NHWC).

Images are encoded ``batch_size`` at a time, so memory stays bounded whatever N is.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import tensorflow as tf

from dgdm_tf.core.compiled import compiled

#: atoms with a norm below this are left at zero (no division by ~0)
_TINY = 1e-12


def unit_norm_atoms(d: np.ndarray) -> np.ndarray:
    """D (dh, dw, C, K) with each atom D[..., k] scaled to unit Euclidean norm."""
    d = np.asarray(d, dtype=np.float64)
    if d.ndim != 4:
        raise ValueError(f"dictionary must be (dh, dw, C, K), got shape {d.shape}")
    norm = np.sqrt(np.sum(d * d, axis=(0, 1, 2), keepdims=True))
    return np.where(norm > _TINY, d / np.maximum(norm, _TINY), 0.0)


def feature_shape(image_shape: tuple[int, ...], d_shape: tuple[int, ...], pool: int
                  ) -> tuple[int, int, int]:
    """(cells along H, cells along W, 2K) of one image's pooled maps."""
    h, w = int(image_shape[0]), int(image_shape[1])
    dh, dw, _, k = (int(s) for s in d_shape)
    hs, ws = h - dh + 1, w - dw + 1
    if hs < 1 or ws < 1:
        raise ValueError(f"image {h}x{w} is smaller than the dictionary elements {dh}x{dw}")
    p = int(pool)
    return math.ceil(hs / p), math.ceil(ws / p), 2 * k


@compiled(reduce_retracing=True)
def _encode_batch(x: tf.Tensor, d: tf.Tensor, alpha: tf.Tensor, p: int) -> tf.Tensor:
    c = tf.nn.conv2d(x, d, strides=1, padding="VALID")  # correlation, (N, Hs, Ws, K)
    maps = tf.concat([tf.nn.relu(c - alpha), tf.nn.relu(-c - alpha)], axis=-1)
    if p > 1:
        hs, ws = tf.shape(maps)[1], tf.shape(maps)[2]
        pad_h = (-hs) % p
        pad_w = (-ws) % p
        maps = tf.pad(maps, [[0, 0], [0, pad_h], [0, pad_w], [0, 0]])  # zeros: maps >= 0
        maps = tf.nn.max_pool2d(maps, ksize=p, strides=p, padding="VALID")
    return tf.reshape(maps, [tf.shape(maps)[0], -1])


def encode(x: np.ndarray, d: np.ndarray, pool: int, *, alpha: float = 0.25,
           batch_size: int = 2000, progress: Callable[[str], None] | None = None
           ) -> np.ndarray:
    """Soft-threshold features of images ``x`` (N, H, W, C) under dictionary ``d``
    (dh, dw, C, K): (N, ceil(Hs/p) * ceil(Ws/p) * 2K) float32 (see the module docstring).

    ``alpha`` >= 0 is the threshold (in the units of the correlation with a unit-norm
    atom); ``pool`` the side p of the max-pooling blocks (1: no pooling).
    """
    x = np.asarray(x)
    if x.ndim == 3:  # (N, H, W): one channel
        x = x[..., None]
    if x.ndim != 4:
        raise ValueError(f"images must be (N, H, W, C), got shape {x.shape}")
    if np.shape(d)[2] != x.shape[-1]:
        raise ValueError(f"dictionary has {np.shape(d)[2]} channels, images {x.shape[-1]}")
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0, got {alpha}")
    p = int(pool)
    if p < 1:
        raise ValueError(f"pool must be >= 1, got {pool}")
    batch_size = max(1, int(batch_size))
    nbh, nbw, k2 = feature_shape(x.shape[1:], np.shape(d), p)
    out = np.empty((len(x), nbh * nbw * k2), dtype=np.float32)
    dn = tf.constant(unit_norm_atoms(d), dtype=tf.float32)
    a = tf.constant(float(alpha), dtype=tf.float32)
    for start in range(0, len(x), batch_size):
        xb = tf.constant(np.asarray(x[start:start + batch_size], dtype=np.float32))
        out[start:start + len(xb)] = _encode_batch(xb, dn, a, p).numpy()
        if progress is not None:
            progress(f"encoded {min(start + batch_size, len(x))} / {len(x)} images")
    return out
