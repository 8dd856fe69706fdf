"""Operators (Sec. 2.1-2.2 of the paper) against direct NumPy loops, on random non-square shapes."""

import math

import numpy as np
import pytest

from dgdm_tf.core import ops

SHAPES = [  # (N, Hs, Ws, K, dh, dw, C)
    (2, 5, 7, 3, 3, 2, 1),
    (1, 4, 4, 2, 4, 4, 3),
    (3, 6, 3, 1, 2, 5, 2),
]


def full_conv_loop(s, d):
    n, hs, ws, k = s.shape
    dh, dw, c, _ = d.shape
    x = np.zeros((n, hs + dh - 1, ws + dw - 1, c))
    for a in range(n):
        for i in range(hs):
            for j in range(ws):
                for kk in range(k):
                    x[a, i:i + dh, j:j + dw, :] += s[a, i, j, kk] * d[:, :, :, kk]
    return x


def adjoint_loop(r, d):
    n, hx, wx, c = r.shape
    dh, dw, _, k = d.shape
    out = np.zeros((n, hx - dh + 1, wx - dw + 1, k))
    for a in range(n):
        for i in range(out.shape[1]):
            for j in range(out.shape[2]):
                for kk in range(k):
                    out[a, i, j, kk] = np.sum(r[a, i:i + dh, j:j + dw, :] * d[:, :, :, kk])
    return out


@pytest.mark.parametrize("shape", SHAPES)
def test_full_conv_and_adjoint_match_loops(shape):
    n, hs, ws, k, dh, dw, c = shape
    rng = np.random.default_rng(sum(shape))
    s = rng.normal(size=(n, hs, ws, k)).astype(np.float32)
    d = rng.normal(size=(dh, dw, c, k)).astype(np.float32)
    x = ops.full_conv(s, d).numpy()
    np.testing.assert_allclose(x, full_conv_loop(s, d), rtol=1e-4, atol=1e-4)
    r = rng.normal(size=x.shape).astype(np.float32)
    a = ops.full_conv_adjoint(r, d).numpy()
    np.testing.assert_allclose(a, adjoint_loop(r, d), rtol=1e-4, atol=1e-4)
    # <full_conv(S, D), R> = <S, adjoint(R, D)>
    assert np.isclose(np.sum(x * r), np.sum(s * a), rtol=1e-4)


@pytest.mark.parametrize("hs,ws,p", [(6, 6, 3), (7, 5, 3), (5, 8, 2), (4, 4, 1)])
def test_unpool_and_pool_match_loops_with_partial_blocks(hs, ws, p):
    rng = np.random.default_rng(hs * 100 + ws * 10 + p)
    n, k = 2, 3
    nbh, nbw = math.ceil(hs / p), math.ceil(ws / p)
    x = rng.normal(size=(n, nbh, nbw, k)).astype(np.float32)
    # one-hot-or-off blocks, positions restricted to the part of the block inside S
    z = np.zeros((n, hs, ws, k), np.float32)
    for a in range(n):
        for bi in range(nbh):
            for bj in range(nbw):
                for kk in range(k):
                    cells = [(i, j) for i in range(bi * p, min(bi * p + p, hs))
                             for j in range(bj * p, min(bj * p + p, ws))]
                    pick = rng.integers(0, len(cells) + 1)
                    if pick < len(cells):
                        z[a, cells[pick][0], cells[pick][1], kk] = 1
    s = ops.unpool(x, z, p).numpy()
    expect = np.zeros_like(z)
    for a in range(n):
        for i in range(hs):
            for j in range(ws):
                expect[a, i, j] = x[a, i // p, j // p] * z[a, i, j]  # 0-based ceil(i/p)
    np.testing.assert_allclose(s, expect)
    pooled = ops.pool(s, p).numpy()
    expect_pool = np.zeros((n, nbh, nbw, k), np.float32)
    for a in range(n):
        for i in range(hs):
            for j in range(ws):
                expect_pool[a, i // p, j // p] += s[a, i, j]
    np.testing.assert_allclose(pooled, expect_pool, atol=1e-6)
    # pooling undoes unpooling where a block is on, and gives 0 where it is off
    on = ops.pool(z, p).numpy()
    np.testing.assert_allclose(pooled, x * on, atol=1e-6)
