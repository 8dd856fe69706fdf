"""The conjugate conditionals of the top-down sampler: ``resample_theta`` (Dir),
``resample_pi`` (Beta(1/K, 1-1/K) spike probability per image and top map),
``resample_gamma_s``, ``resample_gamma_e`` (Gamma).

gamma_s (``Hyper.gamma_s``): "image_map" follows the supplement, one slab precision per
image and top map drawn from Eq. SampleR, whose count N_sx N_sy is every unit of the map:
the top layer is S = W . Z with W ~ N(0, 1/gamma_s) at every unit (the supplement's
Testing section). No other variable sees W where Z = 0, so its conditional there is its
prior; the sweep draws those weights when gamma_s needs them, which is the exact Gibbs
step on (W_off, gamma_s) without keeping W_off in the state. "global" is one gamma_s for
the whole top layer, W integrated out where Z = 0 (its count is the active units).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from dgdm_tf.core.draws import log_dirichlet_sample
from dgdm_tf.core.model import DeepModel, state_index
from dgdm_tf.topdown.state import DeepState, fold_seed


def state_counts(z, n_states: int) -> tf.Tensor:
    """(N, K, S) how many blocks of each map of each image are in each state (float32),
    from z (N, nbh, nbw, K) by a batched bincount: a one-hot of every block would hold
    N x blocks x K x S floats."""
    n, k = tf.shape(z)[0], tf.shape(z)[3]
    rows = state_index(tf.reshape(tf.transpose(z, [0, 3, 1, 2]), [n * k, -1]))
    counts = tf.math.bincount(rows, minlength=n_states, maxlength=n_states, axis=-1,
                              dtype=tf.float32)
    return tf.reshape(counts, [n, k, n_states])


def resample_theta(state: DeepState, x, model: DeepModel, seed) -> DeepState:
    """theta_nk[l] | - ~ Dir(1/(p^2+1) + counts of each block state in the map)."""
    out = []
    for l, g in enumerate(model.geoms[:-1]):
        counts = state_counts(state.z[l], g.n_states)
        out.append(log_dirichlet_sample(model.alpha[l] + counts, fold_seed(seed, l)))
    return state._replace(log_theta=tuple(out))


def resample_pi(state: DeepState, x, model: DeepModel, seed) -> DeepState:
    """pi_nk | - ~ Beta(1/K + #on, 1 - 1/K + #off) over the top map's units."""
    on = tf.reduce_sum(state.on, axis=[1, 2])  # N, K
    total = float(model.top.hs * model.top.ws)
    counts = tf.stack([on, total - on], axis=-1)
    return state._replace(log_pi=log_dirichlet_sample(model.pi_prior + counts, seed))


def resample_gamma_s(state: DeepState, x, model: DeepModel, seed) -> DeepState:
    """gamma_s | - (state.gamma_s is (N, K) in either kind; "global" holds one value).

    "image_map" (Eq. SampleR): ||W_off||^2 ~ Gamma(n_off / 2, rate gamma_s / 2) (the off
    units' weights from their prior), then gamma_s[n, k] ~ Gamma(a_w + M/2, b_w +
    (||S_nk||^2 + ||W_off||^2) / 2), M = N_sx N_sy units of the map.
    "global": gamma_s ~ Gamma(a_w + A/2, b_w + sum_active w^2 / 2), A active top units.
    """
    h = model.hyper
    if not h.slab_per_image:
        shape = h.a_w + 0.5 * tf.reduce_sum(state.on)
        rate = h.b_w + 0.5 * tf.reduce_sum(tf.square(state.s_top))
        g = tf.random.stateless_gamma([], seed, alpha=shape) / rate
        return state._replace(gamma_s=tf.fill(tf.shape(state.gamma_s), g))
    m = float(model.top.hs * model.top.ws)
    n_off = m - tf.reduce_sum(state.on, axis=[1, 2])  # N, K
    sq = tf.reduce_sum(tf.square(state.s_top), axis=[1, 2])
    s_off, s_g = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    # a Gamma of shape 0 is the point 0: a map with every unit on has no W_off
    off_sq = tf.where(n_off > 0, tf.random.stateless_gamma(
        tf.shape(sq), s_off, alpha=tf.maximum(0.5 * n_off, 0.5)) * 2.0 / state.gamma_s, 0.0)
    g = tf.random.stateless_gamma(tf.shape(sq), s_g, alpha=h.a_w + 0.5 * m) / (h.b_w + 0.5 * (sq + off_sq))
    return state._replace(gamma_s=g)


def gamma_s_summary(gamma_s) -> float:
    """One number for a state's gamma_s (N, K): its geometric mean over images and maps
    (the global value itself when it is global); what a later chain starts from."""
    return float(np.exp(np.mean(np.log(np.asarray(gamma_s, np.float64)))))


def resample_gamma_e(state: DeepState, x, model: DeepModel, seed, mask=None) -> DeepState:
    """gamma_e[n] | - ~ Gamma(a_e + n_obs/2, b_e + ||E_n||^2 / 2) (eq. SampleE)."""
    h = model.hyper
    n_obs = (tf.reduce_sum(mask, axis=[1, 2, 3]) if mask is not None
             else tf.fill([tf.shape(x)[0]], float(np.prod(x.shape[1:]))))
    sq = tf.reduce_sum(tf.square(state.resid), axis=[1, 2, 3])
    ge = tf.random.stateless_gamma(tf.shape(sq), seed, alpha=h.a_e + 0.5 * n_obs) / (h.b_e + 0.5 * sq)
    return state._replace(gamma_e=ge)
