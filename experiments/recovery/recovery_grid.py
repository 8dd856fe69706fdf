"""Does pretraining find the model that drew the images, at MNIST's shapes and densities?

Each grid cell (K1, layer-1 density, noise sd) draws labelled images from a known
two-layer model (:mod:`dgdm_tf.data.model_draws`: 28 x 28 images, K1 atoms of 8 x 8
pooled 3 x 3, then K2 atoms of 6 x 6 to a 2 x 2 top layer, each class switching on its
own top maps; the truth's dictionaries drawn from their prior), pretrains both layers
on the training images as the workflow does (:func:`dgdm_tf.pretrain.chain.run_pretrain_layer`,
the config's pretraining settings but the chain length), and reports:

* layer-1 atom recovery: each true atom's best |normalised cross-correlation| up to a
  3-pixel shift with a learnt atom, averaged (:mod:`dgdm_tf.report.recovery`), beside
  the same score of random atoms of the learnt count; layer 2 the same on each layer's
  top atoms projected to the data plane (:func:`dgdm_tf.core.model.project_top_to_data`,
  the random atoms projected through the learnt D[1]);
* the top code's recovery: each true top unit's best |correlation| over the training
  images with a pretrained layer-2 feature, beside the same with the images shuffled;
* layer 1's relative residual after its chain beside the true noise's ||E|| / ||X||;
* test error of one SVM (the Bayesian SVM, EM) on four read-outs of the same images: the
  raw pixels, the pretrained row's features (route layerwise: :func:`dgdm_tf.pretrain.
  features.infer_features` with the pretrained layers), the block posteriors
  (:mod:`dgdm_tf.pretrain.block_posterior`) and the reference encoder
  (:mod:`dgdm_tf.baselines.encoder`);
* an outside anchor: SPORCO's convolutional dictionary learning (ADMM,
  ``sporco.dictlrn.cbpdndl.ConvBPDNDictLearn``) on the same training images, its
  layer-1 recovery (optional: ``pip install -e .[recovery]``; skipped with a message
  when sporco is missing);
* with ``--true-start``: layer 1's chain started at the true atoms plus noise beside the
  same chain from the workflow's start (patches, then the ridge start), recovery and
  residual traced every few sweeps: "cannot find it" against "does not stay there";
* with ``--refine-sweeps N``: the joint (refinement) chain, N sweeps from the pretrained
  layers (:func:`dgdm_tf.topdown.refine.run_refine`), its dictionaries, top code and
  residual scored as above; ``--refine-truth`` also runs it from the true dictionaries
  (gamma_e starting at 1 / noise sd^2, gamma_s at 1).

One JSON a cell, OUT/cells/<cell>.json, written atomically and skipped when present (a
rerun resumes the grid); ``--cells`` picks cells by name or index (``--list`` prints
them). OUT/summary.md and OUT/recovery_grid.png gather every cell present.

    python experiments/recovery/recovery_grid.py --out <out>
    python experiments/recovery/recovery_grid.py --out <out> --k1 12 --densities c1,f0.97 --noise 0.05 --true-start
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from dgdm_tf.baselines.encoder import encode  # noqa: E402
from dgdm_tf.core.hyper import Hyper  # noqa: E402
from dgdm_tf.core.layout import LayerGeometry  # noqa: E402
from dgdm_tf.core.model import DeepModel, project_top_to_data  # noqa: E402
from dgdm_tf.core.random import salted, seed_for  # noqa: E402
from dgdm_tf.data import model_draws  # noqa: E402
from dgdm_tf.io import atomic  # noqa: E402
from dgdm_tf.pretrain.block_posterior import block_posterior_features  # noqa: E402
from dgdm_tf.pretrain.chain import run_pretrain_layer  # noqa: E402
from dgdm_tf.pretrain.features import infer_features  # noqa: E402
from dgdm_tf.pretrain.kernel import make_sweep_fn  # noqa: E402
from dgdm_tf.pretrain.layer_model import LayerModel, init_state  # noqa: E402
from dgdm_tf.pretrain.options import FeatureOptions, Layer, PretrainOptions, Pretrained  # noqa: E402
from dgdm_tf.pretrain.ridge_start import RidgeStart, ridge_start  # noqa: E402
from dgdm_tf.report import recovery  # noqa: E402
from dgdm_tf.supervised.options import SvmOptions  # noqa: E402
from dgdm_tf.supervised.svm_classifier import BayesianSVM  # noqa: E402
from dgdm_tf.topdown.options import RefineOptions, Start  # noqa: E402
from dgdm_tf.topdown.refine import run_refine  # noqa: E402

MAX_SHIFT = 3


def cell_name(k1: int, density: str, noise: float) -> str:
    return f"k{k1}_{density}_n{noise:g}"


def grid(a) -> list[tuple[int, str, float]]:
    return list(itertools.product(a.k1, a.densities, a.noise))


def pick(cells, wanted: str | None):
    if not wanted:
        return cells
    out = []
    for w in wanted.split(","):
        hit = [c for i, c in enumerate(cells) if w in (str(i), cell_name(*c))]
        if not hit:
            raise SystemExit(f"no cell {w!r}: --list prints the grid")
        out += hit
    return out


def svm_error(f_tr, y_tr, f_te, y_te, n_classes, a) -> float:
    svm = BayesianSVM(n_classes, SvmOptions(method="em", em_iters=a.svm_iters), seed=a.seed)
    svm.fit(np.asarray(f_tr, np.float32).reshape(len(f_tr), -1), y_tr)
    pred = svm.predict(np.asarray(f_te, np.float32).reshape(len(f_te), -1))
    return 100.0 * float(np.mean(np.asarray(pred) != y_te))


def layer2_recovery(shapes, d_true, d_est, seed) -> dict:
    """Recovery of the top atoms projected to the data plane; random atoms projected
    through the learnt D[1]."""
    truth = DeepModel((shapes.image,) * 2 + (1,), shapes.layers())
    est = truth.with_ks([d_est[0].shape[-1], d_est[1].shape[-1]])
    pt = np.moveaxis(project_top_to_data(truth, [tf.constant(v) for v in d_true]), 0, -1)
    pe = np.moveaxis(project_top_to_data(est, [tf.constant(np.asarray(v, np.float32)) for v in d_est]), 0, -1)
    rng = np.random.default_rng(seed)
    rand = [np.moveaxis(project_top_to_data(est, [tf.constant(np.asarray(d_est[0], np.float32)), tf.constant(
        rng.normal(size=np.shape(d_est[1])).astype(np.float32))]), 0, -1) for _ in range(3)]
    return {"mean": recovery.atom_recovery(pt, pe, MAX_SHIFT)["mean"],
            "random": float(np.mean([recovery.atom_recovery(pt, r, MAX_SHIFT)["mean"] for r in rand]))}


def sporco_anchor(x, d_true, k, a, say) -> dict:
    """SPORCO's ConvBPDNDictLearn on the training images: its layer-1 recovery."""
    try:
        from sporco.dictlrn import cbpdndl
    except ImportError:
        say("  sporco is not installed (pip install -e .[recovery]): the outside anchor is skipped")
        return {"skipped": "sporco not installed"}
    rng = np.random.default_rng(seed_for(a.seed, "sporco_start"))
    imgs = np.moveaxis(np.asarray(x[: a.sporco_images, :, :, 0], np.float64), 0, -1)  # H, W, N
    imgs = imgs - imgs.mean(axis=(0, 1), keepdims=True)
    d0 = rng.normal(size=(d_true.shape[0], d_true.shape[1], k))
    opt = cbpdndl.ConvBPDNDictLearn.Options({
        "Verbose": False, "MaxMainIter": a.sporco_iters,
        "CBPDN": {"rho": 50.0 * a.sporco_lambda + 0.5, "AutoRho": {"Enabled": True}},
        "CCMOD": {"rho": 10.0, "ZeroMean": False}}, dmethod="cns")
    t0 = time.time()
    dl = cbpdndl.ConvBPDNDictLearn(d0, imgs, a.sporco_lambda, opt, dmethod="cns")
    d = np.asarray(dl.solve()).reshape(d_true.shape[0], d_true.shape[1], 1, k)
    return {"layer1": recovery.atom_recovery(d_true, d, MAX_SHIFT)["mean"],
            "random": recovery.random_atom_score(d_true, k, MAX_SHIFT, seed=seed_for(a.seed, "random_atoms")),
            "images": int(imgs.shape[-1]), "iterations": a.sporco_iters, "lambda": a.sporco_lambda,
            "seconds": time.time() - t0}


def traced_chain(x, d_true, d_start, sweeps, every, seed, jit) -> list[dict]:
    """Layer 1's chain from D = ``d_start`` (None: the workflow's patches), then the ridge
    start; recovery and relative residual every ``every`` sweeps (no pruning)."""
    n, h, w, c = x.shape
    geom = LayerGeometry(hx=h, wx=w, c=c, dh=d_true.shape[0], dw=d_true.shape[1],
                         k=d_true.shape[-1] if d_start is None else d_start.shape[-1], p=3)
    model = LayerModel(geom, Hyper.from_dict(None), top=False, n_images=n, scan="random")
    xt = tf.constant(x)
    st = init_state(x, model, salted(seed, "pretrain_init", tf.int32), dict_init="patches")
    if d_start is not None:
        st = st._replace(d=tf.constant(np.asarray(d_start, np.float32)))
    st = ridge_start(st, xt, model, RidgeStart(), salted(seed, "pretrain_start", tf.int32))
    fn = make_sweep_fn(model, jit_compile=jit, return_expected_pool=True)
    xn = float(np.linalg.norm(x))
    rows = []
    for t in range(sweeps + 1):
        if t:
            st, _ = fn(st, xt)
        if t % every == 0 or t == sweeps:
            rows.append({"sweep": t, "layer1": recovery.atom_recovery(d_true, np.asarray(st.d), MAX_SHIFT)["mean"],
                         "rel_residual": float(np.linalg.norm(np.asarray(st.resid)) / xn),
                         "gamma_e_mean": float(np.mean(np.asarray(st.gamma_e)))})
    return rows


def run_cell(k1, density, noise, a, say) -> dict:
    t0 = time.time()
    shapes = model_draws.Shapes(k1=k1, k2=a.k2)
    on = model_draws.on_fraction(density, shapes)
    cseed = seed_for(a.seed, "recovery", cell_name(k1, density, noise))
    data = model_draws.draw(shapes, on=on, noise=noise, n=a.n_train + a.n_test, n_classes=a.classes,
                            maps_per_class=a.maps_per_class, seed=cseed)
    tr, te = slice(0, a.n_train), slice(a.n_train, None)
    x, y = data["x"], data["y"]
    noise_rel = float(np.linalg.norm(x[tr] - data["clean"][tr]) / np.linalg.norm(x[tr]))
    say(f"  drew {len(x)} images: {100 * data['on']:.1f} % of layer-1 blocks on, "
        f"{data['coverage']:.2f} atoms a pixel, noise ||E||/||X|| {noise_rel:.3f}")
    opts = PretrainOptions(burn_in=a.burn_in, collect=a.collect, prune_min_usage=a.prune,
                           jit_compile=a.jit, anneal_fraction=a.anneal, scan=a.scan,
                           start=RidgeStart() if a.start == "ridge" else None)
    outs, h = [], x[tr]
    for l, (side, k, p) in enumerate([(shapes.d1, round(a.k1_start * k1), shapes.pool),
                                      (shapes.d2, round(a.k2_start * a.k2), 1)]):
        o = run_pretrain_layer(h, Layer(dict_size=side, n_dict=k, pool=p, index=l, n_layers=2), opts,
                               seed=seed_for(cseed, "pretrain", l + 1), progress=None)
        say(f"  layer {l + 1}: K {k} -> {o['D'].shape[-1]}, rel. residual "
            f"{o['trace'][-1]['rel_residual']:.3f}, {o['seconds']:.0f} s")
        outs.append(o)
        h = np.asarray(o["x_next"], np.float32)
    d_est = [np.asarray(o["D"], np.float32) for o in outs]
    res = {"cell": cell_name(k1, density, noise), "k1": k1, "k2": a.k2, "density": density,
           "noise_sd": noise, "on_fraction": data["on"], "coverage": data["coverage"],
           "n_train": a.n_train, "n_test": a.n_test, "sweeps": [a.burn_in, a.collect],
           "pretrain": {"start": a.start, "scan": a.scan, "anneal_fraction": a.anneal, "k1_start": a.k1_start,
                        "prune": a.prune},
           "k_learnt": [int(d.shape[-1]) for d in d_est], "noise_rel": noise_rel,
           "rel_residual": [float(o["trace"][-1]["rel_residual"]) for o in outs]}
    l1 = recovery.atom_recovery(data["d"][0], d_est[0], MAX_SHIFT)
    res["layer1"] = {"mean": l1["mean"], "per_atom": l1["per_atom"].tolist(),
                     "random": recovery.random_atom_score(data["d"][0], d_est[0].shape[-1], MAX_SHIFT,
                                                      seed=seed_for(cseed, "random_atoms"))}
    res["layer2"] = layer2_recovery(shapes, data["d"], d_est, seed_for(cseed, "random_atoms", 2))
    res["top_code"] = {"mean": recovery.code_recovery(data["s_top"][tr], outs[1]["x_next"]),
                       "shuffled": recovery.shuffled_code_score(data["s_top"][tr], outs[1]["x_next"],
                                                               seed=seed_for(cseed, "shuffle"))}
    say(f"  recovery: layer 1 {l1['mean']:.3f} (random {res['layer1']['random']:.3f}), layer 2 "
        f"{res['layer2']['mean']:.3f} (random {res['layer2']['random']:.3f}), top code "
        f"{res['top_code']['mean']:.3f} (shuffled {res['top_code']['shuffled']:.3f})")
    gws = [float(o["gamma_w"]) for o in outs]
    ges = [float(np.mean(o["gamma_e"])) for o in outs]
    if a.refine_sweeps:  # the joint chain from the pretrained layers (the unsupervised row's)
        starts = {"refined": (d_est, shapes.layers(*res["k_learnt"]), ges[0], gws[1])}
        if a.refine_truth:  # and from the truth: does the joint posterior hold it?
            starts["refined_from_truth"] = (data["d"], shapes.layers(), 1.0 / noise ** 2, 1.0)
        for key, (d0, layers, ge0, gs0) in starts.items():
            ref = run_refine(x[tr], Start(d0, layers, gamma_e_init=ge0, gamma_s_init=gs0),
                             RefineOptions(burn_in=a.refine_sweeps - a.refine_collect, collect=a.refine_collect),
                             seed=seed_for(cseed, "refine"), progress=None)
            d_ref = [np.asarray(v, np.float32) for v in ref["D"]]
            res[key] = r = {
                "sweeps": a.refine_sweeps, "seconds": ref["seconds"],
                "layer1": recovery.atom_recovery(data["d"][0], d_ref[0], MAX_SHIFT)["mean"],
                "layer2": layer2_recovery(shapes, data["d"], d_ref, seed_for(cseed, "random_atoms", 2))["mean"],
                "top_code": recovery.code_recovery(data["s_top"][tr], ref["features"]),
                "rel_residual": float(ref["trace"][-1]["rel_residual"])}
            say(f"  {key} {a.refine_sweeps} sweeps: layer 1 {r['layer1']:.3f}, layer 2 {r['layer2']:.3f}, "
                f"top code {r['top_code']:.3f}, rel. residual {r['rel_residual']:.3f}, {ref['seconds']:.0f} s")
    pre = Pretrained(d_est, [shapes.pool, 1], gws, ges)
    fopts = FeatureOptions(burn_in=a.feature_sweeps, collect=a.feature_sweeps, jit_compile=a.jit)
    feats = {
        "pixels": (x[tr], x[te]),
        "pretrained": tuple(infer_features(x[s], pre, fopts, seed=seed_for(cseed, "features", i), progress=None)
                            for i, s in enumerate((tr, te))),
        "block_posterior": tuple(block_posterior_features(x[s], d_est, [shapes.pool, 1], gamma_ws=gws,
                                                          gamma_es=ges) for s in (tr, te)),
        "encoder": tuple(encode(x[s], d_est[0], shapes.pool) for s in (tr, te)),
    }
    res["test_error_pct"] = {k: svm_error(f[0], y[tr], f[1], y[te], a.classes, a) for k, f in feats.items()}
    say("  test error %: " + ", ".join(f"{k} {v:.1f}" for k, v in res["test_error_pct"].items()))
    if not a.no_sporco:
        res["sporco"] = sporco_anchor(x[tr], data["d"][0], k1, a, say)
        if "layer1" in res["sporco"]:
            say(f"  sporco: layer 1 {res['sporco']['layer1']:.3f} (random {res['sporco']['random']:.3f}), "
                f"{res['sporco']['seconds']:.0f} s")
    if a.true_start:
        d0 = data["d"][0]
        rng = np.random.default_rng(seed_for(cseed, "true_start"))  # not the draw's stream
        near = d0 + a.true_start_noise * rng.normal(size=d0.shape) * np.linalg.norm(
            d0.reshape(-1, k1), axis=0) / np.sqrt(d0[..., 0].size)
        xs = x[tr][: a.trace_images]
        res["traces"] = {
            "truth_plus_noise": traced_chain(xs, d0, near.astype(np.float32), a.trace_sweeps, a.trace_every,
                                             seed_for(cseed, "trace"), a.jit),
            "workflow_start": traced_chain(xs, d0, None, a.trace_sweeps, a.trace_every,
                                           seed_for(cseed, "trace"), a.jit),
            "images": len(xs), "start_noise": a.true_start_noise}
        for k in ("truth_plus_noise", "workflow_start"):
            r0, r1 = res["traces"][k][0], res["traces"][k][-1]
            say(f"  {k}: layer 1 {r0['layer1']:.3f} -> {r1['layer1']:.3f}, rel. residual "
                f"{r0['rel_residual']:.3f} -> {r1['rel_residual']:.3f} after {r1['sweep']} sweeps")
    res["seconds"] = time.time() - t0
    return res


def summarise(out: Path) -> list[dict]:
    """OUT/summary.md (a row a cell present) and OUT/recovery_grid.png."""
    cells = [json.loads(p.read_text()) for p in sorted((out / "cells").glob("*.json"))]
    head = ("| cell | blocks on | atoms a pixel | layer 1 (random) | SPORCO (random) | layer 2 (random) "
            "| top code (shuffled) | residual / noise | error %: pixels, pretrained, block post., encoder |\n"
            "|---|---|---|---|---|---|---|---|---|\n")
    rows = []
    for c in cells:
        sp = c.get("sporco", {})
        spt = f"{sp['layer1']:.3f} ({sp['random']:.3f})" if "layer1" in sp else "-"
        e = c["test_error_pct"]
        rows.append(f"| {c['cell']} | {100 * c['on_fraction']:.1f} % | {c['coverage']:.2f} | "
                    f"{c['layer1']['mean']:.3f} ({c['layer1']['random']:.3f}) | {spt} | "
                    f"{c['layer2']['mean']:.3f} ({c['layer2']['random']:.3f}) | "
                    f"{c['top_code']['mean']:.3f} ({c['top_code']['shuffled']:.3f}) | "
                    f"{c['rel_residual'][0]:.3f} / {c['noise_rel']:.3f} | "
                    f"{e['pixels']:.1f}, {e['pretrained']:.1f}, {e['block_posterior']:.1f}, {e['encoder']:.1f} |")
    atomic.write_text(out / "summary.md", head + "\n".join(rows) + "\n")
    if cells:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        traced = [c for c in cells if "traces" in c]
        fig, axes = plt.subplots(1, 2 if traced else 1, figsize=(12 if traced else 7, 4), squeeze=False)
        ax = axes[0, 0]
        for key, style in (("layer1", "o-"), ("sporco", "s--")):
            pts = sorted((c["coverage"], c[key]["layer1"] if key == "sporco" else c[key]["mean"],
                          c["noise_sd"], c["k1"])
                         for c in cells if key != "sporco" or "layer1" in c.get("sporco", {}))
            for sd, k1 in sorted({p[2:] for p in pts}):
                xs = [p for p in pts if p[2:] == (sd, k1)]
                ax.plot([p[0] for p in xs], [p[1] for p in xs], style,
                        label=f"{'dgdm' if key == 'layer1' else 'SPORCO'}, K1 {k1}, noise {sd:g}")
        rnd = sorted((c["coverage"], c["layer1"]["random"]) for c in cells)
        ax.plot([p[0] for p in rnd], [p[1] for p in rnd], "k:", label="random atoms")
        ax.set_xscale("log")
        ax.set_xlabel("atoms covering a pixel (layer-1 density)")
        ax.set_ylabel("layer-1 atom recovery (NCC, shift <= 3)")
        ax.set_ylim(0, 1)
        ax.legend(fontsize=7)
        if traced:
            ax = axes[0, 1]
            for i, c in enumerate(traced):
                for key, style in (("workflow_start", "-"), ("truth_plus_noise", "--")):
                    tr = c["traces"][key]
                    ax.plot([r["sweep"] for r in tr], [r["layer1"] for r in tr], style, color=f"C{i}",
                            label=f"{c['cell']}, {key.replace('_', ' ')}")
            ax.set_xlabel("sweep of layer 1's chain")
            ax.set_ylabel("layer-1 atom recovery")
            ax.set_ylim(0, 1)
            ax.legend(fontsize=6)
        fig.tight_layout()
        with atomic.atomic_path(out / "recovery_grid.png") as tmp:
            fig.savefig(tmp, format="png", dpi=110)
        plt.close(fig)
    return cells


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="folder of the cells' JSON, the summary and the figure")
    p.add_argument("--k1", type=lambda s: [int(v) for v in s.split(",")], default=[12, 25, 50])
    p.add_argument("--densities", type=lambda s: s.split(","), default=["c1", "c2", "f0.25", "f0.97"],
                   help="c<atoms a pixel> or f<fraction of blocks on>, comma-separated")
    p.add_argument("--noise", type=lambda s: [float(v) for v in s.split(",")], default=[0.02, 0.05, 0.1],
                   help="noise sd, a fraction of an image's range")
    p.add_argument("--cells", default=None, help="comma-separated cell names or indices (default: all)")
    p.add_argument("--list", action="store_true", help="print the grid's cells and stop")
    p.add_argument("--k2", type=int, default=20)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--maps-per-class", type=int, default=2)
    p.add_argument("--n-train", type=int, default=1000)
    p.add_argument("--n-test", type=int, default=1000)
    p.add_argument("--burn-in", type=int, default=15, help="pretraining burn-in (the config's)")
    p.add_argument("--collect", type=int, default=20, help="pretraining draws averaged (the config's)")
    p.add_argument("--prune", type=float, default=0.025, help="prune_min_usage (the config's)")
    p.add_argument("--k1-start", type=float, default=1.0, help="layer 1 starts with this times K1 atoms")
    p.add_argument("--k2-start", type=float, default=1.0, help="layer 2 starts with this times K2 atoms")
    p.add_argument("--start", choices=("ridge", "off"), default="ridge")
    p.add_argument("--scan", choices=("random", "fixed"), default="random", help="the chains' scan order")
    p.add_argument("--anneal", type=float, default=0.0,
                   help="anneal_fraction: the share of burn-in at a tempered likelihood (the config's 0)")
    p.add_argument("--jit", default="top", help="jit_compile of the chains (top, true, false)")
    p.add_argument("--feature-sweeps", type=int, default=5, help="burn-in and draws of the feature chains")
    p.add_argument("--svm-iters", type=int, default=50)
    p.add_argument("--no-sporco", action="store_true")
    p.add_argument("--sporco-images", type=int, default=200)
    p.add_argument("--sporco-iters", type=int, default=100)
    p.add_argument("--sporco-lambda", type=float, default=0.1)
    p.add_argument("--refine-sweeps", type=int, default=0,
                   help="also run the joint (top-down) chain this many sweeps from the pretrained layers")
    p.add_argument("--refine-truth", action="store_true",
                   help="with --refine-sweeps, also run the joint chain from the true dictionaries")
    p.add_argument("--refine-collect", type=int, default=5, help="of those, the draws averaged")
    p.add_argument("--true-start", action="store_true", help="also trace layer 1 from the true atoms")
    p.add_argument("--true-start-noise", type=float, default=0.3, help="noise added, a fraction of an atom's norm")
    p.add_argument("--trace-images", type=int, default=300)
    p.add_argument("--trace-sweeps", type=int, default=40)
    p.add_argument("--trace-every", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--smoke", action="store_true", help="tiny sizes, to check the probe runs")
    a = p.parse_args(argv)
    a.jit = {"true": True, "false": False}.get(str(a.jit).lower(), a.jit)
    if a.smoke:
        a.k1, a.densities, a.noise, a.k2, a.classes = [4], ["c1"], [0.05], 4, 2
        a.n_train, a.n_test, a.burn_in, a.collect, a.feature_sweeps, a.svm_iters = 24, 16, 2, 1, 1, 3
        a.jit, a.sporco_images, a.sporco_iters = False, 8, 2
        a.trace_images, a.trace_sweeps, a.trace_every = 8, 2, 1
        a.refine_sweeps, a.refine_collect = min(a.refine_sweeps, 2), 1
    cells = grid(a)
    if a.list:
        for i, c in enumerate(cells):
            print(i, cell_name(*c))
        return cells
    out = Path(a.out)
    (out / "cells").mkdir(parents=True, exist_ok=True)
    todo = pick(cells, a.cells)
    for i, c in enumerate(todo):
        path = out / "cells" / f"{cell_name(*c)}.json"
        if path.is_file():
            print(f"[{i + 1}/{len(todo)}] {cell_name(*c)}: present, skipped", flush=True)
            continue
        print(f"[{i + 1}/{len(todo)}] {cell_name(*c)}", flush=True)
        res = run_cell(*c, a, lambda m: print(m, flush=True))
        atomic.write_json(path, res)
        print(f"[{i + 1}/{len(todo)}] {cell_name(*c)} done in {res['seconds']:.0f} s", flush=True)
    return summarise(out)


if __name__ == "__main__":
    main()
