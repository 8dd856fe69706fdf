"""The E-step of stochastic MCEM (supplement Algorithm 1) and of model averaging: Gibbs
sweeps of a mini-batch's local variables (the unpooling Z at every layer, S[L], theta,
pi, gamma_e and the batch's gamma_s) with D fixed, from the matched-filter start of
:func:`dgdm_tf.topdown.state.init_state` under the current D; the supervised model's
sweeps also see the SVM (beta fixed) and draw each image's lambda."""

from __future__ import annotations

import tensorflow as tf

from dgdm_tf.core import random
from dgdm_tf.supervised import joint_svm as deep_svm

from dgdm_tf.mcem import svm_step as smcem_svm
from dgdm_tf.topdown.conjugate import resample_gamma_s
from dgdm_tf.topdown.state import init_state, residual
from dgdm_tf.topdown.sweep import SWEEP_SEEDS, global_steps, local_steps, make_sweep_fn
from dgdm_tf.core.compiled import cached_builder, compiled
from dgdm_tf.core.model import DeepModel


def e_step(x, d, model: DeepModel, seed, *, sweeps: int, n_samples: int, gamma_s: float,
           sweep_fn=None, resume=None) -> list:
    """``sweeps`` Gibbs sweeps of the batch's local variables with D fixed, from the
    matched-filter start (``resume``: a function of that start giving the state to start
    from, :meth:`dgdm_tf.mcem.local_store.LocalStore.merge`); a global gamma_s (which the
    sweep holds) is redrawn from the batch after each, one per image and map is drawn
    inside the sweep; the last ``n_samples`` states are returned."""
    if not 1 <= n_samples <= sweeps:
        raise ValueError(f"need 1 <= n_samples <= sweeps, got {n_samples}, {sweeps}")
    seeds = random.split(tf.cast(seed, tf.int64), ("start", "gamma_s"))
    xt = tf.convert_to_tensor(x, tf.float32)
    st = init_state(xt, model, d, tf.cast(seeds.start, tf.int32), gamma_s_init=gamma_s)
    if resume is not None:
        st = resume(st)
    sweep_fn = sweep_fn or make_sweep_fn(model, update_globals=False)
    out = []
    for i in range(sweeps):
        st, _ = sweep_fn(st, xt)
        if not model.hyper.slab_per_image:  # the sweep already drew a local gamma_s
            st = resample_gamma_s(st, xt, model, random.fold(seeds.gamma_s, i))
        if i >= sweeps - n_samples:
            out.append(st)
    return out


def e_step_supervised(x, y, d, svm_g, model: DeepModel, seed, *, sweeps: int, n_samples: int,
                      gamma_s: float, svm_hyper, sweep_fn=None, resume=None) -> tuple[list, list]:
    """:func:`e_step` of the supervised model: the top units see the SVM's terms
    (:func:`dgdm_tf.supervised.joint_svm.unit_terms`) and each image's lambda (C, B) is drawn after
    every sweep given beta (:mod:`dgdm_tf.mcem.svm_step`). ``model`` must be built with
    ``supervised=True``; y (C, B) targets in {-1, +1}; ``resume`` as :func:`e_step`'s.
    Returns (states, lambdas)."""
    if not 1 <= n_samples <= sweeps:
        raise ValueError(f"need 1 <= n_samples <= sweeps, got {n_samples}, {sweeps}")
    seeds = random.split(tf.cast(seed, tf.int64), ("start", "gamma_s", "lam"))
    xt, yt = tf.convert_to_tensor(x, tf.float32), tf.cast(y, tf.float64)
    st = init_state(xt, model, d, tf.cast(seeds.start, tf.int32), gamma_s_init=gamma_s)
    if resume is not None:
        st = resume(st)
    sweep_fn = sweep_fn or make_supervised_sweep_fn(model, svm_hyper)
    lam = smcem_svm.resample_lambda(svm_g, st.s_top, yt, svm_hyper, seeds.lam)
    states, lams = [], []
    for i in range(sweeps):
        st, lam = sweep_fn(st, lam, svm_g.beta, svm_g.mean, svm_g.std, xt, yt)
        if not model.hyper.slab_per_image:  # the sweep already drew a local gamma_s
            st = resample_gamma_s(st, xt, model, random.fold(seeds.gamma_s, i))
        if i >= sweeps - n_samples:
            states.append(st)
            lams.append(lam)
    return states, lams


@cached_builder()
def make_supervised_sweep_fn(model: DeepModel, svm_hyper):
    """A compiled sweep of the batch's locals with D and beta fixed:
    f(state, lam, beta, mean, std, x, y) -> (state, lam)."""

    def f(st, lam, beta, mean, std, x, y):
        g = smcem_svm.SvmGlobals(beta=beta, mean=mean, std=std, updates=0)
        seeds = random.split(st.seed, SWEEP_SEEDS)
        st = st._replace(seed=seeds.carry)
        st = st._replace(resid=residual(st, x, model))
        terms = deep_svm.unit_terms(smcem_svm.as_state(g, lam), y,
                                    st.s_top.shape[1:], svm_hyper)
        st, _ = local_steps(st, x, model, seeds.top, seeds.blocks, svm_terms=terms)
        st, _ = global_steps(st, x, model, seeds, update_globals=False)
        lam = smcem_svm.resample_lambda(g, st.s_top, y, svm_hyper, random.fold(seeds.gamma_s, "svm_in_sweep"))
        return st, lam

    return compiled(f, reduce_retracing=True)
