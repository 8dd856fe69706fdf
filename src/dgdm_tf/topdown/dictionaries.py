"""The dictionaries of the top-down sampler: ``resample_d``. D[0]: jointly per map from
its exact Gaussian (reuses :func:`dgdm_tf.pretrain.dictionary.resample_d`, Fourier domain).
D[l], l >= 1: its conditional is Gaussian too but its precision couples every entry
through the per-image unpooling below, so a joint draw would need an N-image Gram of
dh*dw*K_{l-1} columns per map. It is updated by Hamiltonian Monte Carlo with a
Metropolis correction (exact: the conditional is left invariant), with a diagonal mass
matrix estimated from the conditional's own Hessian (Hutchinson probes; it does not
depend on D[l], so the kernel stays valid at every sweep). The step size adapts during
burn-in only, up to half the leapfrog's estimated stability limit.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from dgdm_tf.pretrain import kernel as pretrain
from dgdm_tf.pretrain.blocks import nhwc_to_blocks
from dgdm_tf.pretrain.dictionary import d_statistics, draw_d
from dgdm_tf.pretrain.layer_model import LayerModel, PretrainState
from dgdm_tf.core.image_chunks import chunk_size, map_over_chunks, sum_over_chunks
from dgdm_tf.core.model import (DeepModel, dense_indicators, down_from, layer_inputs,
                                unpool_blocks)
from dgdm_tf.core.ops import full_conv
from dgdm_tf.topdown.state import DeepState, dense_z, masked, residual


#: the largest adapted log step: eps <= 1 / sqrt(lambda_max estimate)
MAX_LOG_STEP = 0.0
#: power iterations for lambda_max (the schema's default of `power_iterations`): 3 come
#: close enough that every D[2] draw was still accepted (docs/findings/hmc_power_iterations.md)
POWER_ITERATIONS = 3
#: leapfrog steps of a D[l >= 1] draw (the schema's default of `n_leapfrog`)
N_LEAPFROG = 10


def _layer_s(s_top, d, model: DeepModel, l: int, zd):
    """S[l] (dense) of the images whose top layer and indicators these are."""
    if l == model.n_layers - 1:
        return s_top
    xs = layer_inputs(s_top, model, d, zd)
    return unpool_blocks(xs[l + 1], zd[l], model.geoms[l].p)


class _Images:
    """What D[l]'s conditional reads of each image, for all images at once (``chunk``
    None) or a chunk at a time (:mod:`dgdm_tf.core.image_chunks`): the data fit's sums
    over images are then accumulated chunk by chunk, so the dense S[l] and the images
    pushed down to the data plane are held for one chunk only."""

    def __init__(self, state: DeepState, x, model: DeepModel, l: int, mask, chunk):
        self.state, self.model, self.l, self.chunk = state, model, l, chunk
        self.has_mask, self.n_z = mask is not None, len(state.z)
        self.per_image = [x, state.gamma_e, state.s_top, *state.z] + ([mask] if self.has_mask else [])

    def _fields(self, parts):
        """(x, gamma_e, S[L-1], dense indicators, mask) of a chunk. The indicators are
        rebuilt per chunk and call: held for every image they are the memory that
        chunking saves (N x H x W x K floats at layer 1)."""
        x, ge, s_top = parts[:3]
        zd = [dense_indicators(zz, g) for zz, g in zip(parts[3: 3 + self.n_z], self.model.geoms[:-1])]
        return x, ge, s_top, zd, (parts[3 + self.n_z] if self.has_mask else None)

    def unpack(self, parts):
        """(x, gamma_e as N x 1 x 1 x 1, S[l], dense indicators, mask) of a chunk."""
        x, ge, s_top, zd, mask = self._fields(parts)
        s_l = _layer_s(s_top, self.state.d, self.model, self.l, zd)
        return x, ge[:, None, None, None], s_l, zd, mask

    def total(self, fn, *shared):
        """sum over the images' chunks of ``fn(*shared, x, ge, S[l], zd, mask)``."""
        return sum_over_chunks(lambda *a: fn(*a[: len(shared)], *self.unpack(a[len(shared):])),
                               self.per_image, self.chunk, shared)

    def residual(self, d):
        """X - g(S[L-1]) with dictionaries ``d``, chunk by chunk."""
        def one(*parts):
            x, _, s_top, zd, mask = self._fields(parts)
            return masked(x - layer_inputs(s_top, self.model, d, zd)[0], mask)
        return map_over_chunks(one, self.per_image, self.chunk)


def _resample_d0_chunked(state: DeepState, x, model: DeepModel, seed, chunk):
    """D[0] | rest from its sums over images (the pretraining kernel's ``statistics`` route,
    :func:`dgdm_tf.pretrain.dictionary.draw_d`), accumulated a chunk of images at a time.
    The same maps, order and seeds as the one-call draw; the two agree to round-off."""
    g = model.geoms[0]
    lm = LayerModel(g, model.hyper, top=False, n_images=int(x.shape[0]))
    images = _Images(state, x, model, 0, None, chunk)

    def stats(x_c, ge_c, s_l, zd, mask):
        return d_statistics(nhwc_to_blocks(s_l, g), x_c, state.d[0], ge_c[:, 0, 0, 0], lm)

    f_corr, f_gram = images.total(stats)
    d = list(state.d)
    d[0] = draw_d(state.d[0], f_corr, f_gram, lm, seed)
    return state._replace(d=tuple(d), resid=images.residual(d)), tf.constant(1.0)


def _d_conditional(images: _Images, model: DeepModel, l: int, d):
    """D[l]'s conditional (l >= 1) over ``images``: (potential_and_grad(D[l]) -> (U, dU),
    data_hess_vec(v) -> the data fit's Hessian times v, the prior's left out). U is
    quadratic in D[l], so its Hessian does not depend on D[l]."""
    prior = model.hyper.dict_prior_precision

    def image(dl, s_l, zd, m):
        return masked(down_from(full_conv(s_l, dl), l, model, d, zd), m)

    def fit_and_grad(dl, x_c, ge, s_l, zd, m, with_prior=False):
        with tf.GradientTape() as tape:
            tape.watch(dl)
            r = masked(x_c - image(dl, s_l, zd, m), m)
            u = 0.5 * tf.reduce_sum(ge * tf.square(r))
            if with_prior:
                u += 0.5 * prior * tf.reduce_sum(tf.square(dl))
        return u, tape.gradient(u, dl)

    def fit_hess_vec(v, x_c, ge, s_l, zd, m):
        with tf.GradientTape() as tape:
            tape.watch(v)
            quad = 0.5 * tf.reduce_sum(ge * tf.square(image(v, s_l, zd, m)))
        return tape.gradient(quad, v)

    if images.chunk is None:  # every image in one call (the draws of the sampler before chunks)
        all_images = images.unpack(images.per_image)

        def potential_and_grad(dl):
            return fit_and_grad(dl, *all_images, with_prior=True)

        def data_hess_vec(v):
            return fit_hess_vec(v, *all_images)
    else:
        def potential_and_grad(dl):
            u, g = images.total(fit_and_grad, dl)
            return u + 0.5 * prior * tf.reduce_sum(tf.square(dl)), g + prior * dl

        def data_hess_vec(v):
            return images.total(fit_hess_vec, v)
    return potential_and_grad, data_hess_vec


def hmc_tuning(hess_vec, q0, prior: float, seed, power_iterations: int):
    """The HMC's diagonal mass and lambda_max of M^-1/2 H M^-1/2, from products with the
    conditional's precision H (``hess_vec``): the mass is the per-map mean of diag(H) from
    one Rademacher probe (Hutchinson), floored at the prior's precision; lambda_max is
    estimated by ``power_iterations`` power iterations (from below). The leapfrog is
    stable for eps < 2 / sqrt(lambda_max)."""
    probe = tf.sign(tf.random.stateless_uniform(tf.shape(q0), seed, -1.0, 1.0))
    mass = tf.maximum(tf.reduce_mean(probe * hess_vec(probe), axis=[0, 1, 2], keepdims=True), prior)
    mass = tf.broadcast_to(mass, tf.shape(q0))
    # tf.while_loop, not a Python loop: one traced copy of the operator and its gradient
    # instead of one per iteration (tracing a sweep, not running it, is what small runs spend)
    sqrt_mass = tf.sqrt(mass)  # outside the loop body: computed once, not per iteration

    def power_step(i, v, lam):
        w = hess_vec(v / sqrt_mass) / sqrt_mass
        lam = tf.norm(w)
        return i + 1, w / lam, lam

    _, _, lam = tf.while_loop(lambda i, *_: i < power_iterations, power_step,
                              (tf.constant(0), probe / tf.norm(probe), tf.constant(1.0)))
    return mass, lam


def resample_d(state: DeepState, x, model: DeepModel, l: int, seed, *, mask=None,
               n_leapfrog: int = N_LEAPFROG, adapt: bool = False, target_accept: float = 0.7,
               power_iterations: int = POWER_ITERATIONS, chunk: int | None = None):
    """D[l] | rest: exact Gaussian draw for l = 0, HMC (Metropolis-corrected) for l >= 1.

    ``chunk``: read the images that many at a time (memory; the sums over images are the
    same up to round-off, and D[0] takes the sums-over-images route of its draw); a
    :class:`dgdm_tf.core.image_chunks.Shards`: its chunks, summed over its workers.
    ``n_leapfrog``: the HMC's leapfrog steps; ``power_iterations``: the power iterations
    that estimate lambda_max for its step (:func:`hmc_tuning`; any count keeps the kernel
    exact, fewer give a less accurate, bolder step; docs/findings/hmc_power_iterations.md).
    Returns (state, acceptance probability) -- 1.0 for the exact draw.
    """
    if chunk is not None and chunk_size(chunk) >= int(x.shape[0]):
        chunk = None
    if l == 0:
        if mask is not None:
            raise NotImplementedError("D[0] is drawn with every pixel observed; hold the "
                                      "dictionaries fixed when pixels are missing")
        if chunk is not None:
            return _resample_d0_chunked(state, x, model, seed, chunk)
        g = model.geoms[0]
        s_l = _layer_s(state.s_top, state.d, model, 0, dense_z(state, model))
        lm = LayerModel(g, model.hyper, top=False, n_images=int(x.shape[0]))
        ps = PretrainState(
            s=nhwc_to_blocks(s_l, g), z=None, d=state.d[0], log_theta=None,
            gamma_w=None, gamma_e=state.gamma_e, resid=None, seed=None)
        ps = pretrain.resample_d(ps, x, lm, seed)
        d = list(state.d)
        d[0] = ps.d
        return state._replace(d=tuple(d), resid=ps.resid[:, : g.hx, : g.wx, :]), tf.constant(1.0)

    images = _Images(state, x, model, l, mask, chunk)
    potential_and_grad, data_hess_vec = _d_conditional(images, model, l, state.d)
    prior = model.hyper.dict_prior_precision

    def hess_vec(v):  # the conditional's precision times v (it does not depend on D[l])
        return data_hess_vec(v) + prior * v

    s_probe, s_mom, s_acc = tf.unstack(tf.random.experimental.stateless_split(seed, 3))
    q0 = state.d[l]
    mass, lam = hmc_tuning(hess_vec, q0, prior, s_probe, power_iterations)
    sqrt_mass = tf.sqrt(mass)
    eps = tf.exp(state.hmc_log_step[l]) / tf.sqrt(lam)  # exp(log step) adapts in burn-in
    p0 = tf.random.stateless_normal(tf.shape(q0), s_mom) * sqrt_mass
    with tf.control_dependencies([lam]):  # after the tuning's passes, not beside them (memory)
        u0, g0 = potential_and_grad(tf.identity(q0))

    # full momentum steps, the last one a half step; a tf.while_loop as for the power
    # iterations (one traced copy of the potential's gradient)
    def leapfrog(i, q, p, u, grad):
        q = q + eps * p / mass
        u, grad = potential_and_grad(q)
        p = p - tf.where(i < n_leapfrog - 1, eps, 0.5 * eps) * grad
        return i + 1, q, p, u, grad

    _, q, p, u1, _ = tf.while_loop(lambda i, *_: i < n_leapfrog, leapfrog,
                                   (tf.constant(0), q0, p0 - 0.5 * eps * g0, u0, g0))
    h0 = u0 + 0.5 * tf.reduce_sum(p0 * p0 / mass)
    h1 = u1 + 0.5 * tf.reduce_sum(p * p / mass)
    log_acc = tf.minimum(0.0, h0 - h1)
    log_acc = tf.where(tf.math.is_finite(log_acc), log_acc, -np.inf)
    accept = tf.math.log(tf.random.stateless_uniform([], s_acc)) < log_acc
    dl = tf.where(accept, q, q0)
    d = list(state.d)
    d[l] = dl
    step = state.hmc_log_step
    if adapt is not False:  # Robbins-Monro towards the target acceptance; burn-in only
        gain = 0.5 * (tf.exp(log_acc) - target_accept)
        if adapt is not True:  # a boolean tensor: one compiled sweep for both phases
            gain = tf.where(adapt, gain, 0.0)
        # never past half the leapfrog's stability limit, 2 / sqrt(lambda_max): the power
        # iterations estimate lambda_max from below, and steps adapted up to the limit
        # were rejected outright in collection, freezing D (docs/findings/hmc_step_cap.md)
        step = tf.minimum(tf.tensor_scatter_nd_add(step, [[l]], [gain]), MAX_LOG_STEP)
    state = state._replace(d=tuple(d), hmc_log_step=step)
    resid = residual(state, x, model, mask) if chunk is None else images.residual(state.d)
    return state._replace(resid=resid), tf.exp(log_acc)
