"""The paper's two chains run long: refinement and the supervised chain read at several lengths.

`run`: one chain (`refine`: joint refinement of every layer, `dgdm_tf.topdown.refine.run_refine`;
`supervised`: the same with labels, the Bayesian SVM trained jointly, started from the
pretrained layers as the supervised rule's `start_from: pretrained`) on the first N images
of the rows' shared training subset (`dgdm_tf.data.subsets.shared_subset`: both kinds see the
same images), for SWEEPS sweeps (the dataset block's `burn_in` of HMC step-size adaptation,
then collection), seeded `seed_for(seed, ds, "chain_length", kind, chain)`. After every sweep
the chain's dictionaries, gamma_s, mean gamma_e, top-unit usage and (supervised) beta are
recorded through run_refine's `on_step` (a reader: the draws are unchanged), in blocks of
`--every` sweeps (`snapshots/sweeps_<a>-<b>.npz`, float32 as drawn; the open block
rewritten after every sweep, before the chain's checkpoint of that sweep), so a rerun of
the same command resumes from `checkpoint/checkpoint.npz` with every checkpointed sweep
recorded. The trace is `checkpoint/trace.csv`.

`read`: for each length T, the model at T is the mean of the snapshots of the sweeps
(T - ceil(T * window), T] (default window 1/3: T = 15 averages sweeps 11..15, the default
run's burn_in 10 + collect 5); the supervised model's beta is the mean over the same sweeps
(decision values are linear in beta: the mean of the sweeps' decision values with that D).
On the first n_train / n_test images of the rows' shared subsets:
  pretrained + SVM: the pretrained layers' test-time features (route of the dataset's
    `topdown_features` block, `dgdm_tf.mcem.classify.alg2_route`: supplement Algorithm 2),
    seeds `seed_for(seed, ds, "features", split)` as the features rule;
  unsupervised + SVM: the same route with the refinement's model at T, seeds
    `seed_for(seed, ds, "topdown_features", split)` as the topdown_features rule;
  both with the Bayesian SVM as the svm rule fits it (the `svm` block on the `svm_view`, seed
  `seed_for(seed, ds, <row>, "svm")`);
  supervised: its own prediction route (`dgdm_tf.mcem.classify.classify_supervised` with the
    `supervised.predict` block), seed `seed_for(seed, ds, "supervised_predict", 0)`.
Each row's test error with its binomial standard error, and against the pretrained row on
the same test images McNemar's exact p (`dgdm_tf.report.scores.paired_errors`). Writes
OUT/chain_length.json, OUT/error_vs_length.png and OUT/top_T<T>.png (Fig. 2: the top-layer
elements in the data plane, unsupervised beside supervised, most used first).

    nohup nice -n 19 python experiments/length/chain_length.py run --kind refine \\
        --results <clone>/results/mnist --n-images 500 --sweeps 300 --chain 0 \\
        --out <runs>/refine_c0 > refine_c0.log 2>&1 &
    # started under setsid instead (a session of its own), Linux's autogroup scheduler
    # shares the cores between sessions first and nice ranks it only inside its session:
    # then lower the session too, `echo 19 > /proc/<its pid>/autogroup`
    python experiments/length/chain_length.py read --results <clone>/results/mnist \\
        --refine <runs>/refine_c0 --supervised <runs>/supervised_c0 \\
        --lengths 15 50 --n-train 1000 --n-test 1000 --out <runs>/read
    python experiments/length/chain_length.py mixing <runs>/supervised_c0 \\
        <runs>/supervised_c1 --at 300 --out <runs>/read/mixing_supervised.json
    python experiments/length/chain_length.py combine <runs>/read <runs>/read_150_300 --out <runs>/read_all

`combine`: the rows of several reads on the same images as one chain_length.json and one
OUT/error_vs_length.png; `combine-weights` likewise for `weights` reads (OUT/weights.json,
OUT/error_vs_weight.png).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import time
from pathlib import Path
from types import SimpleNamespace

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import yaml  # noqa: E402

from dgdm_tf.core.compiled import reproducible_graphs  # noqa: E402
from dgdm_tf.core.random import seed_for  # noqa: E402
from dgdm_tf.data.arrays import class_count, load_prepared  # noqa: E402
from dgdm_tf.data.subsets import shared_subset  # noqa: E402
from dgdm_tf.io import artifacts, atomic  # noqa: E402
from dgdm_tf.mcmc.diagnostics import SETTLE_TOLERANCE  # noqa: E402
from dgdm_tf.mcmc.checkpoint import CheckpointDir  # noqa: E402
from dgdm_tf.topdown.conjugate import gamma_s_summary  # noqa: E402

T0 = time.perf_counter()
KINDS = ("refine", "supervised")


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')} +{time.perf_counter() - T0:7.1f} s] {msg}", flush=True)


def settings(results: Path, config):
    """(config, dataset name, its block): RESULTS names the dataset (results/<ds>);
    ``config`` None: config/config.yaml of the repository that holds RESULTS."""
    config = Path(config) if config else results.resolve().parents[1] / "config" / "config.yaml"
    cfg = yaml.safe_load(config.read_text())
    ds = results.name
    if ds not in cfg.get("datasets", {}):
        raise SystemExit(f"{config} has no dataset {ds!r} (the name of --results {results}); "
                         f"give the config the run was made with (--config)")
    return cfg, ds, cfg["datasets"][ds]


def inputs(results: Path, config) -> SimpleNamespace:
    """What both commands read: the config (``cfg``), dataset name (``ds``) and block,
    ``seed``, ``layers``, ``hyper``, the pretrained layers (``pre``) and the prepared data
    (``data``)."""
    cfg, ds, block = settings(results, config)
    layers = block["model"]["layers"]
    return SimpleNamespace(cfg=cfg, ds=ds, block=block, seed=int(cfg["seed"]), layers=layers,
                           hyper=cfg["hyper"], pre=pretrained(results, len(layers)),
                           data=load_prepared(results / "data" / "prepared.npz"))


def subcommands(description: str):
    """(parser, {'run': ..., 'read': ...}): the two commands with the arguments both take."""
    p = argparse.ArgumentParser(description=description)
    sub = p.add_subparsers(dest="command", required=True)
    for name in ("run", "read"):
        s = sub.add_parser(name)
        s.add_argument("--results", required=True, help="results/<dataset> holding pretrain/ and data/")
        s.add_argument("--config", default=None, help="the config the pretraining ran with (default: "
                       "config/config.yaml of the repository holding RESULTS)")
        s.add_argument("--out", required=True, help="the chain's folder (run) or the output folder (read)")
        s.add_argument("--smoke", action="store_true", help="tiny sizes, to check the script runs")
    return p, sub.choices


def pretrained(results: Path, n_layers: int) -> list:
    paths = [results / "pretrain" / f"layer{l + 1}.npz" for l in range(n_layers)]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise SystemExit(f"no pretrained layers {missing}: run `snakemake --cores 2 "
                         f"{results}/pretrain/layer{n_layers}.npz` first")
    return [artifacts.read_pretrained_layer(p) for p in paths]


# --- the per-sweep snapshots ----------------------------------------------------------------

class Snapshots:
    """run_refine's ``on_step``: each sweep's dictionaries, gamma_s, mean gamma_e, top-unit
    usage and (with the SVM) beta, in blocks of ``every`` sweeps; the SVM's standardisation
    once (svm.npz). The open block is rewritten after every sweep (``sweeps_<a>-<t>.npz``,
    the one before it removed), so a chain stopped between its checkpoints (SIGTERM, a kill)
    loses no sweep it has checkpointed. A chain started afresh (t == 0) clears the folder."""

    def __init__(self, folder: Path, every: int, total: int):
        self.folder, self.every, self.total, self.rows = Path(folder), every, total, []
        self.folder.mkdir(parents=True, exist_ok=True)

    def __call__(self, t: int, chain_state) -> None:
        st, svm, _ = chain_state
        if t == 0:
            for old in self.folder.glob("*.npz"):
                old.unlink()
        rec = {f"d{l}": np.asarray(d) for l, d in enumerate(st.d)}
        rec.update(gamma_s=np.float64(gamma_s_summary(st.gamma_s)),
                   gamma_e_mean=np.float64(np.mean(np.asarray(st.gamma_e))),
                   on_rate=np.asarray(st.on).mean(axis=(0, 1, 2)))
        if svm is not None:
            rec["beta"] = np.asarray(svm.beta)
            if not (self.folder / "svm.npz").exists():
                atomic.save_npz(self.folder / "svm.npz", mean=np.asarray(svm.mean), std=np.asarray(svm.std))
        self.rows.append((t + 1, rec))
        first = self.rows[0][0]
        arrays = {k: np.stack([r[k] for _, r in self.rows]) for k in self.rows[0][1]}
        atomic.save_npz(self.folder / f"sweeps_{first:04d}-{t + 1:04d}.npz",
                        sweep=np.array([s for s, _ in self.rows]), **arrays)
        if len(self.rows) > 1:  # the same block one sweep shorter
            (self.folder / f"sweeps_{first:04d}-{t:04d}.npz").unlink(missing_ok=True)
        if (t + 1) % self.every == 0 or t + 1 == self.total:
            self.rows = []


def load_snapshots(folder: Path) -> dict:
    """Every recorded sweep's arrays stacked in sweep order, 'sweep' their numbers, and
    'svm'. A sweep in two blocks (a chain resumed from a checkpoint older than its last
    block) is taken from the later block, which redrew it from the same seeds. Sweeps
    missing (a chain of an older version killed between blocks) are left out:
    :func:`model_at` refuses a window that needs them."""
    # in the order they were written: a sweep in two blocks is the later one's
    blocks = sorted(Path(folder).glob("sweeps_*.npz"), key=lambda b: b.stat().st_mtime_ns)
    if not blocks:
        raise SystemExit(f"no snapshots in {folder}: run `chain_length.py run` first")
    rows = {}
    for b in blocks:
        with np.load(b) as z:
            part = {k: z[k] for k in z.files}
        for i, s in enumerate(part["sweep"]):
            rows[int(s)] = {k: v[i] for k, v in part.items()}
    order = sorted(rows)
    out = {k: np.stack([rows[s][k] for s in order]) for k in rows[order[0]]}
    svm = Path(folder) / "svm.npz"
    out["svm"] = dict(np.load(svm)) if svm.exists() else None
    return out


def window(length: int, frac: float) -> range:
    """The sweeps (1-based) the model at ``length`` averages: the last ceil(length * frac)."""
    return range(length - max(1, math.ceil(length * frac)) + 1, length + 1)


def model_at(snaps: dict, length: int, frac: float) -> dict:
    """The mean of the snapshots over :func:`window` (float64 sums, then float32)."""
    sweeps = [int(s) for s in snaps["sweep"]]
    if length > max(sweeps):
        raise SystemExit(f"the chain has {max(sweeps)} sweeps recorded, not {length}")
    want = list(window(length, frac))
    pos = {s: i for i, s in enumerate(sweeps)}
    missing = [s for s in want if s not in pos]
    if missing:
        raise SystemExit(f"the model at sweep {length} averages sweeps {want[0]}..{want[-1]}, and "
                         f"the snapshots lack {missing[:5]}: read another length, or rerun the chain")
    sel = np.array([pos[s] for s in want])
    m = {k: v[sel].astype(np.float64).mean(axis=0) for k, v in snaps.items()
         if k not in ("sweep", "svm")}
    n_layers = sum(k.startswith("d") and k[1:].isdigit() for k in m)
    return {"D": [m[f"d{l}"].astype(np.float32) for l in range(n_layers)],
            "gamma_s": float(m["gamma_s"]), "gamma_e_mean": float(m["gamma_e_mean"]),
            "on_rate": m["on_rate"], "beta": m.get("beta"),
            "sweeps": [want[0], want[-1]]}


# --- run --------------------------------------------------------------------------------------

def run(a) -> dict:
    from dgdm_tf.topdown import refine

    results = Path(a.results)
    cfg, ds, block = settings(results, a.config)
    seed, layers, hyper = int(cfg["seed"]), block["model"]["layers"], cfg["hyper"]
    rcfg = block[a.kind]
    pre = pretrained(results, len(layers))
    d = load_prepared(results / "data" / "prepared.npz")
    x, labels, idx = shared_subset(d, "train", block["n_train"], a.n_images, seed, ds)
    chain_seed = seed_for(seed, ds, "chain_length", a.kind, a.chain)
    burn_in = int(rcfg["burn_in"] if a.burn_in is None else a.burn_in)
    if not 0 <= burn_in < a.sweeps:
        raise SystemExit(f"--burn-in {burn_in} must be below --sweeps {a.sweeps}")
    out = Path(a.out)
    # the block's settings, the length and checkpoints this run's; one chain
    opts = (refine.SupervisedOptions if a.kind == "supervised" else refine.RefineOptions).from_config(rcfg)
    opts = dataclasses.replace(opts, burn_in=burn_in, collect=a.sweeps - burn_in, thin=1,
                               checkpoint_every=a.every, chains=1, settle_tolerance=SETTLE_TOLERANCE,
                               workers=1)
    if a.gamma is not None:
        if a.kind != "supervised":
            raise SystemExit("--gamma is the supervised chain's hinge weight: give --kind supervised")
        opts = dataclasses.replace(opts, gamma=float(a.gamma))
    if a.balance_share is not None:
        if a.kind != "supervised":
            raise SystemExit("--balance-share sets the supervised chain's hinge weight: give --kind supervised")
        opts = dataclasses.replace(opts, gamma_mode="balanced", balance_share=float(a.balance_share))
    start = refine.Start([z.D for z in pre], layers, hyper, gamma_e_init=pre[0].gamma_e_mean,
                         gamma_s_init=pre[-1].gamma_w,
                         n_classes=class_count(d) if a.kind == "supervised" else None)
    about = {"kind": a.kind, "dataset": ds, "results": str(results), "config": str(a.config),
             "n_images": len(idx), "image_indices": [int(i) for i in idx], "sweeps": a.sweeps,
             "burn_in": burn_in, "chain": a.chain, "chain_seed": chain_seed, "every": a.every,
             "start": "pretrained", "chunk": rcfg["chunk"], "scan": rcfg["scan"],
             **({"gamma": float(opts.gamma), "gamma_mode": opts.gamma_mode,
                 "balance_share": float(opts.balance_share)} if a.kind == "supervised" else {})}
    out.mkdir(parents=True, exist_ok=True)
    atomic.write_json(out / "run.json", about)
    say(f"{a.kind} chain {a.chain} (seed {chain_seed}) on {x.shape} from the pretrained layers "
        f"{[z.D.shape for z in pre]}: {a.sweeps} sweeps (burn-in {burn_in}), snapshots every "
        f"{a.every} into {out / 'snapshots'}")
    res = refine.run_refine(x, start, opts, seed=chain_seed,
                            labels=labels if a.kind == "supervised" else None,
                            checkpoint=CheckpointDir(out / "checkpoint", stop_after=a.stop_after),
                            progress=say, on_step=Snapshots(out / "snapshots", a.every, a.sweeps))
    if res is None:
        say(f"stopped after sweep {a.stop_after} (--stop-after): rerun to resume")
        return about
    atomic.write_json(out / "done.json", {**about, "chain_seconds": res["seconds"]})
    say(f"done: {a.sweeps} sweeps, {res['seconds']:.0f} s of sweeps")
    return about


# --- read -------------------------------------------------------------------------------------

def svm_row(f_train, y_train, f_test, y_test, block, n_classes, seed) -> np.ndarray:
    """The test predictions of the Bayesian SVM as the svm rule fits it."""
    from dgdm_tf.supervised.feature_view import svm_view
    from dgdm_tf.supervised.options import SvmOptions
    from dgdm_tf.supervised.svm_classifier import BayesianSVM

    svm = BayesianSVM(n_classes, SvmOptions.from_config(block["svm"]), seed=seed)
    svm.fit(svm_view(f_train, block["svm_view"]), y_train)
    return np.asarray(svm.predict(svm_view(f_test, block["svm_view"])))


def topdown_row(x, y, dictionaries, gamma_s, gamma_e, block, hyper, layers, n_classes, ds, seed,
                salt, row) -> tuple:
    """Features of both splits by the topdown_features block's route, then the SVM."""
    from dgdm_tf.mcem.classify import top_features
    from dgdm_tf.mcem.options import topdown_route
    from dgdm_tf.topdown.options import Start

    route = topdown_route(block["topdown_features"])
    start = Start(dictionaries, layers, hyper, gamma_e_init=gamma_e, gamma_s_init=gamma_s)
    f, secs = {}, 0.0
    for split in ("train", "test"):
        r = top_features(x[split], start, route, seed=seed_for(seed, ds, salt, split), progress=None)
        f[split], secs = r["features"], secs + float(r["seconds"])
    t = time.perf_counter()
    pred = svm_row(f["train"], y["train"], f["test"], y["test"], block, n_classes,
                   seed_for(seed, ds, row, "svm"))
    return pred, {"feature_seconds": secs, "svm_seconds": time.perf_counter() - t}


def scored(pred, y, base=None) -> dict:
    from dgdm_tf.report.scores import error_pct, paired_errors, standard_error_pct

    e = error_pct(pred, y)
    # each test image's predicted label, so that any two rows can be paired afterwards
    out = {"error_pct": e, "se_pct": standard_error_pct(e, len(y)), "predicted": [int(v) for v in pred]}
    if base is not None:
        out["vs_pretrained"] = paired_errors(base, pred, y)
    return out


def read_inputs(a) -> tuple:
    """What `read` and `weights` read: (cfg, ds, block, seed, layers, hyper, the pretrained
    layers, the prepared data, n_classes, the shared subsets of both splits (the first
    a.n_train / a.n_test), their images x and labels y by split)."""
    results = Path(a.results)
    cfg, ds, block = settings(results, a.config)
    seed, layers, hyper = int(cfg["seed"]), block["model"]["layers"], cfg["hyper"]
    d = load_prepared(results / "data" / "prepared.npz")
    subsets = {"train": shared_subset(d, "train", block["n_train"], a.n_train, seed, ds),
               "test": shared_subset(d, "test", block["n_test"], a.n_test, seed, ds)}
    return (cfg, ds, block, seed, layers, hyper, pretrained(results, len(layers)), d, class_count(d),
            subsets, {k: v[0] for k, v in subsets.items()}, {k: v[1] for k, v in subsets.items()})


def read(a) -> dict:
    from dgdm_tf.core.model import DeepModel, project_top_to_data
    from dgdm_tf.mcem.classify import classify_supervised
    from dgdm_tf.mcem.options import PredictOptions
    from dgdm_tf.report import model_plots

    results = Path(a.results)
    cfg, ds, block, seed, layers, hyper, pre, d, n_classes, subsets, x, y = read_inputs(a)
    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    common = dict(block=block, hyper=hyper, layers=layers, n_classes=n_classes, ds=ds, seed=seed)
    t = time.perf_counter()
    base, cost = topdown_row(x, y, [z.D for z in pre], pre[-1].gamma_w, pre[0].gamma_e_mean,
                             salt="features", row="pretrained_svm", **common)
    out = {"dataset": ds, "results": str(results), "n_train": len(y["train"]), "n_test": len(y["test"]),
           "test_indices": [int(i) for i in subsets["test"][2]], "window": a.window,
           "estimator": "mean of the per-sweep snapshots over the sweeps (T - ceil(T * window), T]",
           "pretrained_svm": {**scored(base, y["test"]), **cost, "seconds": time.perf_counter() - t},
           "lengths": {}}
    say(f"pretrained + SVM: {out['pretrained_svm']['error_pct']:.2f} % "
        f"({time.perf_counter() - t:.0f} s)")
    snaps = {k: load_snapshots(Path(p) / "snapshots") for k, p in (("refine", a.refine),
                                                                   ("supervised", a.supervised)) if p}
    for k, p in (("refine", a.refine), ("supervised", a.supervised)):
        if p:
            out[f"{k}_run"] = json.loads((Path(p) / "run.json").read_text())
    predict = PredictOptions.from_supervised(block["supervised"])
    for length in a.lengths:
        row = {}
        grids = {}
        if "refine" in snaps:
            t = time.perf_counter()
            m = model_at(snaps["refine"], length, a.window)
            pred, cost = topdown_row(x, y, m["D"], m["gamma_s"], m["gamma_e_mean"],
                                     salt="topdown_features", row="unsupervised_svm", **common)
            row["unsupervised_svm"] = {**scored(pred, y["test"], base), **cost, "sweeps_averaged": m["sweeps"],
                                       "seconds": time.perf_counter() - t}
            grids["unsupervised"] = m
            say(f"T={length}: unsupervised + SVM {row['unsupervised_svm']['error_pct']:.2f} % "
                f"(sweeps {m['sweeps']}, {time.perf_counter() - t:.0f} s)")
        if "supervised" in snaps:
            t = time.perf_counter()
            m = model_at(snaps["supervised"], length, a.window)
            svm = snaps["supervised"]["svm"]
            sup = SimpleNamespace(samples_D=[v[None] for v in m["D"]], samples_beta=m["beta"][None],
                                  svm_mean=svm["mean"], svm_std=svm["std"], gamma_s=m["gamma_s"],
                                  gamma_e_mean=m["gamma_e_mean"])
            res = classify_supervised(x["test"], sup, predict, layers, hyper=hyper,
                                      seeds=[seed_for(seed, ds, "supervised_predict", 0)])
            pred = np.argmax(res.scores, 1)
            row["supervised"] = {**scored(pred, y["test"], base), "feature_seconds": float(res.seconds),
                                 "sweeps_averaged": m["sweeps"], "seconds": time.perf_counter() - t}
            grids["supervised"] = m
            say(f"T={length}: supervised {row['supervised']['error_pct']:.2f} % "
                f"({time.perf_counter() - t:.0f} s)")
            if a.refit_supervised:
                # the supervised dictionaries read as the unsupervised row is (Algorithm 2,
                # then the Bayesian SVM refitted on the n_train images): what the joint
                # SVM's test route costs, apart from what the dictionaries learnt
                t = time.perf_counter()
                pred, cost = topdown_row(x, y, m["D"], m["gamma_s"], m["gamma_e_mean"],
                                         salt="topdown_features", row="unsupervised_svm", **common)
                row["supervised_refit"] = {**scored(pred, y["test"], base), **cost,
                                           "sweeps_averaged": m["sweeps"],
                                           "seconds": time.perf_counter() - t}
                say(f"T={length}: supervised dictionaries + refitted SVM "
                    f"{row['supervised_refit']['error_pct']:.2f} % ({time.perf_counter() - t:.0f} s)")
        if "unsupervised_svm" in row:
            # the paper's order is supervised < unsupervised: each supervised reading paired
            # with the unsupervised row of the same length on the same test images
            from dgdm_tf.report.scores import paired_errors

            for k in ("supervised", "supervised_refit"):
                if k in row:
                    row[k]["vs_unsupervised"] = paired_errors(
                        np.asarray(row["unsupervised_svm"]["predicted"]), np.asarray(row[k]["predicted"]),
                        y["test"])
        out["lengths"][str(length)] = row
        if grids:
            model = DeepModel(x["test"].shape[1:], layers, hyper).with_ks(
                [v.shape[-1] for v in next(iter(grids.values()))["D"]])
            proj = {k: project_top_to_data(model, m["D"])[np.argsort(-m["on_rate"])] for k, m in grids.items()}
            names = list(proj)
            png = out_dir / f"top_T{length}.png"
            title = f"{ds}: top-layer elements in the data plane after {length} sweeps, most used first"
            if len(names) == 2:
                model_plots.plot_image_pair(proj[names[0]], proj[names[1]], tuple(names), png, title)
            else:
                model_plots.plot_image_grid(proj[names[0]], png, f"{title} ({names[0]})")
    out["wall_seconds"] = time.perf_counter() - T0
    atomic.write_json(out_dir / "chain_length.json", out)
    plot_lengths(out, out_dir / "error_vs_length.png")
    say(f"wrote {out_dir / 'chain_length.json'}")
    return out


def plot_lengths(out: dict, png: Path) -> None:
    """Test error against the chain's length, each row with its standard error; the
    pretrained row on the same images as a band."""
    from dgdm_tf.report.plots import plt, save_figure  # Agg, set there

    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    lengths = sorted(int(t) for t in out["lengths"])  # the json keeps its keys sorted as text
    b = out["pretrained_svm"]
    ax.axhspan(b["error_pct"] - b["se_pct"], b["error_pct"] + b["se_pct"], color="0.85")
    ax.axhline(b["error_pct"], color="0.4", label="pretrained + SVM")
    for row, label in (("unsupervised_svm", "unsupervised + SVM"), ("supervised", "supervised"),
                       ("supervised_refit", "supervised dictionaries + refitted SVM")):
        pts = [(t, out["lengths"][str(t)][row]) for t in lengths if row in out["lengths"][str(t)]]
        if pts:
            ax.errorbar([t for t, _ in pts], [r["error_pct"] for _, r in pts],
                        yerr=[r["se_pct"] for _, r in pts], marker="o", capsize=3, label=label)
    ax.set_xlabel("sweeps of the chain")
    ax.set_ylabel("test error (%)")
    ax.set_title(f"{out['dataset']}: {out['n_train']} train / {out['n_test']} test images", fontsize=9)
    ax.legend(fontsize=8)
    save_figure(fig, png)


def parse(argv=None):
    p, sub = subcommands(__doc__.split("\n")[0])
    r = sub["run"]
    r.add_argument("--kind", choices=KINDS, required=True)
    r.add_argument("--n-images", type=int, default=500)
    r.add_argument("--sweeps", type=int, default=300)
    r.add_argument("--burn-in", type=int, default=None, help="default: the dataset block's")
    r.add_argument("--chain", type=int, default=0, help="the chain's number: its seed")
    r.add_argument("--every", type=int, default=10, help="sweeps between checkpoints (and snapshot blocks)")
    r.add_argument("--stop-after", type=int, default=None, help="stop after this many sweeps (tests)")
    r.add_argument("--gamma", type=float, default=None,
                   help="supervised: the SVM's hinge weight (default: the block's supervised.gamma); "
                        "with --balance-share its start")
    r.add_argument("--balance-share", type=float, default=None,
                   help="supervised: gamma_mode balanced, re-set every balance_every sweeps to give "
                        "the labels this median share of a top unit's precision")
    q = sub["read"]
    q.add_argument("--refine", default=None, help="a refinement chain's folder (run --out)")
    q.add_argument("--supervised", default=None, help="a supervised chain's folder (run --out)")
    q.add_argument("--lengths", type=int, nargs="+", default=[15, 50, 150, 300])
    q.add_argument("--window", type=float, default=1 / 3, help="the share of the last sweeps averaged")
    q.add_argument("--n-train", type=int, default=1000)
    q.add_argument("--n-test", type=int, default=1000)
    q.add_argument("--refit-supervised", action="store_true",
                   help="also read the supervised dictionaries by the unsupervised row's route "
                        "(Algorithm 2, the SVM refitted on the n_train images)")
    a = p.parse_args(argv)
    if a.command == "read" and not (a.refine or a.supervised):
        p.error("read needs --refine or --supervised (or both)")
    if a.smoke and a.command == "run":
        a.n_images, a.sweeps, a.every = min(a.n_images, 8), min(a.sweeps, 3), 2
    if a.smoke and a.command == "read":
        a.n_train, a.n_test = min(a.n_train, 20), min(a.n_test, 10)
    return a


# --- weights: the supervised row against the hinge weight ---------------------------------------

def chain_label(run: dict) -> str:
    """A supervised chain's name in the weights table: its hinge weight, or its balance."""
    if run.get("gamma_mode") == "balanced":
        return f"balanced {run['balance_share']:g}"
    return f"gamma {run.get('gamma', 1.0):g}"


def trace_at(folder: Path, length: int, frac: float) -> dict:
    """From a chain's trace.csv: the labels' share columns averaged over the window of
    :func:`window` (NaN where not traced), and rel_residual, gamma_e_mean, svm_gamma,
    svm_train_error (window mean) and every dmove_layer<l> at sweep ``length``."""
    import pandas as pd

    from dgdm_tf.topdown.label_share import COLUMNS

    tr = pd.read_csv(Path(folder) / "checkpoint" / "trace.csv").set_index("sweep")
    if length not in tr.index:
        raise SystemExit(f"{folder}'s trace has no sweep {length} (it has {tr.index.max()})")
    win = tr.loc[list(window(length, frac))]
    out = {c: float(win[c].mean()) for c in (*COLUMNS, "svm_train_error") if c in tr}
    at = tr.loc[length]
    out.update({c: float(at[c]) for c in tr.columns
                if c in ("rel_residual", "gamma_e_mean", "svm_gamma") or c.startswith("dmove_layer")})
    return out


def checkpoint_purity(folder: Path, labels: np.ndarray, n_classes: int) -> dict:
    """Element purity (Fig. 2 as a number: :func:`dgdm_tf.report.element_classes.class_purity`)
    of a chain's posterior-mean top layer over its collected sweeps, at its checkpoint's
    sweep; ``labels`` those of the chain's images."""
    from dgdm_tf.report.element_classes import checkpoint_usage, class_purity

    usage, sweep = checkpoint_usage(Path(folder) / "checkpoint" / "checkpoint.npz")
    r = class_purity(usage, labels, n_classes)
    return {"sweep": sweep, "weighted_purity": r["weighted_purity"],
            "shuffled_weighted_purity": r["shuffled_weighted_purity"]}


def weights(a) -> dict:
    """`weights`: the supervised chains of several hinge weights (`run --kind supervised
    --gamma G`, or `--balance-share`) on the same images as one refinement chain, read at
    each length T on the same test images. Per chain and T: its own route (the
    `supervised.predict` block, labels-free) on the test images and on its own n_train
    training images; its dictionaries with the SVM refitted (the unsupervised row's
    route); each paired (McNemar exact) with the unsupervised and pretrained rows; the
    labels' share, the chain's own training error (svm_train_error, the label-informed
    features) and the relative residual from its trace; D[L]'s move from the start
    against the refinement's; element purity at its checkpoint."""
    from dgdm_tf.mcem.classify import classify_supervised
    from dgdm_tf.mcem.options import PredictOptions
    from dgdm_tf.report.scores import error_pct, paired_errors

    cfg, ds, block, seed, layers, hyper, pre, d, n_classes, subsets, x, y = read_inputs(a)
    folders = [Path(a.refine)] + [Path(f) for f in a.supervised]
    runs = [json.loads((f / "run.json").read_text()) for f in folders]
    own_images = [int(i) for i in subsets["train"][2]]
    for f, r in zip(folders, runs):
        if r["n_images"] < len(own_images) or r["image_indices"][:len(own_images)] != own_images:
            raise SystemExit(f"{f} ran on other images than the first --n-train {len(own_images)} "
                             f"of the shared training subset: give at most the chains' own number")
    labels_chain = np.asarray(d["y_train"])[np.asarray(runs[0]["image_indices"])]
    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    common = dict(block=block, hyper=hyper, layers=layers, n_classes=n_classes, ds=ds, seed=seed)
    base, _ = topdown_row(x, y, [z.D for z in pre], pre[-1].gamma_w, pre[0].gamma_e_mean,
                          salt="features", row="pretrained_svm", **common)
    out = {"dataset": ds, "n_train": len(y["train"]), "n_test": len(y["test"]), "window": a.window,
           "test_indices": [int(i) for i in subsets["test"][2]],
           "estimator": "model at T: the mean of the per-sweep snapshots over (T - ceil(T * window), T]; "
                        "the labels' share and the chain's own training error: their trace's mean "
                        "over the same sweeps; purity: the posterior-mean top layer over the "
                        "collected sweeps at the checkpoint",
           "pretrained_svm": scored(base, y["test"]), "lengths": {}}
    say(f"pretrained + SVM: {out['pretrained_svm']['error_pct']:.2f} %")
    predict = PredictOptions.from_supervised(block["supervised"])
    top = f"dmove_layer{len(layers)}"
    for length in a.lengths:
        m = model_at(load_snapshots(folders[0] / "snapshots"), length, a.window)
        pred_u, _ = topdown_row(x, y, m["D"], m["gamma_s"], m["gamma_e_mean"],
                                salt="topdown_features", row="unsupervised_svm", **common)
        unsup = {**scored(pred_u, y["test"], base), **trace_at(folders[0], length, a.window),
                 "purity": checkpoint_purity(folders[0], labels_chain, n_classes)}
        say(f"T={length}: unsupervised + SVM {unsup['error_pct']:.2f} %")
        rows = {}
        for f, r in zip(folders[1:], runs[1:]):
            t = time.perf_counter()
            snaps = load_snapshots(f / "snapshots")
            m = model_at(snaps, length, a.window)
            sup = SimpleNamespace(samples_D=[v[None] for v in m["D"]], samples_beta=m["beta"][None],
                                  svm_mean=snaps["svm"]["mean"], svm_std=snaps["svm"]["std"],
                                  gamma_s=m["gamma_s"], gamma_e_mean=m["gamma_e_mean"])
            own = {}
            for split in ("test", "train"):
                res = classify_supervised(x[split], sup, predict, layers, hyper=hyper,
                                          seeds=[seed_for(seed, ds, "supervised_predict", 0)])
                own[split] = np.argmax(res.scores, 1)
            refit, _ = topdown_row(x, y, m["D"], m["gamma_s"], m["gamma_e_mean"],
                                   salt="topdown_features", row="unsupervised_svm", **common)
            tr = trace_at(f, length, a.window)
            row = {"folder": str(f), "gamma": r.get("gamma"), "gamma_mode": r.get("gamma_mode", "fixed"),
                   "own": {**scored(own["test"], y["test"], base),
                           "vs_unsupervised": paired_errors(pred_u, own["test"], y["test"])},
                   "refit": {**scored(refit, y["test"], base),
                             "vs_unsupervised": paired_errors(pred_u, refit, y["test"])},
                   # the train / test feature shift: labels-free reading of the chain's own
                   # images against the chain's label-informed draws
                   "train_error_test_route_pct": error_pct(own["train"], y["train"]),
                   "train_error_own_features_pct": 100.0 * tr.get("svm_train_error", float("nan")),
                   "dmove_top_vs_unsupervised": tr[top] / unsup[top] if unsup[top] > 0 else None,
                   **{k: v for k, v in tr.items() if k != "svm_train_error"},
                   "purity": checkpoint_purity(f, labels_chain, n_classes),
                   "seconds": time.perf_counter() - t}
            if a.drop_predictions:
                row["own"].pop("predicted")
                row["refit"].pop("predicted")
            rows[chain_label(r)] = row
            say(f"T={length} {chain_label(r)}: own {row['own']['error_pct']:.2f} % "
                f"(vs unsupervised p {row['own']['vs_unsupervised']['mcnemar_exact_p']:.3g}), refit "
                f"{row['refit']['error_pct']:.2f} %, share {tr.get('label_share_median', float('nan')):.3g}, "
                f"train {row['train_error_own_features_pct']:.2f} % own features / "
                f"{row['train_error_test_route_pct']:.2f} % by the test route, purity "
                f"{row['purity']['weighted_purity']:.3f} ({row['seconds']:.0f} s)")
        out["lengths"][str(length)] = {"unsupervised_svm": unsup, "supervised": rows}
    out["wall_seconds"] = time.perf_counter() - T0
    atomic.write_json(out_dir / "weights.json", out)
    plot_weights(out, out_dir / "error_vs_weight.png")
    say(f"wrote {out_dir / 'weights.json'}")
    return out


def plot_weights(out: dict, png: Path) -> None:
    """Per length: test error of the own route and the refitted reading against the
    hinge weight (a balanced chain at its last weight), the unsupervised and
    pretrained rows as lines; the labels' share; element purity; the training error of
    the chain's own features against the test route's on the same images."""
    from dgdm_tf.report.plots import plt, save_figure  # Agg, set there

    lengths = sorted(out["lengths"], key=int)
    fig, axes = plt.subplots(1, 4, figsize=(17, 3.6))
    for li, length in enumerate(lengths):
        rec = out["lengths"][length]
        # fixed weights as a curve; a balanced chain (its weight set by the share) a star at its last
        every = sorted(rec["supervised"].values(), key=lambda r: r.get("svm_gamma") or r["gamma"] or 1.0)
        rows = [r for r in every if r.get("gamma_mode", "fixed") == "fixed"]
        g = [r.get("svm_gamma") or r["gamma"] for r in rows]
        colour = f"C{li}"
        mk = dict(color=colour, marker="o")
        for r in every:
            if r.get("gamma_mode", "fixed") != "fixed":
                x = [r.get("svm_gamma") or r["gamma"]]
                star = dict(color=colour, marker="*", ms=11, ls="none")
                axes[0].plot(x, [r["own"]["error_pct"]], label=f"balanced chain, own route, T={length}", **star)
                axes[1].plot(x, [r.get("label_share_median", float("nan"))], **star)
                axes[2].plot(x, [r["purity"]["weighted_purity"]], **star)
                axes[3].plot(x, [r["train_error_test_route_pct"]], **star)
        axes[0].plot(g, [r["own"]["error_pct"] for r in rows], label=f"own route, T={length}", **mk)
        axes[0].plot(g, [r["refit"]["error_pct"] for r in rows], ls="--",
                     label=f"dictionaries + refitted SVM, T={length}", **mk)
        axes[0].axhline(rec["unsupervised_svm"]["error_pct"], color=colour, ls=":",
                        label=f"unsupervised + SVM, T={length}")
        axes[1].plot(g, [r.get("label_share_median", float("nan")) for r in rows],
                     label=f"median, T={length}", **mk)
        axes[1].plot(g, [r.get("label_share_margin", float("nan")) for r in rows], ls="--",
                     label=f"median inside a margin, T={length}", **mk)
        axes[2].plot(g, [r["purity"]["weighted_purity"] for r in rows], label=f"supervised, T={length}", **mk)
        axes[2].axhline(rec["unsupervised_svm"]["purity"]["weighted_purity"], color=colour, ls=":",
                        label="unsupervised")
        axes[3].plot(g, [r["train_error_own_features_pct"] for r in rows], ls="--",
                     label=f"own (label-informed) features, T={length}", **mk)
        axes[3].plot(g, [r["train_error_test_route_pct"] for r in rows],
                     label=f"test route on the same images, T={length}", **mk)
    axes[0].axhline(out["pretrained_svm"]["error_pct"], color="0.4", label="pretrained + SVM")
    purity0 = [r["purity"]["shuffled_weighted_purity"] for rec in out["lengths"].values()
               for r in rec["supervised"].values()]
    axes[2].axhline(float(np.mean(purity0)), color="k", ls=":", lw=0.8, label="labels shuffled")
    titles = ("test error (%)", "labels' share of a top unit's precision", "element purity (weighted)",
              "training error (%) of the chain's images")
    for ax, title in zip(axes, titles):
        ax.set_xscale("log")
        ax.set_xlabel("hinge weight gamma (balanced: its last)")
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=6)
    axes[1].set_yscale("log")
    fig.suptitle(f"{out['dataset']}: the supervised row against the hinge weight, "
                 f"{out['n_train']} train / {out['n_test']} test images", fontsize=9)
    fig.tight_layout()
    save_figure(fig, png)


def parse_weights(argv):
    p = argparse.ArgumentParser(prog="chain_length.py weights", description=weights.__doc__.split("\n")[0])
    p.add_argument("--results", required=True, help="results/<dataset> holding pretrain/ and data/")
    p.add_argument("--config", default=None, help="the config the pretraining ran with")
    p.add_argument("--refine", required=True, help="the refinement chain's folder (run --out)")
    p.add_argument("--supervised", nargs="+", required=True, help="supervised chains' folders")
    p.add_argument("--lengths", type=int, nargs="+", default=[50])
    p.add_argument("--window", type=float, default=1 / 3, help="the share of the last sweeps averaged")
    p.add_argument("--n-train", type=int, default=500, help="the chains' own images (the first of theirs)")
    p.add_argument("--n-test", type=int, default=1000)
    p.add_argument("--drop-predictions", action="store_true", help="keep no per-image predictions")
    p.add_argument("--out", required=True)
    p.add_argument("--smoke", action="store_true", help="tiny sizes, to check the script runs")
    a = p.parse_args(argv)
    if a.smoke:
        a.n_train, a.n_test = min(a.n_train, 8), min(a.n_test, 10)
    return a


# --- mixing ---------------------------------------------------------------------------------

def mixing(argv) -> dict:
    """`mixing CHAIN_DIR ... [--at T] [--out F] [--png P]`: the chains' traced scalars read
    together by `dgdm_tf.mcmc.diagnostics.trace_settlement` (as a workflow run's mixing.json:
    per scalar each chain's drift over its last third, R-hat across the chains and bulk ESS of
    the draws after burn-in) over their first T sweeps (default: the sweeps every chain has);
    P draws the traces, one panel a scalar (`dgdm_tf.report.plots.plot_chain_traces`)."""
    import pandas as pd

    from dgdm_tf.mcmc.diagnostics import drift_window, trace_settlement
    from dgdm_tf.topdown.refine import settle_columns

    p = argparse.ArgumentParser(prog="chain_length.py mixing", description=mixing.__doc__)
    p.add_argument("chains", nargs="+", help="chain folders (run --out)")
    p.add_argument("--at", type=int, default=None, help="read the first T sweeps")
    p.add_argument("--out", default=None, help="write the result here as JSON")
    p.add_argument("--png", default=None, help="draw the chains' traces here (one panel a scalar)")
    a = p.parse_args(argv)
    traces = [pd.read_csv(Path(c) / "checkpoint" / "trace.csv") for c in a.chains]
    burn = {json.loads((Path(c) / "run.json").read_text())["burn_in"] for c in a.chains}
    if len(burn) != 1:
        raise SystemExit(f"the chains' burn-in differ ({sorted(burn)}): read chains of one run setting")
    n = min(len(t) for t in traces) if a.at is None else a.at
    if any(len(t) < n for t in traces):
        raise SystemExit(f"--at {n}: a chain has only {min(len(t) for t in traces)} sweeps")
    # the scalars a workflow run's refine / supervised mixing.json reads
    names = settle_columns(sum(c.startswith("dnorm_layer") for c in traces[0]), "beta_norm" in traces[0])
    burn_in = burn.pop()
    series = [{c: t[c].to_numpy()[:n] for c in names} for t in traces]
    out = trace_settlement(series, collected=np.arange(1, n + 1) > burn_in)
    out = {"chains": [str(c) for c in a.chains], "sweeps": n, **out}
    print(json.dumps(out, indent=1))
    if a.out:
        atomic.write_json(a.out, out)
    if a.png:
        from dgdm_tf.report.plots import plot_chain_traces

        plot_chain_traces(series, a.png, f"{len(series)} chains, {n} sweeps (shaded: burn-in; "
                          f"dotted: the drift's window)", burn_in=burn_in, window=drift_window(n),
                          drift={k: v["drift"] for k, v in out["scalars"].items()})
    return out


def reads_of_one_subset(argv, command, reader: str, name: str) -> tuple:
    """(arguments, the JSON ``name`` of each READ_DIR) for ``command`` (:func:`combine` or
    :func:`combine_weights`, whose docstring is its help): reads of one --results,
    --n-train, --n-test and --window (the same test indices, window and pretrained row),
    else SystemExit naming the first read that differs."""
    prog = command.__name__.replace("_", "-")
    p = argparse.ArgumentParser(prog=f"chain_length.py {prog}", description=command.__doc__)
    p.add_argument("reads", nargs="+", help=f"folders written by {reader} ({reader} --out)")
    p.add_argument("--out", required=True, help="the output folder")
    a = p.parse_args(argv)
    outs = [json.loads((Path(r) / name).read_text()) for r in a.reads]
    key = lambda o: (o["test_indices"], o["n_train"], o.get("window"),  # noqa: E731
                     o["pretrained_svm"]["error_pct"])
    for r, o in zip(a.reads, outs):
        if key(o) != key(outs[0]):
            raise SystemExit(f"{r} read other images, another window or another pretrained row than "
                             f"{a.reads[0]}: {prog} only reads of one --results, --n-train, "
                             "--n-test and --window")
    return a, outs


def combine(argv) -> dict:
    """`combine READ_DIR ... --out DIR`: the rows of several `read` runs on the same images
    (the same test indices and pretrained row) as one chain_length.json and one
    error_vs_length.png, so that lengths read at different times draw as one curve. A row
    two reads give at the same length must agree."""
    a, outs = reads_of_one_subset(argv, combine, "read", "chain_length.json")
    merged = {**outs[0], "reads": [str(r) for r in a.reads], "lengths": {}}
    for r, o in zip(a.reads, outs):
        for length, rows in o["lengths"].items():
            have = merged["lengths"].setdefault(length, {})
            for k, v in rows.items():
                if k in have and have[k]["error_pct"] != v["error_pct"]:
                    raise SystemExit(f"{r} reads {k} at T={length} as {v['error_pct']:.2f} %, an earlier "
                                     f"read as {have[k]['error_pct']:.2f} %: they are not the same chain")
                have.setdefault(k, v)
    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic.write_json(out_dir / "chain_length.json", merged)
    plot_lengths(merged, out_dir / "error_vs_length.png")
    say(f"wrote {out_dir / 'chain_length.json'}: lengths {sorted(int(t) for t in merged['lengths'])}")
    return merged


def combine_weights(argv) -> dict:
    """`combine-weights READ_DIR ... --out DIR`: the rows of several `weights` runs on the
    same images (the same test indices and pretrained row) as one weights.json and one
    error_vs_weight.png, so that chains read at different times draw as one curve a length.
    The unsupervised row of a length, and a chain read twice at one length, must agree."""
    a, outs = reads_of_one_subset(argv, combine_weights, "weights", "weights.json")
    merged = {**outs[0], "reads": [str(r) for r in a.reads], "lengths": {}}
    for r, o in zip(a.reads, outs):
        for length, rec in o["lengths"].items():
            have = merged["lengths"].setdefault(length, {"unsupervised_svm": rec["unsupervised_svm"],
                                                         "supervised": {}})
            if have["unsupervised_svm"]["error_pct"] != rec["unsupervised_svm"]["error_pct"]:
                raise SystemExit(f"{r} reads the unsupervised row at T={length} as "
                                 f"{rec['unsupervised_svm']['error_pct']:.2f} %, an earlier read as "
                                 f"{have['unsupervised_svm']['error_pct']:.2f} %: not the same refinement")
            for k, v in rec["supervised"].items():
                old = have["supervised"].get(k)
                if old is not None and old["own"]["error_pct"] != v["own"]["error_pct"]:
                    raise SystemExit(f"{r} reads {k} at T={length} as {v['own']['error_pct']:.2f} %, an "
                                     f"earlier read as {old['own']['error_pct']:.2f} %: not the same chain")
                have["supervised"].setdefault(k, v)
    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic.write_json(out_dir / "weights.json", merged)
    plot_weights(merged, out_dir / "error_vs_weight.png")
    say(f"wrote {out_dir / 'weights.json'}: lengths {sorted(int(t) for t in merged['lengths'])}, "
        f"{sum(len(v['supervised']) for v in merged['lengths'].values())} chain readings")
    return merged


def main(argv=None):
    import sys

    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["mixing"]:
        return mixing(argv[1:])
    if argv[:1] == ["combine"]:
        return combine(argv[1:])
    if argv[:1] == ["combine-weights"]:
        return combine_weights(argv[1:])
    if argv[:1] == ["weights"]:
        a = parse_weights(argv[1:])
        reproducible_graphs()
        return weights(a)
    a = parse(argv)
    reproducible_graphs()  # as the rule scripts (workflow/scripts/_common.start)
    return run(a) if a.command == "run" else read(a)


if __name__ == "__main__":
    main()
