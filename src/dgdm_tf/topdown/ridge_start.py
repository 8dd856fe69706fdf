"""An order-free start for the top-down chains' top layer: its units on where they match
the top layer's input best, their weights a ridge fit of the image through the whole
model.

Why: :func:`dgdm_tf.topdown.state.init_state` starts the top layer off, so the first
sweep's top units see the whole image as residual, and the colours visited first take
every stroke. With the fixed scan every image gets the same order's decomposition; with a
random scan each batch got its own, and train and test features stopped agreeing
(docs/findings/topdown_ridge_start.md). This start is a deterministic function of the image, the
dictionaries and the lower layers' start positions, the same whatever the scan order, and
it already fits the image. It only sets where the chain starts; every sweep after it is
the exact Gibbs sweep.

Given the lower layers' unpooling states Z (the matched-filter start), the image is linear
in the top layer's weights: X = g(S) = J S. Then

1. support: each top unit's |correlation| with the unit-norm element over the top layer's
   input as the matched filter passes it up (:func:`dgdm_tf.pretrain.ridge_start.support`
   at pool 1), on where it exceeds ``threshold`` times the image's largest;
2. weights: S = argmin ||M (X - J S)||^2 + lam ||S||^2 on that support (M the observed
   pixels), lam = ``ridge`` times the product over layers of the mean ||D_k||^2, by
   conjugate gradients with J and its adjoint (J^T by automatic differentiation of the
   linear map);
3. gamma_e[n] at its conditional mean given that fit, (a_e + n_obs / 2) /
   (b_e + ||M E_n||^2 / 2).
"""

from __future__ import annotations

import tensorflow as tf

from dgdm_tf.core.model import DeepModel, layer_inputs
from dgdm_tf.pretrain.ridge_start import RidgeStart, support


def _operators(model: DeepModel, d, zd, mask):
    """(J, M J^T M): the image of top-layer weights given Z, and its masked adjoint."""
    def forward(s):
        return layer_inputs(s, model, d, zd)[0]

    def adjoint(r, like):
        s0 = tf.zeros_like(like)
        with tf.GradientTape() as tape:
            tape.watch(s0)
            y = forward(s0)
        return tape.gradient(y, s0, output_gradients=r if mask is None else r * mask)

    return forward, adjoint


def top_ridge_fit(x, top_input, model: DeepModel, d, zd, settings: RidgeStart, mask=None):
    """(S (N, hs, ws, K_L), on 0/1 of the same shape): steps 1 and 2 above. ``top_input``
    is the top layer's input as the matched filter passes it up."""
    on = support(top_input, d[-1], 1, settings.threshold)
    forward, adjoint = _operators(model, d, zd, mask)
    scale = 1.0
    for dl in d:
        scale *= tf.reduce_mean(tf.reduce_sum(tf.square(dl), axis=[0, 1, 2]))
    lam = settings.ridge * scale

    def normal(s):
        return on * adjoint(forward(on * s), s) + lam * s

    def dot(a, b):
        return tf.reduce_sum(a * b, axis=[1, 2, 3], keepdims=True)

    rhs = on * adjoint(x if mask is None else x * mask, on)
    s, r, direction, rr = tf.zeros_like(rhs), rhs, rhs, dot(rhs, rhs)
    for _ in range(settings.iterations):
        q = normal(direction)
        step = rr / tf.maximum(dot(direction, q), 1e-30)
        s, r = s + step * direction, r - step * q
        rr_new = dot(r, r)
        direction = r + rr_new / tf.maximum(rr, 1e-30) * direction
        rr = rr_new
    return s * on, on


def gamma_e_given_fit(x, x_hat, model: DeepModel, mask=None):
    """gamma_e[n] at its conditional mean given the reconstruction ``x_hat``."""
    h = model.hyper
    e = x - x_hat if mask is None else (x - x_hat) * mask
    n_obs = (tf.cast(tf.reduce_prod(tf.shape(x)[1:]), tf.float32) if mask is None
             else tf.reduce_sum(tf.cast(mask, tf.float32), axis=[1, 2, 3]))
    return (h.a_e + 0.5 * n_obs) / (h.b_e + 0.5 * tf.reduce_sum(tf.square(e), axis=[1, 2, 3]))
