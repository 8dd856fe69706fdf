"""The pretraining sweep over images in batches, with D drawn from sufficient statistics.

Given D and gamma_w, the local variables of different images -- (z, W), theta_n and
gamma_e[n] -- are conditionally independent, so a sweep may visit the images batch by
batch and hold only one batch's state in memory. What couples the images is D's
conditional (supplement, conditional of D) and gamma_w's. Both depend on the images
only through sums over n, accumulated batch by batch:

* D, by the sums over images F and Q of :mod:`dgdm_tf.pretrain.dictionary` (its
  ``statistics`` route), accumulated batch by batch: the in-memory sweep's draw (the
  same map order, the same seeds);
* gamma_w: the count of active entries and sum W^2.

One batched sweep, image batch after image batch, then the globals:

    per batch b: R = X - D * S (rebuilt exactly); gamma_e | R; (z, W) | -; theta | z;
                 add the batch's F, Q, count, sum W^2
    D | F, Q;  gamma_w | count, sum W^2

The order of the conditionals is :func:`pretrain.sweep`'s with gamma_e moved to the
front (a sweep of one and the same Gibbs scan; theta and D are conditionally
independent given z and S, so their order does not matter). Each batch's draws are
seeded by the sweep's stream folded with the batch index, so a sweep's result does not
depend on which batches sit in memory together, only on the batch size.
"""

from __future__ import annotations

import collections

import numpy as np
import tensorflow as tf

from dgdm_tf.core import random
from dgdm_tf.core.compiled import cached_builder, compiled
from dgdm_tf.pretrain.blocks import pad_input, reconstruction
from dgdm_tf.pretrain.dictionary import d_statistics, draw_d
from dgdm_tf.pretrain.kernel import (SWEEP_SEEDS, active_mask, draw_gamma_w, log_likelihood,
                                     resample_gamma_e, resample_theta, resample_zw)
from dgdm_tf.pretrain.layer_model import LayerModel, PretrainState

# A batch's local state as stored between sweeps: block states z (int8, p*p + 1 < 128
# states) and each block's one weight w (the value at position z; 0 when off).
LOCAL_FIELDS = ("z", "w", "log_theta", "gamma_e")

BatchedGlobals = collections.namedtuple("BatchedGlobals", ["d", "gamma_w", "seed"])
BatchStats = collections.namedtuple(
    "BatchStats", ["f_corr", "f_gram", "active", "sum_w2", "used", "sq_resid", "log_lik",
                   "sum_gamma_e"])


def sweep_seeds(seed):
    """The named seeds of one sweep (:data:`pretrain.kernel.SWEEP_SEEDS`), as the in-memory sweep's."""
    return random.split(tf.convert_to_tensor(seed, tf.int32), SWEEP_SEEDS)


def batch_seed(seed, b):
    """Batch ``b``'s share of one of a sweep's streams."""
    return tf.random.experimental.stateless_fold_in(seed, b)


def dense_blocks(z, w, model: LayerModel) -> tf.Tensor:
    """Stored (z, w) -> the sampler's block values s (Gh, Gw, K, N, nch, ncw, P2)."""
    p2 = model.geom.p * model.geom.p
    return tf.one_hot(tf.cast(z, tf.int32), p2 + 1)[..., :p2] * tf.convert_to_tensor(w)[..., None]


def compact_blocks(s) -> tf.Tensor:
    """The inverse of :func:`dense_blocks` for a block's weight: at most one non-zero."""
    return tf.reduce_sum(s, axis=-1)


def batch_step(local: dict, x, d, gamma_w, seeds, b, gamma_e_cap, model: LayerModel,
               zw_fn=None):
    """One batch's share of a batched sweep (module docstring).

    ``local``: the batch's stored state (:data:`LOCAL_FIELDS`); ``seeds``: the sweep's
    :func:`sweep_seeds`; ``b``: the batch's index (a tensor: a Python int retraces); ``gamma_e_cap``: (N,) or +inf, the
    tempered likelihood of burn-in (as :func:`pretrain.sweep`; gamma_e itself is drawn
    exactly). Returns (new local state, the pooled features' Rao-Blackwellised
    expectation, :class:`BatchStats`); the residual and log-likelihood in the statistics
    are those after the (z, W) step, before D moves."""
    g = model.geom
    x = tf.convert_to_tensor(x, tf.float32)
    s = dense_blocks(local["z"], local["w"], model)
    resid = pad_input(x - reconstruction(s, d, g), g)
    st = PretrainState(s=s, z=tf.cast(local["z"], tf.int32), d=d,
                       log_theta=tf.convert_to_tensor(local["log_theta"]), gamma_w=gamma_w,
                       gamma_e=tf.convert_to_tensor(local["gamma_e"]), resid=resid,
                       seed=seeds.carry)
    st = resample_gamma_e(st, x, model, batch_seed(seeds.gamma_e, b))
    gamma_e = st.gamma_e
    st = st._replace(gamma_e=tf.minimum(gamma_e, gamma_e_cap))
    zw = zw_fn or (lambda s_, x_, sd: resample_zw(s_, x_, model, sd, True))
    st, expected = zw(st, x, batch_seed(seeds.zw, b))
    st = resample_theta(st, x, model, batch_seed(seeds.theta, b))
    f_corr, f_gram = d_statistics(st.s, x, d, st.gamma_e, model)
    on = active_mask(st, model)
    stats = BatchStats(
        f_corr=f_corr, f_gram=f_gram, active=tf.reduce_sum(on),
        sum_w2=tf.reduce_sum(tf.square(st.s)), used=tf.reduce_sum(on, axis=[0, 1, 3, 4, 5]),
        sq_resid=tf.reduce_sum(tf.square(st.resid)),
        log_lik=log_likelihood(st._replace(gamma_e=gamma_e), model),
        sum_gamma_e=tf.reduce_sum(gamma_e))
    new_local = {"z": tf.cast(st.z, tf.int8), "w": compact_blocks(st.s),
                 "log_theta": st.log_theta, "gamma_e": gamma_e}
    return new_local, expected, stats


@cached_builder()
def make_batch_step(model: LayerModel, jit_compile: bool = False):
    """A compiled :func:`batch_step` ``f(local, x, d, gamma_w, seeds, b, cap)``;
    ``jit_compile`` compiles the (z, W) step with XLA (as :func:`pretrain.make_sweep_fn`).
    Shared by every chain of an equal model (:func:`dgdm_tf.core.compiled.cached_builder`)."""
    zw_fn = None
    if jit_compile:
        zw_fn = compiled(lambda st, xx, sd: resample_zw(st, xx, model, sd, True), jit_compile=True)
    return compiled(lambda local, x, d, gamma_w, seeds, b, cap: batch_step(
        local, x, d, gamma_w, seeds, b, cap, model, zw_fn), reduce_retracing=True)


@cached_builder()
def make_global_step(model: LayerModel):
    """A compiled ``f(d, f_corr, f_gram, active, sum_w2, seeds) -> (D, gamma_w)``: the
    sweep's global draws from the summed statistics."""
    return compiled(lambda d, f_corr, f_gram, active, sum_w2, seeds: (
        draw_d(d, f_corr, f_gram, model, seeds.d),
        draw_gamma_w(active, sum_w2, model.hyper, seeds.gamma_w)), reduce_retracing=True)


class StatsSum:
    """Batch statistics summed on the host in double precision (60 batches of float32
    sums would otherwise lose digits D's conditional mean depends on)."""

    def __init__(self):
        self.total = None

    def add(self, stats: BatchStats) -> None:
        arrs = [np.asarray(v).astype(np.complex128 if np.iscomplexobj(v) else np.float64)
                for v in stats]
        self.total = arrs if self.total is None else [t + a for t, a in zip(self.total, arrs)]

    def result(self) -> BatchStats:
        """The sums as tensors (numpy scalars would retrace a compiled step per value)."""
        return BatchStats(*(tf.constant(np.asarray(v)) for v in self.total))


def batched_sweep(glob: BatchedGlobals, n_batches: int, read, write, model: LayerModel,
                   batch_fn=None, global_fn=None, progress=None):
    """One batched sweep: returns (the new globals, the summed :class:`BatchStats`).

    ``read(b)`` -> (stored local state, X, gamma_e cap) of batch b; ``write(b, local,
    expected)`` takes its new local state and Rao-Blackwellised pooled features (numpy).
    The chain driver (:mod:`dgdm_tf.pretrain.batched_chain`) reads and writes files; tests keep the
    batches in lists. ``progress(b)`` is called after each batch."""
    batch_fn = batch_fn or make_batch_step(model)
    global_fn = global_fn or make_global_step(model)
    seeds = sweep_seeds(glob.seed)
    total = StatsSum()
    for b in range(n_batches):
        local, x, cap = read(b)
        new, expected, stats = batch_fn(local, x, glob.d, glob.gamma_w, seeds, tf.constant(b),
                                        cap)
        write(b, {k: v.numpy() for k, v in new.items()}, expected.numpy())
        total.add(stats)
        if progress is not None:
            progress(b)
    st = total.result()
    d, gamma_w = global_fn(glob.d, st.f_corr, st.f_gram, st.active, st.sum_w2, seeds)
    return BatchedGlobals(d=d, gamma_w=gamma_w, seed=seeds.carry), st
