"""Stochastic MCEM (supplement Algorithm 1) from the pretrained layers, read at several epochs.

`run`: one MCEM run (`dgdm_tf.mcem.stochastic.run_mcem`) of the unsupervised model
(`--kind unsupervised`) or the supervised one (`--kind supervised`: the labels enter, the SVM
in the E-step and beta's closed-form M-step from the first iteration), started from the
pretrained dictionaries (pretraining, then the whole model, as the paper trains its small
datasets), on the first N images of the rows' shared training subset
(`dgdm_tf.data.subsets.shared_subset`: every run and the pretrained row see the same images),
with the dataset's `mcem` block but for `--lr`, `--sweeps`, `--batch-size` and `--local-state` (restart: each
E-step from the matched filter, as the supplement; persist: from the image's last visit,
`dgdm_tf.mcem.local_store`), seeded `seed_for(seed, ds, "algorithm1", kind, local_state,
chain)`. The model after each epoch of `--epochs` goes to `epoch_<E>.npz` (D, and beta with its
standardisation); the run resumes from `checkpoint/mcem_checkpoint.npz` (every
`--checkpoint-every` iterations and at each epoch read), its trace `checkpoint/trace.tsv`.

`read`: on the first n_train / n_test images of the rows' shared subsets, for each run folder
and each recorded epoch E the row "Algorithm 1, E epochs" of MCEM's D after E epochs (the
estimator: the last iterate, not an average over iterations):
  unsupervised + SVM: the topdown_features block's route (Algorithm 2) with that D, then the
    Bayesian SVM as the svm rule fits it, seeds as the topdown_features and svm rules;
  supervised: the supervised block's prediction route with that D and MCEM's beta
    (`dgdm_tf.mcem.classify.classify_supervised`), seed `seed_for(seed, ds, "supervised_predict", 0)`.
Both read the test-time features from the pretrained layers' gamma_e and gamma_s (MCEM keeps
no global precisions). Each row beside the pretrained row on the same test images, with
McNemar's exact p (`dgdm_tf.report.scores.paired_errors`). Writes OUT/algorithm1.json,
OUT/error_vs_epochs.png, OUT/traces.png (Qbar, the relative residual and the batch's training
error per iteration, epoch means) and OUT/top_E<E>_<local state>.png (Fig. 2: the top-layer
elements in the data plane, unsupervised beside supervised, at each epoch both kinds were
read with that local state). Every two runs read at the same epoch are also paired
against each other (`pairs` in the json).

    nohup nice -n 19 python experiments/length/algorithm1.py run --kind unsupervised \\
        --local-state persist --results <clone>/results/mnist --n-images 10000 \\
        --epochs 1 2 5 10 --lr 0.001 --out <runs>/unsup_persist > unsup_persist.log 2>&1 &
    # --smoke after either command: tiny sizes, to check the script runs (its test)
    python experiments/length/algorithm1.py read --results <clone>/results/mnist \\
        --runs <runs>/unsup_persist <runs>/unsup_restart \\
        --n-train 2000 --n-test 2000 --out <runs>/read
"""
from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import time
from pathlib import Path
from types import SimpleNamespace

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from dgdm_tf.core.compiled import reproducible_graphs  # noqa: E402
from dgdm_tf.core.random import seed_for  # noqa: E402
from dgdm_tf.data.arrays import class_count  # noqa: E402
from dgdm_tf.data.subsets import shared_subset  # noqa: E402
from dgdm_tf.io import atomic  # noqa: E402
from dgdm_tf.mcmc.diagnostics import SETTLE_TOLERANCE, drift  # noqa: E402
from dgdm_tf.mcmc.checkpoint import CheckpointDir  # noqa: E402

T0 = time.perf_counter()
KINDS = ("unsupervised", "supervised")


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')} +{time.perf_counter() - T0:7.1f} s] {msg}", flush=True)


def chain_length():
    """chain_length.py beside this probe: the readers both share (settings, pretrained,
    topdown_row, scored)."""
    spec = importlib.util.spec_from_file_location("chain_length", Path(__file__).with_name("chain_length.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _mcem_options(block: dict, a):
    from dgdm_tf.mcem.options import McemOptions

    o = McemOptions.from_config({k: v for k, v in block["mcem"].items()
                                 if k not in ("keep_checkpoints", "distribute")})
    return dataclasses.replace(o, lr=float(a.lr if a.lr is not None else o.lr),
                               sweeps=int(a.sweeps if a.sweeps is not None else o.sweeps),
                               batch_size=int(a.batch_size if a.batch_size is not None else o.batch_size),
                               local_state=a.local_state, supervise_from=0,
                               checkpoint_every=int(a.checkpoint_every))


# --- run --------------------------------------------------------------------------------------

def run(a) -> dict:
    from dgdm_tf.mcem.options import McemStart
    from dgdm_tf.mcem.stochastic import run_mcem

    cl = chain_length()
    results = Path(a.results)
    i = cl.inputs(results, a.config)
    ds, block, seed, layers, hyper, pre, d = i.ds, i.block, i.seed, i.layers, i.hyper, i.pre, i.data
    x, labels, idx = shared_subset(d, "train", block["n_train"], a.n_images, seed, ds)
    o = _mcem_options(block, a)
    per_epoch = -(-len(x) // min(o.batch_size, len(x)))
    epochs = sorted(set(int(e) for e in a.epochs))
    if epochs[0] < 1:
        raise SystemExit(f"--epochs must be positive, got {a.epochs}")
    run_seed = seed_for(seed, ds, "algorithm1", a.kind, a.local_state, a.chain)
    start = McemStart(layers=layers, hyper=hyper, dictionaries=[z.D for z in pre])
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    about = {"kind": a.kind, "dataset": ds, "results": str(results), "config": str(a.config),
             "n_images": len(idx), "image_indices": [int(i) for i in idx], "epochs": epochs,
             "iterations_per_epoch": per_epoch, "chain": a.chain, "seed": run_seed,
             "start": "pretrained", "options": dataclasses.asdict(o)}
    atomic.write_json(out / "run.json", about)
    say(f"Algorithm 1 ({a.kind}, local state {o.local_state}, lr {o.lr}, {o.sweeps} sweeps) on "
        f"{x.shape} from the pretrained layers {[z.D.shape for z in pre]}: {per_epoch} "
        f"iterations an epoch, the model read after epochs {epochs}, into {out}")
    secs = 0.0
    for e in epochs:
        path = out / f"epoch_{e:03d}.npz"
        if path.exists():
            say(f"epoch {e}: {path} is there (a resumed run)")
            continue
        res = run_mcem(x, start, dataclasses.replace(o, iterations=e * per_epoch),
                       y=labels if a.kind == "supervised" else None, seed=run_seed,
                       checkpoint=CheckpointDir(out / "checkpoint", stop_after=a.stop_after,
                                                trace="trace.tsv"), progress=say)
        if res is None:
            say(f"stopped after iteration {a.stop_after} (--stop-after): rerun to resume")
            return about
        extra = {} if res["beta"] is None else {"beta": res["beta"], "mean": res["mean"], "std": res["std"]}
        atomic.save_npz(path, **{f"d{l}": v for l, v in enumerate(res["D"])}, **extra,
                        iterations=np.int64(e * per_epoch))
        secs = res["seconds"]
        say(f"epoch {e}: wrote {path} ({secs:.0f} s of MCEM iterations so far)")
    atomic.write_json(out / "done.json", {**about, "mcem_seconds": secs})
    return about


# --- read -------------------------------------------------------------------------------------

def load_epochs(folder: Path) -> dict:
    """{epoch: {'D': [...], 'beta', 'mean', 'std' or None}} of a run folder."""
    paths = sorted(Path(folder).glob("epoch_*.npz"))
    if not paths:
        raise SystemExit(f"no epoch_*.npz in {folder}: run `algorithm1.py run --out {folder}` first")
    out = {}
    for p in paths:
        z = dict(np.load(p))
        n_layers = sum(k.startswith("d") and k[1:].isdigit() for k in z)
        out[int(p.stem.split("_")[1])] = {"D": [z[f"d{l}"] for l in range(n_layers)],
                                          **{k: z.get(k) for k in ("beta", "mean", "std")}}
    return out


def read_trace(folder: Path) -> list[dict]:
    path = Path(folder) / "checkpoint" / "trace.tsv"
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    cols = lines[0].split("\t")
    return [dict(zip(cols, map(float, ln.split("\t")))) for ln in lines[1:]]


def cached(folder: Path, name: str, arrays: list, compute):
    """``compute()`` -> (predictions, cost), kept in FOLDER/readings/: a reading of the
    same name and model (``arrays``: its dictionaries, beta) is loaded, not recomputed, so
    a read rerun after more epochs reads only the new ones."""
    import hashlib

    h = hashlib.sha256(b"".join(np.ascontiguousarray(v).tobytes() for v in arrays if v is not None))
    path = Path(folder) / "readings" / f"{name}_{h.hexdigest()[:16]}.npz"
    if path.exists():
        z = np.load(path)
        return z["pred"], json.loads(str(z["cost"]))
    pred, cost = compute()
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.save_npz(path, pred=np.asarray(pred), cost=np.array(json.dumps(cost)))
    return pred, cost


def run_label(about: dict) -> str:
    o = about["options"]
    return f"{about['kind']}, {o['local_state']}, lr {o['lr']:g}, {o['sweeps']} sweeps"


def read(a) -> dict:
    from dgdm_tf.core.model import DeepModel, project_top_to_data
    from dgdm_tf.mcem.classify import classify_supervised
    from dgdm_tf.mcem.options import PredictOptions
    from dgdm_tf.report import model_plots

    cl = chain_length()
    results = Path(a.results)
    i = cl.inputs(results, a.config)
    ds, block, seed, layers, hyper, pre, d = i.ds, i.block, i.seed, i.layers, i.hyper, i.pre, i.data
    n_classes = class_count(d)
    subsets = {"train": shared_subset(d, "train", block["n_train"], a.n_train, seed, ds),
               "test": shared_subset(d, "test", block["n_test"], a.n_test, seed, ds)}
    x = {s: v[0] for s, v in subsets.items()}
    y = {s: v[1] for s, v in subsets.items()}
    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    common = dict(block=block, hyper=hyper, layers=layers, n_classes=n_classes, ds=ds, seed=seed)
    gamma_s, gamma_e = pre[-1].gamma_w, pre[0].gamma_e_mean
    t = time.perf_counter()
    sizes = f"n{len(y['train'])}-{len(y['test'])}"
    base, cost = cached(out_dir, f"pretrained_{sizes}", [z.D for z in pre], lambda: cl.topdown_row(
        x, y, [z.D for z in pre], gamma_s, gamma_e, salt="features", row="pretrained_svm", **common))
    out = {"dataset": ds, "results": str(results), "n_train": len(y["train"]), "n_test": len(y["test"]),
           "test_indices": [int(i) for i in subsets["test"][2]],
           "estimator": "MCEM's last D (and beta) after E epochs; test-time gamma_e and gamma_s "
                        "of the pretrained layers",
           "pretrained_svm": {**cl.scored(base, y["test"]), **cost, "seconds": time.perf_counter() - t},
           "runs": {}}
    say(f"pretrained + SVM: {out['pretrained_svm']['error_pct']:.2f} % ({time.perf_counter() - t:.0f} s)")
    predict = PredictOptions.from_supervised(block["supervised"])
    pre_d = [z.D for z in pre]
    models: dict[str, dict] = {}  # local_state -> kind -> epoch -> model
    preds: dict[str, dict] = {}  # run label -> epoch -> test predictions
    for folder in a.runs:
        about = json.loads((Path(folder) / "run.json").read_text())
        label = run_label(about)
        trace = read_trace(folder)
        per_epoch = int(about["iterations_per_epoch"])
        entry = {"run": {k: v for k, v in about.items() if k != "image_indices"}, "epochs": {},
                 "trace_epoch_means": _epoch_means(trace, per_epoch)}
        for name in ("q", "rel_residual"):
            vals = [r[name] for r in trace]
            if len(vals) >= 6:
                entry[f"drift_{name}"] = float(drift(np.asarray(vals)))
        entry["settled"] = all(abs(entry.get(f"drift_{n}", np.inf)) <= SETTLE_TOLERANCE
                               for n in ("q", "rel_residual"))
        for e, m in sorted(load_epochs(folder).items()):
            t = time.perf_counter()
            moved = [float(np.linalg.norm(v - v0) / np.linalg.norm(v0)) for v, v0 in zip(m["D"], pre_d)]
            name = f"{Path(folder).name}_E{e}_{sizes}"
            if about["kind"] == "unsupervised":
                pred, cost = cached(out_dir, name, m["D"], lambda: cl.topdown_row(
                    x, y, m["D"], gamma_s, gamma_e, salt="topdown_features", row="unsupervised_svm", **common))
            else:
                def own_route():
                    sup = SimpleNamespace(samples_D=[v[None] for v in m["D"]], samples_beta=m["beta"][None],
                                          svm_mean=m["mean"], svm_std=m["std"], gamma_s=gamma_s,
                                          gamma_e_mean=gamma_e)
                    res = classify_supervised(x["test"], sup, predict, layers, hyper=hyper,
                                              seeds=[seed_for(seed, ds, "supervised_predict", 0)])
                    return np.argmax(res.scores, 1), {"feature_seconds": float(res.seconds)}

                pred, cost = cached(out_dir, name, [*m["D"], m["beta"]], own_route)
            entry["epochs"][str(e)] = {**cl.scored(pred, y["test"], base), **cost, "moved": moved,
                                       "seconds": time.perf_counter() - t}
            if about["kind"] == "supervised" and a.refit_supervised is not None and (
                    not a.refit_supervised or e in a.refit_supervised):
                # the supervised dictionaries read as the unsupervised row is (Algorithm 2,
                # the Bayesian SVM refitted on the n_train images): what the dictionaries
                # learnt, apart from the joint SVM's test route
                t = time.perf_counter()
                refit, cost = cached(out_dir, name + "_refit", m["D"], lambda: cl.topdown_row(
                    x, y, m["D"], gamma_s, gamma_e, salt="topdown_features", row="unsupervised_svm", **common))
                entry["epochs"][str(e)]["refit"] = {**cl.scored(refit, y["test"], base), **cost,
                                                    "seconds": time.perf_counter() - t}
                preds.setdefault(label + ", refitted SVM", {})[e] = refit
            r = entry["epochs"][str(e)]
            say(f"{label}, Algorithm 1, {e} epochs: {r['error_pct']:.2f} % (pretrained "
                f"{out['pretrained_svm']['error_pct']:.2f} %, McNemar p "
                f"{r['vs_pretrained']['mcnemar_exact_p']:.3g}; D moved {[round(v, 3) for v in moved]})")
            models.setdefault(about["options"]["local_state"], {}).setdefault(about["kind"], {})[e] = m
            preds.setdefault(label, {})[e] = pred
        out["runs"][str(folder)] = {"label": label, **entry}
    # every two runs read at the same epoch, paired on the same test images (b against a)
    from dgdm_tf.report.scores import paired_errors

    out["pairs"] = {}
    labels = list(preds)
    for i, la in enumerate(labels):
        for lb in labels[i + 1:]:
            for e in sorted(set(preds[la]) & set(preds[lb])):
                out["pairs"].setdefault(str(e), {})[f"{lb} against {la}"] = paired_errors(
                    preds[la][e], preds[lb][e], y["test"])
    for local_state, by_kind in models.items():
        for e in sorted(set(by_kind.get("unsupervised", {})) & set(by_kind.get("supervised", {}))):
            ms = {k: by_kind[k][e] for k in KINDS}
            model = DeepModel(x["test"].shape[1:], layers, hyper).with_ks(
                [v.shape[-1] for v in ms["supervised"]["D"]])
            proj = {k: project_top_to_data(model, m["D"]) for k, m in ms.items()}
            model_plots.plot_image_pair(
                proj["unsupervised"], proj["supervised"], KINDS, out_dir / f"top_E{e}_{local_state}.png",
                f"{ds}: top-layer elements in the data plane after {e} epochs of Algorithm 1 ({local_state})")
    out["wall_seconds"] = time.perf_counter() - T0
    atomic.write_json(out_dir / "algorithm1.json", out)
    atomic.write_text(out_dir / "algorithm1.md", table(out))
    plot_epochs(out, out_dir / "error_vs_epochs.png")
    plot_traces(out, out_dir / "traces.png")
    say(f"wrote {out_dir / 'algorithm1.json'}")
    return out


def _epoch_means(trace: list[dict], per_epoch: int) -> list[dict]:
    rows = []
    for e in range(0, len(trace), per_epoch):
        part = trace[e:e + per_epoch]
        rows.append({"epoch": e // per_epoch + 1, **{k: float(np.nanmean([r[k] for r in part]))
                                                     for k in ("q", "rel_residual", "train_error")
                                                     if k in part[0] and not all(np.isnan(r[k]) for r in part)}})
    return rows


def table(out: dict) -> str:
    """The rows as a markdown table: each run at each epoch against the pretrained row."""
    b = out["pretrained_svm"]
    lines = ["| row | epochs | D[1] / D[2] moved | test error % (se) | wrong only here / only pretrained | McNemar p |",
             "|---|---|---|---|---|---|",
             f"| pretrained + SVM | — | — | {b['error_pct']:.2f} ({b['se_pct']:.2f}) | — | — |"]
    for run in out["runs"].values():
        for e in sorted(int(k) for k in run["epochs"]):
            r = run["epochs"][str(e)]
            moved = " / ".join(f"{v:.3f}" for v in r["moved"])
            for name, row in ((run["label"], r), (run["label"] + ", its D + refitted SVM", r.get("refit"))):
                if row is not None:
                    v = row["vs_pretrained"]
                    lines.append(f"| {name} | {e} | {moved} | {row['error_pct']:.2f} ({row['se_pct']:.2f}) | "
                                 f"{v['wrong_only_b']} / {v['wrong_only_a']} | {v['mcnemar_exact_p']:.3g} |")
    return "\n".join(lines) + "\n"


def plot_epochs(out: dict, png: Path) -> None:
    """Test error against MCEM epochs, a line a run, the pretrained row as a band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dgdm_tf.report.plots import save_figure

    fig, ax = plt.subplots(figsize=(5.8, 3.8))
    b = out["pretrained_svm"]
    ax.axhspan(b["error_pct"] - b["se_pct"], b["error_pct"] + b["se_pct"], color="0.85")
    ax.axhline(b["error_pct"], color="0.4", label="pretrained + SVM")
    for run in out["runs"].values():
        es = sorted(int(e) for e in run["epochs"])
        ax.errorbar(es, [run["epochs"][str(e)]["error_pct"] for e in es],
                    yerr=[run["epochs"][str(e)]["se_pct"] for e in es], marker="o", capsize=3,
                    label=run["label"] + ("" if run["settled"] else " (not settled)"))
        refit = [e for e in es if "refit" in run["epochs"][str(e)]]
        if refit:
            ax.errorbar(refit, [run["epochs"][str(e)]["refit"]["error_pct"] for e in refit],
                        yerr=[run["epochs"][str(e)]["refit"]["se_pct"] for e in refit], marker="s",
                        linestyle="--", capsize=3, label=run["label"] + ", its D with a refitted SVM")
    ax.set_xlabel("epochs of Algorithm 1")
    ax.set_ylabel("test error (%)")
    ax.set_title(f"{out['dataset']}: {out['n_train']} train / {out['n_test']} test images", fontsize=9)
    ax.legend(fontsize=7)
    save_figure(fig, png)


def plot_traces(out: dict, png: Path) -> None:
    """Each run's epoch means of Qbar, the relative residual and the batch training error."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dgdm_tf.report.plots import save_figure

    fig, axes = plt.subplots(1, 3, figsize=(11, 3.2))
    for run in out["runs"].values():
        rows = run["trace_epoch_means"]
        for ax, k in zip(axes, ("q", "rel_residual", "train_error")):
            pts = [(r["epoch"], r[k]) for r in rows if k in r]
            if pts:
                ax.plot(*zip(*pts), marker=".", label=run["label"])
    for ax, k in zip(axes, ("Qbar (epoch mean)", "relative residual (epoch mean)",
                            "batch training error (epoch mean)")):
        ax.set_xlabel("epoch")
        ax.set_title(k, fontsize=9)
    axes[0].legend(fontsize=6)
    save_figure(fig, png)


def parse(argv=None):
    p, sub = chain_length().subcommands(__doc__.split("\n")[0])
    r = sub["run"]
    r.add_argument("--kind", choices=KINDS, required=True)
    r.add_argument("--local-state", choices=("restart", "persist"), default="restart")
    r.add_argument("--n-images", type=int, default=10000)
    r.add_argument("--epochs", type=int, nargs="+", default=[1, 2, 5, 10],
                   help="the epochs after which the model is written (the last: the run's length)")
    r.add_argument("--lr", type=float, default=None, help="RMSprop step (default: the mcem block's)")
    r.add_argument("--sweeps", type=int, default=None, help="E-step sweeps (default: the mcem block's)")
    r.add_argument("--batch-size", type=int, default=None, help="images a mini-batch (default: the mcem block's)")
    r.add_argument("--chain", type=int, default=0, help="the run's number: its seed")
    r.add_argument("--checkpoint-every", type=int, default=50)
    r.add_argument("--stop-after", type=int, default=None, help="stop after this many iterations (tests)")
    q = sub["read"]
    q.add_argument("--runs", nargs="+", required=True, help="run folders (run --out)")
    q.add_argument("--n-train", type=int, default=2000)
    q.add_argument("--n-test", type=int, default=2000)
    q.add_argument("--refit-supervised", type=int, nargs="*", default=None, metavar="EPOCH",
                   help="also read each supervised model's dictionaries by the unsupervised row's "
                        "route (Algorithm 2, the SVM refitted on the n_train images), at these "
                        "epochs (none given: every epoch)")
    a = p.parse_args(argv)
    if a.smoke:
        if a.command == "run":
            a.n_images, a.epochs, a.checkpoint_every, a.batch_size = min(a.n_images, 24), [1, 2], 2, 12
        else:
            a.n_train, a.n_test = min(a.n_train, 20), min(a.n_test, 20)
    return a


def main(argv=None):
    a = parse(argv)
    reproducible_graphs()  # as the rule scripts (workflow/scripts/_common.start)
    return run(a) if a.command == "run" else read(a)


if __name__ == "__main__":
    main()
