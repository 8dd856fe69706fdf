"""Gibbs driver for layer-wise pretraining: burn-in, pruning, collection, checkpoints.

Kernels live in :mod:`dgdm_tf.pretrain.kernel`; this module only schedules them. The chain is
restartable: every ``checkpoint_every`` sweeps its whole state (including the stateless
seed it carries), the collection sums and the trace are written atomically to
``checkpoint_dir``; a rerun with the same arguments resumes from the newest checkpoint
and ends bit-for-bit where an uninterrupted run ends (same machine, same TF build).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np
import tensorflow as tf

from dgdm_tf.core import random
from dgdm_tf.mcmc import anneal

from dgdm_tf.mcmc.checkpoint import Checkpoint, CheckpointDir, fit
from dgdm_tf.mcmc.driver import Kernel, run_chain
from dgdm_tf.core.layout import LayerGeometry
from dgdm_tf.pretrain.options import Layer, PretrainOptions
from dgdm_tf.pretrain.ridge_start import ridge_start
from dgdm_tf.pretrain.blocks import blocks_to_nhwc, pad_input
from dgdm_tf.pretrain.kernel import active_mask, log_likelihood, make_sweep_fn
from dgdm_tf.core.hyper import Hyper
from dgdm_tf.pretrain.layer_model import LayerModel, PretrainState, init_state
from dgdm_tf.core.ops import full_conv
from dgdm_tf.pretrain.chain_parts import check_finite, kept_maps, maps_to_keep, report_sweep
from dgdm_tf.pretrain.batched_chain import run_batched_layer


def fingerprint(*arrays: np.ndarray, **kwargs) -> str:
    """Short hash of a chain's inputs and settings: a checkpoint resumes only a chain
    with the same fingerprint (shared by the pretraining and refinement drivers)."""
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    h.update(json.dumps(kwargs, sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]


def _state_to_numpy(state: PretrainState) -> dict:
    return {f"state_{k}": np.asarray(v) for k, v in state._asdict().items()}


def _state_from_numpy(arrs) -> PretrainState:
    return PretrainState(**{k: tf.constant(arrs[f"state_{k}"]) for k in PretrainState._fields})


def _trace_row(sweep: int, phase: str, state: PretrainState, model: LayerModel, x_norm: float,
               seconds: float, used: np.ndarray) -> dict:
    g = model.geom
    active = float(np.mean(used))
    return {"sweep": sweep, "phase": phase, "n_dict": g.k,
            "log_lik": float(log_likelihood(state, model)),
            "rel_residual": float(np.linalg.norm(np.asarray(state.resid)) / max(x_norm, 1e-30)),
            "active_frac": active, "gamma_e_mean": float(np.mean(np.asarray(state.gamma_e))),
            "gamma_w": float(state.gamma_w), "seconds": seconds}


def prune_state(state: PretrainState, model: LayerModel, keep: np.ndarray):
    """Drop dictionary elements not in ``keep``; their contribution returns to the residual."""
    g = model.geom
    drop = np.setdiff1d(np.arange(g.k), keep)
    if drop.size == 0:
        return state, model
    s_drop = tf.gather(state.s, drop, axis=2)
    d_drop = tf.gather(state.d, drop, axis=3)
    back = full_conv(blocks_to_nhwc(s_drop, g.with_k(len(drop))), d_drop)
    new_geom = g.with_k(int(len(keep)))
    new_model = LayerModel(new_geom, model.hyper, top=model.top, n_images=model.n, scan=model.scan)
    state = state._replace(
        s=tf.gather(state.s, keep, axis=2), z=tf.gather(state.z, keep, axis=2),
        d=tf.gather(state.d, keep, axis=3), log_theta=tf.gather(state.log_theta, keep, axis=1),
        resid=state.resid + pad_input(back, g))
    return state, new_model


def usage(state: PretrainState, model: LayerModel) -> np.ndarray:
    """Fraction of each map's blocks that are on, averaged over images."""
    g = model.geom
    on = np.asarray(active_mask(state, model))  # Gh, Gw, K, N, nch, ncw
    return on.sum(axis=(0, 1, 3, 4, 5)) / (g.n_valid_blocks() * on.shape[3])


class _PretrainKernel(Kernel):
    """One layer's Gibbs sweep (:func:`dgdm_tf.pretrain.kernel.make_sweep_fn`) for
    :func:`dgdm_tf.mcmc.driver.run_chain`; it prunes the maps at the step its schedule
    marks ``warmup_ends``, so the model and the kept maps are its own, and caps gamma_e over the tempered sweeps."""

    def __init__(self, x, model, options, *, seed, say, trace_path):
        o = options
        self.x, self.x_tf, self.x_norm = x, tf.constant(x), float(np.linalg.norm(x))
        self.model, self.kept = model, np.arange(model.geom.k)
        self.seed, self.prune = seed, o.prune_min_usage
        self.dict_init, self.start_with, self.jit = o.dict_init, o.start, o.jit_compile
        self.anneal_ratio, self.anneal_start = o.anneal_ratio, o.anneal_start
        self.say, self.trace_path = say, trace_path

    def start(self):
        state = init_state(self.x, self.model, random.salted(self.seed, "pretrain_init", tf.int32),
                           dict_init=self.dict_init)
        if self.start_with is not None:
            state = ridge_start(state, self.x_tf, self.model, self.start_with,
                                random.salted(self.seed, "pretrain_start", tf.int32))
        return state

    def restore(self, arrays):
        m = self.model
        g = m.geom.with_k(kept_maps(arrays["state_d"], m.geom.k))
        fit(arrays, {"kept": ((g.k,), np.int64), "state_d": ((g.dh, g.dw, g.c, g.k), np.float32),
                     "state_s": ((g.gh, g.gw, g.k, m.n, g.nch, g.ncw, g.p * g.p), np.float32),
                     "state_z": ((g.gh, g.gw, g.k, m.n, g.nch, g.ncw), np.int32),
                     "state_log_theta": ((m.n, g.k, g.n_states), np.float32),
                     "state_gamma_e": ((m.n,), np.float32)})
        self.kept = arrays["kept"]
        self.model = LayerModel(g, m.hyper, top=m.top, n_images=m.n, scan=m.scan)
        return _state_from_numpy(arrays)

    def arrays(self, state):
        return {"kept": np.asarray(self.kept), **_state_to_numpy(state)}

    def begin(self, state, done):
        self.sweep_fn = make_sweep_fn(self.model, jit_compile=self.jit, return_expected_pool=True)
        self.cap_start = self.anneal_start * anneal.start_precision(self.x)

    def step(self, state, at):
        t, t0 = at.t, time.time()
        cap = anneal.gamma_e_cap(self.cap_start, t, at.anneal, self.anneal_ratio)
        state, expected = (self.sweep_fn(state, self.x_tf) if cap is None
                           else self.sweep_fn(state, self.x_tf, tf.constant(cap)))
        sec = time.time() - t0
        check_finite(f"D after sweep {t + 1}", state.d)
        check_finite(f"gamma_e after sweep {t + 1}", state.gamma_e)
        used = usage(state, self.model)
        row = _trace_row(t + 1, at.phase, state, self.model, self.x_norm, sec, used)
        keep_local = maps_to_keep(used, self.prune, self.say) if at.warmup_ends else None
        if keep_local is not None:
            state, self.model = prune_state(state, self.model, keep_local)
            self.kept = np.asarray(self.kept)[keep_local]
            self.sweep_fn = make_sweep_fn(self.model, jit_compile=self.jit,
                                          return_expected_pool=True)
        sample = None
        if at.collected:
            sample = {"d": np.asarray(state.d), "x_next": np.asarray(expected),
                      "usage": used, "gamma_e": np.asarray(state.gamma_e),
                      "gamma_w": np.asarray(state.gamma_w), "count": np.array(1.0)}
        return state, row, sample

    def report(self, rows, at, sec_per_step):
        report_sweep(self.say, rows, self.trace_path, at.total, sec_per_step)


def run_pretrain_layer(x: np.ndarray, layer: Layer, options: PretrainOptions, *, seed: int,
                       checkpoint: CheckpointDir | None = None,
                       progress: Callable[[str], None] | None = print) -> dict | None:
    """Pretrain one layer by Gibbs sampling (supplement, "Bottom-Up Pretraining"): the
    layer ``layer`` (:class:`dgdm_tf.pretrain.options.Layer`) on its input ``x`` (N, H,
    W, C), with the settings ``options`` (:class:`PretrainOptions`, config block
    `pretrain`). ``checkpoint`` (:class:`dgdm_tf.mcmc.checkpoint.CheckpointDir`): resume
    from and save to its folder, writing the live trace there (a TSV); None: neither.

    ``burn_in`` sweeps, then maps used by fewer than ``prune_min_usage`` of the blocks are
    dropped (the paper's inference of K), then ``collect`` samples one every ``thin``
    sweeps, averaged (x_next: the Rao-Blackwellised pooled features, see
    ``pretrain.resample_zw``). A layer with ``pool == 1`` is a top layer with the
    spike-slab prior. The first ``anneal_sweeps`` burn-in sweeps run at a tempered
    likelihood, gamma_e capped by a schedule rising ``anneal_ratio``-fold from
    ``anneal_start`` / Var(x_n) (:mod:`dgdm_tf.mcmc.anneal`). ``scan`` is the sweep's visiting
    order (``pretrain.LayerModel``); ``start`` the local state's start given the initial
    D (:mod:`dgdm_tf.pretrain.ridge_start`; ``None``: every block off).
    ``checkpoint.stop_after`` ends the run early after that many sweeps in total (used to
    test resumption); the result is then ``None``. ``batch_size`` sweeps the images in
    batches of that many with the per-image state on disk under ``checkpoint.dir``
    (:mod:`dgdm_tf.pretrain.batched_chain`: memory bounded by the batch, a checkpoint every sweep,
    ``checkpoint_every`` unused; without a checkpoint, in a temporary folder); ``None``
    holds every image's state in memory.

    Returns {'D', 'kept', 'usage', 'x_next', 'gamma_e', 'gamma_w', 'sweeps', 'seconds'}.
    """
    x = np.asarray(x, dtype=np.float32)
    if x.ndim != 4:
        raise ValueError(f"x must be (N, H, W, C), got shape {x.shape}")
    check_finite("layer input x", x)
    # this layer's flag of the per-layer jit_compile
    o = dataclasses.replace(options, jit_compile=options.jit_for(layer.index, layer.n_layers))
    say = progress or (lambda _m: None)
    hyp = Hyper.from_dict(layer.hyper)
    n, h, w, c = x.shape
    geom = LayerGeometry(hx=h, wx=w, c=c, dh=layer.dict_size, dw=layer.dict_size,
                         k=layer.n_dict, p=layer.pool)
    model = LayerModel(geom, hyp, top=(layer.pool == 1), n_images=n, scan=o.scan)
    anneal_sweeps = o.anneal_sweeps
    fp = fingerprint(x, dict_size=layer.dict_size, n_dict=layer.n_dict, pool=layer.pool, seed=seed,
                      burn_in=o.burn_in, collect=o.collect, thin=o.thin, prune=o.prune_min_usage,
                      hyper=hyp.__dict__, dict_init=o.dict_init,
                      **({"anneal": [anneal_sweeps, o.anneal_ratio, o.anneal_start]}
                         if anneal_sweeps else {}),
                      # absent while they are the sampler's old defaults, so checkpoints of
                      # earlier runs of those settings still resume
                      **({"scan": o.scan} if o.scan != "fixed" else {}),
                      **({"start": dataclasses.asdict(o.start)} if o.start is not None else {}),
                      **({"batch_size": o.batch_size} if o.batch_size is not None else {}))
    ckdir = Path(checkpoint.dir) if checkpoint is not None else None
    if o.batch_size is not None:
        # without a checkpoint folder the state lives in a temporary one (no resumption)
        with (contextlib.nullcontext(ckdir / "batches") if ckdir else
              tempfile.TemporaryDirectory(prefix="dgdm_batches_")) as state_dir:
            return run_batched_layer(x, model, o, seed=seed, fingerprint=fp, state_dir=state_dir,
                                     checkpoint=checkpoint, progress=say)
    kernel = _PretrainKernel(x, model, o, seed=seed, say=say,
                             trace_path=None if checkpoint is None else checkpoint.trace_path)
    ck = Checkpoint(ckdir / "checkpoint.npz" if ckdir else None, fp, every=o.checkpoint_every)
    run = run_chain(kernel, o.schedule, ck, say=say,
                    stop_after=None if checkpoint is None else checkpoint.stop_after)
    if run is None:
        return None
    acc, rows, kept = run.sums, run.rows, kernel.kept
    cnt = float(acc["count"])
    return {"D": (acc["d"] / cnt).astype(np.float32), "kept": np.asarray(kept, dtype=np.int64),
            "usage": (acc["usage"] / cnt).astype(np.float32),
            "x_next": (acc["x_next"] / cnt).astype(np.float32),
            "gamma_e": (acc["gamma_e"] / cnt).astype(np.float32),
            "gamma_w": np.float32(acc["gamma_w"] / cnt), "sweeps": o.sweeps,
            "seconds": float(sum(r["seconds"] for r in rows)), "trace": rows}
