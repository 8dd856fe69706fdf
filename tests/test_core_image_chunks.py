"""Tests of dgdm_tf.core.image_chunks: sums and maps over image chunks equal the one-call
results, inside compiled functions, with gradients of the shared tensors."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from dgdm_tf.core.image_chunks import map_over_chunks, sum_over_chunks


def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    return (tf.constant(rng.normal(size=(n, 4, 3)).astype(np.float32)),
            tf.constant(rng.integers(0, 5, size=(n, 2)).astype(np.int32)),
            tf.constant(rng.normal(size=(3,)).astype(np.float32)))


def _fit(w, a, b):
    """A sum over images and its gradient in w: the shape of the D steps' terms."""
    with tf.GradientTape() as tape:
        tape.watch(w)
        r = a * w - tf.cast(b[:, :1, None], tf.float32)
        u = 0.5 * tf.reduce_sum(tf.square(r))
    return u, tape.gradient(u, w)


@pytest.mark.parametrize("n,chunk", [(7, 2), (6, 3), (5, 5), (5, 9), (5, None), (1, 1)])
def test_sum_over_chunks_is_the_sum_with_its_gradient(n, chunk):
    a, b, w = _data(n)
    u0, g0 = _fit(w, a, b)
    f = tf.function(lambda w, a, b: sum_over_chunks(_fit, [a, b], chunk, shared=[w]))
    u1, g1 = f(w, a, b)
    np.testing.assert_allclose(u1.numpy(), u0.numpy(), rtol=1e-5)
    np.testing.assert_allclose(g1.numpy(), g0.numpy(), rtol=1e-5, atol=1e-6)
    assert np.any(g1.numpy() != 0.0)  # the tape saw the shared tensor inside the loop


@pytest.mark.parametrize("n,chunk", [(7, 2), (6, 3), (5, 5), (5, None), (3, 1)])
def test_map_over_chunks_keeps_the_images_in_order(n, chunk):
    a, b, _ = _data(n, 1)
    def one(a, b):  # per image: a chunk out of order would put rows in the wrong place
        return a * tf.cast(b[:, :1, None], tf.float32)

    want = one(a, b).numpy()
    got = tf.function(lambda a, b: map_over_chunks(one, [a, b], chunk))(a, b)
    assert got.shape == (n, 4, 3)
    np.testing.assert_array_equal(got.numpy(), want)


def test_chunks_refuse_mismatched_images_and_bad_sizes():
    a, b, w = _data(4)
    with pytest.raises(ValueError, match="same first axis"):
        sum_over_chunks(_fit, [a, b[:3]], 2, shared=[w])
    with pytest.raises(ValueError, match="positive"):
        map_over_chunks(lambda a: a, [a], 0)
