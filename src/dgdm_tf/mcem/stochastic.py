"""Stochastic Monte Carlo EM training of the top-down model (supplement Algorithm 1),
the paper's route for ImageNet: every layer's dictionaries are point estimates,
learned from mini-batches, starting from the prior (no pretraining).

Iteration t, mini-batch I_t of B images out of N:

* E-step: the batch's local variables (the unpooling Z at every layer, S[L], theta, pi,
  gamma_e and the batch's gamma_s) by Gibbs with D fixed (:func:`e_step`); the last
  ``n_samples`` sweeps are the samples of eq. (ApproQ).
* M-step: RMSprop ascent (eq. UpdateD, decay alpha) on the sampled objective
      Qbar(D) = -(N / B) (1 / N_s) sum_s sum_n gamma_e^(n,s) / 2 ||X_n - g(S^(s)_n; D)||^2
                - 1/2 sum_l ||D[l]||^2,
  its gradient from the supplement's delta recursion (eq. UpdateDelta;
  :func:`grad_delta`), which :func:`grad_autodiff` checks (tests). The paper's
  ``+ D`` in dQ/dD is a sign slip: the prior term contributes ``- D``.

The D-independent parts of Q (the SVM's, the priors of the locals) do not enter the
gradient. ``N / B`` makes the mini-batch objective an unbiased estimate of the full-data
one, so the prior keeps its weight against N images.

Choices where the supplement is loose: gamma_s (one precision of the top layer in this
model, see :mod:`dgdm_tf.topdown.conditionals`) is drawn in the E-step from the batch's own top
units, as the paper draws its per-image gamma_s locally; each batch's chain starts from
the matched-filter state of :func:`dgdm_tf.topdown.conditionals.init_state` under the current D.
"""

from __future__ import annotations

import collections
import hashlib
import json
import time
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import tensorflow as tf

from dgdm_tf.io import atomic as atomic_io

from dgdm_tf.supervised import joint_svm as deep_svm

from dgdm_tf.mcem import svm_step as smcem_svm
from dgdm_tf.topdown import conditionals as G
from dgdm_tf.core.compiled import compiled
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
        s = tf.random.experimental.stateless_fold_in(tf.constant([seed, 0xD1C7], tf.int64), l)
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


def e_step(x, d, model: DeepModel, seed, *, sweeps: int, n_samples: int, gamma_s: float,
           sweep_fn=None) -> list:
    """``sweeps`` Gibbs sweeps of the batch's local variables with D fixed, from the
    matched-filter start; gamma_s redrawn from the batch after each; the last
    ``n_samples`` states are returned."""
    if not 1 <= n_samples <= sweeps:
        raise ValueError(f"need 1 <= n_samples <= sweeps, got {n_samples}, {sweeps}")
    seeds = tf.unstack(tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), 2))
    xt = tf.convert_to_tensor(x, tf.float32)
    st = G.init_state(xt, model, d, tf.cast(seeds[0], tf.int32), gamma_s_init=gamma_s)
    sweep_fn = sweep_fn or G.make_sweep_fn(model, update_globals=False)
    out = []
    for i in range(sweeps):
        st, _ = sweep_fn(st, xt)
        st = G.resample_gamma_s(st, xt, model, tf.random.experimental.stateless_fold_in(seeds[1], i))
        if i >= sweeps - n_samples:
            out.append(st)
    return out


def e_step_supervised(x, y, d, svm_g, model: DeepModel, seed, *, sweeps: int, n_samples: int,
                      gamma_s: float, svm_hyper, sweep_fn=None) -> tuple[list, list]:
    """:func:`e_step` of the supervised model: the top units see the SVM's terms
    (:func:`dgdm_tf.supervised.joint_svm.unit_terms`) and each image's lambda (C, B) is drawn after
    every sweep given beta (:mod:`dgdm_tf.mcem.svm_step`). ``model`` must be built with
    ``supervised=True``; y (C, B) targets in {-1, +1}. Returns (states, lambdas)."""
    if not 1 <= n_samples <= sweeps:
        raise ValueError(f"need 1 <= n_samples <= sweeps, got {n_samples}, {sweeps}")
    seeds = tf.unstack(tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), 3))
    xt, yt = tf.convert_to_tensor(x, tf.float32), tf.cast(y, tf.float64)
    st = G.init_state(xt, model, d, tf.cast(seeds[0], tf.int32), gamma_s_init=gamma_s)
    sweep_fn = sweep_fn or make_supervised_sweep_fn(model, svm_hyper)
    lam = smcem_svm.resample_lambda(svm_g, st.s_top, yt, svm_hyper, seeds[2])
    states, lams = [], []
    for i in range(sweeps):
        st, lam = sweep_fn(st, lam, svm_g.beta, svm_g.mean, svm_g.std, xt, yt)
        st = G.resample_gamma_s(st, xt, model, tf.random.experimental.stateless_fold_in(seeds[1], i))
        if i >= sweeps - n_samples:
            states.append(st)
            lams.append(lam)
    return states, lams


def make_supervised_sweep_fn(model: DeepModel, svm_hyper):
    """A compiled sweep of the batch's locals with D and beta fixed:
    f(state, lam, beta, mean, std, x, y) -> (state, lam)."""

    def f(st, lam, beta, mean, std, x, y):
        g = smcem_svm.SvmGlobals(beta=beta, mean=mean, std=std, updates=0)
        seeds = tf.unstack(tf.random.experimental.stateless_split(st.seed, 8))
        st = st._replace(seed=seeds[0])
        st = st._replace(resid=G.residual(st, x, model))
        terms = deep_svm.unit_terms(smcem_svm.as_state(g, lam), y,
                                    st.s_top.shape[1:], svm_hyper)
        st, _ = G.local_steps(st, x, model, seeds[1], seeds[2], svm_terms=terms)
        st, _ = G.global_steps(st, x, model, seeds, update_globals=False)
        lam = smcem_svm.resample_lambda(g, st.s_top, y, svm_hyper, G.fold_seed(seeds[4], 0x5F3))
        return st, lam

    return compiled(f, reduce_retracing=True)


_STRATEGIES: dict = {}


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

    fns = {sup: compiled(lambda *a, sup=sup: body(*a, supervised=sup),
                         jit_compile=False, reduce_retracing=True) for sup in (False, True)}

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


def array_batches(x: np.ndarray, y: np.ndarray | None, batch_size: int, seed: int):
    """``batches(start)`` over in-memory images: iteration t's mini-batch is a block of a
    seeded ``tf.data`` shuffle of the images (reshuffled every epoch)."""
    n, b = len(x), min(int(batch_size), len(x))
    per_epoch = -(-n // b)
    order = _batches(n, b, seed)

    def batches(start: int):
        t = int(start)
        while True:
            idx = np.sort(order(t // per_epoch)[(t % per_epoch) * b:(t % per_epoch) * b + b])
            yield t, x[idx], (None if y is None else y[idx])
            t += 1

    return batches


def run_mcem(x: np.ndarray, layers: Sequence[dict], *, seed: int, iterations: int,
             batch_size: int, y: np.ndarray | None = None, **kw) -> dict | None:
    """:func:`train` on in-memory images ``x`` (N, H, W, C) (labels ``y`` for the
    supervised model)."""
    x = np.asarray(x, np.float32)
    if x.ndim != 4:
        raise ValueError(f"x must be (N, H, W, C), got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("x holds NaN or Inf values; fix the data before training")
    b = min(int(batch_size), len(x))
    data_id = {"n": len(x), "shape": list(x.shape), "sum": float(np.sum(x, dtype=np.float64)),
               "labels": None if y is None else hashlib.sha256(np.asarray(y, np.int64).tobytes()).hexdigest()}
    return train(array_batches(x, y, b, seed), x.shape[1:], layers, n_total=len(x), seed=seed,
                 iterations=iterations, batch_size=b, data_id=data_id, **kw)


def train(batches: Callable, image_shape, layers: Sequence[dict], *, n_total: int, seed: int,
          iterations: int, batch_size: int, data_id: dict, sweeps: int = 3, n_samples: int = 1,
          lr: float = 1e-2, decay: float = 0.95, gamma_s: float = 1.0, hyper: dict | None = None,
          dictionaries: Sequence[np.ndarray] | None = None, prior_scale: float = 1.0,
          n_classes: int | None = None, svm: dict | None = None, jit_compile: bool = False,
          devices: Sequence[str] | None = None, checkpoint_dir=None, checkpoint_every: int = 50, trace_path=None,
          stop_after: int | None = None, scan: str = "random",
          progress: Callable[[str], None] | None = print) -> dict | None:
    """Algorithm 1: ``iterations`` mini-batches from ``batches(start)`` (an iterator of
    (t, x, y) from iteration ``start``; ``n_total`` images in all), each an E-step then one
    RMSprop step of every D. Starts from the prior (or from ``dictionaries``). ``scan``:
    the E-step sweeps' visiting order (:class:`DeepModel`), in the checkpoint's
    fingerprint.

    Supervised model: ``n_classes`` and ``svm`` = {'hyper': SvmHyper fields, 'start':
    the iteration supervision starts at (the top layer's standardisation is fixed from that
    batch's samples), 'step_power': beta's Robbins-Monro exponent}; beta then gets its
    closed-form M-step (:mod:`dgdm_tf.mcem.svm_step`) every iteration from ``start`` on.

    ``devices`` (e.g. every visible GPU): data parallel with
    ``tf.distribute.MirroredStrategy``: each device runs the E-step and the gradient of
    its equal share of the batch, the gradients are summed across devices (the prior's
    term counted once), then one RMSprop step and beta's step on the host
    (:func:`_replicated_step`). None: one device, the default one.

    Checkpoints (D, RMSprop state, beta, trace) atomically every ``checkpoint_every``
    iterations; a rerun with the same inputs resumes there and ends where an
    uninterrupted run ends. Returns {'D': [per layer], 'beta', 'mean', 'std' (None
    unsupervised), 'trace': [...], 'seconds'}; None when ``stop_after`` ended it early.
    """
    say = progress or (lambda _m: None)
    model = DeepModel(image_shape, layers, hyper, scan=scan)
    supervised = svm is not None
    if supervised and not n_classes:
        raise ValueError("the supervised model needs n_classes")
    svm_hyper = deep_svm.SvmHyper.from_dict((svm or {}).get("hyper"))
    svm_start = int((svm or {}).get("start", 0))
    step_power = float((svm or {}).get("step_power", 0.7))
    if supervised and not 0.5 < step_power <= 1.0:
        raise ValueError(f"beta's Robbins-Monro exponent must be in (0.5, 1], got {step_power}")
    model_sup = DeepModel(image_shape, layers, hyper, supervised=True, scan=scan) if supervised else None
    d = (tuple(tf.constant(np.asarray(v, np.float32)) for v in dictionaries) if dictionaries
         is not None else init_from_prior(model, seed, scale=prior_scale))
    state = McemState(d=d, v=tuple(tf.zeros_like(dl) for dl in d), step=0)
    g = None
    rows: list[dict] = []
    fp = json.dumps({"data": data_id, "layers": list(layers), "seed": seed, "batch": batch_size,
                     "sweeps": sweeps, "n_samples": n_samples, "lr": lr, "decay": decay,
                     "gamma_s": gamma_s, "prior_scale": prior_scale, "hyper": hyper,
                     "svm": svm, "n_classes": n_classes,
                     "start": None if dictionaries is None else
                     float(sum(np.sum(np.abs(v)) for v in dictionaries)),
                     # absent for the old sampler's order: its checkpoints still resume
                     **({"scan": scan} if scan != "fixed" else {})}, sort_keys=True,
                    default=str)
    ck = Path(checkpoint_dir) / "mcem_checkpoint.npz" if checkpoint_dir else None
    if ck is not None and ck.exists():
        with np.load(ck) as z:
            if str(z["fingerprint"]) == fp:
                state = McemState(d=tuple(tf.constant(z[f"d{l}"]) for l in range(model.n_layers)),
                                  v=tuple(tf.constant(z[f"v{l}"]) for l in range(model.n_layers)),
                                  step=int(z["step"]))
                if "beta" in z:
                    g = smcem_svm.SvmGlobals(beta=tf.constant(z["beta"]), mean=tf.constant(z["mean"]),
                                             std=tf.constant(z["std"]), updates=int(z["updates"]))
                rows = json.loads(str(z["trace"]))
                say(f"resuming stochastic MCEM at iteration {state.step}/{iterations} ({ck})")
            else:
                say(f"checkpoint {ck} is from other inputs or settings; starting afresh")
    sweep_fn = G.make_sweep_fn(model, update_globals=False)
    sup_fn = make_supervised_sweep_fn(model_sup, svm_hyper) if supervised else None
    grad_fn = compiled(lambda dd, smp, xb: grad_delta(dd, smp, xb, model, n_total, with_q=True),
                       reduce_retracing=True, jit_compile=bool(jit_compile))
    replicated = None
    if devices:
        replicated = _replicated_step(
            _strategy(devices), model, model_sup, n_total=n_total,
            batch_size=batch_size, sweeps=sweeps, n_samples=n_samples, gamma_s=gamma_s,
            svm_hyper=svm_hyper, jit_compile=bool(jit_compile))
        say(f"stochastic MCEM data-parallel over {len(devices)} device(s): {list(devices)}")
    t_start, seen = time.time(), 0
    stream = batches(state.step) if state.step < iterations else iter(())
    for t, xb, yb in stream:
        if t >= iterations:
            break
        t0 = time.time()
        seed_t = tf.random.experimental.stateless_fold_in(tf.constant([seed, 0x5C3], tf.int64), t)
        if supervised and t == svm_start and g is None:
            # the standardisation is fixed from this batch's unsupervised samples, then held
            warm = e_step(xb, state.d, model, tf.random.experimental.stateless_fold_in(seed_t, 1),
                          sweeps=sweeps, n_samples=n_samples, gamma_s=gamma_s, sweep_fn=sweep_fn)
            mean, std = deep_svm.standardisation(tf.concat([s.s_top for s in warm], 0),
                                                 scale=svm_hyper.scale)
            g = smcem_svm.init(int(n_classes), mean, std)
        yt = deep_svm.targets(yb, int(n_classes)) if g is not None else None
        if replicated is not None:
            grads, q, stats, lams, s_tops = replicated(state.d, xb, yt, g, seed_t)
        else:
            if g is not None:
                samples, lams = e_step_supervised(xb, yt, state.d, g, model_sup, seed_t,
                                                  sweeps=sweeps, n_samples=n_samples,
                                                  gamma_s=gamma_s, svm_hyper=svm_hyper,
                                                  sweep_fn=sup_fn)
            else:
                samples = e_step(xb, state.d, model, seed_t, sweeps=sweeps, n_samples=n_samples,
                                 gamma_s=gamma_s, sweep_fn=sweep_fn)
            grads, q = grad_fn(state.d, samples, tf.constant(xb))
            s_tops = [smp.s_top for smp in samples]
            stats = _last_sample_stats(samples[-1], xb)
        d, v = rmsprop(state.d, state.v, grads, lr=lr, decay=decay)
        for l, dl in enumerate(d):
            if not np.all(np.isfinite(dl.numpy())):
                raise FloatingPointError(f"D[{l + 1}] is not finite after MCEM iteration {t + 1}; "
                                         f"lower the RMSprop step (lr = {lr})")
        row_extra = {}
        if g is not None:
            g = smcem_svm.update_beta(g, lams, s_tops, yt, svm_hyper,
                                      n_total=n_total, step_power=step_power)
            marg = deep_svm.margins(smcem_svm.as_state(g, lams[-1]), s_tops[-1])
            row_extra["train_error"] = float(np.mean(np.argmax(marg.numpy(), 1) != np.asarray(yb)))
        state = McemState(d=d, v=v, step=t + 1)
        seen += len(xb)
        rows.append({"iteration": t + 1, "q": float(q), **stats,
                     "train_error": row_extra.get("train_error", float("nan")),
                     "seconds": time.time() - t0})
        if (t + 1) % max(1, iterations // 20) == 0 or t + 1 == iterations:
            say(f"MCEM iteration {t + 1}/{iterations}: Qbar {rows[-1]['q']:.6g} rel.resid "
                f"{rows[-1]['rel_residual']:.4f} batch train error {rows[-1]['train_error']:.3f} "
                f"({seen / max(time.time() - t_start, 1e-9):.1f} images/s)")
        if trace_path:
            _write_trace(trace_path, rows)
        if ck is not None and ((t + 1) % checkpoint_every == 0 or t + 1 == iterations):
            extra = {} if g is None else {"beta": np.asarray(g.beta), "mean": np.asarray(g.mean),
                                          "std": np.asarray(g.std), "updates": np.array(g.updates)}
            atomic_io.save_npz(ck, compressed=False, fingerprint=np.array(fp), step=np.array(t + 1),
                               trace=np.array(json.dumps(rows)), **extra,
                               **{f"d{l}": np.asarray(dl) for l, dl in enumerate(state.d)},
                               **{f"v{l}": np.asarray(vl) for l, vl in enumerate(state.v)})
        if stop_after is not None and t + 1 >= stop_after and t + 1 < iterations:
            return None
    return {"D": [np.asarray(dl) for dl in state.d], "trace": rows,
            "beta": None if g is None else np.asarray(g.beta),
            "mean": None if g is None else np.asarray(g.mean),
            "std": None if g is None else np.asarray(g.std),
            "seconds": float(sum(r["seconds"] for r in rows))}


def _batches(n: int, b: int, seed: int) -> Callable[[int], np.ndarray]:
    """Epoch e's image order: a seeded tf.data shuffle of range(n) (same seed, same order)."""
    cache: dict[int, np.ndarray] = {}

    def order(epoch: int) -> np.ndarray:
        if epoch not in cache:
            ds = tf.data.Dataset.range(n).shuffle(n, seed=int(seed) * 100003 + epoch,
                                                  reshuffle_each_iteration=False)
            cache[epoch] = np.fromiter(ds.as_numpy_iterator(), np.int64, count=n)
        return cache[epoch]

    return order


def _write_trace(path, rows: list[dict]) -> None:
    cols = list(rows[0])
    text = "\t".join(cols) + "\n" + "".join(
        "\t".join(f"{r[c]:.6g}" if isinstance(r[c], float) else str(r[c]) for c in cols) + "\n"
        for r in rows)
    with atomic_io.atomic_path(path) as tmp:
        Path(tmp).write_text(text)
