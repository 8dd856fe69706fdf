"""Model averaging (Sec. 4, ImageNet): from the MCEM (MAP) estimate, Gibbs on mini-batches
gives posterior samples of the global parameters (every D and beta); the paper keeps 20,
one per 1000 iterations, and averages their predictions.

Iteration t, mini-batch of B of the N images, r = N / B:
  1. the batch's local variables by the supervised E-step (D and beta fixed);
  2. D[l] | locals for every layer, the batch's likelihood raised to the power r (the
     batch's gamma_e times r): the exact Gaussian draw for D[1], HMC above it
     (:func:`dgdm_tf.topdown.dictionaries.resample_d`, the step adapted until the first kept
     sample);
  3. omega | beta (Laplace mixing variances), then beta | lambda, omega, S[L] with the
     batch's SVM likelihood raised to the power r (the hinge weight gamma times r).
Raising a mini-batch's likelihood to N / B is the paper's approximation of the full-data
conditional (an unbiased estimate of its log density); with B = N it is exact Gibbs.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable

import numpy as np
import tensorflow as tf

from dgdm_tf.core import random
from dgdm_tf.supervised import joint_svm as deep_svm

from dgdm_tf.mcem import svm_step as smcem_svm
from dgdm_tf.topdown.dictionaries import resample_d
from dgdm_tf.topdown.state import DeepState, fold_seed
from dgdm_tf.supervised import svm_gibbs as S
from dgdm_tf.core.model import DeepModel
from dgdm_tf.mcem.estep import e_step_supervised, make_supervised_sweep_fn
from dgdm_tf.mcem.options import AveragingOptions, McemStart
from dgdm_tf.mcmc.checkpoint import Checkpoint, CheckpointDir, fit
from dgdm_tf.mcmc.driver import Kernel, run_chain


def resample_globals(st: DeepState, lam, g: smcem_svm.SvmGlobals, x, y, model: DeepModel,
                     svm_hyper: deep_svm.SvmHyper, r: float, seed, *, n_leapfrog: int,
                     power_iterations: int, adapt: bool):
    """Steps 2 and 3 above. Returns (state with the new D, new SvmGlobals, HMC acceptance)."""
    seeds = random.split(tf.cast(seed, tf.int64), ("d", "omega", "beta", "unused"))
    ge = st.gamma_e
    scaled = st._replace(gamma_e=ge * r)
    acc = []
    for l in range(model.n_layers):
        scaled, a = resample_d(scaled, x, model, l, tf.cast(fold_seed(seeds.d, l), tf.int32),
                               n_leapfrog=n_leapfrog, power_iterations=power_iterations,
                               adapt=adapt)
        acc.append(float(a))
    st = scaled._replace(gamma_e=ge)
    f = int(g.beta.shape[1]) - 1
    c = int(g.beta.shape[0])
    kappa = tf.fill([c], tf.constant(svm_hyper.kappa, tf.float64))
    omega = S.resample_omega(g.beta[:, :f], kappa, seeds.omega)
    omega_all = tf.concat([omega, tf.fill([c, 1], tf.constant(svm_hyper.bias_var, tf.float64))], 1)
    s = deep_svm.design(st.s_top, g.mean, g.std)
    beta = S.resample_beta(lam, omega_all, s, tf.cast(y, tf.float64), svm_hyper.gamma * r, seeds.beta)
    return st, g._replace(beta=beta), acc


def run_averaging(data, start: McemStart, options: AveragingOptions, *, seed: int,
                  checkpoint: CheckpointDir | None = None,
                  progress: Callable[[str], None] | None = print) -> dict | None:
    """``options.keep`` posterior samples of (D, beta), one every ``thin`` iterations
    (:class:`dgdm_tf.mcem.options.AveragingOptions`, config block `averaging`), starting
    from ``start`` (:class:`dgdm_tf.mcem.options.McemStart`: the output of
    :func:`dgdm_tf.mcem.stochastic.train` for the supervised model, its D, beta, mean and
    std). ``data`` the labelled mini-batches, as there. Checkpointed to
    ``checkpoint.dir`` (averaging_checkpoint.npz) and resumable like training
    (:func:`dgdm_tf.mcmc.driver.run_chain` runs :class:`AveragingKernel`; the checkpoint's
    trace holds each iteration's HMC acceptance). ``scan``: the E-step sweeps' visiting
    order (:class:`DeepModel`), in the fingerprint. ``n_leapfrog``, ``power_iterations``:
    the HMC kernel of D[l >= 1] (:func:`dgdm_tf.topdown.dictionaries.resample_d`).

    Returns {'D': [keep x per-layer arrays], 'beta': (keep, C, F+1), 'mean', 'std',
    'accept': per-iteration HMC acceptance, 'seconds'}; None when stopped early."""
    say = progress or (lambda _m: None)
    if start.beta is None:
        raise ValueError("model averaging starts from a supervised MCEM run (it has no beta)")
    if data.n_classes is None:
        raise ValueError("model averaging needs labelled mini-batches (data.n_classes)")
    o, scan, n_total = options, options.scan, int(data.n_total)
    keep, thin, sweeps = int(o.keep), int(o.thin), int(o.sweeps)
    n_leapfrog, power_iterations = int(o.n_leapfrog), int(o.power_iterations)
    model = DeepModel(tuple(data.image_shape), start.layers, start.hyper, supervised=True, scan=scan)
    total = o.total
    mcem = {"D": start.dictionaries, "beta": start.beta, "mean": start.mean, "std": start.std}
    fp = json.dumps({"keep": keep, "thin": thin, "sweeps": sweeps, "seed": seed, "n": n_total,
                     "start": float(sum(np.sum(np.abs(v)) for v in mcem["D"])) +
                     float(np.sum(np.abs(mcem["beta"]))), "svm": dict(o.svm), "L": n_leapfrog,
                     "power_iterations": power_iterations,
                     # absent for the old sampler's order: its checkpoints still resume
                     **({"scan": scan} if scan != "fixed" else {})},
                    sort_keys=True, default=str)
    kernel = AveragingKernel(data.batches, model, mcem=mcem, n_total=n_total, n_classes=int(data.n_classes),
                             seed=seed, sweeps=sweeps, gamma_s=float(o.gamma_s),
                             svm_hyper=o.svm_hyper, n_leapfrog=n_leapfrog,
                             power_iterations=power_iterations, total=total, say=say)
    ck = Checkpoint(None if checkpoint is None else Path(checkpoint.dir) / "averaging_checkpoint.npz",
                    fp, every=int(o.checkpoint_every), step_key="step",
                    resumed="resuming model averaging at iteration {done}/{total} ({path})")
    run = run_chain(kernel, o.schedule, ck, say=say,
                    stop_after=None if checkpoint is None else checkpoint.stop_after)
    if run is None:
        return None
    _d, g, _log_step, kept_d, kept_beta = run.state
    return {"D": kept_d, "beta": np.stack(kept_beta), "mean": np.asarray(g.mean),
            "std": np.asarray(g.std), "accept": [r["accept"] for r in run.rows],
            "seconds": time.time() - kernel.t_start}


class AveragingKernel(Kernel):
    """One iteration of model averaging (steps 1-3 of the module docstring) for
    :func:`dgdm_tf.mcmc.driver.run_chain` (the arguments of :func:`run_averaging`).
    State: (D, the SVM's globals, HMC's log step per layer, the kept D, the kept beta);
    its trace row is the iteration's HMC acceptance per layer."""

    def __init__(self, batches: Callable, model: DeepModel, *, mcem: dict, n_total: int,
                 n_classes: int, seed: int, sweeps: int, gamma_s: float,
                 svm_hyper: deep_svm.SvmHyper, n_leapfrog: int, power_iterations: int,
                 total: int, say):
        self.batches, self.model, self.mcem_d = batches, model, mcem["D"]
        self.g0 = smcem_svm.SvmGlobals(beta=tf.constant(mcem["beta"]), mean=tf.constant(mcem["mean"]),
                                       std=tf.constant(mcem["std"]), updates=0)
        self.n_total, self.n_classes, self.seed = n_total, n_classes, seed
        self.sweeps, self.gamma_s, self.svm_hyper = sweeps, gamma_s, svm_hyper
        self.n_leapfrog, self.total, self.say = n_leapfrog, total, say
        self.power_iterations = power_iterations

    def start(self):
        d = tuple(tf.constant(np.asarray(v, np.float32)) for v in self.mcem_d)
        return d, self.g0, tf.zeros([self.model.n_layers]), [], []

    def restore(self, z):
        layers, n_kept = range(self.model.n_layers), int(z["n_kept"])
        beta = np.asarray(self.g0.beta)
        fit(z, {"log_step": ((self.model.n_layers,), np.float32), "beta": (beta.shape, beta.dtype),
                **{f"kept{k}_beta": (beta.shape, beta.dtype) for k in range(n_kept)},
                **{f"{pre}d{l}": ((g.dh, g.dw, g.c, g.k), np.float32)
                   for l, g in enumerate(self.model.geoms)
                   for pre in ["", *(f"kept{k}_" for k in range(n_kept))]}})
        return (tuple(tf.constant(z[f"d{l}"]) for l in layers),
                self.g0._replace(beta=tf.constant(z["beta"])), tf.constant(z["log_step"]),
                [[z[f"kept{k}_d{l}"] for l in layers] for k in range(n_kept)],
                [z[f"kept{k}_beta"] for k in range(n_kept)])

    def arrays(self, state):
        d, g, log_step, kept_d, kept_beta = state
        return {"beta": np.asarray(g.beta), "log_step": np.asarray(log_step),
                "n_kept": np.array(len(kept_d)),
                **{f"d{l}": np.asarray(dl) for l, dl in enumerate(d)},
                **{f"kept{k}_d{l}": v for k, dk in enumerate(kept_d) for l, v in enumerate(dk)},
                **{f"kept{k}_beta": b for k, b in enumerate(kept_beta)}}

    def begin(self, state, done):
        self.sweep_fn = make_supervised_sweep_fn(self.model, self.svm_hyper)
        self.t_start = time.time()
        # array_batches and the ImageNet stream never end: run_chain takes `total` steps
        self.stream = self.batches(done) if done < self.total else iter(())

    def step(self, state, at):
        d, g, log_step, kept_d, kept_beta = state
        t = at.t
        t_batch, xb, yb = next(self.stream, (None, None, None))
        if t_batch is None:
            raise RuntimeError(f"the mini-batch stream ended before averaging iteration {t + 1}")
        assert t_batch == t, f"the stream gave iteration {t_batch}'s batch for iteration {t}"
        model, hyper_s = self.model, self.svm_hyper
        seed_t = random.fold(random.salted(self.seed, "model_averaging"), t)
        s1, s2 = random.split(seed_t, ("e_step", "globals"))
        yt = deep_svm.targets(yb, self.n_classes)
        states, lams = e_step_supervised(xb, yt, d, g, model, s1, sweeps=self.sweeps, n_samples=1,
                                         gamma_s=self.gamma_s, svm_hyper=hyper_s,
                                         sweep_fn=self.sweep_fn)
        st = states[-1]._replace(hmc_log_step=log_step)
        st, g, acc = resample_globals(st, lams[-1], g, tf.constant(xb), yt, model, hyper_s,
                                      self.n_total / len(xb), s2, n_leapfrog=self.n_leapfrog,
                                      power_iterations=self.power_iterations, adapt=at.adapting)
        d, log_step = st.d, st.hmc_log_step
        for l, dl in enumerate(d):
            if not np.all(np.isfinite(dl.numpy())):
                raise FloatingPointError(f"D[{l + 1}] is not finite at averaging iteration {t + 1}")
        if at.collected:
            kept_d = kept_d + [[np.asarray(dl) for dl in d]]
            kept_beta = kept_beta + [np.asarray(g.beta)]
        return (d, g, log_step, kept_d, kept_beta), {"iteration": t + 1, "accept": acc}, None

    def report(self, rows, at, sec_per_step):
        step = rows[-1]["iteration"]
        if at.collected:
            accept = [r["accept"] for r in rows[-at.since:]]
            self.say(f"model averaging: sample {at.draw + 1}/{at.n_draws} kept at "
                     f"iteration {step} (HMC acceptance {np.mean(accept, 0).round(2).tolist()}, "
                     f"{time.time() - self.t_start:.1f} s)")
