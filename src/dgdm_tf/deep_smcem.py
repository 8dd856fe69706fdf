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
model, see :mod:`dgdm_tf.deep_gibbs`) is drawn in the E-step from the batch's own top
units, as the paper draws its per-image gamma_s locally; each batch's chain starts from
the matched-filter state of :func:`dgdm_tf.deep_gibbs.init_state` under the current D.
"""

from __future__ import annotations

import collections
import json
import time
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import tensorflow as tf

from dgdm_tf import atomic_io
from dgdm_tf import deep_gibbs as G
from dgdm_tf.deep_model import DeepModel, dense_indicators, layer_inputs, unpool_blocks
from dgdm_tf.ops import full_conv_adjoint

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
    st = G.init_state(x, model, d, tf.cast(seeds[0], tf.int32), gamma_s_init=gamma_s)
    sweep_fn = sweep_fn or G.make_sweep_fn(model, update_globals=False)
    out = []
    xt = tf.constant(x)
    for i in range(sweeps):
        st, _ = sweep_fn(st, xt)
        st = G.resample_gamma_s(st, xt, model, tf.random.experimental.stateless_fold_in(seeds[1], i))
        if i >= sweeps - n_samples:
            out.append(st)
    return out


def run_mcem(x: np.ndarray, layers: Sequence[dict], *, seed: int, iterations: int,
             batch_size: int, sweeps: int = 3, n_samples: int = 1, lr: float = 1e-2,
             decay: float = 0.95, gamma_s: float = 1.0, hyper: dict | None = None,
             dictionaries: Sequence[np.ndarray] | None = None, prior_scale: float = 1.0,
             checkpoint_dir=None, checkpoint_every: int = 50, trace_path=None,
             stop_after: int | None = None,
             progress: Callable[[str], None] | None = print) -> dict | None:
    """Algorithm 1 on images ``x`` (N, H, W, C): ``iterations`` mini-batches of
    ``batch_size`` drawn by a seeded ``tf.data`` shuffle (reshuffled every epoch), each
    an E-step then one RMSprop step of every D. Starts from the prior (or from
    ``dictionaries``). Checkpoints (D, RMSprop state, trace) atomically every
    ``checkpoint_every`` iterations; a rerun with the same inputs resumes there and
    ends where an uninterrupted run ends.

    Returns {'D': [per layer], 'trace': [{'iteration', 'q', 'rel_residual', 'gamma_e',
    'active_top', 'seconds'}], 'seconds'}; None when ``stop_after`` ended it early.
    """
    x = np.asarray(x, np.float32)
    if x.ndim != 4:
        raise ValueError(f"x must be (N, H, W, C), got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("x holds NaN or Inf values; fix the data before training")
    model = DeepModel(x.shape[1:], layers, hyper)
    n, b = len(x), min(int(batch_size), len(x))
    say = progress or (lambda _m: None)
    d = (tuple(tf.constant(np.asarray(v, np.float32)) for v in dictionaries) if dictionaries
         is not None else init_from_prior(model, seed, scale=prior_scale))
    state = McemState(d=d, v=tuple(tf.zeros_like(dl) for dl in d), step=0)
    rows: list[dict] = []
    fp = json.dumps({"n": n, "shape": list(x.shape), "sum": float(np.sum(x, dtype=np.float64)),
                     "layers": list(layers), "seed": seed, "batch": b, "sweeps": sweeps,
                     "n_samples": n_samples, "lr": lr, "decay": decay, "gamma_s": gamma_s,
                     "prior_scale": prior_scale, "start": None if dictionaries is None else
                     float(sum(np.sum(np.abs(v)) for v in dictionaries))}, sort_keys=True)
    ck = Path(checkpoint_dir) / "mcem_checkpoint.npz" if checkpoint_dir else None
    if ck is not None and ck.exists():
        with np.load(ck) as z:
            if str(z["fingerprint"]) == fp:
                state = McemState(d=tuple(tf.constant(z[f"d{l}"]) for l in range(model.n_layers)),
                                  v=tuple(tf.constant(z[f"v{l}"]) for l in range(model.n_layers)),
                                  step=int(z["step"]))
                rows = json.loads(str(z["trace"]))
                say(f"resuming stochastic MCEM at iteration {state.step}/{iterations} ({ck})")
            else:
                say(f"checkpoint {ck} is from other inputs or settings; starting afresh")
    per_epoch = -(-n // b)
    order = _batches(n, b, seed)
    sweep_fn = G.make_sweep_fn(model, update_globals=False)
    grad_fn = tf.function(lambda dd, smp, xb: grad_delta(dd, smp, xb, model, n, with_q=True),
                          reduce_retracing=True)
    t_start = time.time()
    for t in range(state.step, iterations):
        t0 = time.time()
        idx = order(t // per_epoch)[(t % per_epoch) * b:(t % per_epoch) * b + b]
        xb = x[np.sort(idx)]
        seed_t = tf.random.experimental.stateless_fold_in(tf.constant([seed, 0x5C3], tf.int64), t)
        samples = e_step(xb, state.d, model, seed_t, sweeps=sweeps, n_samples=n_samples,
                         gamma_s=gamma_s, sweep_fn=sweep_fn)
        grads, q = grad_fn(state.d, samples, tf.constant(xb))
        d, v = rmsprop(state.d, state.v, grads, lr=lr, decay=decay)
        for l, dl in enumerate(d):
            if not np.all(np.isfinite(dl.numpy())):
                raise FloatingPointError(f"D[{l + 1}] is not finite after MCEM iteration {t + 1}; "
                                         f"lower the RMSprop step (lr = {lr})")
        state = McemState(d=d, v=v, step=t + 1)
        last = samples[-1]
        rows.append({"iteration": t + 1, "q": float(q),
                     "rel_residual": float(np.linalg.norm(last.resid) / np.linalg.norm(xb)),
                     "gamma_e": float(np.mean(last.gamma_e)),
                     "active_top": float(np.mean(last.on)), "seconds": time.time() - t0})
        if (t + 1) % max(1, iterations // 20) == 0 or t + 1 == iterations:
            say(f"MCEM iteration {t + 1}/{iterations}: Qbar {rows[-1]['q']:.6g} rel.resid "
                f"{rows[-1]['rel_residual']:.4f} ({time.time() - t_start:.1f} s)")
        if trace_path:
            _write_trace(trace_path, rows)
        if ck is not None and ((t + 1) % checkpoint_every == 0 or t + 1 == iterations):
            atomic_io.save_npz(ck, compressed=False, fingerprint=np.array(fp), step=np.array(t + 1),
                               trace=np.array(json.dumps(rows)),
                               **{f"d{l}": np.asarray(dl) for l, dl in enumerate(state.d)},
                               **{f"v{l}": np.asarray(vl) for l, vl in enumerate(state.v)})
        if stop_after is not None and t + 1 >= stop_after and t + 1 < iterations:
            return None
    return {"D": [np.asarray(dl) for dl in state.d], "trace": rows,
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
