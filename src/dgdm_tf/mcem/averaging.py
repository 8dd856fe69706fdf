"""Model averaging (Sec. 4, ImageNet): from the MCEM (MAP) estimate, Gibbs on mini-batches
gives posterior samples of the global parameters (every D and beta); the paper keeps 20,
one per 1000 iterations, and averages their predictions.

Iteration t, mini-batch of B of the N images, r = N / B:
  1. the batch's local variables by the supervised E-step (D and beta fixed);
  2. D[l] | locals for every layer, the batch's likelihood raised to the power r (the
     batch's gamma_e times r): the exact Gaussian draw for D[1], HMC above it
     (:func:`dgdm_tf.topdown.conditionals.resample_d`, the step adapted until the first kept
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
from typing import Callable, Sequence

import numpy as np
import tensorflow as tf

from dgdm_tf.io import atomic as atomic_io

from dgdm_tf.supervised import joint_svm as deep_svm

from dgdm_tf.mcem import svm_step as smcem_svm
from dgdm_tf.topdown import conditionals as G
from dgdm_tf.supervised import bayes_svm as S
from dgdm_tf.core.model import DeepModel
from dgdm_tf.mcem.stochastic import e_step_supervised, make_supervised_sweep_fn


def resample_globals(st: G.DeepState, lam, g: smcem_svm.SvmGlobals, x, y, model: DeepModel,
                     svm_hyper: deep_svm.SvmHyper, r: float, seed, *, n_leapfrog: int,
                     adapt: bool):
    """Steps 2 and 3 above. Returns (state with the new D, new SvmGlobals, HMC acceptance)."""
    seeds = tf.unstack(tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), 4))
    ge = st.gamma_e
    scaled = st._replace(gamma_e=ge * r)
    acc = []
    for l in range(model.n_layers):
        scaled, a = G.resample_d(scaled, x, model, l, tf.cast(G.fold_seed(seeds[0], l), tf.int32),
                                 n_leapfrog=n_leapfrog, adapt=adapt)
        acc.append(float(a))
    st = scaled._replace(gamma_e=ge)
    f = int(g.beta.shape[1]) - 1
    c = int(g.beta.shape[0])
    kappa = tf.fill([c], tf.constant(svm_hyper.kappa, tf.float64))
    omega = S.resample_omega(g.beta[:, :f], kappa, seeds[1])
    omega_all = tf.concat([omega, tf.fill([c, 1], tf.constant(svm_hyper.bias_var, tf.float64))], 1)
    s = deep_svm.design(st.s_top, g.mean, g.std)
    beta = S.resample_beta(lam, omega_all, s, tf.cast(y, tf.float64), svm_hyper.gamma * r, seeds[2])
    return st, g._replace(beta=beta), acc


def run_averaging(batches: Callable, image_shape, layers: Sequence[dict], *, mcem: dict,
                  n_total: int, n_classes: int, seed: int, keep: int, thin: int, sweeps: int,
                  gamma_s: float, svm_hyper: dict | None, n_leapfrog: int = 10,
                  hyper: dict | None = None, checkpoint_dir=None, checkpoint_every: int = 50,
                  stop_after: int | None = None, scan: str = "random",
                  progress: Callable[[str], None] | None = print) -> dict | None:
    """``keep`` posterior samples of (D, beta), one every ``thin`` iterations, starting
    from ``mcem`` (the output of :func:`dgdm_tf.mcem.stochastic.train` for the supervised
    model). ``batches(start)`` as there. Checkpointed and resumable like training.
    ``scan``: the E-step sweeps' visiting order (:class:`DeepModel`), in the fingerprint.

    Returns {'D': [keep x per-layer arrays], 'beta': (keep, C, F+1), 'mean', 'std',
    'accept': per-iteration HMC acceptance, 'seconds'}; None when stopped early."""
    say = progress or (lambda _m: None)
    if mcem.get("beta") is None:
        raise ValueError("model averaging starts from a supervised MCEM run (it has no beta)")
    hyper_s = deep_svm.SvmHyper.from_dict(svm_hyper)
    model = DeepModel(image_shape, layers, hyper, supervised=True, scan=scan)
    total = keep * thin
    d = tuple(tf.constant(np.asarray(v, np.float32)) for v in mcem["D"])
    g = smcem_svm.SvmGlobals(beta=tf.constant(mcem["beta"]), mean=tf.constant(mcem["mean"]),
                             std=tf.constant(mcem["std"]), updates=0)
    log_step = tf.zeros([model.n_layers])
    kept_d: list[list[np.ndarray]] = []
    kept_beta: list[np.ndarray] = []
    accept: list[list[float]] = []
    step = 0
    fp = json.dumps({"keep": keep, "thin": thin, "sweeps": sweeps, "seed": seed, "n": n_total,
                     "start": float(sum(np.sum(np.abs(v)) for v in mcem["D"])) +
                     float(np.sum(np.abs(mcem["beta"]))), "svm": svm_hyper, "L": n_leapfrog,
                     # absent for the old sampler's order: its checkpoints still resume
                     **({"scan": scan} if scan != "fixed" else {})},
                    sort_keys=True, default=str)
    ck = Path(checkpoint_dir) / "averaging_checkpoint.npz" if checkpoint_dir else None
    if ck is not None and ck.exists():
        with np.load(ck) as z:
            if str(z["fingerprint"]) == fp:
                step = int(z["step"])
                d = tuple(tf.constant(z[f"d{l}"]) for l in range(model.n_layers))
                g = g._replace(beta=tf.constant(z["beta"]))
                log_step = tf.constant(z["log_step"])
                n_kept = int(z["n_kept"])
                kept_d = [[z[f"kept{k}_d{l}"] for l in range(model.n_layers)] for k in range(n_kept)]
                kept_beta = [z[f"kept{k}_beta"] for k in range(n_kept)]
                accept = json.loads(str(z["accept"]))
                say(f"resuming model averaging at iteration {step}/{total} ({ck})")
    sweep_fn = make_supervised_sweep_fn(model, hyper_s)
    t_start = time.time()
    stream = batches(step) if step < total else iter(())
    for t, xb, yb in stream:
        if t >= total:
            break
        seed_t = tf.random.experimental.stateless_fold_in(tf.constant([seed, 0xA7E], tf.int64), t)
        s1, s2 = tf.unstack(tf.random.experimental.stateless_split(seed_t, 2))
        yt = deep_svm.targets(yb, n_classes)
        states, lams = e_step_supervised(xb, yt, d, g, model, s1, sweeps=sweeps, n_samples=1,
                                         gamma_s=gamma_s, svm_hyper=hyper_s, sweep_fn=sweep_fn)
        st = states[-1]._replace(hmc_log_step=log_step)
        st, g, acc = resample_globals(st, lams[-1], g, tf.constant(xb), yt, model, hyper_s,
                                      n_total / len(xb), s2, n_leapfrog=n_leapfrog,
                                      adapt=t < thin)
        d, log_step = st.d, st.hmc_log_step
        for l, dl in enumerate(d):
            if not np.all(np.isfinite(dl.numpy())):
                raise FloatingPointError(f"D[{l + 1}] is not finite at averaging iteration {t + 1}")
        accept.append(acc)
        step = t + 1
        if step % thin == 0:
            kept_d.append([np.asarray(dl) for dl in d])
            kept_beta.append(np.asarray(g.beta))
            say(f"model averaging: sample {len(kept_d)}/{keep} kept at iteration {step} "
                f"(HMC acceptance {np.mean(accept[-thin:], 0).round(2).tolist()}, "
                f"{time.time() - t_start:.1f} s)")
        if ck is not None and (step % checkpoint_every == 0 or step == total):
            atomic_io.save_npz(
                ck, compressed=False, fingerprint=np.array(fp), step=np.array(step),
                beta=np.asarray(g.beta), log_step=np.asarray(log_step), n_kept=np.array(len(kept_d)),
                accept=np.array(json.dumps(accept)),
                **{f"d{l}": np.asarray(dl) for l, dl in enumerate(d)},
                **{f"kept{k}_d{l}": v for k, dk in enumerate(kept_d) for l, v in enumerate(dk)},
                **{f"kept{k}_beta": b for k, b in enumerate(kept_beta)})
        if stop_after is not None and step >= stop_after and step < total:
            return None
    return {"D": kept_d, "beta": np.stack(kept_beta), "mean": np.asarray(g.mean),
            "std": np.asarray(g.std), "accept": accept, "seconds": time.time() - t_start}
