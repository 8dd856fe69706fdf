"""Tests of draws from the top-down model's prior (dgdm_tf.core.model: the generated
images of Fig. 3): the top layer's spike-slab prior, the mean unpooling, blank draws."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

from dgdm_tf.core.layout import MAX_POOL, LayerGeometry
from dgdm_tf.core.model import (DeepModel, draw_top_prior, images_given_top, sample_prior_images,
                                state_index, stored_states)

# 12x12 images; layer 1: 3x3 atoms, 2x2 pooling (5 x 5 blocks); top: 2 x 2 positions of 3 maps
MODEL = DeepModel((12, 12, 1), [{"dict_size": 3, "n_dict": 2, "pool": 2},
                                {"dict_size": 4, "n_dict": 3, "pool": 1}])


def _counts_per_map(s_top):
    return np.asarray(tf.reduce_sum(tf.cast(s_top != 0, tf.int32), axis=[1, 2])).ravel()


def test_top_layer_prior_is_the_beta_bernoulli():
    """Each map's count of units on (of its 4) over 20000 draws follows the beta-binomial
    of pi ~ Beta(1/K, 1 - 1/K) within 5 standard errors per count (U-shaped: every unit
    of a map on far more often than a rate of 1/K allows); with ``on_rate`` the binomial; the slab's variance is 1 /
    gamma_s."""
    k, u, n = 3, 4, 20000
    a, b = 1.0 / k, 1.0 - 1.0 / k
    beta_fn = lambda x, y: math.gamma(x) * math.gamma(y) / math.gamma(x + y)  # noqa: E731
    expected = {"prior": [math.comb(u, c) * beta_fn(c + a, u - c + b) / beta_fn(a, b) for c in range(u + 1)],
                "rate": [math.comb(u, c) * 0.3 ** c * 0.7 ** (u - c) for c in range(u + 1)]}
    for kind, rate in (("prior", None), ("rate", np.full(k, 0.3, np.float32))):
        s = draw_top_prior(MODEL, n, [3, 4], gamma_s=4.0, on_rate=rate)
        freq = np.bincount(_counts_per_map(s), minlength=u + 1) / (n * k)
        se = np.sqrt(np.asarray(expected[kind]) * (1 - np.asarray(expected[kind])) / (n * k))
        assert np.all(np.abs(freq - expected[kind]) < 5 * se + 1e-4), (kind, freq, expected[kind])
        w = np.asarray(s)[np.asarray(s) != 0]
        assert abs(w.var() * 4.0 - 1.0) < 0.05, w.var()
    # U-shaped: 0.45 / 0.16 / 0.12 / 0.12 / 0.14, where a rate of 1/K gives P(4) = 0.01
    assert expected["prior"][4] > expected["prior"][2] > 0.1


def test_mean_unpooling_is_the_average_of_drawn_unpoolings():
    """g is linear in each layer's indicators, so the image with every block at E[Z |
    theta] is the average of images with the blocks drawn from theta: 4000 draws of one
    top layer agree with it to a few Monte Carlo standard errors."""
    rng = np.random.default_rng(0)
    d = [tf.constant(rng.normal(size=(g.dh, g.dw, g.c, g.k)).astype(np.float32)) for g in MODEL.geoms]
    theta = [rng.dirichlet(np.ones(MODEL.geoms[0].n_states), size=MODEL.geoms[0].k)]
    top = tf.constant(rng.normal(size=(1, 2, 2, 3)).astype(np.float32))
    mean = images_given_top(MODEL, d, top, theta, "mean").numpy()[0]
    drawn = images_given_top(MODEL, d, tf.repeat(top, 4000, axis=0), theta, "draw", [5, 6]).numpy()
    se = drawn.std(0) / np.sqrt(len(drawn))
    assert np.all(np.abs(drawn.mean(0) - mean) < 5 * se + 1e-5)
    assert np.abs(mean).max() > 10 * se.max()  # the check is not vacuous


def test_generated_images_skip_blank_draws_and_repeat_by_seed():
    """Draws with every top unit off are skipped (at on-rates of 2 % most draws are blank),
    and the same seed gives the same images."""
    rng = np.random.default_rng(1)
    d = [rng.normal(size=(g.dh, g.dw, g.c, g.k)).astype(np.float32) for g in MODEL.geoms]
    theta = [rng.dirichlet(np.ones(MODEL.geoms[0].n_states), size=MODEL.geoms[0].k)]
    kw = dict(n=40, seed=[7, 0], gamma_s=1.0, theta=theta, on_rate=np.full(3, 0.02, np.float32))
    imgs = sample_prior_images(MODEL, d, **kw)
    assert imgs.shape == (40, 12, 12, 1)
    assert np.all(np.abs(imgs).reshape(40, -1).max(1) > 0)
    assert np.array_equal(imgs, sample_prior_images(MODEL, d, **kw))


def test_block_states_are_stored_as_bytes_and_read_as_indices():
    """The largest pool whose p^2 + 1 states fit a byte is accepted and its states survive
    the round trip; a larger pool is refused with what to change."""
    g = LayerGeometry(hx=40, wx=40, c=1, dh=3, dw=3, k=2, p=MAX_POOL)
    z = tf.constant(np.arange(g.n_states, dtype=np.int32))
    b = stored_states(z)
    assert b.dtype == tf.int8 and state_index(b).dtype == tf.int32
    assert np.array_equal(state_index(b).numpy(), z.numpy())
    with pytest.raises(ValueError, match="pool <= 11"):
        LayerGeometry(hx=40, wx=40, c=1, dh=3, dw=3, k=2, p=MAX_POOL + 1)
