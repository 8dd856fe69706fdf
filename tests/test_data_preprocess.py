"""Tests of dgdm_tf.data.preprocess against NumPy references on tiny arrays."""

from __future__ import annotations

import numpy as np
import pytest

from dgdm_tf.data import preprocess as P


def test_gcn_centres_and_scales_each_image():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5, 4, 3, 2)) * 3 + 7
    x[2] = 1.5  # a constant image is only centred
    y = P.global_contrast_normalize(x, scale=55.0)
    flat = y.reshape(5, -1).astype(np.float64)
    np.testing.assert_allclose(flat.mean(1), 0.0, atol=1e-5)
    norms = np.linalg.norm(flat, axis=1)
    np.testing.assert_allclose(norms[[0, 1, 3, 4]], 55.0, rtol=1e-5)
    assert norms[2] == 0.0


def test_zca_whitens_the_training_set_and_reuses_its_statistics():
    """filter_bias 0 on full-rank data: the whitened training covariance is the identity;
    the matrix is symmetric (ZCA, not PCA); the test set is whitened with the training
    mean and matrix, not its own."""
    rng = np.random.default_rng(1)
    mix = rng.normal(size=(12, 12))
    train = (rng.normal(size=(400, 12)) @ mix + 3.0).reshape(400, 2, 2, 3)
    zca = P.fit_zca(train, filter_bias=0.0)
    w = P.apply_zca(train, zca).reshape(400, -1).astype(np.float64)
    np.testing.assert_allclose(np.cov(w, rowvar=False, bias=True), np.eye(12), atol=1e-4)
    np.testing.assert_allclose(zca.matrix, zca.matrix.T, atol=1e-10)
    test = (rng.normal(size=(7, 12)) @ mix + 3.0).reshape(7, 2, 2, 3)
    ref = (test.reshape(7, -1) - train.reshape(400, -1).mean(0)) @ zca.matrix
    np.testing.assert_allclose(P.apply_zca(test, zca, batch=3).reshape(7, -1), ref, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="fitted on 12"):
        P.apply_zca(np.zeros((2, 5)), zca)


def test_zca_filter_bias_matches_eigen_reference():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(50, 6)) * np.array([5.0, 1.0, 0.2, 0.01, 1.0, 2.0])
    zca = P.fit_zca(x, filter_bias=0.1)
    c = np.cov(x - x.mean(0), rowvar=False, bias=True)
    e, v = np.linalg.eigh(c)
    np.testing.assert_allclose(zca.matrix, v @ np.diag(1 / np.sqrt(e + 0.1)) @ v.T, atol=1e-10)
    np.testing.assert_allclose(np.sort(zca.eigenvalues), np.sort(e), atol=1e-12)


def _lcn_reference(x, size=3, sigma=None):
    """Jarrett et al. (2009) by explicit sums, zero padding, window renormalised at borders."""
    n, h, w, c = x.shape
    win = P.gaussian_window(size, sigma) / c
    r = size // 2

    def window_sum(f):  # f: (h, w, c) -> sum over window and channels, and the window's mass
        tot, mass = np.zeros((h, w)), np.zeros((h, w))
        for i in range(h):
            for j in range(w):
                for p in range(-r, r + 1):
                    for q in range(-r, r + 1):
                        if 0 <= i + p < h and 0 <= j + q < w:
                            mass[i, j] += win[p + r, q + r] * c
                            tot[i, j] += win[p + r, q + r] * f[i + p, j + q].sum()
        return tot / mass

    out = np.zeros_like(x, dtype=np.float64)
    for b in range(n):
        v = x[b] - window_sum(x[b])[..., None]
        s = np.sqrt(window_sum(v ** 2))
        out[b] = v / np.maximum(s.mean(), s)[..., None]
    return out


def test_lcn_matches_the_explicit_definition():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 5, 6, 3)).astype(np.float32) + np.linspace(0, 4, 6)[None, None, :, None]
    np.testing.assert_allclose(P.local_contrast_normalize(x, size=3, batch=1),
                               _lcn_reference(x.astype(np.float64), size=3), rtol=1e-4, atol=1e-5)
    const = np.full((1, 4, 4, 1), 2.5, np.float32)
    np.testing.assert_allclose(P.local_contrast_normalize(const, size=3), 0.0, atol=1e-6)
    with pytest.raises(ValueError, match="odd"):
        P.gaussian_window(4)
