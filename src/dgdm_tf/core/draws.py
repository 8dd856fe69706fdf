"""Exact draws that TensorFlow's samplers lose to underflow at the model's small
Dirichlet and Beta shapes (1 / (p^2 + 1), 1 / K): taken in log space."""

from __future__ import annotations

import tensorflow as tf


def _log_gamma_sample(shape_param, seed):
    """log of a Gamma(shape, 1) draw, exact for small shapes (no underflow to -inf).

    G_a = G_{a+1} * U^{1/a} (Marsaglia & Tsang's boost), taken in log space.
    """
    s1, s2 = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    g = tf.random.stateless_gamma(tf.shape(shape_param), s1, alpha=shape_param + 1.0)
    u = tf.random.stateless_uniform(tf.shape(shape_param), s2, minval=1e-30, maxval=1.0)
    return tf.math.log(g) + tf.math.log(u) / shape_param


def log_dirichlet_sample(alpha, seed):
    """log of a Dirichlet(``alpha``) draw over the last axis (normalised log-Gamma draws)."""
    lg = _log_gamma_sample(alpha, seed)
    return lg - tf.reduce_logsumexp(lg, axis=-1, keepdims=True)
