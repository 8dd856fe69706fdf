"""Joint refinement of every layer (the paper's Gibbs sampler for the whole model, and
with labels the supervised model of Sec. 2.3), run by :func:`dgdm_tf.mcmc.driver.run_chain`.

Start from the pretrained dictionaries, ``burn_in`` sweeps (the HMC step sizes of D[l >= 1]
adapt here only), then ``collect`` draws one every ``thin`` sweeps; the dictionaries,
precisions and usage statistics are averaged over the draws. The chain is restartable:
the whole state (with the seed it carries), the collection sums, the SVM and the kept
models are checkpointed atomically every ``checkpoint_every`` sweeps, and a rerun with
the same inputs resumes from there. Kernels are in :mod:`dgdm_tf.topdown.sweep`.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Callable

import numpy as np
import tensorflow as tf

from dgdm_tf.core import cluster, random
from dgdm_tf.core.image_chunks import Shards, chunk_size
from dgdm_tf.core.model import DeepModel, stored_states
from dgdm_tf.io import atomic as atomic_io
from dgdm_tf.mcmc.diagnostics import trace_settlement
from dgdm_tf.mcmc.checkpoint import Checkpoint, CheckpointDir, CheckpointMismatch, fit
from dgdm_tf.mcmc.driver import Kernel, part_progress, run_chain
from dgdm_tf.pretrain.chain import fingerprint
from dgdm_tf.pretrain.chain_parts import check_finite
from dgdm_tf.supervised import joint_svm as deep_svm
from dgdm_tf.topdown import label_share
from dgdm_tf.topdown.conjugate import gamma_s_summary
from dgdm_tf.topdown.options import RefineOptions, Start, SupervisedOptions
from dgdm_tf.topdown.state import DeepState, init_state
from dgdm_tf.topdown.sweep import log_joint, make_sweep_fn


def trace_columns(model: DeepModel) -> list[str]:
    cols = ["sweep", "phase", "log_joint", "rel_residual", "gamma_e_mean", "gamma_s",
            "active_top"]
    cols += [f"active_layer{l + 1}" for l in range(model.n_layers - 1)]
    cols += [f"accept_d{l + 1}" for l in range(1, model.n_layers)]
    cols += [f"{k}_layer{l + 1}" for k in ("dnorm", "dmove") for l in range(model.n_layers)]
    if model.supervised:
        cols += ["svm_train_error", "svm_hinge", "svm_kappa", "beta_norm", "svm_gamma",
                 *label_share.COLUMNS]
    return cols + ["seconds"]


def settle_columns(n_layers: int, supervised: bool) -> list[str]:
    """The traced scalars of the global state whose drift says whether a chain of
    ``n_layers`` layers (with the SVM: ``supervised``) has settled
    (:func:`dgdm_tf.mcmc.diagnostics.trace_settlement`)."""
    cols = ["log_joint", "gamma_e_mean", "active_top"]
    cols += [f"active_layer{l + 1}" for l in range(n_layers - 1)]
    cols += [f"{k}_layer{l + 1}" for k in ("dnorm", "dmove") for l in range(n_layers)]
    return cols + (["svm_hinge", "beta_norm"] if supervised else [])


def _trace_row(sweep, phase, st: DeepState, x, model: DeepModel, x_norm, stats, seconds,
               mask=None, svm=None, y=None, svm_hyper=None, d_start=(), share_images=0):
    """One sweep's trace. ``d_start``: the chain's starting D[l] (float64), for
    dnorm_layer<l> = ||D[l]||_F and dmove_layer<l> = ||D[l] - D[l]_start|| / ||D[l]_start||.
    ``share_images``: the supervised chain's labels' share of the top units' conditionals
    (:func:`dgdm_tf.topdown.label_share.trace_shares`) on that many of its first
    images; 0: not traced (NaN)."""
    row = {"sweep": sweep, "phase": phase,
           "log_joint": float(log_joint(st, x, model, mask, svm, y, svm_hyper)),
           "rel_residual": float(np.linalg.norm(np.asarray(st.resid)) / max(x_norm, 1e-30)),
           "gamma_e_mean": float(np.mean(np.asarray(st.gamma_e))),
           "gamma_s": gamma_s_summary(st.gamma_s), "active_top": float(np.mean(np.asarray(st.on)))}
    for l, g in enumerate(model.geoms[:-1]):
        row[f"active_layer{l + 1}"] = float(np.mean(np.asarray(st.z[l]) != g.off))
    acc = np.asarray(stats["accept"])
    for l in range(1, model.n_layers):
        row[f"accept_d{l + 1}"] = float(acc[l])
    for l, d0 in enumerate(d_start):
        d = np.asarray(st.d[l], np.float64)
        row[f"dnorm_layer{l + 1}"] = float(np.linalg.norm(d))
        row[f"dmove_layer{l + 1}"] = float(np.linalg.norm(d - d0) / max(np.linalg.norm(d0), 1e-30))
    if model.supervised:
        if svm is None:  # the first sweep runs before the SVM exists
            row.update(svm_train_error=float("nan"), svm_hinge=float("nan"), svm_kappa=float("nan"),
                       beta_norm=float("nan"), svm_gamma=float("nan"),
                       **{c: float("nan") for c in label_share.COLUMNS})
        else:
            m = np.asarray(deep_svm.margins(svm, st.s_top))  # N, C
            yy = np.asarray(y).T
            row["svm_train_error"] = float(np.mean(np.argmax(m, 1) != np.argmax(yy, 1)))
            row["svm_hinge"] = float(np.mean(np.maximum(1.0 - yy * m, 0.0)))
            row["svm_kappa"] = float(np.mean(np.asarray(svm.kappa)))
            row["beta_norm"] = float(np.linalg.norm(np.asarray(svm.beta, np.float64)))
            row["svm_gamma"] = float(svm_hyper.gamma)
            row.update(label_share.trace_shares(st, svm, x, y, model, svm_hyper, share_images)
                       if share_images > 0 else {c: float("nan") for c in label_share.COLUMNS})
    row["seconds"] = seconds
    return row


def write_trace_csv(path, rows: list[dict], columns: list[str]) -> None:
    lines = [",".join(columns)]
    for r in rows:
        lines.append(",".join(f"{r[c]:.7g}" if isinstance(r[c], float) else str(r[c]) for c in columns))
    atomic_io.write_text(path, "\n".join(lines) + "\n")


def _state_to_numpy(st, prefix: str = "state") -> dict:
    out = {}
    for name, v in st._asdict().items():
        if isinstance(v, tuple):
            out[f"{prefix}_{name}_n"] = np.array(len(v))
            for i, t in enumerate(v):
                out[f"{prefix}_{name}_{i}"] = np.asarray(t)
        else:
            out[f"{prefix}_{name}"] = np.asarray(v)
    return out


def _state_from_numpy(z, cls=DeepState, prefix: str = "state"):
    kw = {}
    for name in cls._fields:
        if f"{prefix}_{name}_n" in z:
            kw[name] = tuple(tf.constant(z[f"{prefix}_{name}_{i}"])
                             for i in range(int(z[f"{prefix}_{name}_n"])))
        else:
            kw[name] = tf.constant(z[f"{prefix}_{name}"])
    if cls is DeepState:  # the block states as bytes (a checkpoint written before holds int32)
        kw["z"] = tuple(stored_states(v) for v in kw["z"])
    return cls(**kw)


def _averages(st: DeepState, model: DeepModel) -> dict:
    """Per-draw statistics the collection averages: dictionaries, precisions, usage."""
    out = {f"d{l}": np.asarray(d) for l, d in enumerate(st.d)}
    out["gamma_s"] = np.float64(gamma_s_summary(st.gamma_s))
    out["gamma_e"] = np.asarray(st.gamma_e)
    out["on_rate"] = np.asarray(st.on).mean(axis=(0, 1, 2))  # K_top
    for l, g in enumerate(model.geoms[:-1]):
        z = np.asarray(st.z[l])  # a state at a time: a one-hot of z is N x blocks x K x S floats
        counts = np.stack([(z == s).mean(axis=(0, 1, 2), dtype=np.float32)
                           for s in range(g.n_states)], axis=-1)
        out[f"theta{l}"] = counts  # K, S: how often each block state is used
    return out


def _averaged_beta(scan, svm, s_top, y, n: int, seed) -> np.ndarray:
    """Mean beta over ``n`` SVM scans (``scan(svm, s_top, y, seed)``, compiled once per
    process: :func:`dgdm_tf.supervised.joint_svm.make_svm_scan`) with S[L] held; scan i
    seeded by fold-in of i."""
    acc = np.zeros(svm.beta.shape, np.float64)
    for i in range(n):
        svm = scan(svm, s_top, y, tf.random.experimental.stateless_fold_in(seed, i))
        acc += np.asarray(svm.beta)
    return acc / n


#: the most a balanced hinge weight moves at one re-setting (a factor either way), so a
#: share read on a chain still far from its balance does not throw gamma about
BALANCE_STEP = 10.0


def balanced_gamma(gamma: float, share: float, target: float) -> float:
    """The hinge weight that moves the labels' median share of a top unit's precision
    from ``share`` to ``target``: the SVM's part is linear in gamma at fixed beta and
    lambda, so the odds share / (1 - share) scale with it (by at most
    :data:`BALANCE_STEP`). gamma_mode "balanced" re-sets gamma so every few sweeps: the
    chain then targets a joint that moves with it (an adaptive approximation, measured
    against fixed weights), not one fixed posterior; with "fixed" (the default) gamma
    never moves."""
    if not np.isfinite(share) or share <= 0.0 or share >= 1.0:
        return float(gamma)
    factor = (target / (1.0 - target)) / (share / (1.0 - share))
    return float(gamma * np.clip(factor, 1.0 / BALANCE_STEP, BALANCE_STEP))


class _RefineKernel(Kernel):
    """One refinement sweep (:func:`dgdm_tf.topdown.sweep.make_sweep_fn`) for
    :func:`dgdm_tf.mcmc.driver.run_chain`. State: (the model's state, the SVM's state or
    None, the kept models). With labels (``y``) the SVM starts after the first sweep."""

    def __init__(self, x, dictionaries, model, *, seed, gamma_e_init,
                 gamma_s_init, n_leapfrog, power_iterations, chunk, y, n_classes, shyper,
                 svm_warmup, svm_average, keep, say, trace_path, team, share_images=0,
                 balance=None):
        self.team = team
        self.x, self.xt, self.x_norm = x, tf.constant(x), float(np.linalg.norm(x))
        self.dictionaries, self.model, self.seed = dictionaries, model, seed
        self.n_leapfrog, self.chunk = n_leapfrog, chunk
        self.power_iterations = power_iterations
        self.gamma_e_init, self.gamma_s_init = gamma_e_init, gamma_s_init
        self.y, self.n_classes, self.shyper = y, n_classes, shyper
        self.supervised = y is not None
        self.svm_warmup, self.svm_average, self.keep = svm_warmup, svm_average, keep
        self.share_images = int(share_images)
        # gamma_mode balanced: (target share, sweeps between re-settings); the weight in
        # force is checkpointed with the chain, so a resumed chain goes on with it
        self.balance = balance
        self.gamma_now = None if shyper is None else float(shyper.gamma)
        self.say, self.trace_path, self.cols = say, trace_path, trace_columns(model)
        self.d_start = [np.asarray(d, np.float64) for d in dictionaries]

    def start(self):
        state = init_state(self.x, self.model, self.dictionaries,
                           random.salted(self.seed, "refine_start", tf.int32),
                           gamma_e_init=self.gamma_e_init, gamma_s_init=self.gamma_s_init,
                           chunk=chunk_size(self.chunk))
        return state, None, []

    def restore(self, z):
        fit(z, {"state_d_n": ((), np.asarray(len(self.model.geoms)).dtype),
                "state_gamma_e": ((len(self.x),), np.float32),
                **{f"state_d_{l}": ((g.dh, g.dw, g.c, g.k), np.float32)
                   for l, g in enumerate(self.model.geoms)}})
        if int(z["state_d_n"]) != self.model.n_layers:
            raise CheckpointMismatch(f"the checkpoint holds {int(z['state_d_n'])} layers' "
                                     f"dictionaries, the chain {self.model.n_layers}")
        svm = _state_from_numpy(z, deep_svm.SvmState, "svm") if "svm_beta" in z else None
        if "svm_gamma_now" in z:
            self.gamma_now = float(z["svm_gamma_now"])
        samples = [{k[len(f"sample{i}_"):]: z[k] for k in z if k.startswith(f"sample{i}_")}
                   for i in range(int(z["n_samples"]) if "n_samples" in z else 0)]
        return _state_from_numpy(z), svm, samples

    def arrays(self, chain_state):
        state, svm, samples = chain_state
        arrs = _state_to_numpy(state)
        if svm is not None:
            arrs.update(_state_to_numpy(svm, "svm"))
        arrs["n_samples"] = np.array(len(samples))
        if self.balance is not None:
            arrs["svm_gamma_now"] = np.array(self.gamma_now)
        for i, smp in enumerate(samples):
            arrs.update({f"sample{i}_{k}": v for k, v in smp.items()})
        return arrs

    def begin(self, chain_state, done):
        # one compiled sweep for every step (the adaptation flag is an argument)
        hmc = dict(n_leapfrog=self.n_leapfrog, power_iterations=self.power_iterations)
        self.sweep_fn = make_sweep_fn(self.model, adapt="argument", chunk=self.chunk, **hmc)
        self.hmc = hmc
        if self.supervised:
            self._build_supervised()

    def _build_supervised(self):
        """The supervised sweep and SVM scan at the hinge weight in force."""
        self.shyper_now = dataclasses.replace(self.shyper, gamma=self.gamma_now)
        self.sup_fn = make_sweep_fn(self.model, adapt="argument", svm_hyper=self.shyper_now,
                                    chunk=self.chunk, **self.hmc)
        self.svm_scan = deep_svm.make_svm_scan(self.shyper_now, steps=1)

    def step(self, chain_state, at):
        state, svm, samples = chain_state
        xt, y, seed, t = self.xt, self.y, self.seed, at.t
        shyper = self.shyper_now if self.supervised else None
        t0 = time.time()
        kind = "supervised" if self.supervised else "refine"  # a long sweep's progress by chunks
        kw = {} if self.chunk is None else {
            "on_chunk": part_progress(self.say, f"{kind} sweep {t + 1}/{at.total}", t0, "chunks")}
        if svm is None:
            state, stats = self.sweep_fn(state, xt, tf.constant(at.adapting), **kw)
            if self.supervised:  # the SVM starts after the first sweep, standardised by it
                mean, std = deep_svm.standardisation(stats["expected_top"], scale=shyper.scale)
                svm = deep_svm.init_svm(self.n_classes, mean, std, len(self.x), shyper)
                if self.svm_warmup > 0:
                    svm = deep_svm.resample_svm(svm, state.s_top, y, shyper,
                                                random.salted(seed, "refine_svm_start"),
                                                steps=self.svm_warmup)
        else:
            state, svm, stats = self.sup_fn(state, svm, xt, y, tf.constant(at.adapting), **kw)
            check_finite(f"SVM weights after sweep {t + 1}", svm.beta)
        sec = time.time() - t0
        for l, d in enumerate(state.d):
            check_finite(f"D[{l + 1}] after refinement sweep {t + 1}", d)
        check_finite(f"gamma_e after refinement sweep {t + 1}", state.gamma_e)
        row = _trace_row(t + 1, at.phase, state, xt, self.model, self.x_norm, stats, sec,
                         svm=svm, y=y, svm_hyper=shyper, d_start=self.d_start,
                         share_images=self.share_images)
        if self.balance is not None and (t + 1) % self.balance[1] == 0:
            gamma = balanced_gamma(self.gamma_now, row["label_share_median"], self.balance[0])
            if gamma != self.gamma_now:  # the next sweeps at the new weight
                self.gamma_now = gamma
                self._build_supervised()
        sample = None
        if at.collected:
            sample = _averages(state, self.model)
            sample["features"] = np.asarray(stats["expected_top"]).reshape(len(self.x), -1)
            sample["count"] = np.array(1.0)
            if self.supervised and at.draw in self.keep:
                # a model to predict with: its dictionaries and beta
                beta = np.asarray(svm.beta)
                if self.svm_average > 0:
                    beta = _averaged_beta(self.svm_scan, svm, state.s_top, y, self.svm_average,
                                          random.fold(random.salted(seed, "refine_svm_average"), t))
                samples = samples + [{**{f"d{l}": np.asarray(d) for l, d in enumerate(state.d)},
                                      "beta": beta}]
        return (state, svm, samples), row, sample

    def agree(self, stop):
        if self.team.count == 1:
            return stop
        # every worker's SIGTERM flag, gathered after every sweep, so all leave after one
        return bool(tf.reduce_any(cluster.all_gather(tf.constant(stop), self.team.count)))

    def report(self, rows, at, sec_per_step):
        row, total = rows[-1], at.total
        sup = (f" SVM train error {row['svm_train_error']:.4f}"
               if self.supervised and not np.isnan(row["svm_train_error"]) else "")
        kind = "supervised" if self.supervised else "refine"  # the two chains' logs apart
        self.say(f"{kind} sweep {row['sweep']}/{total} ({row['phase']}) log joint "
                 f"{row['log_joint']:.6g} rel.resid={row['rel_residual']:.4f} active "
                 f"top={row['active_top']:.3f} gamma_e={row['gamma_e_mean']:.4g}{sup} "
                 f"{row['seconds']:.2f} s/sweep, ETA {(total - row['sweep']) * sec_per_step:.0f} s")
        if self.trace_path:
            write_trace_csv(self.trace_path, rows, self.cols)


def run_refine(x: np.ndarray, start: Start, options: RefineOptions | SupervisedOptions, *,
               seed: int, labels=None, checkpoint: CheckpointDir | None = None,
               progress: Callable[[str], None] | None = print,
               on_step: Callable[[int, tuple], None] | None = None) -> dict | None:
    """Joint Gibbs refinement of every layer of ``start`` (:class:`Start`: the
    pretrained or refined dictionaries) on the images ``x`` (N, H, W, C), with the
    settings ``options`` (:class:`RefineOptions`, config block `refine`; with ``labels``
    :class:`SupervisedOptions`, block `supervised`). ``checkpoint``
    (:class:`dgdm_tf.mcmc.checkpoint.CheckpointDir`): resume from and save to its folder,
    writing the live trace there; None: neither.

    Of the options: ``chunk``: draw the per-image steps that many images at a time (memory: the top
    units' data-plane images are units x images x footprint); None, or at least N, draws
    all at once. ``scan``: the sweeps' visiting order (:class:`DeepModel`; "fixed" repeats
    the draws of the sampler before the random scan); part of the checkpoint's
    fingerprint, so a chain never resumes from one of the other scan. ``n_leapfrog``,
    ``power_iterations``: the HMC kernel of D[l >= 1]
    (:func:`dgdm_tf.topdown.dictionaries.resample_d`).

    Returns {'D': [per layer, collection average], 'gamma_s', 'gamma_e' (N,),
    'on_rate' (K_top,), 'theta': [per lower layer (K, p*p+1) state frequencies],
    'features': (N, F) Rao-Blackwellised posterior mean of S[L-1] of the images,
    'sweeps', 'seconds', 'trace'}; None when ``checkpoint.stop_after`` ended the run early.

    With ``labels`` (ints in [0, ``start.n_classes``)) this is the supervised model (Sec. 2.3): the
    Bayesian SVM (:mod:`dgdm_tf.supervised.joint_svm`, ``svm_hyper``) is trained jointly. The first
    sweep runs without it (beta = 0 would add nothing); its features fix the SVM's
    standardisation, and ``svm_warmup`` SVM scans on its draw of S[L] give beta a start
    that fits (exact Gibbs steps with S held, so the chain is unchanged in law). The
    result then also holds 'samples': every collected draw's
    dictionaries and beta ({'D': [per layer (S, ...)], 'beta': (S, C, F+1)}, only
    ``keep_models`` of them, evenly spaced, the last included, when given), and
    'svm_mean', 'svm_std'. With ``svm_average`` > 0 a kept model's beta is instead the
    mean of that many further SVM scans with its S[L] held, started from its state: draws
    of beta from its conditional given the kept state, so a decision value averaged over
    them is Rao-Blackwellised over beta (a side computation: the chain goes on from the
    kept state, unchanged).

    ``workers`` > 1 (``options.distribute``): run data-parallel over the workers of this process's cluster
    (:func:`dgdm_tf.core.cluster.workers`: Slurm's tasks, TF_CONFIG's workers, or this
    process alone), every worker running ``run_refine`` with the same arguments. Worker
    w sweeps the images of chunks w, w + W, ... (``chunk`` images each, so ``chunk``
    must be given); every chunk's draws are seeded by the chunk, and the dictionaries'
    sums are taken over every worker's chunks in the order one process takes them
    (:class:`dgdm_tf.core.image_chunks.Shards`), so every worker holds the same state,
    and 1, 2 or W workers draw the same chain, bit for bit: the chain of ``chunk``
    without ``distribute``. Only the chief (worker 0) writes the checkpoint and the
    trace; a checkpoint resumes with any number of workers.

    ``on_step(t, (state, svm, kept))``: called after sweep ``t`` (0-based) with the
    chain's :class:`DeepState`, the SVM's state (None before it starts) and the kept
    models (:func:`dgdm_tf.mcmc.driver.run_chain`'s ``on_step``: a reader, the draws are
    unchanged); chain 0's sweeps only.

    ``chains``: how many chains run, one after the other. Chain 0 is the chain of
    ``seed`` (with ``chains=1`` everything is what it was), chain c > 0 that of
    :func:`dgdm_tf.core.random.chain_seed` (salt "refine_chains"), its checkpoint in
    ``checkpoint.dir/chain<c>/`` and its trace beside chain 0's (``<stem>_chain<c>``).
    The result (dictionaries, features, kept models) is chain 0's: averaging
    dictionaries over chains is not valid (each chain settles in its own mode, its
    elements in their own order and sign), and pooling the supervised chains' kept
    models would need each chain's own standardisation; the other chains serve the
    diagnostics. 'settlement' holds :func:`dgdm_tf.mcmc.diagnostics.trace_settlement`
    of every chain's :func:`settle_columns` (drift over the last third of all sweeps
    against ``settle_tolerance``; R-hat and bulk ESS of the collected draws), and
    'chain_traces' every chain's trace (chain 0's is 'trace').
    """
    x = np.asarray(x, np.float32)
    if x.ndim != 4:
        raise ValueError(f"x must be (N, H, W, C), got shape {x.shape}")
    check_finite("refinement input x", x)
    o, dictionaries, layers, n_classes = options, start.dictionaries, start.layers, start.n_classes
    say = progress or (lambda _m: None)
    ks = [int(np.shape(d)[-1]) for d in dictionaries]
    supervised = labels is not None
    if supervised != o.supervised:
        raise ValueError("labels need SupervisedOptions (config block `supervised`), and "
                         "SupervisedOptions need labels; got "
                         f"{type(o).__name__} {'with' if supervised else 'without'} labels")
    model = DeepModel(x.shape[1:], layers, start.hyper, supervised=supervised, scan=o.scan).with_ks(ks)
    total = o.sweeps
    chunk = int(o.chunk) if o.chunk is not None and int(o.chunk) < len(x) else None
    trace_path = None if checkpoint is None else checkpoint.trace_path
    team = cluster.workers() if o.distribute else cluster.Workers()
    if o.distribute:
        if chunk is None:
            raise ValueError("a distributed chain needs chunk: fewer images per chunk than "
                             f"the {len(x)} images, at least one chunk per worker")
        chunk = Shards(chunk, team)
        chunk.owned(len(x))  # enough chunks for the workers
        if not team.chief:  # the chief reports and writes; the others sweep
            say, trace_path = (lambda _m: None), None
    extra = {} if chunk is None else {"chunk": chunk_size(chunk)}
    if o.scan != "fixed":  # absent for the old sampler's order: its checkpoints still resume
        extra["scan"] = o.scan
    collect, keep = o.collect, set(range(o.collect))
    if supervised and o.keep_models is not None:
        keep = {collect - 1 - int(round(j * collect / o.keep_models))
                for j in range(min(o.keep_models, collect))}
    if supervised:
        labels = np.asarray(labels, np.int64)
        if labels.shape != (len(x),) or n_classes is None or labels.min() < 0 or labels.max() >= n_classes:
            raise ValueError(f"labels must be {len(x)} ints in [0, n_classes={n_classes})")
        shyper = o.svm_hyper
        y = deep_svm.targets(labels, n_classes)
        extra.update(n_classes=n_classes, svm_hyper=shyper.__dict__, keep=sorted(keep),
                     svm_warmup=int(o.svm_warmup), svm_average=int(o.svm_average))
        if o.gamma_mode != "fixed":  # absent for fixed: the fixed chains' checkpoints resume
            extra.update(gamma_mode=o.gamma_mode, balance_share=float(o.balance_share),
                         balance_every=int(o.balance_every))
    fp = fingerprint(x, *dictionaries, *([labels] if supervised else []), layers=list(layers), seed=seed,
                     burn_in=o.burn_in, collect=collect, thin=o.thin, hyper=model.hyper.__dict__,
                     gamma_e_init=start.gamma_e_init, gamma_s_init=start.gamma_s_init,
                     n_leapfrog=o.n_leapfrog, power_iterations=o.power_iterations, **extra)
    chains, runs = int(o.chains), []
    for c in range(chains):
        tag = "" if chains == 1 else f"chain {c + 1}/{chains}: "
        say_c = (lambda m, tag=tag: say(tag + m)) if tag else say
        trace_c = trace_path if c == 0 or trace_path is None else \
            Path(trace_path).with_name(f"{Path(trace_path).stem}_chain{c}{Path(trace_path).suffix}")
        ck_dir = None if checkpoint is None else Path(checkpoint.dir) / (f"chain{c}" if c else "")
        seed_c = random.chain_seed(seed, "refine_chains", c)
        kernel = _RefineKernel(x, dictionaries, model, seed=seed_c, gamma_e_init=start.gamma_e_init, gamma_s_init=start.gamma_s_init,
                               n_leapfrog=o.n_leapfrog, power_iterations=o.power_iterations,
                               chunk=chunk, y=y if supervised else None,
                               n_classes=n_classes, shyper=shyper if supervised else None,
                               svm_warmup=o.svm_warmup if supervised else 0,
                               svm_average=o.svm_average if supervised else 0, keep=keep,
                               say=say_c, trace_path=trace_c, team=team,
                               share_images=o.share_images if supervised else 0,
                               balance=((float(o.balance_share), int(o.balance_every))
                                        if supervised and o.gamma_mode == "balanced" else None))
        ck = Checkpoint(ck_dir / "checkpoint.npz" if ck_dir else None,
                        fp if c == 0 else fingerprint(parent=fp, chain=c),
                        every=o.checkpoint_every, write=team.chief,
                        resumed="resuming refinement from checkpoint at sweep {done}/{total} ({path})")
        run = run_chain(kernel, o.schedule, ck, say=say_c,
                        stop_after=None if checkpoint is None else checkpoint.stop_after,
                        on_step=on_step if c == 0 else None)
        if run is None:
            return None
        runs.append(run)
    traces = [r.rows for r in runs]
    settle = trace_settlement([{k: [row[k] for row in rows] for k in settle_columns(model.n_layers, model.supervised)}
                               for rows in traces],
                              collected=[row["phase"] == "collect" for row in traces[0]],
                              tolerance=o.settle_tolerance)
    if supervised:
        settle["label_share"] = label_share.trace_summary(traces[0])
    say(settlement_message("supervised chain" if supervised else "refinement", settle))
    acc, rows, (_, svm, samples) = runs[0].sums, runs[0].rows, runs[0].state
    cnt = float(acc["count"])
    out_sup = {}
    if supervised:
        out_sup = {"samples": {"D": [np.stack([smp[f"d{l}"] for smp in samples])
                                     for l in range(model.n_layers)],
                               "beta": np.stack([smp["beta"] for smp in samples])},
                   "svm_mean": np.asarray(svm.mean), "svm_std": np.asarray(svm.std)}
    return {**out_sup, "D": [(acc[f"d{l}"] / cnt).astype(np.float32) for l in range(model.n_layers)],
            "gamma_s": float(acc["gamma_s"] / cnt), "gamma_e": (acc["gamma_e"] / cnt).astype(np.float32),
            "on_rate": (acc["on_rate"] / cnt).astype(np.float32),
            "theta": [(acc[f"theta{l}"] / cnt).astype(np.float32) for l in range(model.n_layers - 1)],
            "features": (acc["features"] / cnt).astype(np.float32), "sweeps": total,
            "seconds": float(sum(r["seconds"] for rows_c in traces for r in rows_c)), "trace": rows,
            "chain_traces": traces, "settlement": settle}


def settlement_message(what: str, settle: dict) -> str:
    """The log line of :func:`dgdm_tf.mcmc.diagnostics.trace_settlement`'s verdict."""
    sc = settle["scalars"]
    rh = [v["rhat"] for v in sc.values() if v.get("rhat") is not None]
    mix = (f"; worst R-hat {max(rh):.3f} ({settle['rhat']})" if rh else f"; R-hat {settle['rhat']}")
    if settle["settled"] is None:
        return (f"{what} too short to tell whether it settled: {settle['n_sweeps']} sweeps, where "
                f"the drift test needs {settle['min_sweeps']} (no scalar drifts beyond "
                f"{settle['tolerance']:g} yet){mix}")
    if settle["settled"]:
        return (f"{what} settled: every traced scalar drifts within {settle['tolerance']:g} over "
                f"the last third of its {settle['n_sweeps']} sweeps{mix}")
    worst = ", ".join(f"{k} {sc[k]['drift']:+.2f}" for k in settle["drifting"])
    return (f"{what} not settled: over the last third of its {settle['n_sweeps']} sweeps {worst} "
            f"(drift, tolerance {settle['tolerance']:g}): the chain is still in its transient, "
            f"its model an early draw; more burn-in sweeps let it settle{mix}")
