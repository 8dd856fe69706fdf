"""The inference chain of ``deep_chain.infer_topdown`` (same seeds, same kernels, same
draws), opened up so one run can score several estimators of the reconstruction and
report the state's statistics. One batch (all images at once)."""
from __future__ import annotations

import time

import numpy as np
import tensorflow as tf

from dgdm_tf.topdown.conjugate import resample_gamma_e, resample_pi, resample_theta
from dgdm_tf.topdown.state import init_state, reconstruct, residual
from dgdm_tf.topdown.sweep import local_steps, make_sweep_fn
from dgdm_tf.topdown.top_units import resample_top
from dgdm_tf.core.model import DeepModel, dense_indicators, indicator_map, layer_inputs
from dgdm_tf.core.model import unseen_blocks as _unseen_blocks
from dgdm_tf.core.ops import full_conv_adjoint


def unseen_blocks(mask, model: DeepModel) -> np.ndarray:
    """(N, nbh, nbw) bool: layer-1 blocks whose whole footprint is hidden
    (:func:`dgdm_tf.core.model.unseen_blocks`, layer 0)."""
    return _unseen_blocks(mask, model)[0]


def fixed_gamma_e_sweep(model: DeepModel, masked: bool, *, fix_gamma_e: bool = True,
                        fix_z: bool = False):
    """A compiled sweep as make_sweep_fn(update_globals=False) but gamma_e held at its
    start value (an approximation: the posterior at a given noise level) and / or (for
    the oracle probes) the unpooling Z held."""
    from dgdm_tf.core.compiled import compiled

    def sw(st, x, mask=None):
        seeds = tf.unstack(tf.random.experimental.stateless_split(st.seed, 8))
        st = st._replace(seed=seeds[0])
        st = st._replace(resid=residual(st, x, model, mask))
        if fix_z:
            st, expected = resample_top(st, x, model, seeds[1], mask, return_expected=True)
        else:
            st, expected = local_steps(st, x, model, seeds[1], seeds[2], mask=mask)
        st = resample_theta(st, x, model, seeds[5])
        st = resample_pi(st, x, model, seeds[6])
        if not fix_gamma_e:
            st = resample_gamma_e(st, x, model, seeds[7], mask)
        return st, {"expected_top": expected}
    if masked:
        return compiled(lambda st, x, m: sw(st, x, m), reduce_retracing=True)
    return compiled(lambda st, x: sw(st, x), reduce_retracing=True)


def run(x, mask, dicts, layers, *, seed, burn_in, collect, gamma_s, gamma_e, hyper,
        estimators, start=None, batch_index: int = 0, on_sweep=None, fix_gamma_e: bool = False,
        fix_z: bool = False):
    """Run the chain of infer_topdown on all of x as batch ``batch_index``; after burn-in
    call each ``estimators[name](ctx) -> (N,H,W,C)`` and average. ctx holds model, state
    before / after the sweep, stats. Returns ({name: mean estimate}, final state, seconds)."""
    x = np.asarray(x, np.float32)
    xm = x if mask is None else np.where(mask > 0, x, 0.0).astype(np.float32)
    ks = [int(np.shape(d)[-1]) for d in dicts]
    model = DeepModel(x.shape[1:], layers, hyper).with_ks(ks)
    mb = None if mask is None else tf.constant(mask, tf.float32)
    fn = (fixed_gamma_e_sweep(model, mb is not None, fix_gamma_e=fix_gamma_e, fix_z=fix_z)
          if fix_gamma_e or fix_z else make_sweep_fn(model, mask_given=mb is not None, update_globals=False))
    bseed = tf.random.experimental.stateless_fold_in(tf.constant([seed, 0x1F], tf.int32), batch_index)
    st = init_state(xm, model, dicts, bseed, gamma_e_init=gamma_e, gamma_s_init=gamma_s, mask=mb)
    if start is not None:
        st = start(st, model)
        st = st._replace(resid=residual(st, tf.constant(xm), model, mb))
    xt = tf.constant(xm)
    acc = {k: 0.0 for k in estimators}
    t0 = time.time()
    for t in range(burn_in + collect):
        before = st
        st, stats = fn(st, xt) if mb is None else fn(st, xt, mb)
        if on_sweep is not None:
            on_sweep(t, before, st, stats, model)
        if t >= burn_in:
            ctx = {"model": model, "before": before, "after": st, "stats": stats}
            for k, f in estimators.items():
                acc[k] = acc[k] + np.asarray(f(ctx))
    return {k: v / collect for k, v in acc.items()}, st, time.time() - t0, model


# ---- estimators --------------------------------------------------------------------------

def est_workflow(ctx):
    """infer_topdown's: g(E[S_top | rest], Z drawn before the sweep)."""
    m, b = ctx["model"], ctx["before"]
    zd = [dense_indicators(z, g) for z, g in zip(b.z, m.geoms[:-1])]
    return layer_inputs(ctx["stats"]["expected_top"], m, b.d, zd)[0]


def est_draw(ctx):
    """The plain draw after the sweep: g(S_top, Z)."""
    return reconstruct(ctx["after"], ctx["model"])


def est_hidden_rb(unseen):
    """g(E[S_top | rest], Z) with the unseen blocks' Z replaced by its conditional mean
    E[Z_b | theta] = theta (exact: those blocks are absent from the likelihood, so given
    the rest they are independent of S_top and distributed as theta)."""
    unseen_t = tf.constant(unseen[..., None, None], tf.bool)  # N, nbh, nbw, 1, 1

    def f(ctx):
        m, b = ctx["model"], ctx["before"]
        g0 = m.geoms[0]
        onehot = tf.one_hot(b.z[0], g0.n_states)[..., : g0.p * g0.p]  # N, nbh, nbw, K, P2
        theta = tf.exp(b.log_theta[0])[:, None, None, :, : g0.p * g0.p]  # N, 1, 1, K, P2
        probs = tf.where(unseen_t, tf.broadcast_to(theta, tf.shape(onehot)), onehot)
        zd = [indicator_map(probs, g0)] + [dense_indicators(z, g) for z, g in
                                             zip(b.z[1:], m.geoms[1:-1])]
        return layer_inputs(ctx["stats"]["expected_top"], m, b.d, zd)[0]
    return f


def touched_blocks(mask, model: DeepModel) -> np.ndarray:
    """(N, nbh, nbw) bool: layer-1 blocks whose footprint reaches a hidden pixel."""
    g = model.geoms[0]
    ones = tf.ones([g.dh, g.dw, g.c, 1])
    hidden = full_conv_adjoint(tf.constant(1.0 - np.asarray(mask), tf.float32), ones)[..., 0].numpy()
    n = len(mask)
    pad = np.zeros((n, g.nbh * g.p, g.nbw * g.p), np.float32)
    pad[:, : g.hs, : g.ws] = hidden
    return pad.reshape(n, g.nbh, g.p, g.nbw, g.p).sum(axis=(2, 4)) > 0


def est_blocks_from_prior(blocks, draw_seed=None):
    """As est_hidden_rb for an arbitrary block set; with ``draw_seed`` one draw from
    theta instead of its mean."""
    sel = tf.constant(blocks[..., None, None], tf.bool)
    calls = [0]

    def f(ctx):
        m, b = ctx["model"], ctx["before"]
        g0 = m.geoms[0]
        p2 = g0.p * g0.p
        onehot = tf.one_hot(b.z[0], g0.n_states)[..., :p2]
        theta = tf.exp(b.log_theta[0])[:, None, None, :, :]  # N,1,1,K,S
        theta = tf.broadcast_to(theta, tf.shape(onehot)[:-1].numpy().tolist() + [g0.n_states])
        if draw_seed is None:
            repl = theta[..., :p2]
        else:
            calls[0] += 1
            lg = tf.reshape(tf.math.log(theta), [-1, g0.n_states])
            zz = tf.random.stateless_categorical(lg, 1, [draw_seed, calls[0]])[:, 0]
            repl = tf.reshape(tf.one_hot(zz, g0.n_states)[:, :p2], tf.shape(onehot))
        probs = tf.where(sel, repl, onehot)
        zd = [indicator_map(probs, g0)] + [dense_indicators(z, g) for z, g in
                                             zip(b.z[1:], m.geoms[1:-1])]
        return layer_inputs(ctx["stats"]["expected_top"], m, b.d, zd)[0]
    return f
