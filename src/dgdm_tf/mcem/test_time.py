"""Test-time inference of the supervised model (supplement Algorithm 2 and "Testing"):
Monte Carlo EM for the MAP of a new image's top layer S[L] = W . Z[L], dictionaries fixed.

Psi_test = (W, Z[L]) (W defined for every unit, prior N(0, 1/gamma_s[n, k])), Phi_test =
(Z[l < L-1], theta, pi, gamma_e, gamma_s): the latent variables the E-step samples from
their conditionals given Psi_test (the Gibbs kernels of :mod:`dgdm_tf.topdown.sweep`;
gamma_s per image and top map by Eq. SampleR, or a global one held, ``Hyper.gamma_s``).
The M-step raises the sampled Q (eq. ApproTestQ)

    Q(W, Z) = sum_n [ -gamma_e/2 ||X - g(W . Z)||^2 - sum_k gamma_s[n, k]/2 ||W_k||^2
                      + sum_u z_u log pi + (1 - z_u) log(1 - pi) ]

in two moves, each of which cannot lower it:
  1. per unit, (z, w) jointly to their coordinate maximum: z = 1 iff
     log(pi/(1-pi)) + (gamma_e b)^2 / (2 P) > 0 (b = <F, R0>, P = gamma_e ||F||^2 + gamma_s,
     F the unit's image, R0 the residual without it), w = gamma_e b / P if on, else 0.
     This is eq. UpdateZ evaluated at the unit's best w (UpdateZ alone, at the current w,
     can never switch a unit on once its W has decayed to 0, since an off unit's W gets no
     data gradient). Units of one colour of one map have disjoint footprints: Q is
     separable over them, so they are maximised together.
  2. ``rmsprop_steps`` RMSprop steps (eq. UpdateW, decay ``rmsprop_decay``) on W with Z
     fixed, the gradient by autodiff of Q.
The chain starts from a Gibbs sample (``burn_in`` sweeps of the test-time sampler), so the
MAP search starts inside the posterior's bulk.
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

import numpy as np
import tensorflow as tf

from dgdm_tf.core import random
from dgdm_tf.topdown.conjugate import resample_gamma_e, resample_pi, resample_theta
from dgdm_tf.topdown.state import DeepState, dense_z, fold_seed, init_state, masked, reconstruct, residual
from dgdm_tf.topdown.sweep import make_sweep_fn
from dgdm_tf.topdown.top_units import top_unit_terms
from dgdm_tf.topdown.unpooling import resample_z
from dgdm_tf.pretrain.chain_parts import check_finite
from dgdm_tf.core.compiled import cached_builder, compiled
from dgdm_tf.core.shards import concat_parts, image_range
from dgdm_tf.core.model import DeepModel, layer_inputs
from dgdm_tf.mcem.options import MapOptions
from dgdm_tf.mcmc.driver import Kernel, Schedule, run_in_memory
from dgdm_tf.topdown.options import Start


def resample_gamma_s_given_w(state: DeepState, w, model: DeepModel, seed):
    """gamma_s | W (Eq. SampleR): per image and top map, Gamma(a_w + M/2, b_w + ||W_nk||^2 / 2)
    with M = N_sx N_sy units of the map (W is the M-step's point at every unit; where Z = 0
    it is 0, its prior mode). A global gamma_s (``Hyper.gamma_s``) is held at the state's."""
    h = model.hyper
    if not h.slab_per_image:
        return state.gamma_s
    m = float(model.top.hs * model.top.ws)
    rate = h.b_w + 0.5 * tf.reduce_sum(tf.square(w), axis=[1, 2])  # N, K
    return tf.random.stateless_gamma(tf.shape(rate), seed, alpha=h.a_w + 0.5 * m) / rate


def e_step(state: DeepState, w, x, model: DeepModel, seed, mask=None):
    """Phi_test | Psi_test: lower unpooling, theta, pi, gamma_e and gamma_s.
    Returns (state with the new gamma_s, gamma_s (N, K))."""
    seeds = random.split(seed, ("z", "theta", "pi", "gamma_e", "gamma_s"))
    state = state._replace(resid=residual(state, x, model, mask))
    for l in range(model.n_layers - 2, -1, -1):
        state = resample_z(state, x, model, l, fold_seed(seeds.z, l), mask)
    state = resample_theta(state, x, model, seeds.theta)
    state = resample_pi(state, x, model, seeds.pi)
    state = resample_gamma_e(state, x, model, seeds.gamma_e, mask)
    gs = resample_gamma_s_given_w(state, w, model, seeds.gamma_s)
    return state._replace(gamma_s=gs), gs


def maximise_units(state: DeepState, w, gamma_s, model: DeepModel, mask=None):
    """Move 1 of the M-step: every unit's (z, w) to its coordinate maximum of Q."""
    gt, col = model.top, model.colourings[-1]
    colour_terms = top_unit_terms(state, model, mask)
    ge = state.gamma_e[:, None, None]
    s_k = tf.transpose(state.s_top, [3, 0, 1, 2])
    w_k = tf.transpose(w, [3, 0, 1, 2])
    log_odds = state.log_pi[..., 0] - state.log_pi[..., 1]
    resid = state.resid
    # coordinate ascent in index order: a maximisation, not a sampler, has no scan to draw
    for ci, (a, b) in enumerate(col.colours()):
        member = tf.constant(col.member_mask(a, b))[None]
        real = tf.constant(col.real(a, b))[None]
        cache0, terms = colour_terms(ci, ci, None)

        def body(k, resid, s_k, w_k, cache, a=a, b=b, member=member, real=real, terms=terms):
            bsum, asum, finish, cache = terms(k, k, resid, col.take(s_k[k], a, b), cache)
            prec = ge * asum + tf.gather(gamma_s, k, axis=1)[:, None, None]
            w_best = ge * bsum / prec
            gain = log_odds[:, k][:, None, None] + 0.5 * prec * w_best * w_best
            on = tf.cast((gain > 0.0) & real, tf.float32)
            val = on * w_best
            resid = finish(val)
            s_new = tf.where(member, col.put(val, a, b), s_k[k])
            return (k + 1, resid, tf.tensor_scatter_nd_update(s_k, [[k]], s_new[None]),
                    tf.tensor_scatter_nd_update(w_k, [[k]], s_new[None]), cache)

        _, resid, s_k, w_k, _ = tf.while_loop(lambda k, *_: k < gt.k, body,
                                              (tf.constant(0), resid, s_k, w_k, cache0),
                                              parallel_iterations=1)
    s_top = tf.transpose(s_k, [1, 2, 3, 0])
    on = tf.cast(tf.not_equal(s_top, 0.0), tf.float32)
    return state._replace(s_top=s_top, on=on, resid=resid), tf.transpose(w_k, [1, 2, 3, 0])


def q_value(state: DeepState, w, gamma_s, x, model: DeepModel, mask=None) -> tf.Tensor:
    """Q of the current sample, per image (N,): the M-step's objective."""
    rec = reconstruct(state._replace(s_top=w * state.on), model)
    r = masked(x - rec, mask)
    lp = state.log_pi
    return (-0.5 * state.gamma_e * tf.reduce_sum(tf.square(r), axis=[1, 2, 3])
            - 0.5 * tf.reduce_sum(gamma_s * tf.reduce_sum(tf.square(w), axis=[1, 2]), axis=1)
            + tf.reduce_sum(state.on * lp[:, None, None, :, 0]
                            + (1.0 - state.on) * lp[:, None, None, :, 1], axis=[1, 2, 3]))


def rmsprop_w(state: DeepState, w, v, gamma_s, x, model: DeepModel, *, lr: float,
              decay: float, steps: int, mask=None):
    """Move 2 of the M-step: RMSprop ascent on W with Z fixed (eq. UpdateW).

    RMSprop's step is about ``lr`` whatever the gradient's size, so ``lr`` is taken in
    units of W's prior sd ``1 / sqrt(gamma_s)`` (per image and map): the paper's 1e-3 assumed
    weights of order 1, and on MNIST's top layer (sd ~ 2e-3) an absolute 1e-3 step
    scrambled the features (docs/findings/supervised_first_version.md).
    """
    scale = tf.math.rsqrt(gamma_s)[:, None, None, :]
    for _ in range(steps):
        with tf.GradientTape() as tape:
            tape.watch(w)
            q = tf.reduce_sum(q_value(state, w, gamma_s, x, model, mask))
        g = tape.gradient(q, w) * state.on  # an off unit's W only decays: keep it at 0
        v = decay * v + (1.0 - decay) * g * g
        w = w + lr * scale * g / (tf.sqrt(v) + 1e-8)
    s_top = w * state.on
    state = state._replace(s_top=s_top)
    return state._replace(resid=residual(state, x, model, mask)), w, v


@cached_builder()
def make_iteration_fn(model: DeepModel, *, lr: float, decay: float, steps: int,
                      mask_given: bool = False):
    """A compiled MCEM iteration f(state, w, v, x[, mask]) -> (state, w, v, gamma_s, Q (N,))."""

    def it(state, w, v, x, mask=None):
        seeds = random.split(state.seed, ("carry", "e_step"))
        state = state._replace(seed=seeds.carry)
        state, gs = e_step(state, w, x, model, seeds.e_step, mask)
        state, w = maximise_units(state, w, gs, model, mask)
        state, w, v = rmsprop_w(state, w, v, gs, x, model, lr=lr, decay=decay, steps=steps,
                                mask=mask)
        return state, w, v, gs, q_value(state, w, gs, x, model, mask)

    if mask_given:
        return compiled(lambda st, w, v, x, mask: it(st, w, v, x, mask), reduce_retracing=True)
    return compiled(lambda st, w, v, x: it(st, w, v, x), reduce_retracing=True)


class SweepKernel(Kernel):
    """``sweep_fn(state, x) -> (state, stats)`` step after step, nothing collected (the
    Gibbs sweeps before the MAP iterations), for :func:`dgdm_tf.mcmc.driver.run_in_memory`."""

    def __init__(self, sweep_fn, x):
        self.sweep_fn, self.x = sweep_fn, x

    def step(self, state, at):
        return self.sweep_fn(state, self.x)[0], {}, None


class _MapKernel(Kernel):
    """Algorithm 2's MCEM iterations on one batch (its first ``n_real`` images real),
    until every image's Q has met ``tol``. State: (the model's state, W, RMSprop's v, the
    features, the iterations each image took, whether it met ``tol``, its last Q); the
    row of an iteration is its summed Q over the real images."""

    def __init__(self, iteration_fn, xb, n_real, tol):
        self.fn, self.xb, self.n_real, self.tol = iteration_fn, xb, n_real, tol

    def step(self, state, at):
        st, w, v, f, took, done, q_prev = state
        st, w, v, _, q = self.fn(st, w, v, self.xb)
        q = np.asarray(q, np.float64)[:self.n_real]
        if q_prev is not None and self.tol > 0:
            newly = ~done & (np.abs(q - q_prev) <= self.tol * np.maximum(np.abs(q_prev), 1e-30))
            if newly.any():
                f = f.copy()
                f[newly] = np.asarray(st.s_top).reshape(int(self.xb.shape[0]), -1)[:self.n_real][newly]
                took = np.where(newly, at.t + 1, took)
                done = done | newly
        return (st, w, v, f, took, done, q), {"q_sum": float(np.sum(q))}, None

    def finished(self, state):
        return bool(state[5].all())


def infer_map(x: np.ndarray, start: Start, options: MapOptions, *, seed: int,
              images: Sequence[int] | None = None,
              progress: Callable[[str], None] | None = print) -> dict:
    """MAP top-layer features of ``x`` (Algorithm 2) under the dictionaries of ``start``
    (:class:`dgdm_tf.topdown.options.Start`), with the settings ``options``
    (:class:`dgdm_tf.mcem.options.MapOptions`): ``burn_in`` Gibbs sweeps with the
    dictionaries fixed (gamma_s from ``start.gamma_s_init``, then drawn per image and map
    unless it is global), then MCEM iterations until each image's Q changes by less than ``tol``
    relative to its previous value (at most ``iterations``; ``tol`` 0: exactly
    ``iterations``). An image's features are its M-step point at the iteration it first
    met the tolerance; the batch runs on until every image has (or ``iterations``).

    Returns {'features': (N, F) the MAP S[L] (vectorised, NHWC order), 'layer1_pooled':
    layer 1's pooled output at the last iteration (its S when it is the top), 'iterations':
    (N,) the iterations each image took, 'converged': (N,) whether it met ``tol``, 'q_trace':
    (iterations run,) mean Q per image over the images that ran each iteration, its
    per-batch sums 'q_sums' and image counts 'q_counts' (batches, ``iterations``),
    'seconds'}. Batch b is seeded by fold-in of (seed, b): results do not depend on the
    batches before it. ``images`` (start, stop): only those images' batches, whole ones
    (:func:`dgdm_tf.core.shards.shard_bounds`), with the same draws and outputs as in
    the call on all of ``x``; :func:`gather_map` joins such shards into that call's result. The compiled sweep and iteration are shared by every call on an
    equal model (:func:`dgdm_tf.core.compiled.cached_builder`): traced once per shape.
    ``scan``: the visiting order of the Gibbs sweeps and E-steps (:class:`DeepModel`); the
    M-step's coordinate ascent keeps index order.
    """
    x = np.asarray(x, np.float32)
    check_finite("test-time MCEM input x", x)
    o, dictionaries = options, start.dictionaries
    burn_in, iterations, tol = int(o.burn_in), int(o.iterations), float(o.tol)
    say = progress or (lambda _m: None)
    # fewer images than a batch are one batch of their own size, not padded to batch_size
    batch_size = min(int(o.batch_size), len(x))
    ks = [int(np.shape(d)[-1]) for d in dictionaries]
    model = DeepModel(x.shape[1:], start.layers, start.hyper, scan=o.scan).with_ks(ks)
    gibbs_fn = make_sweep_fn(model, update_globals=False)
    mcem_fn = make_iteration_fn(model, lr=float(o.rmsprop_lr), decay=float(o.rmsprop_decay),
                                steps=int(o.rmsprop_steps))
    feats, iters, conv, l1s, q_sums, q_counts = [], [], [], [], [], []
    lo, hi = image_range(images, len(x), batch_size)
    t0 = time.time()
    for b0 in range(lo, hi, batch_size):
        real = x[b0: b0 + batch_size]
        n_real = len(real)
        # a partial batch is padded with copies of its images (dropped below): one traced
        # shape for every batch (images are conditionally independent given D, so the
        # copies change only which random numbers the real images draw)
        xb = tf.constant(np.resize(real, (batch_size, *real.shape[1:])) if n_real < batch_size
                         else real)
        nb = int(xb.shape[0])
        bseed = random.fold(random.salted(seed, "map_batch", tf.int32), b0 // batch_size)
        st = init_state(xb, model, dictionaries, bseed, gamma_e_init=start.gamma_e_init,
                        gamma_s_init=start.gamma_s_init)
        st = run_in_memory(SweepKernel(gibbs_fn, xb), Schedule(burn_in=burn_in), st).state
        w = st.s_top
        first = (st, w, tf.zeros_like(w), np.zeros((n_real, int(np.prod(w.shape[1:]))), np.float32),
                 np.zeros(n_real, np.int64), np.zeros(n_real, bool), None)
        run = run_in_memory(_MapKernel(mcem_fn, xb, n_real, tol), Schedule.steps(iterations), first)
        st, w, v, f, took, done, _q = run.state
        q_sums.append(np.zeros(iterations))
        q_counts.append(np.zeros(iterations))
        q_sums[-1][:len(run.rows)] = [r["q_sum"] for r in run.rows]
        q_counts[-1][:len(run.rows)] = n_real
        rest = ~done
        f[rest] = np.asarray(st.s_top).reshape(nb, -1)[:n_real][rest]
        took[rest] = len(run.rows)
        check_finite("MAP top-layer features", f)
        feats.append(f)
        # layer 1's pooled output at the last iteration (the mixing diagnostics read it)
        xs = layer_inputs(st.s_top, model, st.d, dense_z(st, model))
        l1s.append(np.asarray(xs[1] if model.n_layers > 1 else st.s_top)[:n_real])
        iters.append(took)
        conv.append(done)  # tol 0: no image met a rule, none is called converged
        n_done = b0 + n_real - lo
        say(f"test-time MCEM: {n_done}/{hi - lo} images, iterations {np.mean(took):.1f} (max {took.max()}), "
            f"converged {np.mean(done):.0%}, {n_done / max(time.time() - t0, 1e-9):.2f} images/s")
    q_sums, q_counts = np.stack(q_sums), np.stack(q_counts)
    return {"features": np.concatenate(feats), "layer1_pooled": np.concatenate(l1s),
            "iterations": np.concatenate(iters),
            "converged": np.concatenate(conv), "q_trace": q_trace(q_sums, q_counts),
            "q_sums": q_sums, "q_counts": q_counts, "seconds": time.time() - t0}


def q_trace(q_sums: np.ndarray, q_counts: np.ndarray) -> np.ndarray:
    """Mean Q per image at each iteration that some batch ran, from the per-batch sums
    and counts (batches, iterations), added batch after batch in image order (so shards
    joined give the unsplit call's bits)."""
    total, count = np.zeros(q_sums.shape[1]), np.zeros(q_sums.shape[1])
    for s, c in zip(q_sums, q_counts):
        total += s
        count += c
    ran = count > 0
    return total[ran] / count[ran]


def gather_map(parts: Sequence[dict]) -> dict:
    """:func:`infer_map`'s result on all images from its results on shards (in image
    order, each on whole batches via ``images``): the arrays joined, 'q_trace' from the
    joined per-batch sums, bit for bit the unsplit call's."""
    out = concat_parts(parts)
    out["q_trace"] = q_trace(out["q_sums"], out["q_counts"])
    return out
