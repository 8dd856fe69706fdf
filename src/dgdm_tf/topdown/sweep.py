"""Sweeps of the L-layer top-down model's Gibbs sampler (supplement, "Full Conditional
Posterior Distribution"): the top units (:mod:`dgdm_tf.topdown.top_units`), the
unpooling blocks of layers L-2 .. 0 (:mod:`dgdm_tf.topdown.unpooling`), every D
(:mod:`dgdm_tf.topdown.dictionaries`), then theta, pi, gamma_s, gamma_e
(:mod:`dgdm_tf.topdown.conjugate`); with the supervised model the SVM's variables last.
Every step leaves the joint posterior invariant (exact by default). Also the compiled
sweep (whole batch or image chunks) and the log joint.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from dgdm_tf.supervised import joint_svm as deep_svm
from dgdm_tf.core import random
from dgdm_tf.core.compiled import cached_builder, compiled
from dgdm_tf.core.image_chunks import Shards
from dgdm_tf.core.model import DeepModel, state_index
from dgdm_tf.topdown.conjugate import (
    resample_gamma_e,
    resample_gamma_s,
    resample_pi,
    resample_theta,
)
from dgdm_tf.topdown.dictionaries import N_LEAPFROG, POWER_ITERATIONS, resample_d
from dgdm_tf.topdown.state import (DeepState, concat_images, fold_seed, image_fields, residual,
                                   take_images)
from dgdm_tf.topdown.top_units import resample_top
from dgdm_tf.topdown.unpooling import resample_z

#: one sweep's streams: the state's next seed, then one per conditional, in sweep order
SWEEP_SEEDS = ("carry", "top", "blocks", "d", "gamma_s", "theta", "pi", "gamma_e")

def local_steps(state: DeepState, x, model: DeepModel, seed_top, seed_z, *, mask=None,
                fast_bottom: bool = True, svm_terms=None):
    """The per-image part of a sweep: the top units, then the unpooling blocks of layers
    L-2 .. 0 (eqs. SampleS, SampleZ). Given D, gamma_s and each image's own theta, pi,
    gamma_e (and lambda, beta), images are conditionally independent, so running this on
    any split of the images into chunks draws from the same conditionals.
    Returns (state, RB posterior mean of S[L-1])."""
    state, expected = resample_top(state, x, model, seed_top, mask, return_expected=True,
                                   fast=fast_bottom, svm_terms=svm_terms)
    for l in range(model.n_layers - 2, -1, -1):
        state = resample_z(state, x, model, l, fold_seed(seed_z, l), mask, fast=fast_bottom)
    return state, expected


def global_steps(state: DeepState, x, model: DeepModel, seeds, *, mask=None,
                 update_globals: bool = True, adapt: bool = False, n_leapfrog: int = N_LEAPFROG,
                 power_iterations: int = POWER_ITERATIONS, chunk: int | None = None):
    """The rest of a sweep: (with ``update_globals``) every D, then gamma_s (always when
    it is per image and map, else with ``update_globals``), theta, pi and gamma_e. ``seeds``: the sweep's :data:`SWEEP_SEEDS`; ``chunk``: the D steps read
    the images that many at a time; ``n_leapfrog``, ``power_iterations``: the HMC kernel of
    D[l >= 1] (:func:`dgdm_tf.topdown.dictionaries.resample_d`).
    Returns (state, HMC acceptance per layer)."""
    accept = [tf.constant(1.0)] * model.n_layers
    if update_globals:
        for l in range(model.n_layers):
            state, accept[l] = resample_d(state, x, model, l, fold_seed(seeds.d, l), mask=mask,
                                          n_leapfrog=n_leapfrog, adapt=adapt, chunk=chunk,
                                          power_iterations=power_iterations)
    if update_globals or model.hyper.slab_per_image:  # per image and map, gamma_s is local
        state = resample_gamma_s(state, x, model, seeds.gamma_s)
    state = resample_theta(state, x, model, seeds.theta)
    state = resample_pi(state, x, model, seeds.pi)
    state = resample_gamma_e(state, x, model, seeds.gamma_e, mask)
    return state, tf.stack(accept)


def sweep(state: DeepState, x, model: DeepModel, *, mask=None, update_globals: bool = True,
          adapt: bool = False, n_leapfrog: int = N_LEAPFROG, power_iterations: int = POWER_ITERATIONS,
          fast_bottom: bool = True, svm=None, y=None, svm_hyper=None):
    """One sweep: top units, then the blocks of layers L-2 .. 0 (:func:`local_steps`),
    then (with ``update_globals``) every D and gamma_s, then theta, pi and gamma_e
    (:func:`global_steps`); with ``svm`` (supervised model: a
    :class:`dgdm_tf.supervised.joint_svm.SvmState`, ``y`` the (C, N) targets) the top units see the
    SVM terms and lambda, beta, omega, kappa are drawn last.

    Returns (state, stats) with stats = {'expected_top': RB posterior mean of S[L-1] at
    this sweep, 'accept': HMC acceptance per layer (1.0 for exact draws)} and, with
    ``svm``, 'svm': the new SVM state.
    """
    seeds = random.split(state.seed, SWEEP_SEEDS)
    state = state._replace(seed=seeds.carry)
    # rebuild the residual from X: no round-off drifts across sweeps
    state = state._replace(resid=residual(state, x, model, mask))
    terms = None
    if svm is not None:
        terms = deep_svm.unit_terms(svm, y, state.s_top.shape[1:], svm_hyper)
    state, expected = local_steps(state, x, model, seeds.top, seeds.blocks, mask=mask,
                                  fast_bottom=fast_bottom, svm_terms=terms)
    state, accept = global_steps(state, x, model, seeds, mask=mask, update_globals=update_globals,
                                 adapt=adapt, n_leapfrog=n_leapfrog,
                                 power_iterations=power_iterations)
    stats = {"expected_top": expected, "accept": accept}
    if svm is not None:
        # its own stream, folded from gamma_s's: no name is added to the split, so
        # unsupervised chains draw exactly what they drew before supervision existed
        stats["svm"] = deep_svm.resample_svm(svm, state.s_top, y, svm_hyper,
                                             random.fold(seeds.gamma_s, "svm_in_sweep"))
    return state, stats


@cached_builder()
def make_local_steps(model: DeepModel, fast_bottom: bool = True):
    """A compiled ``f(state, x, seed_top, seed_z, svm_terms) -> (state, expected)``:
    :func:`local_steps` on a chunk of images, its residual rebuilt from ``x`` first."""
    return compiled(lambda st, x, s1, s2, terms: local_steps(
        st._replace(resid=residual(st, x, model)), x, model, s1, s2,
        fast_bottom=fast_bottom, svm_terms=terms), reduce_retracing=True)


@cached_builder()
def make_global_steps(model: DeepModel, *, update_globals: bool, n_leapfrog: int,
                      power_iterations: int, chunk):
    """A compiled ``f(state, x, seeds, adapt) -> (state, accept)``: :func:`global_steps`
    with the D steps' sums over ``chunk``."""
    return compiled(lambda st, x, seeds, ad: global_steps(
        st, x, model, seeds, update_globals=update_globals, adapt=ad, n_leapfrog=n_leapfrog,
        power_iterations=power_iterations, chunk=chunk), reduce_retracing=True)


def _chunked_sweep_fn(model: DeepModel, chunk, *, update_globals: bool, adapt,
                      n_leapfrog: int, power_iterations: int, fast_bottom: bool,
                      svm_hyper=None):
    """:func:`sweep` with the per-image steps run ``chunk`` images at a time, one compiled
    call per chunk, so the top units' data-plane images (units x images x footprint, 120 GB
    for all 60000 MNIST images) are held for one chunk only. Chunk c > 0 is seeded by
    fold-in of c into the sweep's streams (chunk 0 by the streams themselves, so one chunk
    of all images is :func:`sweep`). The D steps sum their statistics over the same chunks
    (:mod:`dgdm_tf.core.image_chunks`), so no step holds every image's dense maps: the
    same draws as all images at once up to round-off, D[0] by its sums-over-images route.

    ``chunk`` a :class:`dgdm_tf.core.image_chunks.Shards`: the same chunks and seeds, each
    worker sweeping its own chunks and the D steps summing over every worker's; the
    workers then hold the same state, and it is the state one worker gets.

    The returned ``f`` takes ``on_chunk`` (a keyword): called as ``on_chunk(done, chunks)``
    after each of its chunks' per-image steps, for progress on long sweeps; it sees no
    state and changes no draw."""
    local = make_local_steps(model, fast_bottom)
    glob = make_global_steps(model, update_globals=update_globals, n_leapfrog=n_leapfrog,
                             power_iterations=power_iterations, chunk=chunk)
    svm_fn = None if svm_hyper is None else deep_svm.make_svm_scan(svm_hyper)

    def f(state, *args, on_chunk=None):
        if adapt == "argument":
            args, ad = args[:-1], tf.convert_to_tensor(args[-1])
        else:  # a Python bool inside the compiled function: no tf.where when not adapting
            ad = adapt
        svm, x, y = args if svm_hyper is not None else (None, args[0], None)
        n = int(x.shape[0])
        seeds = random.split(state.seed, SWEEP_SEEDS)
        state = state._replace(seed=seeds.carry)
        terms = None
        if svm is not None:
            terms = deep_svm.unit_terms(svm, y, state.s_top.shape[1:], svm_hyper)
        parts, expected = [], []
        spans = (chunk.owned(n) if isinstance(chunk, Shards)
                 else [(c, lo, min(lo + chunk, n)) for c, lo in enumerate(range(0, n, chunk))])
        for done, (c, lo, hi) in enumerate(spans, 1):
            sl = slice(lo, hi)
            tc = None if terms is None else {**terms, "target": terms["target"][sl],
                                             "weight": terms["weight"][sl]}
            s1, s2 = ((seeds.top, seeds.blocks) if c == 0
                      else (fold_seed(seeds.top, c), fold_seed(seeds.blocks, c)))
            st_c, ex = local(take_images(state, sl), x[sl], s1, s2, tc)
            parts.append(st_c)
            expected.append(ex)
            if on_chunk is not None:
                on_chunk(done, len(spans))
        if isinstance(chunk, Shards):  # every worker's chunks, on every worker
            swept = chunk.exchange([(image_fields(p), e) for p, e in zip(parts, expected)], n)
            parts = [state._replace(**fields) for fields, _ in swept]
            expected = [e for _, e in swept]
            del swept
        # the chunks' copies are dropped field by field as they are joined: held to the
        # end of the sweep, they sat beside the old and the joined state through the
        # global steps, which build a state's worth again
        joined = concat_images(state, parts, consume=True)
        state, accept = glob(joined, x, seeds, ad)
        stats = {"expected_top": tf.concat(expected, 0), "accept": accept}
        if svm is None:
            return state, stats
        return state, svm_fn(svm, state.s_top, y, random.fold(seeds.gamma_s, "svm_in_sweep")), stats

    return f


def supervised_sweep(state: DeepState, svm, x, y, model: DeepModel, svm_hyper, **kw):
    """:func:`sweep` of the supervised model: returns (state, svm, stats)."""
    state, stats = sweep(state, x, model, svm=svm, y=y, svm_hyper=svm_hyper, **kw)
    return state, stats.pop("svm"), stats


def log_joint_terms(state: DeepState, x, model: DeepModel, mask=None) -> dict:
    """The log joint of :func:`log_joint` (no SVM) split by image: ``fit`` (N,) the
    Gaussian log-likelihood of each image's observed pixels; ``codes`` (N,) the log
    prior of the image's own variables (its blocks' Z and theta, its top units' on/off,
    slab weights and pi, its gamma_e, and its gamma_s when it is per image and map);
    ``shared`` the rest (the dictionaries' priors, and a global gamma_s's). Given the
    shared variables, p(state | X) of one image is proportional to exp(fit + codes) of
    that image alone."""
    h = model.hyper
    n_obs = (tf.reduce_sum(mask, axis=[1, 2, 3]) if mask is not None
             else tf.fill([tf.shape(x)[0]], float(np.prod(x.shape[1:]))))
    ge = state.gamma_e
    sq = tf.reduce_sum(tf.square(state.resid), axis=[1, 2, 3])
    fit = 0.5 * n_obs * tf.math.log(ge / (2 * np.pi)) - 0.5 * ge * sq
    codes = (h.a_e - 1.0) * tf.math.log(ge) - h.b_e * ge
    for l, g in enumerate(model.geoms[:-1]):
        z = state_index(tf.transpose(state.z[l], [0, 3, 1, 2]))  # N, K, nbh, nbw
        # log theta of each block's state (a gather: a one-hot of every block's states
        # held N x blocks x K x S floats, 2.5 GB at 10000 MNIST images)
        codes += tf.reduce_sum(tf.gather(state.log_theta[l], z, batch_dims=2), axis=[1, 2, 3])
        codes += tf.reduce_sum((model.alpha[l] - 1.0) * state.log_theta[l], axis=[1, 2])
    lp = state.log_pi  # N, K, 2
    codes += tf.reduce_sum(state.on * lp[:, None, None, :, 0] + (1.0 - state.on) * lp[:, None, None, :, 1],
                           axis=[1, 2, 3])
    codes += tf.reduce_sum((model.pi_prior - 1.0) * lp, axis=[1, 2])
    gs = state.gamma_s  # N, K
    codes += tf.reduce_sum(0.5 * tf.reduce_sum(state.on, axis=[1, 2]) * tf.math.log(gs / (2 * np.pi))
                           - 0.5 * gs * tf.reduce_sum(tf.square(state.s_top), axis=[1, 2]), axis=1)
    shared = tf.add_n([-0.5 * h.dict_prior_precision * tf.reduce_sum(tf.square(dl)) for dl in state.d])
    if h.slab_per_image:
        codes += tf.reduce_sum((h.a_w - 1.0) * tf.math.log(gs) - h.b_w * gs, axis=1)
    else:
        shared += (h.a_w - 1.0) * tf.math.log(gs[0, 0]) - h.b_w * gs[0, 0]
    return {"fit": fit, "codes": codes, "shared": shared}


def log_joint(state: DeepState, x, model: DeepModel, mask=None, svm=None, y=None,
              svm_hyper=None) -> tf.Tensor:
    """log p(X, all variables), dropping only terms that are constant in every variable
    (the Gamma priors' normalisers and 2 pi factors of the dictionaries' priors); with
    ``svm`` the SVM's augmented pseudo-likelihood and priors too."""
    t = log_joint_terms(state, x, model, mask)
    lj = tf.reduce_sum(t["fit"]) + tf.reduce_sum(t["codes"]) + t["shared"]
    if svm is not None:
        lj += deep_svm.log_density(svm, state.s_top, y, svm_hyper)
    return lj


@cached_builder()
def make_sweep_fn(model: DeepModel, *, mask_given: bool = False, update_globals: bool = True,
                  adapt: bool = False, n_leapfrog: int = N_LEAPFROG, power_iterations: int = POWER_ITERATIONS,
                  fast_bottom: bool = True, svm_hyper=None, chunk: int | None = None):
    """A compiled ``f(state, x[, mask]) -> (state, stats)``; with ``svm_hyper`` (the
    supervised model) ``f(state, svm, x, y) -> (state, svm, stats)``. With ``chunk`` the
    per-image steps run that many images at a time (memory; no mask): the same
    conditionals, drawn from other seeds than the unchunked sweep. ``adapt``: True
    (burn-in: the HMC steps adapt), False, or ``"argument"``: f takes the flag as a
    boolean tensor after its other arguments, so burn-in and collection share one trace
    (tracing a sweep takes longer than running a few; the draws are those of True /
    False)."""
    if adapt == "argument":
        def bind(fn):  # the compiled function of a sweep with the flag as last argument
            return lambda *args: fn(*args[:-1], adapt=args[-1])
    elif isinstance(adapt, bool):
        def bind(fn):
            return lambda *args: fn(*args, adapt=adapt)
    else:
        raise ValueError(f"adapt must be True, False or 'argument', not {adapt!r}")
    kw = dict(update_globals=update_globals, n_leapfrog=n_leapfrog,
              power_iterations=power_iterations, fast_bottom=fast_bottom)
    if chunk is not None:
        if mask_given:
            raise ValueError("chunked sweeps take no mask (refinement and training have none)")
        chunk = chunk if isinstance(chunk, Shards) else int(chunk)
        return _chunked_sweep_fn(model, chunk, svm_hyper=svm_hyper, adapt=adapt, **kw)
    if svm_hyper is not None:
        return compiled(bind(lambda st, svm, x, y, adapt: supervised_sweep(
            st, svm, x, y, model, svm_hyper, adapt=adapt, **kw)), reduce_retracing=True)
    if mask_given:
        return compiled(bind(lambda st, x, mask, adapt: sweep(st, x, model, mask=mask, adapt=adapt, **kw)),
                        reduce_retracing=True)
    return compiled(bind(lambda st, x, adapt: sweep(st, x, model, adapt=adapt, **kw)),
                    reduce_retracing=True)
