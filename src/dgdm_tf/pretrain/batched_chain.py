"""Layer-wise pretraining in image batches, the per-image state on disk: memory bounded by
the batch, not the data set.

The sweep is :mod:`dgdm_tf.pretrain.batched`'s; this module schedules it as
:func:`dgdm_tf.pretrain.chain.run_pretrain_layer` schedules the in-memory sweep (burn-in, pruning,
collection, trace, progress) and keeps the state in ``state_dir``:

* ``buffer<i>/batch<b>.npz``: one batch's local state (z as int8, one weight per
  block, theta, gamma_e) and, during collection, its running sums of x_next and gamma_e;
* ``head.npz``: the globals (D, gamma_w, the chain's seed), the sweep count, which of
  the two buffers holds that sweep's batches, the trace and the global collection sums.

Sweep t reads every batch from one buffer and writes it to the other; only then is the
head replaced (atomically) to point at the new buffer. A run killed mid-sweep leaves the
head at the last whole sweep, and a rerun with the same arguments repeats that sweep and
ends bit-for-bit where an uninterrupted run ends (same machine, same TF build).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable

import numpy as np
import tensorflow as tf

from dgdm_tf.core import random
from dgdm_tf.mcmc import anneal

from dgdm_tf.mcmc.checkpoint import (Checkpoint, CheckpointDir, CheckpointMismatch, StateFiles,
                                     fit)
from dgdm_tf.mcmc.driver import Kernel, run_chain
from dgdm_tf.pretrain.chain_parts import (TRACE_COLUMNS, check_finite, kept_maps,
                                 maps_to_keep, report_sweep)
from dgdm_tf.pretrain.kernel import active_mask
from dgdm_tf.pretrain.layer_model import (START_SEEDS, LayerModel, PretrainState, initial_dictionary,
                                          initial_locals)
from dgdm_tf.pretrain.batched import (LOCAL_FIELDS, BatchedGlobals, batch_seed, compact_blocks,
                                     make_batch_step, make_global_step, batched_sweep)
from dgdm_tf.pretrain.options import PretrainOptions
from dgdm_tf.pretrain.ridge_start import RidgeStart, gamma_w_mean, ridge_start

def _prune_local(loc: dict, keep: np.ndarray) -> dict:
    out = dict(loc)
    out["z"], out["w"] = np.take(loc["z"], keep, axis=2), np.take(loc["w"], keep, axis=2)
    out["log_theta"] = np.take(loc["log_theta"], keep, axis=1)
    if "acc_x_next" in loc:
        out["acc_x_next"] = np.take(loc["acc_x_next"], keep, axis=3)
    return out


class _BatchedKernel(Kernel):
    """The batched sweep for :func:`dgdm_tf.mcmc.driver.run_chain`. Its state is the
    globals and which buffer holds the sweep's batches; the batches themselves are files,
    so the driver checkpoints (``head.npz``) after every sweep."""

    def __init__(self, x, model, options, *, bounds, store, seed, say, trace_path):
        o = options
        self.x, self.model, self.bounds, self.store = x, model, bounds, store
        self.n, self.x_norm = len(x), float(np.linalg.norm(x))
        self.seed, self.prune = seed, o.prune_min_usage
        self.dict_init, self.start_with = o.dict_init, o.start
        self.jit, self.anneal_ratio, self.anneal_start = o.jit_compile, o.anneal_ratio, o.anneal_start
        self.say, self.trace_path = say, trace_path

    def start(self):
        self.store.clear()  # another run's batches
        return self._adopt(_start(self.x, self.model, self.bounds, self.store, self.seed,
                                  self.dict_init, self.start_with, self.say))

    def restore(self, head):
        """The head's state, once the head and every batch file of its buffer fit the
        chain (a resume reads the batches once more: a damaged one is found here, not
        mid-sweep)."""
        g = self.model.geom
        k_now = kept_maps(head["d"], g.k)
        fit(head, {"d": ((g.dh, g.dw, g.c, k_now), np.float32), "kept": ((k_now,), np.int64),
                   "buffer": ((), np.int64)})
        if int(head["buffer"]) not in (0, 1):
            raise CheckpointMismatch(f"its buffer is {int(head['buffer'])}, not 0 or 1")
        for b, (lo, hi) in enumerate(self.bounds):
            z = self.store.read(int(head["buffer"]), b)["z"]
            if z.ndim != 6 or z.shape[3] != hi - lo or z.dtype != np.int8:
                raise CheckpointMismatch(f"batch {b}'s z is {z.dtype}{list(z.shape)}, not int8 "
                                         f"with {hi - lo} images on axis 3")
        return self._adopt(head)

    def _adopt(self, head):
        k_now = int(head["d"].shape[-1])
        if k_now != self.model.geom.k:
            m = self.model
            self.model = LayerModel(m.geom.with_k(k_now), m.hyper, top=m.top, n_images=self.n,
                                    scan=m.scan)
        self.kept, self.pending_keep = np.asarray(head["kept"]), np.asarray(head["pending_keep"])
        glob = BatchedGlobals(d=tf.constant(head["d"]), gamma_w=tf.constant(head["gamma_w"]),
                             seed=tf.constant(head["seed"]))
        return glob, int(head["buffer"])

    def arrays(self, state):
        glob, buffer = state
        return {"buffer": np.array(buffer), "d": glob.d.numpy(),
                "gamma_w": np.asarray(glob.gamma_w), "seed": glob.seed.numpy(),
                "kept": np.asarray(self.kept), "pending_keep": np.asarray(self.pending_keep)}

    def begin(self, state, done):
        self.batch_fn = make_batch_step(self.model, self.jit)
        self.global_fn = make_global_step(self.model)
        self.cap_start = self.anneal_start * anneal.start_precision(self.x)

    def step(self, state, at):
        t, glob, buffer = at.t, *state
        model, x, bounds, store, total_n = self.model, self.x, self.bounds, self.store, self.n
        n_batches = len(bounds)
        t0 = time.time()
        cap = anneal.gamma_e_cap(self.cap_start, t, at.anneal, self.anneal_ratio)
        collecting, first_sample = at.collected, at.draw == 0
        sums = {}  # batch b's collection sums, from its read to its write

        def read(b):
            lo, hi = bounds[b]
            loc = store.read(buffer, b)
            if loc["z"].shape[2] != model.geom.k:  # written before the pruning
                loc = _prune_local(loc, self.pending_keep)
            sums[b] = {k: v for k, v in loc.items() if k.startswith("acc_")}
            cap_b = np.full(hi - lo, np.inf, np.float32) if cap is None else cap[lo:hi]
            return ({k: loc[k] for k in LOCAL_FIELDS}, tf.constant(x[lo:hi]),
                    tf.constant(cap_b, tf.float32))

        def write(b, out, expected):
            acc_b = sums.pop(b)
            if collecting:
                out["acc_x_next"] = expected if first_sample else acc_b["acc_x_next"] + expected
                out["acc_gamma_e"] = (out["gamma_e"] if first_sample
                                      else acc_b["acc_gamma_e"] + out["gamma_e"])
            else:  # carried to the next collected sweep
                out.update(acc_b)
            store.write(1 - buffer, b, out)

        last_say = [time.time()]

        def progress(b):
            if n_batches > 1 and time.time() - last_say[0] > 30:
                self.say(f"sweep {t + 1}/{at.total}: batch {b + 1}/{n_batches}")
                last_say[0] = time.time()

        glob, st = batched_sweep(glob, n_batches, read, write, model, self.batch_fn,
                                  self.global_fn, progress)
        buffer = 1 - buffer
        sec = time.time() - t0
        check_finite(f"D after sweep {t + 1}", glob.d)
        check_finite(f"the images' log-likelihood after sweep {t + 1}", st.log_lik)
        used = np.asarray(st.used) / (model.geom.n_valid_blocks() * total_n)
        # the residual and log-likelihood after the (z, W) step, before D moved
        row = {"sweep": t + 1, "phase": at.phase, "n_dict": model.geom.k,
               "log_lik": float(st.log_lik),
               "rel_residual": float(np.sqrt(st.sq_resid) / max(self.x_norm, 1e-30)),
               "active_frac": float(np.mean(used)), "gamma_e_mean": float(st.sum_gamma_e / total_n),
               "gamma_w": float(glob.gamma_w), "seconds": sec}
        assert set(row) == set(TRACE_COLUMNS)
        keep_local = maps_to_keep(used, self.prune, self.say) if at.warmup_ends else None
        if keep_local is not None:  # the batch files follow when next read
            glob = glob._replace(d=tf.gather(glob.d, keep_local, axis=3))
            self.model = LayerModel(model.geom.with_k(int(keep_local.size)), model.hyper,
                                    top=model.top, n_images=total_n, scan=model.scan)
            self.kept, self.pending_keep = self.kept[keep_local], keep_local
            self.batch_fn = make_batch_step(self.model, self.jit)
            self.global_fn = make_global_step(self.model)
        sample = None
        if collecting:
            sample = {"d": glob.d.numpy(), "usage": used, "gamma_w": np.asarray(glob.gamma_w),
                      "count": np.array(1.0)}
        return (glob, buffer), row, sample

    def report(self, rows, at, sec_per_step):
        report_sweep(self.say, rows, self.trace_path, at.total, sec_per_step,
                     extra=f" batches={len(self.bounds)}")


def run_batched_layer(x: np.ndarray, model: LayerModel, options: PretrainOptions, *, seed: int,
                      fingerprint: str, state_dir: str | os.PathLike,
                      checkpoint: CheckpointDir | None = None,
                      progress: Callable[[str], None] | None = None) -> dict | None:
    """:func:`dgdm_tf.pretrain.chain.run_pretrain_layer` with ``options.batch_size`` set
    (its arguments, checked there: ``model`` the layer's, ``options`` with this layer's
    ``jit_compile`` flag), the per-image state in ``state_dir``, ``fingerprint`` the
    chain's (:func:`dgdm_tf.pretrain.chain.fingerprint`); returns the same dict."""
    o = options
    if not isinstance(o.jit_compile, bool):
        raise ValueError(f"jit_compile must be this layer's flag, got {o.jit_compile!r}: pass "
                         "dataclasses.replace(options, jit_compile=options.jit_for(l, n_layers))")
    say = progress or (lambda _m: None)
    n = len(x)
    bounds = o.batch_bounds(n)
    store = StateFiles(Path(state_dir))
    total = o.sweeps
    kernel = _BatchedKernel(x, model, o, bounds=bounds, store=store, seed=seed, say=say,
                           trace_path=None if checkpoint is None else checkpoint.trace_path)
    ck = Checkpoint(Path(state_dir) / "head.npz", fingerprint, every=1,
                    resumed="resuming from the batched state at sweep {done}/{total} ({path})",
                    stale="batched state {path} is from different inputs or settings; "
                          "starting afresh", save_start=True)
    run = run_chain(kernel, o.schedule, ck, say=say,
                    stop_after=None if checkpoint is None else checkpoint.stop_after)
    if run is None:
        return None
    acc, rows, kept, buffer = run.sums, run.rows, kernel.kept, run.state[1]
    cnt = float(acc["count"])
    # filled in place: the output is the one array here that grows with the data
    x_next, gamma_e = None, np.empty(n, np.float32)
    for b, (lo, hi) in enumerate(bounds):
        loc = store.read(buffer, b)
        if x_next is None:
            x_next = np.empty((n,) + loc["acc_x_next"].shape[1:], np.float32)
        np.divide(loc["acc_x_next"], cnt, out=x_next[lo:hi], casting="unsafe")
        gamma_e[lo:hi] = loc["acc_gamma_e"] / cnt
    return {"D": (acc["d"] / cnt).astype(np.float32), "kept": np.asarray(kept, dtype=np.int64),
            "usage": (acc["usage"] / cnt).astype(np.float32),
            "x_next": x_next, "gamma_e": gamma_e,
            "gamma_w": np.float32(acc["gamma_w"] / cnt), "sweeps": total,
            "seconds": float(sum(r["seconds"] for r in rows)), "trace": rows}


def _start(x, model: LayerModel, bounds, store: StateFiles, seed: int, dict_init: str,
           start: RidgeStart | None, say) -> dict:
    """Sweep 0, written to buffer 0 (returned: the kernel's start): D as
    :func:`dgdm_tf.pretrain.layer_model.init_state` draws it from the
    whole of X, every batch's local start (:func:`ridge_start.ridge_start` batch by
    batch with gamma_w held, then gamma_w at its conditional mean given all batches)."""
    g = model.geom
    h = model.hyper
    init_seed = random.salted(seed, "pretrain_init", tf.int32)
    d = initial_dictionary(tf.constant(x), model, init_seed, dict_init)
    chain_seed = random.split(init_seed, START_SEEDS).chain
    start_seed = random.salted(seed, "pretrain_start", tf.int32)
    active, sum_w2 = 0.0, 0.0
    t0 = time.time()
    for b, (lo, hi) in enumerate(bounds):
        xb = tf.constant(x[lo:hi])
        s, z, log_theta, gamma_e = initial_locals(xb, model)
        st = PretrainState(s=s, z=z, d=d, log_theta=log_theta, gamma_w=tf.constant(1.0),
                           gamma_e=gamma_e, resid=xb, seed=chain_seed)
        if start is not None:
            st = ridge_start(st, xb, model, start, batch_seed(start_seed, b), fixed_gamma_w=True)
            active += float(tf.reduce_sum(active_mask(st, model)))
            sum_w2 += float(tf.reduce_sum(tf.square(st.s)))
        store.write(0, b, {"z": tf.cast(st.z, tf.int8).numpy(), "w": compact_blocks(st.s).numpy(),
                           "log_theta": st.log_theta.numpy(), "gamma_e": st.gamma_e.numpy()})
    gamma_w = np.float32(1.0 if start is None else gamma_w_mean(active, sum_w2, h))
    say(f"batched start: {len(bounds)} batches of up to {bounds[0][1] - bounds[0][0]} images "
        f"in {time.time() - t0:.1f} s")
    return {"buffer": np.array(0), "d": d.numpy(), "gamma_w": np.asarray(gamma_w),
            "seed": chain_seed.numpy(), "kept": np.arange(g.k), "pending_keep": np.arange(g.k)}
