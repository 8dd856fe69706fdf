"""Image preprocessing of the paper's data sets (Sec. 4): global contrast
normalisation and ZCA whitening for CIFAR (as Maxout, Goodfellow et al. 2013), local
contrast normalisation for Caltech (Jarrett et al. 2009). Images are NHWC float arrays.

Every statistic a transform needs from data (the ZCA mean and matrix) is fitted on the
training set only and applied unchanged to the test set: :func:`fit_zca` returns it,
:func:`apply_zca` uses it.
"""

from __future__ import annotations

import dataclasses

import numpy as np


def global_contrast_normalize(x, *, scale: float = 55.0, sqrt_bias: float = 0.0,
                              min_divisor: float = 1e-8) -> np.ndarray:
    """Per image: subtract its mean, divide by its norm, times ``scale`` (pylearn2's
    ``global_contrast_normalize`` with ``use_std=False``, Maxout's CIFAR setting 55).
    An image whose norm is below ``min_divisor`` (a constant image) is only centred."""
    x = np.asarray(x, np.float64)
    flat = x.reshape(len(x), -1)
    flat = flat - flat.mean(axis=1, keepdims=True)
    norm = np.sqrt(sqrt_bias + np.sum(flat * flat, axis=1)) / scale
    norm[norm < min_divisor] = 1.0
    return (flat / norm[:, None]).reshape(x.shape).astype(np.float32)


@dataclasses.dataclass(frozen=True)
class Zca:
    """ZCA whitening fitted on a training set: ``(x - mean) @ matrix`` per flattened image."""

    mean: np.ndarray  # (D,)
    matrix: np.ndarray  # (D, D), symmetric
    eigenvalues: np.ndarray  # (D,) of the training covariance, descending


def fit_zca(x, *, filter_bias: float = 0.1) -> Zca:
    """ZCA of the training images ``x``: covariance ``C = V diag(e) V^T`` (ddof 0),
    ``matrix = V diag(1 / sqrt(e + filter_bias)) V^T``. ``filter_bias`` keeps the
    near-zero directions (GCN removes one) from being amplified without bound."""
    if filter_bias < 0:
        raise ValueError(f"filter_bias must be >= 0, got {filter_bias}")
    flat = np.asarray(x, np.float64).reshape(len(x), -1)
    mean = flat.mean(axis=0)
    cov = np.cov(flat - mean, rowvar=False, bias=True)
    e, v = np.linalg.eigh(cov)
    e, v = np.maximum(e[::-1], 0.0), v[:, ::-1]
    matrix = (v / np.sqrt(e + filter_bias)) @ v.T
    return Zca(mean=mean, matrix=matrix, eigenvalues=e)


def apply_zca(x, zca: Zca, *, batch: int = 4096) -> np.ndarray:
    """Whiten ``x`` with a fitted :class:`Zca` (in batches; float32 out, shape kept)."""
    x = np.asarray(x)
    flat = x.reshape(len(x), -1)
    if flat.shape[1] != zca.mean.shape[0]:
        raise ValueError(f"images have {flat.shape[1]} values, the ZCA was fitted on "
                         f"{zca.mean.shape[0]}")
    out = np.empty(flat.shape, np.float32)
    for i in range(0, len(flat), batch):
        out[i:i + batch] = (flat[i:i + batch].astype(np.float64) - zca.mean) @ zca.matrix
    return out.reshape(x.shape)


def gaussian_window(size: int = 9, sigma: float | None = None) -> np.ndarray:
    """(size, size) Gaussian weights summing to 1 (Jarrett et al.: 9x9, sigma = size / 4)."""
    if size < 1 or size % 2 == 0:
        raise ValueError(f"window size must be an odd integer >= 1, got {size}")
    sigma = size / 4.0 if sigma is None else float(sigma)
    r = np.arange(size) - size // 2
    g = np.exp(-(r[:, None] ** 2 + r[None, :] ** 2) / (2.0 * sigma ** 2))
    return g / g.sum()


def local_contrast_normalize(x, *, size: int = 9, sigma: float | None = None,
                             batch: int = 256) -> np.ndarray:
    """Jarrett et al. (2009): ``v = x - w * x`` with ``w`` a Gaussian window summed over
    channels (so the window weights add to 1 over the window and the channels),
    ``s = sqrt(w * v^2)``, ``y = v / max(c, s)`` with ``c`` the image's mean of ``s``.
    Zero padding at the borders, with the window renormalised to the part inside the
    image so that a constant image maps to 0 everywhere."""
    # imported here: the data rules of MNIST and the .npz kinds never need TensorFlow,
    # whose import costs each of their jobs about 5 s of CPU
    import tensorflow as tf

    x = np.asarray(x, np.float32)
    if x.ndim != 4:
        raise ValueError(f"images must be (N, H, W, C), got shape {x.shape}")
    c = x.shape[-1]
    w = gaussian_window(size, sigma) / c
    # float64: the division by a local sd amplifies round-off where an image is flat
    k = tf.constant(np.repeat(w[:, :, None, None], c, axis=2), tf.float64)  # (s, s, C, 1)

    def smooth(t):
        return tf.nn.conv2d(t, k, strides=1, padding="SAME")

    coverage = smooth(tf.ones([1, *x.shape[1:]], tf.float64))  # window mass inside the image
    out = np.empty_like(x)
    for i in range(0, len(x), batch):
        t = tf.constant(x[i:i + batch], tf.float64)
        v = t - smooth(t) / coverage
        s = tf.sqrt(smooth(v * v) / coverage)
        mean_s = tf.reduce_mean(s, axis=[1, 2, 3], keepdims=True)
        out[i:i + batch] = (v / tf.maximum(tf.maximum(mean_s, s), 1e-8)).numpy().astype(np.float32)
    return out
