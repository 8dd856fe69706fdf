"""Driver of the top-down sampler: joint refinement (burn-in, collection, thinning,
checkpoints, per-sweep trace) and inference with the dictionaries fixed (features,
missing data). Kernels are in :mod:`dgdm_tf.topdown.conditionals`, diagnostics in the trace.

Refinement (SPEC sec. 3): start from the pretrained dictionaries, ``burn_in`` sweeps
(the HMC step sizes of D[l >= 1] adapt here only), then ``collect`` draws one every
``thin`` sweeps; the dictionaries, precisions and usage statistics are averaged over the
draws. The chain is restartable like pretraining: the whole state (with the seed it
carries), the collection sums and the trace are checkpointed atomically every
``checkpoint_every`` sweeps, and a rerun with the same inputs resumes from there.
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
from dgdm_tf.topdown import conditionals as G
from dgdm_tf.pretrain.chain import fingerprint
from dgdm_tf.pretrain.chain_parts import check_finite
from dgdm_tf.core.compiled import compiled
from dgdm_tf.core.model import DeepModel, layer_inputs, soft_indicators, unseen_blocks


def trace_columns(model: DeepModel) -> list[str]:
    cols = ["sweep", "phase", "log_joint", "rel_residual", "gamma_e_mean", "gamma_s",
            "active_top"]
    cols += [f"active_layer{l + 1}" for l in range(model.n_layers - 1)]
    cols += [f"accept_d{l + 1}" for l in range(1, model.n_layers)]
    if model.supervised:
        cols += ["svm_train_error", "svm_hinge", "svm_kappa"]
    return cols + ["seconds"]


def _trace_row(sweep, phase, st: G.DeepState, x, model: DeepModel, x_norm, stats, seconds,
               mask=None, svm=None, y=None, svm_hyper=None):
    row = {"sweep": sweep, "phase": phase,
           "log_joint": float(G.log_joint(st, x, model, mask, svm, y, svm_hyper)),
           "rel_residual": float(np.linalg.norm(np.asarray(st.resid)) / max(x_norm, 1e-30)),
           "gamma_e_mean": float(np.mean(np.asarray(st.gamma_e))),
           "gamma_s": float(st.gamma_s), "active_top": float(np.mean(np.asarray(st.on)))}
    for l, g in enumerate(model.geoms[:-1]):
        row[f"active_layer{l + 1}"] = float(np.mean(np.asarray(st.z[l]) != g.off))
    acc = np.asarray(stats["accept"])
    for l in range(1, model.n_layers):
        row[f"accept_d{l + 1}"] = float(acc[l])
    if model.supervised:
        if svm is None:  # the first sweep runs before the SVM exists
            row.update(svm_train_error=float("nan"), svm_hinge=float("nan"), svm_kappa=float("nan"))
        else:
            m = np.asarray(deep_svm.margins(svm, st.s_top))  # N, C
            yy = np.asarray(y).T
            row["svm_train_error"] = float(np.mean(np.argmax(m, 1) != np.argmax(yy, 1)))
            row["svm_hinge"] = float(np.mean(np.maximum(1.0 - yy * m, 0.0)))
            row["svm_kappa"] = float(np.mean(np.asarray(svm.kappa)))
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


def _state_from_numpy(z, cls=G.DeepState, prefix: str = "state"):
    kw = {}
    for name in cls._fields:
        if f"{prefix}_{name}_n" in z:
            kw[name] = tuple(tf.constant(z[f"{prefix}_{name}_{i}"])
                             for i in range(int(z[f"{prefix}_{name}_n"])))
        else:
            kw[name] = tf.constant(z[f"{prefix}_{name}"])
    return cls(**kw)


def _averages(st: G.DeepState, model: DeepModel) -> dict:
    """Per-draw statistics the collection averages: dictionaries, precisions, usage."""
    out = {f"d{l}": np.asarray(d) for l, d in enumerate(st.d)}
    out["gamma_s"] = np.asarray(st.gamma_s)
    out["gamma_e"] = np.asarray(st.gamma_e)
    out["on_rate"] = np.asarray(st.on).mean(axis=(0, 1, 2))  # K_top
    for l, g in enumerate(model.geoms[:-1]):
        counts = np.eye(g.n_states, dtype=np.float32)[np.asarray(st.z[l])].mean(axis=(0, 1, 2))
        out[f"theta{l}"] = counts  # K, S: how often each block state is used
    return out


def _averaged_beta(scan, svm, s_top, y, n: int, seed) -> np.ndarray:
    """Mean beta over ``n`` SVM scans (``scan(svm, s_top, y, seed)``, compiled once per
    chain) with S[L] held; scan i seeded by fold-in of i."""
    acc = np.zeros(svm.beta.shape, np.float64)
    for i in range(n):
        svm = scan(svm, s_top, y, tf.random.experimental.stateless_fold_in(seed, i))
        acc += np.asarray(svm.beta)
    return acc / n


def run_refine(x: np.ndarray, dictionaries: Sequence[np.ndarray], layers: Sequence[dict], *,
               seed: int, burn_in: int, collect: int, thin: int = 1, hyper: dict | None = None,
               gamma_e_init: float | None = None, gamma_s_init: float = 1.0,
               n_leapfrog: int = 10, checkpoint_dir=None, checkpoint_every: int = 10,
               trace_path=None, progress: Callable[[str], None] | None = print,
               stop_after: int | None = None, labels=None, n_classes: int | None = None,
               svm_hyper: dict | None = None, keep_models: int | None = None,
               svm_warmup: int = 0, svm_average: int = 0, chunk: int | None = None,
               scan: str = "random") -> dict | None:
    """Joint Gibbs refinement of every layer from the given (pretrained) dictionaries.

    ``chunk``: draw the per-image steps that many images at a time (memory: the top
    units' data-plane images are units x images x footprint); None, or at least N, draws
    all at once. ``scan``: the sweeps' visiting order (:class:`DeepModel`; "fixed" repeats
    the draws of the sampler before the random scan); part of the checkpoint's
    fingerprint, so a chain never resumes from one of the other scan.

    Returns {'D': [per layer, collection average], 'gamma_s', 'gamma_e' (N,),
    'on_rate' (K_top,), 'theta': [per lower layer (K, p*p+1) state frequencies],
    'features': (N, F) Rao-Blackwellised posterior mean of S[L-1] of the images,
    'sweeps', 'seconds', 'trace'}; None when ``stop_after`` ended the run early.

    With ``labels`` (ints in [0, n_classes)) this is the supervised model (Sec. 2.3): the
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
    """
    x = np.asarray(x, np.float32)
    if x.ndim != 4:
        raise ValueError(f"x must be (N, H, W, C), got shape {x.shape}")
    check_finite("refinement input x", x)
    if burn_in < 0 or collect < 1 or thin < 1:
        raise ValueError("need burn_in >= 0, collect >= 1 and thin >= 1")
    say = progress or (lambda _m: None)
    ks = [int(np.shape(d)[-1]) for d in dictionaries]
    supervised = labels is not None
    model = DeepModel(x.shape[1:], layers, hyper, supervised=supervised, scan=scan).with_ks(ks)
    total = burn_in + collect * thin
    chunk = int(chunk) if chunk is not None and int(chunk) < len(x) else None
    extra = {} if chunk is None else {"chunk": chunk}
    if scan != "fixed":  # absent for the old sampler's order: its checkpoints still resume
        extra["scan"] = scan
    keep = set(range(collect))
    if keep_models is not None:
        keep = {collect - 1 - int(round(j * collect / keep_models)) for j in range(min(keep_models, collect))}
    if supervised:
        labels = np.asarray(labels, np.int64)
        if labels.shape != (len(x),) or n_classes is None or labels.min() < 0 or labels.max() >= n_classes:
            raise ValueError(f"labels must be {len(x)} ints in [0, n_classes={n_classes})")
        shyper = deep_svm.SvmHyper.from_dict(svm_hyper)
        y = deep_svm.targets(labels, n_classes)
        extra.update(n_classes=n_classes, svm_hyper=shyper.__dict__, keep=sorted(keep),
                     svm_warmup=int(svm_warmup), svm_average=int(svm_average))
    fp = fingerprint(x, *dictionaries, *([labels] if supervised else []), layers=list(layers), seed=seed, burn_in=burn_in,
                      collect=collect, thin=thin, hyper=model.hyper.__dict__,
                      gamma_e_init=gamma_e_init, gamma_s_init=gamma_s_init, n_leapfrog=n_leapfrog,
                      **extra)
    ck = Path(checkpoint_dir) / "checkpoint.npz" if checkpoint_dir else None
    xt = tf.constant(x)
    x_norm = float(np.linalg.norm(x))
    cols = trace_columns(model)
    done, rows, acc, state, svm, samples = 0, [], None, None, None, []
    if ck is not None and ck.exists():
        with np.load(ck, allow_pickle=False) as z:
            if str(z["fingerprint"]) == fp:
                done, rows = int(z["sweep"]), json.loads(str(z["trace"]))
                state = _state_from_numpy(z)
                if "acc_count" in z:
                    acc = {k[4:]: z[k] for k in z.files if k.startswith("acc_")}
                if "svm_beta" in z:
                    svm = _state_from_numpy(z, deep_svm.SvmState, "svm")
                for i in range(int(z["n_samples"]) if "n_samples" in z else 0):
                    samples.append({k[len(f"sample{i}_"):]: z[k] for k in z.files
                                    if k.startswith(f"sample{i}_")})
                say(f"resuming refinement from checkpoint at sweep {done}/{total} ({ck})")
            else:
                say(f"checkpoint {ck} is from different inputs or settings; starting afresh")
    if state is None:
        state = G.init_state(x, model, dictionaries, tf.constant([seed, 0xDEE9], tf.int32),
                             gamma_e_init=gamma_e_init, gamma_s_init=gamma_s_init)
    # one compiled sweep for burn-in and collection (the adaptation flag is an argument)
    sweep_fn = G.make_sweep_fn(model, adapt="argument", n_leapfrog=n_leapfrog, chunk=chunk)
    if supervised:
        sup_fn = G.make_sweep_fn(model, adapt="argument", n_leapfrog=n_leapfrog,
                                 svm_hyper=shyper, chunk=chunk)
        svm_scan = compiled(lambda sv, s_top, yy, sd: deep_svm.resample_svm(sv, s_top, yy, shyper, sd, steps=1))

    def save(sweep_idx):
        if ck is None:
            return
        arrs = _state_to_numpy(state)
        if acc is not None:
            arrs.update({f"acc_{k}": v for k, v in acc.items()})
        if svm is not None:
            arrs.update(_state_to_numpy(svm, "svm"))
        arrs["n_samples"] = np.array(len(samples))
        for i, smp in enumerate(samples):
            arrs.update({f"sample{i}_{k}": v for k, v in smp.items()})
        atomic_io.save_npz(ck, compressed=False, fingerprint=np.array(fp),
                           sweep=np.array(sweep_idx), trace=np.array(json.dumps(rows)), **arrs)

    t_start = time.time()
    for t in range(done, total):
        t0 = time.time()
        phase = "burn-in" if t < burn_in else "collect"
        if svm is None:
            state, stats = sweep_fn(state, xt, tf.constant(phase == "burn-in"))
            if supervised:  # the SVM starts after the first sweep, standardised by it
                mean, std = deep_svm.standardisation(stats["expected_top"], scale=shyper.scale)
                svm = deep_svm.init_svm(n_classes, mean, std, len(x), shyper)
                if svm_warmup > 0:
                    svm = deep_svm.resample_svm(svm, state.s_top, y, shyper,
                                                tf.constant([seed, 0x5A3], tf.int64), steps=svm_warmup)
        else:
            state, svm, stats = sup_fn(state, svm, xt, y, tf.constant(phase == "burn-in"))
            check_finite(f"SVM weights after sweep {t + 1}", svm.beta)
        sec = time.time() - t0
        for l, d in enumerate(state.d):
            check_finite(f"D[{l + 1}] after refinement sweep {t + 1}", d)
        check_finite(f"gamma_e after refinement sweep {t + 1}", state.gamma_e)
        row = _trace_row(t + 1, phase, state, xt, model, x_norm, stats, sec,
                         svm=svm, y=y if supervised else None,
                         svm_hyper=shyper if supervised else None)
        rows.append(row)
        if t + 1 > burn_in and (t + 1 - burn_in) % thin == 0:
            sample = _averages(state, model)
            sample["features"] = np.asarray(stats["expected_top"]).reshape(len(x), -1)
            sample["count"] = np.array(1.0)
            acc = sample if acc is None else {k: acc[k] + sample[k] for k in acc}
            if supervised and (t + 1 - burn_in) // thin - 1 in keep:
                # a model to predict with: its dictionaries and beta
                beta = np.asarray(svm.beta)
                if svm_average > 0:
                    beta = _averaged_beta(svm_scan, svm, state.s_top, y, svm_average,
                                          tf.random.experimental.stateless_fold_in(
                                              tf.constant([seed, 0xA7E], tf.int64), t))
                samples.append({**{f"d{l}": np.asarray(d) for l, d in enumerate(state.d)},
                                "beta": beta})
        eta = (total - t - 1) * (time.time() - t_start) / max(t + 1 - done, 1)
        sup = (f" SVM train error {row['svm_train_error']:.4f}"
               if supervised and svm is not None else "")
        say(f"refine sweep {t + 1}/{total} ({phase}) log joint {row['log_joint']:.6g} "
            f"rel.resid={row['rel_residual']:.4f} active top={row['active_top']:.3f} "
            f"gamma_e={row['gamma_e_mean']:.4g}{sup} {sec:.2f} s/sweep, ETA {eta:.0f} s")
        if trace_path:
            write_trace_csv(trace_path, rows, cols)
        if (t + 1) % checkpoint_every == 0 or t + 1 == total:
            save(t + 1)
        if stop_after is not None and t + 1 >= stop_after and t + 1 < total:
            return None
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
            "seconds": float(sum(r["seconds"] for r in rows)), "trace": rows}


def chain_permutations(ks: Sequence[int], chain: int) -> list[np.ndarray]:
    """The map order of chain ``chain`` of :func:`infer_topdown`, per layer: identity
    for chain 0, else the chain-th of a fixed sequence of permutations of each layer's
    K_l maps. Not drawn from the run's seed: train and test images (seeded apart) must
    be visited in the same orders, or their features differ by the order."""
    if chain == 0:
        return [np.arange(k) for k in ks]
    rng = np.random.default_rng([0xC4A1, int(chain)])
    return [rng.permutation(int(k)) for k in ks]


def permute_maps(dictionaries: Sequence[np.ndarray], perms: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The same model with layer l's maps in order ``perms[l]``: D[l]'s atoms and
    D[l+1]'s input channels permuted alike (map j of the result is map perms[l][j])."""
    out = []
    for l, d in enumerate(dictionaries):
        d = np.asarray(d, np.float32)[..., perms[l]]
        if l > 0:
            d = d[:, :, perms[l - 1], :]
        out.append(np.ascontiguousarray(d))
    return out


def infer_topdown(x: np.ndarray, dictionaries: Sequence[np.ndarray], layers: Sequence[dict], *,
                  seed: int, burn_in: int, collect: int, batch_size: int, gamma_s: float,
                  gamma_e_init: float | None = None, hyper: dict | None = None, mask=None,
                  chains: int = 1, scan: str = "random",
                  progress: Callable[[str], None] | None = print) -> dict:
    """Posterior means with every dictionary and gamma_s fixed: each image's own Z, S,
    theta, pi and gamma_e are sampled. ``mask`` (same shape as x, 1 = observed) drops
    the missing pixels from the likelihood.

    Returns {'features': (N, F) Rao-Blackwellised mean of S[L-1],
    'reconstruction': (N, H, W, C) posterior mean of g(S[L-1], Z) (the whole image,
    missing pixels included), 'layer1_pooled': (N, h, w, K_1) posterior
    mean of layer 1's pooled output X[1] under the same draws (layer 1's S when it is the
    top; the mixing diagnostics read it), 'seconds'}. Batch b's chain is seeded by
    fold-in of (seed, b), so results do not depend on the batches before it.

    The reconstruction is Rao-Blackwellised twice, each sweep adding g at conditional
    means given the state before it: the top units' (drawn against that unpooling), and,
    with a ``mask``, the unpooling states of the blocks whose whole footprint is hidden
    (:func:`dgdm_tf.core.model.unseen_blocks`): they are absent from the likelihood, so
    given theta and the rest they are independent of the top units and of each other and
    distributed as theta; E[Z_b | theta] = theta replaces the one draw of each (the
    draws stay in the chain; its law is unchanged).

    ``chains`` > 1: that many independent chains per batch, averaged (each output is the
    mean of the chains' means). Chain 0 is the single chain (same seed, same draws);
    chain c >= 1 is seeded by fold-in of c and runs on the model with each layer's maps
    in the c-th of a fixed sequence of orders (:func:`chain_permutations`; the same model and posterior,
    visited in another scan order: the chains freeze into scan-order decompositions, so
    chains in one order differ little); its features are put back in the given order.
    ``scan``: the sweeps' visiting order (:class:`DeepModel`); with "random" every
    chain draws its own orders, sweep by sweep, and the permuted maps only relabel them.
    """
    x = np.asarray(x, np.float32)
    if mask is not None:
        mask = np.asarray(mask, np.float32)
        if mask.shape != x.shape:
            raise ValueError(f"mask shape {mask.shape} differs from the images' {x.shape}")
        # missing pixels never enter (and need not be finite)
        x = np.where(mask > 0, x, 0.0).astype(np.float32)
    check_finite("inference input x (observed pixels)", x)
    if int(chains) < 1:
        raise ValueError(f"chains must be >= 1, got {chains}")
    say = progress or (lambda _m: None)
    ks = [int(np.shape(d)[-1]) for d in dictionaries]
    model = DeepModel(x.shape[1:], layers, hyper, scan=scan).with_ks(ks)
    lower = model.geoms[:-1]
    perms = [chain_permutations(ks, c) for c in range(int(chains))]
    dicts = [permute_maps(dictionaries, pm) for pm in perms]
    feats, recs, l1s = [], [], []
    fns = {}
    t0 = time.time()
    for b0 in range(0, len(x), batch_size):
        xb = x[b0: b0 + batch_size]
        mb = None if mask is None else tf.constant(mask[b0: b0 + batch_size])
        unseen = [None] * len(lower)
        if mask is not None:
            unseen = [u if u.any() else None for u in unseen_blocks(mask[b0: b0 + batch_size], model)]
        nb = len(xb)
        if nb not in fns:
            fns[nb] = G.make_sweep_fn(model, mask_given=mask is not None, update_globals=False)
        bseed = tf.random.experimental.stateless_fold_in(tf.constant([seed, 0x1F], tf.int32), b0 // batch_size)
        xt = tf.constant(xb)
        f_acc = r_acc = l1_acc = 0.0
        for c in range(int(chains)):
            cseed = bseed if c == 0 else tf.random.experimental.stateless_fold_in(bseed, c)
            st = G.init_state(xb, model, dicts[c], cseed, gamma_e_init=gamma_e_init,
                              gamma_s_init=gamma_s, mask=mb)
            back_top = np.argsort(perms[c][-1])  # the chain's maps -> the given order
            back_l1 = np.argsort(perms[c][0])
            for t in range(burn_in + collect):
                before = st  # the unpooling the top units were drawn against, its theta
                st, stats = fns[nb](st, xt) if mb is None else fns[nb](st, xt, mb)
                if t >= burn_in:
                    ex = stats["expected_top"]
                    f_acc = f_acc + np.asarray(ex)[..., back_top].reshape(nb, -1)
                    zd = [soft_indicators(z, g, None if u is None else tf.exp(lt), u)
                          for z, lt, u, g in zip(before.z, before.log_theta, unseen, lower)]
                    xs = layer_inputs(ex, model, st.d, zd)
                    r_acc = r_acc + np.asarray(xs[0])
                    # layer 1's pooled output (its S when it is the top), for the mixing diagnostics
                    l1_acc = l1_acc + np.asarray(xs[1] if model.n_layers > 1 else ex)[..., back_l1]
        n_draws = collect * int(chains)
        check_finite("top-down features", f_acc)
        feats.append((f_acc / n_draws).astype(np.float32))
        recs.append((r_acc / n_draws).astype(np.float32))
        l1s.append((l1_acc / n_draws).astype(np.float32))
        done = b0 + nb
        say(f"top-down inference: {done}/{len(x)} images, {done / max(time.time() - t0, 1e-9):.2f} images/s")
    return {"features": np.concatenate(feats), "reconstruction": np.concatenate(recs),
            "layer1_pooled": np.concatenate(l1s),
            "seconds": time.time() - t0}


def missing_mask(shape, kind: str, *, fraction: float = 0.5, block: int = 8, seed: int = 0) -> np.ndarray:
    """1 = observed. ``half``: the bottom half of every image hidden (the paper's figure);
    ``pixels``: each pixel hidden with probability ``fraction``; ``blocks``: one random
    ``block`` x ``block`` square hidden per image."""
    n, h, w, c = shape
    m = np.ones(shape, np.float32)
    rng = np.random.default_rng(seed)
    if kind == "half":
        m[:, h // 2:, :, :] = 0.0
    elif kind == "pixels":
        m = (rng.random((n, h, w, 1)) >= fraction).astype(np.float32) * np.ones((1, 1, 1, c), np.float32)
    elif kind == "blocks":
        if block > min(h, w):
            raise ValueError(f"missing block {block} is larger than the image {h}x{w}")
        for i in range(n):
            r, q = rng.integers(0, h - block + 1), rng.integers(0, w - block + 1)
            m[i, r: r + block, q: q + block, :] = 0.0
    else:
        raise ValueError(f"mask kind must be 'half', 'pixels' or 'blocks', got {kind!r}")
    return m


def hidden_error(x, x_hat, mask, peak: float = 1.0) -> dict:
    """MSE and PSNR (dB, peak ``peak``) over the hidden pixels (mask == 0)."""
    hid = np.asarray(mask) == 0
    if not hid.any():
        raise ValueError("the mask hides no pixel")
    mse = float(np.mean((np.asarray(x)[hid] - np.asarray(x_hat)[hid]) ** 2))
    return {"mse": mse, "psnr_db": float(10 * np.log10(peak ** 2 / max(mse, 1e-30)))}
