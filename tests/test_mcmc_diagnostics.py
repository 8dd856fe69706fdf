"""dgdm_tf.mcmc.diagnostics: the figures that tell a sampler that follows the image from one that
follows its scan order."""

import numpy as np
import pytest

from dgdm_tf.mcmc import diagnostics as mixing


def test_ink_per_cell_matches_a_direct_window_average():
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, size=(3, 11, 10, 2))
    d, p = 4, 3
    hs, ws = 11 - d + 1, 10 - d + 1
    win = np.array([[np.abs(x[:, i:i + d, j:j + d]).mean() for j in range(ws)] for i in range(hs)])
    want = np.array([[win[3 * u:3 * u + 3, 3 * v:3 * v + 3].mean() for v in range(-(-ws // p))]
                     for u in range(-(-hs // p))])  # partial edge blocks average what they hold
    np.testing.assert_allclose(mixing.ink_per_cell(x, d, p), want, rtol=1e-12)


def test_activity_ink_correlation_sees_where_the_activity_is():
    rng = np.random.default_rng(1)
    x = np.zeros((20, 12, 12, 1))
    x[:, 2:6, 3:9] = 1.0  # ink in the upper middle
    ink = mixing.ink_per_cell(x, 3, 2)
    follows = rng.uniform(0.5, 1.5, size=(20, 1, 1, 4)) * ink[None, :, :, None]
    grid = np.zeros_like(follows)
    grid[:, ::2, ::2] = 1.0  # a colour grid, blind to the image
    assert mixing.activity_ink_correlation(follows, x, 3, 2) > 0.99
    assert abs(mixing.activity_ink_correlation(grid, x, 3, 2)) < 0.3
    with pytest.raises(ValueError, match="does not match"):
        mixing.activity_ink_correlation(follows[:, :-1], x, 3, 2)


def test_map_distance():
    a = np.arange(6.0).reshape(2, 3)
    assert mixing.map_distance(a, a) == 0.0
    assert mixing.map_distance(a, 2 * a) == pytest.approx(np.linalg.norm(a) / (1.5 * np.linalg.norm(a)))


def test_half_distance_compares_the_even_and_the_odd_chains():
    rng = np.random.default_rng(0)
    base = rng.normal(size=(50, 8))
    # chains that agree up to small noise: near 0; unrelated chains of equal norm: near sqrt(2)
    same = np.stack([base + 0.01 * rng.normal(size=base.shape) for _ in range(4)])
    assert mixing.half_distance(same) < 0.02
    apart = rng.normal(size=(2, 2000, 8))
    assert mixing.half_distance(apart) == pytest.approx(np.sqrt(2.0), abs=0.03)
    # even chains (0, 2) against odd (1, 3), not the first half against the second
    ordered = np.stack([base, -base, base, -base])
    assert mixing.half_distance(ordered) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="two or more"):
        mixing.half_distance(base[None])


def test_ridge_probe_reads_out_separable_classes_and_not_noise():
    rng = np.random.default_rng(2)
    y = rng.integers(0, 3, size=600)
    f = rng.normal(size=(600, 20))
    f[np.arange(600), y] += 4.0  # class c lifts feature c
    assert mixing.ridge_probe(f[:400], y[:400], f[400:], y[400:]) < 2.0
    noise = rng.normal(size=(600, 20))
    assert mixing.ridge_probe(noise[:400], y[:400], noise[400:], y[400:]) > 50.0


def test_polarity_split():
    f = np.array([[1.0, -2.0], [0.0, 3.0]])
    np.testing.assert_array_equal(mixing.polarity_split(f), [[1, 0, 0, 2], [0, 3, 0, 0]])
