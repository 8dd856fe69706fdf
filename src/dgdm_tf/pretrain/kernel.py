"""One Gibbs sweep of the layer-wise pretraining model (:mod:`dgdm_tf.pretrain.layer_model`):
the conditionals and the compiled sweep.

Choices where the paper is loose (written down here as the code's contract):

* Entries of W at inactive positions never touch the likelihood; they are integrated
  out (a partially collapsed Gibbs step, van Dyk & Park 2008), so the gamma_w
  conditional counts the active entries only. The target distribution is unchanged.
* The (z, W) conditional of a block is drawn jointly: W integrated out gives the
  (p^2 + 1)-way categorical in closed form (precision gamma_e ||D_k||^2 + gamma_w),
  then W given z. Blocks of one colour of one map have disjoint footprints, so they are
  conditionally independent and drawn together (exact; the supplement, "Gibbs Sampling").
* D_k is drawn jointly over its dh*dw*C entries from its exact Gaussian conditional
  (the supplement draws D entry by entry; the joint draw is the same target, mixes
  better). Maps are updated one after the other (:mod:`dgdm_tf.pretrain.dictionary`).

The state's layout: :mod:`dgdm_tf.pretrain.blocks`.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from dgdm_tf.core import random
from dgdm_tf.core.compiled import cached_builder, compiled
from dgdm_tf.core.draws import log_dirichlet_sample
from dgdm_tf.pretrain.blocks import block_kernels, blocks_to_pooled, colour_tiles, tiles_to_residual
from dgdm_tf.core.hyper import Hyper
from dgdm_tf.pretrain.dictionary import resample_d
from dgdm_tf.pretrain.layer_model import LayerModel, PretrainState

#: one sweep's streams: the state's next seed, then one per conditional, in sweep order
SWEEP_SEEDS = ("carry", "zw", "d", "theta", "gamma_w", "gamma_e")



def _gamma_sample(shape, rate, seed):
    return tf.random.stateless_gamma(tf.shape(rate), seed, alpha=shape) / rate



def scan_orders(model: LayerModel, seed):
    """(colour ids (G_h G_w,), map order per colour (G_h G_w, K)) of one sweep.

    A colour's id is a * G_w + b. ``scan == "fixed"``: ``model.colour_order`` and the maps
    in index order; ``"random"``: both permutations drawn from ``seed`` (stateless), so
    the same seed gives the same sweep."""
    g = model.geom
    n_col = g.gh * g.gw
    if model.scan == "fixed":
        ids = tf.constant([a * g.gw + b for a, b in model.colour_order], tf.int32)
        return ids, tf.broadcast_to(tf.range(g.k, dtype=tf.int32), [n_col, g.k])
    s_col, s_map = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    ids = tf.argsort(tf.random.stateless_uniform([n_col], s_col))
    maps = tf.argsort(tf.random.stateless_uniform([n_col, g.k], s_map), axis=-1)
    return ids, maps


def resample_zw(state: PretrainState, x: tf.Tensor, model: LayerModel, seed,
                return_expected_pool: bool = False):
    """Blocked draw of (z, W) for every block (supplement: z_{ij} and W_{ij} conditionals).

    For block (n, k, i, j) with residual R excluding the block, c_m = <R, D_k at offset m>
    and P = gamma_e ||D_k||^2 + gamma_w:
        log p(z = m) = log theta_m + 1/2 log(gamma_w / P) + (gamma_e c_m)^2 / (2 P)
        log p(z = off) = log theta_off
        W | z = m ~ N(gamma_e c_m / P, 1 / P)
    Colour after colour, map after map, in the order :func:`scan_orders` gives: the
    blocks of one colour of one map have disjoint footprints, so they are conditionally
    independent and drawn together. Within a colour the residual is held as its blocks'
    footprint tiles, so each step is two small matmuls (correlation and residual update)
    instead of image-sized convs. A step's draws are seeded by (colour id, map index),
    whatever the order, so ``scan="fixed"`` with the default order repeats the draws of
    the sampler before the random scan existed.

    With ``return_expected_pool`` it also returns, per block, E[pooled value | rest] =
    sum_m p(z = m | -) E[W | z = m, -] at the moment the block is drawn: averaging these
    over sweeps estimates the posterior mean of the pooled features with less variance
    than averaging the draws (Rao-Blackwellisation); the chain itself is unchanged.
    """
    g = model.geom
    p2 = g.p * g.p
    n_col = g.gh * g.gw
    kb = tf.reshape(block_kernels(state.d, g), [g.k, g.fh * g.fw * g.c, p2])  # K, F, P2
    gram = tf.einsum("kfm,kfq->kmq", kb, kb)  # K, P2, P2
    dnorm = tf.linalg.diag_part(gram)[:, 0]  # ||D_k||^2 (the same at every offset)
    n = tf.shape(state.resid)[0]
    nb = g.nch * g.ncw
    ge = state.gamma_e[:, None, None]  # N,1,1
    gw = state.gamma_w
    log_theta = tf.transpose(state.log_theta, [1, 0, 2])[:, :, None, :]  # K, N, 1, S
    neg_inf = tf.constant(-np.inf, tf.float32)
    # the draws keep the seed's own stream; the scan order comes from a salted fold-in
    seed_draw = seed
    colour_ids, map_orders = scan_orders(
        model, random.fold(seed, "scan_order"))
    # colour-major state and masks flattened over the G_h x G_w colours, so a colour is
    # picked by its id at run time
    s_col = tf.reshape(state.s, [n_col, g.k, n * nb, p2])
    valid_col = tf.reshape(model.valid, [n_col, 1, nb, p2])
    real_col = tf.reshape(model.block_valid, [n_col, 1, nb, 1])

    def one_colour(slot, resid, s_new_c, z_new_c, e_new_c):
        """Slot ``slot``'s colour: its blocks of every map, map after map."""
        ci = tf.gather(colour_ids, slot)
        a, b = ci // g.gw, ci % g.gw
        colour_seed = tf.random.experimental.stateless_fold_in(seed_draw, ci)
        # gathers, not slices: XLA would make a run-time slice start a compile-time
        # constant and recompile the sweep on every call
        valid = tf.gather(valid_col, ci)
        real = tf.gather(real_col, ci)
        tiles0 = colour_tiles(resid, g, a, b)
        s_ab = tf.gather(s_col, ci)
        order = tf.gather(map_orders, slot)
        s_out = tf.TensorArray(tf.float32, size=g.k)
        e_out = tf.TensorArray(tf.float32, size=g.k if return_expected_pool else 0)
        z_out = tf.TensorArray(tf.int32, size=g.k)

        def body(i, tiles, s_out, z_out, e_out):
            k = order[i]
            s1, s2 = tf.unstack(tf.random.experimental.stateless_split(
                tf.random.experimental.stateless_fold_in(colour_seed, k), 2))
            s_old = tf.gather(s_ab, k)  # M, P2
            kb_k = tf.gather(kb, k)
            corr = tiles @ kb_k + s_old @ tf.gather(gram, k)
            corr = tf.reshape(corr, [n, nb, p2])
            prec = ge * tf.gather(dnorm, k) + gw  # N,1,1
            lt = tf.gather(log_theta, k)  # N,1,S
            on = lt[..., :p2] + 0.5 * tf.math.log(gw / prec) + 0.5 * tf.square(ge * corr) / prec
            # A partial edge block's position outside S carries no data: its state has
            # the off state's likelihood (theta stays conjugate); padded blocks are no
            # part of the model and stay off.
            on = tf.where(valid, on, lt[..., :p2])
            on = tf.where(real, on, neg_inf)
            logits = tf.concat([on, tf.broadcast_to(lt[..., p2:], [n, nb, 1])], axis=-1)
            u = tf.random.stateless_uniform(tf.shape(logits), s1, minval=1e-20, maxval=1.0)
            zz = tf.argmax(logits - tf.math.log(-tf.math.log(u)), axis=-1, output_type=tf.int32)
            onehot = tf.one_hot(zz, p2 + 1)[..., :p2] * tf.cast(valid, tf.float32)
            c_sel = tf.reduce_sum(onehot * corr, axis=-1, keepdims=True)
            eps = tf.random.stateless_normal(tf.shape(c_sel), s2)
            s_new = tf.reshape(onehot * (ge * c_sel + eps * tf.sqrt(prec)) / prec, [-1, p2])
            tiles = tiles - tf.matmul(s_new - s_old, kb_k, transpose_b=True)
            if return_expected_pool:  # only the chains that average features pay for it
                prob = tf.nn.softmax(logits, axis=-1)[..., :p2] * tf.cast(valid, tf.float32)
                e_out = e_out.write(k, tf.reshape(
                    tf.reduce_sum(prob * ge * corr / prec, axis=-1), [-1]))
            return (i + 1, tiles, s_out.write(k, s_new), z_out.write(k, tf.reshape(zz, [-1])),
                    e_out)

        _, tiles, s_out, z_out, e_out = tf.while_loop(
            lambda i, *_: i < g.k, body, (tf.constant(0), tiles0, s_out, z_out, e_out),
            parallel_iterations=1)
        return (slot + 1, resid + tiles_to_residual(tiles - tiles0, g, a, b, n),
                s_new_c.write(slot, s_out.stack()), z_new_c.write(slot, z_out.stack()),
                e_new_c.write(slot, e_out.stack()) if return_expected_pool else e_new_c)

    # the slots in one while loop, not unrolled: a traced sweep holds one colour's step
    # (tracing and graph optimisation shrink with it; each step computes what it did unrolled)
    _, resid, s_new_c, z_new_c, e_new_c = tf.while_loop(
        lambda slot, *_: slot < n_col, one_colour,
        (tf.constant(0), state.resid, tf.TensorArray(tf.float32, size=n_col),
         tf.TensorArray(tf.int32, size=n_col),
         tf.TensorArray(tf.float32, size=n_col if return_expected_pool else 0)),
        parallel_iterations=1)

    # colour id -> the slot that drew it (a scatter: XLA's invert_permutation wants its
    # input at compile time)
    slot_of = tf.scatter_nd(colour_ids[:, None], tf.range(n_col, dtype=tf.int32), [n_col])

    def grid(per_slot, shape):  # back to the colour-major layout (Gh, Gw, ...)
        return tf.reshape(tf.gather(per_slot.stack(), slot_of), [g.gh, g.gw] + shape)

    shape = [g.k, n, g.nch, g.ncw]
    state = state._replace(s=grid(s_new_c, shape + [p2]), z=grid(z_new_c, shape), resid=resid)
    if return_expected_pool:
        return state, blocks_to_pooled(grid(e_new_c, shape), g)
    return state


def resample_theta(state: PretrainState, x: tf.Tensor, model: LayerModel, seed) -> PretrainState:
    """theta_nk | - ~ Dir(alpha + counts of each block state over the map's blocks)."""
    g = model.geom
    real = tf.cast(model.block_valid, tf.float32)[:, :, None, None, :, :, None]
    oh = tf.one_hot(state.z, g.n_states) * real
    counts = tf.reduce_sum(oh, axis=[0, 1, 4, 5])  # K, N, S
    if g.n_states != model.alpha.shape[0]:  # spike-slab top layer: states (on, off)
        raise AssertionError("Dirichlet prior size does not match the block states")
    alpha = model.alpha + tf.transpose(counts, [1, 0, 2])
    return state._replace(log_theta=log_dirichlet_sample(alpha, seed))


def active_mask(state: PretrainState, model: LayerModel) -> tf.Tensor:
    """(Gh, Gw, K, N, nch, ncw) 1.0 where a block's non-zero entry lies inside S."""
    g = model.geom
    oh = tf.one_hot(state.z, g.n_states)[..., : g.p * g.p]
    valid = tf.cast(model.valid, tf.float32)[:, :, None, None]
    return tf.reduce_sum(oh * valid, axis=-1)


def resample_gamma_w(state: PretrainState, x: tf.Tensor, model: LayerModel, seed) -> PretrainState:
    """gamma_w | - ~ Gamma(a_w + M/2, b_w + ||W_active||^2 / 2), M active entries."""
    return state._replace(gamma_w=draw_gamma_w(
        tf.reduce_sum(active_mask(state, model)), tf.reduce_sum(tf.square(state.s)), model.hyper,
        seed))


def draw_gamma_w(active, sum_w2, hyper: Hyper, seed) -> tf.Tensor:
    """gamma_w ~ Gamma(a_w + active / 2, b_w + sum_w2 / 2), from the two sums alone."""
    shape = hyper.a_w + 0.5 * tf.cast(active, tf.float32)
    rate = hyper.b_w + 0.5 * tf.cast(sum_w2, tf.float32)
    return tf.random.stateless_gamma([], seed, alpha=shape) / rate


def resample_gamma_e(state: PretrainState, x: tf.Tensor, model: LayerModel, seed) -> PretrainState:
    """gamma_e[n] | - ~ Gamma(a_e + Hx Wx C / 2, b_e + ||E_n||^2 / 2)."""
    h = model.hyper
    sq = tf.reduce_sum(tf.square(state.resid), axis=[1, 2, 3])
    ge = _gamma_sample(h.a_e + 0.5 * model.n_pixels, h.b_e + 0.5 * sq, seed)
    return state._replace(gamma_e=ge)


def sweep(state: PretrainState, x: tf.Tensor, model: LayerModel, update_d: bool = True,
          update_gamma_w: bool = True, return_expected_pool: bool = False, zw_fn=None,
          gamma_e_cap=None):
    """One Gibbs sweep over every conditional; the state's seed is split with a salt.

    ``update_d`` / ``update_gamma_w`` False hold the globals fixed (feature inference).
    ``return_expected_pool`` also returns the Rao-Blackwellised pooled features of the
    sweep (see :func:`resample_zw`). ``gamma_e_cap`` (N,), burn-in only: the sweep runs
    at gamma_e = min(gamma_e, cap), a tempered likelihood (:mod:`dgdm_tf.mcmc.anneal`);
    gamma_e itself is still drawn from its exact conditional at the end of the sweep.
    """
    seeds = random.split(state.seed, SWEEP_SEEDS)
    state = state._replace(seed=seeds.carry)
    if gamma_e_cap is not None:
        state = state._replace(gamma_e=tf.minimum(state.gamma_e, gamma_e_cap))
    zw = zw_fn or (lambda st, xx, sd: resample_zw(st, xx, model, sd, return_expected_pool))
    out = zw(state, x, seeds.zw)
    state, expected = out if return_expected_pool else (out, None)
    if update_d:
        state = resample_d(state, x, model, seeds.d)
    state = resample_theta(state, x, model, seeds.theta)
    if update_gamma_w:
        state = resample_gamma_w(state, x, model, seeds.gamma_w)
    state = resample_gamma_e(state, x, model, seeds.gamma_e)
    if return_expected_pool:
        return state, expected
    return state


def log_likelihood(state: PretrainState, model: LayerModel) -> tf.Tensor:
    """sum_n log N(X_n | sum_k D_k * S_nk, 1/gamma_e[n])."""
    sq = tf.reduce_sum(tf.square(state.resid), axis=[1, 2, 3])
    ge = state.gamma_e
    return tf.reduce_sum(0.5 * model.n_pixels * tf.math.log(ge / (2 * np.pi)) - 0.5 * ge * sq)


@cached_builder()
def make_sweep_fn(model: LayerModel, update_d: bool = True, update_gamma_w: bool = True,
                  jit_compile: bool = False, return_expected_pool: bool = False,
                  zw_step=None):
    """A compiled sweep ``f(state, x[, gamma_e_cap]) -> state`` (or ``(state, expected_pool)``).

    ``jit_compile`` compiles the (z, W) step -- thousands of small ops a sweep -- with
    XLA; the rest stays in graph mode (XLA has no stateless Gamma sampler). ``zw_step``
    replaces :func:`resample_zw` (same signature); the probe of another schedule used it
    (docs/findings/map_parallel_schedule.md).
    """
    step = zw_step or resample_zw
    zw_fn = None
    if jit_compile or zw_step is not None:
        zw_fn = compiled(
            lambda st, xx, sd: step(st, xx, model, sd, return_expected_pool),
            jit_compile=jit_compile)
    return compiled(
        lambda st, x, gamma_e_cap=None: sweep(st, x, model, update_d, update_gamma_w,
                                              return_expected_pool, zw_fn, gamma_e_cap),
        reduce_retracing=True)
