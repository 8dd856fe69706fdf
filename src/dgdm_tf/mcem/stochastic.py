"""Stochastic Monte Carlo EM training of the top-down model (supplement Algorithm 1),
the paper's route for ImageNet: every layer's dictionaries are point estimates,
learned from mini-batches, starting from the prior (no pretraining).

Iteration t, mini-batch I_t of B images out of N:

* E-step: the batch's local variables (the unpooling Z at every layer, S[L], theta, pi,
  gamma_e and the batch's gamma_s) by Gibbs with D fixed (:func:`dgdm_tf.mcem.estep.e_step`);
  the last ``n_samples`` sweeps are the samples of eq. (ApproQ).
* M-step: RMSprop ascent (eq. UpdateD, decay alpha) on the sampled objective
      Qbar(D) = -(N / B) (1 / N_s) sum_s sum_n gamma_e^(n,s) / 2 ||X_n - g(S^(s)_n; D)||^2
                - 1/2 sum_l ||D[l]||^2,
  its gradient from the supplement's delta recursion (eq. UpdateDelta;
  :func:`grad_delta`), which :func:`grad_autodiff` checks (tests). The paper's
  ``+ D`` in dQ/dD is a sign slip: the prior term contributes ``- D``.

The D-independent parts of Q (the SVM's, the priors of the locals) do not enter the
gradient. ``N / B`` makes the mini-batch objective an unbiased estimate of the full-data
one, so the prior keeps its weight against N images.

Choices where the supplement is loose: gamma_s (per image and top map by Eq. SampleR,
or one for the top layer, ``Hyper.gamma_s``; :mod:`dgdm_tf.topdown.conjugate`) is drawn in
the E-step from the batch's own top units; each batch's chain starts from the
matched-filter state of :func:`dgdm_tf.topdown.state.init_state` under the current D.
"""

from __future__ import annotations

import collections
import json
import time
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import tensorflow as tf

from dgdm_tf.core import random
from dgdm_tf.data.minibatches import ArrayData
from dgdm_tf.io import atomic as atomic_io
from dgdm_tf.supervised import joint_svm as deep_svm
from dgdm_tf.mcem import svm_step as smcem_svm
from dgdm_tf.mcem.estep import e_step, e_step_supervised, make_supervised_sweep_fn
from dgdm_tf.mcem.local_store import LocalStore
from dgdm_tf.mcem.options import McemOptions, McemStart
from dgdm_tf.mcmc.checkpoint import Checkpoint, CheckpointDir, CheckpointMismatch, fit
from dgdm_tf.mcmc.driver import Kernel, Schedule, run_chain
from dgdm_tf.topdown.sweep import make_sweep_fn
from dgdm_tf.core.compiled import cached_builder, compiled
from dgdm_tf.core.model import DeepModel, dense_indicators, layer_inputs, unpool_blocks
from dgdm_tf.core.ops import full_conv_adjoint

McemState = collections.namedtuple("McemState", ["d", "v", "step"])
McemState.__doc__ = """d: tuple of the dictionaries (one per layer); v: RMSprop's running
mean square of each layer's gradient; step: iterations done (iteration t's draws are
seeded by fold-in of t into the run's seed)."""


def init_from_prior(model: DeepModel, seed: int, *, scale: float = 1.0) -> tuple:
    """D[l] ~ N(0, 1 / dict_prior_precision) (times ``scale``), seeded."""
    sd = scale / np.sqrt(model.hyper.dict_prior_precision)
    out = []
    for l, g in enumerate(model.geoms):
        s = random.fold(random.salted(seed, "mcem_init"), l)
        out.append(sd * tf.random.stateless_normal((g.dh, g.dw, g.c, g.k), s))
    return tuple(out)


def _layer_s(samples, model: DeepModel, d):
    """Per sample: (S[0], ..., S[L-1]) (each layer's coefficient maps) and X[0]."""
    out = []
    for st in samples:
        zd = [dense_indicators(z, g) for z, g in zip(st.z, model.geoms[:-1])]
        xs = layer_inputs(st.s_top, model, d, zd)
        s = [unpool_blocks(xs[l + 1], zd[l], model.geoms[l].p) for l in range(model.n_layers - 1)]
        out.append((s + [st.s_top], xs[0], zd))
    return out


def sampled_q(d, samples, x, model: DeepModel, n_total: int) -> tf.Tensor:
    """Qbar(D) of eq. (ApproQ) up to D-independent terms, for one mini-batch."""
    x = tf.convert_to_tensor(x, tf.float32)
    scale = float(n_total) / tf.cast(tf.shape(x)[0], tf.float32) / len(samples)
    q = 0.0
    for st, (_, rec, _) in zip(samples, _layer_s(samples, model, d)):
        sq = tf.reduce_sum(tf.square(x - rec), axis=[1, 2, 3])
        q += -0.5 * scale * tf.reduce_sum(st.gamma_e * sq)
    prior = model.hyper.dict_prior_precision
    return q - 0.5 * prior * tf.add_n([tf.reduce_sum(tf.square(dl)) for dl in d])


def grad_autodiff(d, samples, x, model: DeepModel, n_total: int) -> list:
    """dQbar/dD[l] by TensorFlow's autodiff (the reference for :func:`grad_delta`)."""
    d = [tf.convert_to_tensor(v) for v in d]
    with tf.GradientTape() as tape:
        tape.watch(d)
        q = sampled_q(d, samples, x, model, n_total)
    return tape.gradient(q, d)


def _correlate(delta, s, dh: int, dw: int) -> tf.Tensor:
    """G[t, u, c, k] = sum_{n, i, j} delta[n, i + t, j + u, c] S[n, i, j, k]: the gradient
    of <delta, full_conv(S, D)> wrt D."""
    c = delta.shape[-1]
    patches = tf.image.extract_patches(delta, sizes=[1, dh, dw, 1], strides=[1, 1, 1, 1],
                                       rates=[1, 1, 1, 1], padding="VALID")  # N, hs, ws, dh*dw*C
    g = tf.einsum("nijp,nijk->pk", patches, s)
    return tf.reshape(g, [dh, dw, c, -1])


def grad_delta(d, samples, x, model: DeepModel, n_total: int, *, with_q: bool = False):
    """dQbar/dD[l] by the supplement's delta recursion (eq. UpdateDelta):
    delta[0] = gamma_e (X - X0), delta[l+1] = pool(Z[l] o (delta[l] (*) D[l])) (the
    correlation pulled back through the unpooling), dQ/dD[l] = delta[l] (*) S[l] - D[l].
    With ``with_q`` returns (grads, Qbar), Qbar from the same reconstructions."""
    x = tf.convert_to_tensor(x, tf.float32)
    scale = float(n_total) / tf.cast(tf.shape(x)[0], tf.float32) / len(samples)
    grads = [tf.zeros_like(dl) for dl in d]
    q = 0.0
    for st, (s, rec, zd) in zip(samples, _layer_s(samples, model, d)):
        r = x - rec
        q += -0.5 * scale * tf.reduce_sum(st.gamma_e * tf.reduce_sum(tf.square(r), axis=[1, 2, 3]))
        delta = scale * st.gamma_e[:, None, None, None] * r
        for l, g in enumerate(model.geoms):
            grads[l] += _correlate(delta, s[l], g.dh, g.dw)
            if l + 1 < model.n_layers:
                back = full_conv_adjoint(delta, d[l]) * zd[l]  # dQ/dS[l]
                delta = _pool_to(back, g.p, g.nbh, g.nbw)
    prior = model.hyper.dict_prior_precision
    grads = [gl - prior * dl for gl, dl in zip(grads, d)]
    if not with_q:
        return grads
    return grads, q - 0.5 * prior * tf.add_n([tf.reduce_sum(tf.square(dl)) for dl in d])


def _pool_to(s, p: int, h: int, w: int) -> tf.Tensor:
    """Block sums of S over p x p blocks, as a (N, h, w, K) map (the adjoint of unpooling)."""
    n, hs, ws, k = s.shape
    s = tf.pad(s, [[0, 0], [0, h * p - hs], [0, w * p - ws], [0, 0]])
    return tf.reduce_sum(tf.reshape(s, [-1, h, p, w, p, k]), axis=[2, 4])


def rmsprop(d, v, grads, *, lr: float, decay: float, eps: float = 1e-8):
    """Eq. (UpdateD): v = alpha v + (1 - alpha) g^2, D = D + lr g / sqrt(v)."""
    v = tuple(decay * vl + (1.0 - decay) * tf.square(gl) for vl, gl in zip(v, grads))
    d = tuple(dl + lr * gl / (tf.sqrt(vl) + eps) for dl, gl, vl in zip(d, grads, v))
    return d, v


_STRATEGIES: dict = {}


@cached_builder()
def make_grad_fn(model: DeepModel, n_total: int, jit_compile: bool = False):
    """A compiled ``f(d, samples, x) -> (grads, Qbar)``: :func:`grad_delta` with ``with_q``."""
    return compiled(lambda d, samples, x: grad_delta(d, samples, x, model, n_total, with_q=True),
                    reduce_retracing=True, jit_compile=jit_compile)


def _strategy(devices) -> tf.distribute.MirroredStrategy:
    """One MirroredStrategy per device set for the whole process: strategies made anew
    for every run number their collective ops from the same keys, and a second run's
    ops then meet the first's."""
    key = tuple(devices)
    if key not in _STRATEGIES:
        _STRATEGIES[key] = tf.distribute.MirroredStrategy(list(key))
    return _STRATEGIES[key]


def _last_sample_stats(st, xb) -> dict:
    """The trace's per-iteration figures from the E-step's last sample."""
    return {"rel_residual": float(np.linalg.norm(st.resid) / np.linalg.norm(xb)),
            "gamma_e": float(np.mean(st.gamma_e)), "active_top": float(np.mean(st.on))}


@cached_builder()
def _make_replica_body(model: DeepModel, model_sup, devices: tuple, *, n_total: int, share: int,
                       sweeps: int, n_samples: int, gamma_s: float, svm_hyper, supervised: bool):
    """The compiled per-replica part of :func:`_replicated_step`'s iteration
    ``f(d, xr, yr, seed_r, beta, mean, std)``, shared by every chain on the same devices
    (``devices`` keys it: a trace runs on the strategy's devices)."""
    r_count = len(devices)

    def body(d, xr, yr, seed_r, beta, mean, std, supervised: bool):
        if supervised:
            g = smcem_svm.SvmGlobals(beta=beta, mean=mean, std=std, updates=0)
            states, lams = e_step_supervised(xr, yr, d, g, model_sup, seed_r, sweeps=sweeps,
                                             n_samples=n_samples, gamma_s=gamma_s,
                                             svm_hyper=svm_hyper)
        else:
            states = e_step(xr, d, model, seed_r, sweeps=sweeps, n_samples=n_samples,
                            gamma_s=gamma_s)
            lams = [tf.zeros([0, share], tf.float64)] * len(states)
        grads, q = grad_delta(d, states, xr, model, n_total / r_count, with_q=True)
        last = states[-1]
        stats = tf.stack([tf.reduce_sum(tf.square(last.resid)), tf.reduce_sum(tf.square(xr)),
                          tf.reduce_sum(last.gamma_e), tf.reduce_sum(last.on),
                          tf.cast(tf.size(last.on), tf.float32)])
        return (tuple(grads), q, stats, tf.stack(lams), tf.stack([st.s_top for st in states]))

    return compiled(lambda *a: body(*a, supervised=supervised), jit_compile=False,
                    reduce_retracing=True)


def _replicated_step(strategy, model: DeepModel, model_sup, *, n_total: int, batch_size: int,
                     sweeps: int, n_samples: int, gamma_s: float, svm_hyper, jit_compile: bool):
    """f(d, xb, yt, svm_globals | None, seed) -> (grads, Qbar, stats, lams, s_tops) of one
    iteration, the batch split evenly over the strategy's replicas. Replica r draws its
    share's locals from seed fold-in(seed, r); its delta-recursion gradient scales its
    share's likelihood by N / B (so the sum over replicas is the whole batch's) and
    subtracts the prior's D once per replica, which the sum corrects to once."""
    r_count = strategy.num_replicas_in_sync
    if batch_size % r_count:
        raise ValueError(f"mcem batch_size {batch_size} must be a multiple of the "
                         f"{r_count} devices (each gets an equal share)")
    share = batch_size // r_count
    prior = model.hyper.dict_prior_precision
    SUM = tf.distribute.ReduceOp.SUM
    devices = tuple(str(d) for d in strategy.extended.worker_devices)
    fns = {sup: _make_replica_body(model, model_sup, devices, n_total=n_total, share=share,
                                   sweeps=sweeps, n_samples=n_samples, gamma_s=gamma_s,
                                   svm_hyper=svm_hyper, supervised=sup) for sup in (False, True)}

    def step(d, xb, yt, g, seed):
        xb = np.asarray(xb, np.float32)
        yt = tf.zeros([0, batch_size], tf.float64) if yt is None else tf.cast(yt, tf.float64)
        parts = strategy.experimental_distribute_values_from_function(
            lambda ctx: (tf.constant(xb[ctx.replica_id_in_sync_group * share:
                                        (ctx.replica_id_in_sync_group + 1) * share]),
                         yt[:, ctx.replica_id_in_sync_group * share:
                            (ctx.replica_id_in_sync_group + 1) * share],
                         tf.random.experimental.stateless_fold_in(
                             tf.cast(seed, tf.int64), ctx.replica_id_in_sync_group)))
        beta, mean, std = ((g.beta, g.mean, g.std) if g is not None else
                           (tf.zeros([1, 1], tf.float64), tf.zeros([0]), tf.ones([0])))
        out = strategy.run(lambda p: fns[g is not None](tuple(d), p[0], p[1], p[2], beta, mean, std),
                           args=(parts,))
        grads, q, stats, lams, s_tops = out
        grads = [strategy.reduce(SUM, gl, axis=None) + (r_count - 1) * prior * dl
                 for gl, dl in zip(grads, d)]
        q = strategy.reduce(SUM, q, axis=None) + (r_count - 1) * 0.5 * prior * tf.add_n(
            [tf.reduce_sum(tf.square(dl)) for dl in d])
        st = strategy.reduce(SUM, stats, axis=None).numpy()
        stats = {"rel_residual": float(np.sqrt(st[0] / st[1])),
                 "gamma_e": float(st[2] / batch_size), "active_top": float(st[3] / st[4])}
        lams = tf.unstack(strategy.gather(lams, axis=2)) if g is not None else None
        s_tops = tf.unstack(strategy.gather(s_tops, axis=1))
        return grads, q, stats, lams, s_tops

    return step


def run_mcem(x: np.ndarray, start: McemStart, options: McemOptions, *, seed: int,
             y: np.ndarray | None = None, devices: Sequence[str] | None = None,
             checkpoint: CheckpointDir | None = None,
             progress: Callable[[str], None] | None = print) -> dict | None:
    """:func:`train` on in-memory images ``x`` (N, H, W, C) in mini-batches of
    ``options.batch_size`` (at most N; :class:`dgdm_tf.data.minibatches.ArrayData`, seeded
    by ``seed``); with labels ``y`` the supervised model."""
    x = np.asarray(x, np.float32)
    if x.ndim != 4:
        raise ValueError(f"x must be (N, H, W, C), got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("x holds NaN or Inf values; fix the data before training")
    return train(ArrayData(x, y, options.batch_size, seed), start, options, seed=seed,
                 devices=devices, checkpoint=checkpoint, progress=progress)


def train(data, start: McemStart, options: McemOptions, *, seed: int,
          devices: Sequence[str] | None = None, checkpoint: CheckpointDir | None = None,
          progress: Callable[[str], None] | None = print) -> dict | None:
    """Algorithm 1: ``options.iterations`` mini-batches from ``data``
    (:class:`dgdm_tf.data.minibatches.McemData` or :class:`~dgdm_tf.data.minibatches.ArrayData`:
    ``batches(start)`` an iterator of (t, x, y) from iteration ``start``, of
    ``batch_size`` images of ``image_shape``, ``n_total`` in all, ``n_classes``, and
    ``data_id``, what a checkpoint is for), each an E-step then one RMSprop step of every
    D, with the settings ``options`` (:class:`dgdm_tf.mcem.options.McemOptions`, config
    block `mcem`). Starts from ``start.dictionaries`` (None: from the prior). ``scan``:
    the E-step sweeps' visiting order (:class:`DeepModel`), in the checkpoint's
    fingerprint.

    Supervised model (``data.n_classes`` not None: the batches have labels): the SVM
    (``svm``'s settings) enters at iteration ``supervise_from`` (the top layer's
    standardisation is fixed from that batch's samples); beta then gets its closed-form
    M-step (:mod:`dgdm_tf.mcem.svm_step`) every iteration, its step (1 + t)^-``beta_step_power``.

    ``local_state`` persist (in-memory ``data`` with ``batch_indices(t)``, one device):
    each image's E-step starts from its last visit's state (:mod:`dgdm_tf.mcem.local_store`),
    which the checkpoint keeps; restart: from the matched filter at every visit.

    ``devices`` (e.g. every visible GPU): data parallel with
    ``tf.distribute.MirroredStrategy``: each device runs the E-step and the gradient of
    its equal share of the batch, the gradients are summed across devices (the prior's
    term counted once), then one RMSprop step and beta's step on the host
    (:func:`_replicated_step`). None: one device, the default one.

    ``checkpoint`` (:class:`dgdm_tf.mcmc.checkpoint.CheckpointDir`): D, RMSprop state, beta
    saved atomically to its folder (mcem_checkpoint.npz) every ``checkpoint_every``
    iterations, the trace written live to its ``trace_path``; a rerun with the same
    inputs resumes there and ends where an uninterrupted run ends
    (:func:`dgdm_tf.mcmc.driver.run_chain` runs :class:`McemKernel`). Returns {'D': [per
    layer], 'beta', 'mean', 'std' (None unsupervised), 'trace': [...], 'seconds'}; None
    when ``checkpoint.stop_after`` ended it early.
    """
    o, layers, hyper, dictionaries = options, start.model_layers, start.hyper, start.dictionaries
    say = progress or (lambda _m: None)
    image_shape, n_total, batch_size = tuple(data.image_shape), int(data.n_total), int(data.batch_size)
    n_classes = data.n_classes
    supervised = n_classes is not None
    iterations, sweeps, n_samples = int(o.iterations), int(o.sweeps), int(o.n_samples)
    lr, decay, gamma_s = float(o.lr), float(o.decay), float(o.gamma_s)
    prior_scale, scan = float(o.prior_scale), o.scan
    svm_hyper, step_power = o.svm_hyper, float(o.beta_step_power)
    svm = ({"hyper": dict(o.svm), "start": int(o.supervise_from), "step_power": step_power}
           if supervised else None)
    persist = o.local_state == "persist"
    if persist and devices:
        raise ValueError("mcem.local_state: persist runs on one device; set distribute: false "
                         "or local_state: restart")
    if persist and not hasattr(data, "batch_indices"):
        raise ValueError("mcem.local_state: persist keeps each image's locals between epochs and "
                         "needs in-memory images (ArrayData); a streamed data set takes restart")
    model = DeepModel(image_shape, layers, hyper, scan=scan)
    model_sup = DeepModel(image_shape, layers, hyper, supervised=True, scan=scan) if supervised else None
    fp = json.dumps({"data": data.data_id, "layers": list(layers), "seed": seed, "batch": batch_size,
                     "sweeps": sweeps, "n_samples": n_samples, "lr": lr, "decay": decay,
                     "gamma_s": gamma_s, "prior_scale": prior_scale, "hyper": hyper,
                     "svm": svm, "n_classes": n_classes,
                     "start": None if dictionaries is None else
                     float(sum(np.sum(np.abs(v)) for v in dictionaries)),
                     # absent for the old sampler's order and for restart: their
                     # checkpoints still resume
                     **({"scan": scan} if scan != "fixed" else {}),
                     **({"local_state": "persist"} if persist else {})}, sort_keys=True,
                    default=str)
    kernel = McemKernel(
        data.batches, model, model_sup, iterations=iterations, n_total=n_total, seed=seed,
        batch_size=batch_size, sweeps=sweeps, n_samples=n_samples, lr=lr, decay=decay,
        gamma_s=gamma_s, dictionaries=dictionaries, prior_scale=prior_scale,
        n_classes=n_classes, svm_hyper=svm_hyper, svm_start=int(o.supervise_from) if supervised else 0,
        step_power=step_power, jit_compile=bool(o.jit_compile), devices=devices,
        indices=data.batch_indices if persist else None,
        trace_path=None if checkpoint is None else checkpoint.trace_path, say=say)
    ck = Checkpoint(None if checkpoint is None else Path(checkpoint.dir) / "mcem_checkpoint.npz", fp,
                    every=int(o.checkpoint_every), step_key="step",
                    resumed="resuming stochastic MCEM at iteration {done}/{total} ({path})",
                    stale="checkpoint {path} is from other inputs or settings; starting afresh")
    run = run_chain(kernel, Schedule.steps(iterations), ck, say=say,
                    stop_after=None if checkpoint is None else checkpoint.stop_after)
    if run is None:
        return None
    (state, g), rows = run.state, run.rows
    return {"D": [np.asarray(dl) for dl in state.d], "trace": rows,
            "beta": None if g is None else np.asarray(g.beta),
            "mean": None if g is None else np.asarray(g.mean),
            "std": None if g is None else np.asarray(g.std),
            "seconds": float(sum(r["seconds"] for r in rows))}


class McemKernel(Kernel):
    """One iteration of Algorithm 1 for :func:`dgdm_tf.mcmc.driver.run_chain` (the
    arguments of :func:`train`). State: (:class:`McemState`, the SVM's globals or None
    before supervision starts); step t takes iteration t's mini-batch from the stream
    ``batches(done)`` that :meth:`begin` opens. With ``indices`` (iteration t's image
    indices) each image's locals persist between visits in ``self.store``
    (:class:`dgdm_tf.mcem.local_store.LocalStore`, saved with the checkpoint)."""

    def __init__(self, batches: Callable, model: DeepModel, model_sup: DeepModel | None, *,
                 iterations, n_total, seed, batch_size, sweeps, n_samples, lr, decay, gamma_s,
                 dictionaries, prior_scale, n_classes, svm_hyper, svm_start, step_power,
                 jit_compile, devices, trace_path, say, indices=None):
        self.batches, self.model, self.model_sup = batches, model, model_sup
        self.iterations, self.n_total, self.seed, self.batch_size = iterations, n_total, seed, batch_size
        self.sweeps, self.n_samples, self.lr, self.decay = sweeps, n_samples, lr, decay
        self.gamma_s, self.dictionaries, self.prior_scale = gamma_s, dictionaries, prior_scale
        self.n_classes, self.svm_hyper, self.svm_start = n_classes, svm_hyper, svm_start
        self.step_power, self.jit_compile, self.devices = step_power, jit_compile, devices
        self.trace_path, self.say = trace_path, say
        self.indices, self.store = indices, None

    def start(self):
        self.store = LocalStore(self.n_total) if self.indices is not None else None
        d = (tuple(tf.constant(np.asarray(v, np.float32)) for v in self.dictionaries)
             if self.dictionaries is not None
             else init_from_prior(self.model, self.seed, scale=self.prior_scale))
        return McemState(d=d, v=tuple(tf.zeros_like(dl) for dl in d), step=0), None

    def restore(self, z):
        layers = range(self.model.n_layers)
        fit(z, {f"{v}{l}": ((g.dh, g.dw, g.c, g.k), np.float32)
                for l, g in enumerate(self.model.geoms) for v in "dv"})
        state = McemState(d=tuple(tf.constant(z[f"d{l}"]) for l in layers),
                          v=tuple(tf.constant(z[f"v{l}"]) for l in layers), step=int(z["step"]))
        if self.indices is not None:
            try:
                self.store = LocalStore.load(z, self.n_total)
            except ValueError as e:
                raise CheckpointMismatch(str(e)) from e
        g = None
        if "beta" in z:
            g = smcem_svm.SvmGlobals(beta=tf.constant(z["beta"]), mean=tf.constant(z["mean"]),
                                     std=tf.constant(z["std"]), updates=int(z["updates"]))
        return state, g

    def arrays(self, state):
        state, g = state
        extra = {} if g is None else {"beta": np.asarray(g.beta), "mean": np.asarray(g.mean),
                                      "std": np.asarray(g.std), "updates": np.array(g.updates)}
        local = {} if self.store is None else self.store.arrays()
        return {**extra, **local, **{f"d{l}": np.asarray(dl) for l, dl in enumerate(state.d)},
                **{f"v{l}": np.asarray(vl) for l, vl in enumerate(state.v)}}

    def begin(self, state, done):
        model, model_sup = self.model, self.model_sup
        self.sweep_fn = make_sweep_fn(model, update_globals=False)
        self.sup_fn = make_supervised_sweep_fn(model_sup, self.svm_hyper) if model_sup else None
        self.grad_fn = make_grad_fn(model, self.n_total, bool(self.jit_compile))
        self.replicated = None
        if self.devices:
            self.replicated = _replicated_step(
                _strategy(self.devices), model, model_sup, n_total=self.n_total,
                batch_size=self.batch_size, sweeps=self.sweeps, n_samples=self.n_samples,
                gamma_s=self.gamma_s, svm_hyper=self.svm_hyper, jit_compile=bool(self.jit_compile))
            self.say(f"stochastic MCEM data-parallel over {len(self.devices)} device(s): "
                     f"{list(self.devices)}")
        self.t_start, self.seen = time.time(), 0
        # array_batches and the ImageNet stream never end: run_chain takes `iterations` steps
        self.stream = self.batches(done) if done < self.iterations else iter(())

    def step(self, state, at):
        (state, g), t = state, at.t
        t_batch, xb, yb = next(self.stream, (None, None, None))
        if t_batch is None:
            raise RuntimeError(f"the mini-batch stream ended before MCEM iteration {t + 1}")
        assert t_batch == t, f"the stream gave iteration {t_batch}'s batch for iteration {t}"
        t0 = time.time()
        model, sweeps, n_samples, gamma_s = self.model, self.sweeps, self.n_samples, self.gamma_s
        seed_t = random.fold(random.salted(self.seed, "mcem_iteration"), t)
        if self.model_sup is not None and t == self.svm_start and g is None:
            # the standardisation is fixed from this batch's unsupervised samples, then held
            warm = e_step(xb, state.d, model, tf.random.experimental.stateless_fold_in(seed_t, 1),
                          sweeps=sweeps, n_samples=n_samples, gamma_s=gamma_s, sweep_fn=self.sweep_fn)
            mean, std = deep_svm.standardisation(tf.concat([s.s_top for s in warm], 0),
                                                 scale=self.svm_hyper.scale)
            g = smcem_svm.init(int(self.n_classes), mean, std)
        yt = deep_svm.targets(yb, int(self.n_classes)) if g is not None else None
        resume = None
        if self.store is not None:
            idx = self.indices(t)
            resume = lambda fresh: self.store.merge(fresh, idx, xb, model)  # noqa: E731
        if self.replicated is not None:
            grads, q, stats, lams, s_tops = self.replicated(state.d, xb, yt, g, seed_t)
        else:
            if g is not None:
                samples, lams = e_step_supervised(xb, yt, state.d, g, self.model_sup, seed_t,
                                                  sweeps=sweeps, n_samples=n_samples,
                                                  gamma_s=gamma_s, svm_hyper=self.svm_hyper,
                                                  sweep_fn=self.sup_fn, resume=resume)
            else:
                samples = e_step(xb, state.d, model, seed_t, sweeps=sweeps, n_samples=n_samples,
                                 gamma_s=gamma_s, sweep_fn=self.sweep_fn, resume=resume)
            if self.store is not None:
                self.store.keep(samples[-1], idx)  # the image's next visit starts here
            grads, q = self.grad_fn(state.d, samples, tf.constant(xb))
            s_tops = [smp.s_top for smp in samples]
            stats = _last_sample_stats(samples[-1], xb)
        d, v = rmsprop(state.d, state.v, grads, lr=self.lr, decay=self.decay)
        for l, dl in enumerate(d):
            if not np.all(np.isfinite(dl.numpy())):
                raise FloatingPointError(f"D[{l + 1}] is not finite after MCEM iteration {t + 1}; "
                                         f"lower the RMSprop step (lr = {self.lr})")
        train_error = float("nan")
        if g is not None:
            g = smcem_svm.update_beta(g, lams, s_tops, yt, self.svm_hyper,
                                      n_total=self.n_total, step_power=self.step_power)
            marg = deep_svm.margins(smcem_svm.as_state(g, lams[-1]), s_tops[-1])
            train_error = float(np.mean(np.argmax(marg.numpy(), 1) != np.asarray(yb)))
        self.seen += len(xb)
        row = {"iteration": t + 1, "q": float(q), **stats, "train_error": train_error,
               "seconds": time.time() - t0}
        return (McemState(d=d, v=v, step=t + 1), g), row, None

    def report(self, rows, at, sec_per_step):
        row, total = rows[-1], at.total
        if row["iteration"] % max(1, total // 20) == 0 or row["iteration"] == total:
            self.say(f"MCEM iteration {row['iteration']}/{total}: Qbar {row['q']:.6g} rel.resid "
                     f"{row['rel_residual']:.4f} batch train error {row['train_error']:.3f} "
                     f"({self.seen / max(time.time() - self.t_start, 1e-9):.1f} images/s)")
        if self.trace_path:
            _write_trace(self.trace_path, rows)


def _write_trace(path, rows: list[dict]) -> None:
    cols = list(rows[0])
    text = "\t".join(cols) + "\n" + "".join(
        "\t".join(f"{r[c]:.6g}" if isinstance(r[c], float) else str(r[c]) for c in cols) + "\n"
        for r in rows)
    with atomic_io.atomic_path(path) as tmp:
        Path(tmp).write_text(text)
