"""``results/tables.md``: our numbers beside the paper's, one table per configured dataset.

Input: the workflow config's ``datasets`` mapping and the ``metrics.json`` of every run
(``results/{dataset}/{method}/metrics.json``, written by the ``svm``, ``cnn`` and other
method rules; ``results/{dataset}/cnn_at/{method}/metrics.json``, the CNN peers below).
Output: Markdown, one table per dataset, one row per method of the paper's table for it
(:mod:`dgdm_tf.report.paper`), columns: method, ours, paper, config file, data size
(train / test), wall time. Rows of the paper's peers show "—" for ours; rows of our
methods that did not run say why.

Additions of ours, not in the paper:

- ``pretrained_block_svm`` ("Our pretrained model, block posteriors + SVM",
  :mod:`dgdm_tf.pretrain.block_posterior`), under ``pretrained_svm`` when it runs: the same
  pretrained layers and SVM on the same images, each block's posterior given the image
  alone as features instead of Gibbs posterior means (docs/design.md, "Mixing");

- a reference row, ``encoder_svm`` ("Reference: learned layer-1 dictionary +
  soft-threshold encoder + SVM", :mod:`dgdm_tf.baselines.encoder`), placed under the
  ``pretrained_svm`` row in every table of a dataset that runs ``pretrained_svm`` (or
  ``encoder_svm``; "not run" with how to enable it where only the former runs): the same layer-1 dictionary and the same SVM on the same images,
  features from a deterministic encoder instead of Gibbs inference;
- when the dataset runs ``cnn``, a last column "CNN, same images": for each of our Gibbs
  rows (``pretrained_svm``, ``unsupervised_svm``, ``supervised``), the test error (or
  accuracy, as the table's metric) of the same-shape CNN trained and tested on exactly
  that row's train / test images (:func:`row_subsets`, :func:`cnn_peer_run`): the
  ``cnn`` run itself where the row uses the dataset's ``n_train`` / ``n_test`` subsets,
  else ``results/{dataset}/cnn_at/{method}/``.

Nothing is computed here that a run did not record.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

from dgdm_tf.report.paper import METHOD_LABELS, METRIC_HEADERS, PAPER_TABLES, PaperRow, PaperTable

#: methods the workflow has rules for (keep in sync with the config schema's enum)
IMPLEMENTED_METHODS: tuple[str, ...] = ("pretrained_svm", "pretrained_block_svm", "encoder_svm",
                                         "unsupervised_svm", "supervised", "cnn", "mcem_map",
                                         "model_averaging", "imagenet_transfer")

#: our rows whose features come from the Gibbs samplers: each gets a "CNN, same images" cell
GIBBS_METHODS: tuple[str, ...] = ("pretrained_svm", "unsupervised_svm", "supervised")
#: the reference row shown under pretrained_svm (dgdm_tf.baselines.encoder)
ENCODER_METHOD = "encoder_svm"
#: the pretrained model's block posteriors given the image alone (dgdm_tf.pretrain.block_posterior)
BLOCK_METHOD = "pretrained_block_svm"

DASH = "—"


def row_subsets(block: Mapping[str, Any], method: str) -> dict[str, int | None] | None:
    """Which images a row of ours trains and tests on, as the workflow's scripts pick
    them: the dataset's seeded, stratified ``n_train`` / ``n_test`` subsets of each split
    (``_common.split_subset``), then their first ``own`` images; returned as
    ``{"train": own, "test": own}`` (None = the whole subset). ``pretrained_svm``,
    ``encoder_svm`` and ``cnn``: the whole subsets; ``unsupervised_svm``:
    ``topdown_features.n_train`` / ``n_test``; ``supervised``: ``supervised.n_train`` /
    ``n_test``. None for the other methods (their own data paths)."""
    if method in ("pretrained_svm", BLOCK_METHOD, ENCODER_METHOD, "cnn"):
        return {"train": None, "test": None}
    key = {"unsupervised_svm": "topdown_features", "supervised": "supervised"}.get(method)
    if key is None:
        return None
    sub = block.get(key) or {}
    return {"train": sub.get("n_train"), "test": sub.get("n_test")}


def _whole(own: int | None, size: int | None) -> bool:
    """Is the first ``own`` of a subset of ``size`` (None: all) the whole subset?"""
    return own is None or (size is not None and int(own) >= int(size))


def cnn_peer_run(block: Mapping[str, Any], method: str) -> str | None:
    """The run directory, under ``results/<dataset>/``, of the CNN trained and tested on
    the same images as our Gibbs row ``method``: ``"cnn"`` when the row uses the
    dataset's whole ``n_train`` / ``n_test`` subsets (the ``cnn`` method's own images),
    else ``"cnn_at/<method>"`` (rule ``cnn_at``). None when there is none: the dataset
    does not run ``cnn`` or ``method``, or ``method`` is not a Gibbs row."""
    enabled = list(block.get("methods", []) or [])
    if method not in GIBBS_METHODS or method not in enabled or "cnn" not in enabled:
        return None
    own = row_subsets(block, method) or {}
    if all(_whole(own.get(s), block.get(f"n_{s}")) for s in ("train", "test")):
        return "cnn"
    return f"cnn_at/{method}"


def cnn_peer_runs(block: Mapping[str, Any]) -> dict[str, str]:
    """Gibbs row -> :func:`cnn_peer_run` of every row of ``block`` that has one."""
    out = {}
    for method in GIBBS_METHODS:
        run = cnn_peer_run(block, method)
        if run is not None:
            out[method] = run
    return out


def metrics_path(results_dir: str | os.PathLike, dataset: str, method: str) -> Path:
    return Path(results_dir) / dataset / method / "metrics.json"


def load_metrics(results_dir: str | os.PathLike, datasets: Mapping[str, Mapping[str, Any]]
                 ) -> dict[tuple[str, str], dict]:
    """The metrics.json of every enabled (dataset, method) that exists."""
    out: dict[tuple[str, str], dict] = {}
    for ds, block in datasets.items():
        for method in block.get("methods", []) or []:
            p = metrics_path(results_dir, ds, method)
            if p.exists():
                out[(ds, method)] = json.loads(p.read_text())
        for run in cnn_peer_runs(block).values():  # the CNN at the Gibbs rows' sizes
            p = Path(results_dir) / ds / run / "metrics.json"
            if run != "cnn" and p.exists():
                out[(ds, run)] = json.loads(p.read_text())
        p = Path(results_dir) / ds / "inpainting" / "metrics.json"
        if p.exists():  # missing-data interpolation: a table of its own under the dataset's
            out[(ds, "inpainting")] = json.loads(p.read_text())
    return out


def render_inpainting(ds: str, m: Mapping[str, Any]) -> str:
    """The missing-data scores of ``results/<ds>/inpainting/metrics.json``."""
    labels = {"refined": "top-down model, refined dictionaries",
              "pretrained": "top-down model, pretrained dictionaries",
              "mean_fill": "mean training image"}
    out = [f"### `{ds}`: missing-data interpolation ({m.get('mask')} of each image hidden, "
           f"{m.get('n_images')} test images; the paper shows figures only)", "",
           _row(["reconstruction", "MSE on hidden pixels", "PSNR on hidden pixels (dB)"]),
           _row(["---"] * 3)]
    for key, sc in (m.get("hidden_pixels") or {}).items():
        out.append(_row([labels.get(key, key), f"{sc['mse']:.5f}", f"{sc['psnr_db']:.2f}"]))
    out += ["", f"Figure: `results/{ds}/figures/inpainting.png`.", ""]
    return "\n".join(out)


def format_seconds(s: float | None) -> str:
    if s is None:
        return DASH
    s = float(s)
    if s < 60:
        return f"{s:.1f} s"
    if s < 3600:
        m, sec = divmod(int(round(s)), 60)
        return f"{m} min {sec:02d} s"
    h, rem = divmod(int(round(s)), 3600)
    return f"{h} h {rem // 60:02d} min"


def _fmt_value(v: float | tuple[float, float] | None) -> str:
    if v is None:
        return DASH
    if isinstance(v, (tuple, list)):
        return " / ".join(DASH if x is None else f"{x:g}" for x in v)
    return f"{v:g}"


def _ours_value(metric: str, m: Mapping[str, Any]) -> str:
    if metric == "error":
        return f"{m['test_error_pct']:.2f}"
    if metric == "accuracy":  # Caltech: accuracy averaged over classes, as the paper
        acc = m.get("class_mean_accuracy_pct", m.get("test_accuracy_pct"))
        if acc is None:
            acc = 100.0 - float(m["test_error_pct"])
        return f"{acc:.2f}"
    if metric == "top1_top5_error":
        top5 = m.get("top5_error_pct")
        return f"{m['test_error_pct']:.2f} / " + (DASH if top5 is None else f"{top5:.2f}")
    raise ValueError(f"unknown metric {metric!r}")


def _not_run(ds: str, method: str, enabled: list[str], implemented: Iterable[str]) -> str:
    if method in set(implemented):
        want = ", ".join(list(enabled) + [method])
        return f"not run (enable with `methods: [{want}]` in `datasets.{ds}`)"
    return f"not run (`{method}` is not implemented yet)"


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _run_note(ds: str, method: str, m: Mapping[str, Any]) -> str:
    """One line with the settings a run used, read from its metrics.json."""
    if method == "cnn":
        return _cnn_note(m)
    if method == ENCODER_METHOD:
        return _encoder_note(m)
    if method == BLOCK_METHOD:
        return _block_note(m)
    if method in ("mcem_map", "model_averaging", "imagenet_transfer"):
        return _mcem_note(method, m)
    cfg = m.get("config", {}) or {}
    bits = []
    sup = cfg.get("supervised") or {}
    if method == "supervised" and sup:
        pr = sup.get("predict") or {}
        bits.append(
            f"Gibbs over every layer and the SVM jointly on {m.get('n_train')} labelled images "
            f"from the {sup.get('start_from')} dictionaries, {sup.get('burn_in')} burn-in + "
            f"{sup.get('collect')} x {sup.get('thin')} collection sweeps; test: "
            + (f"posterior mean of the top layer ({pr.get('burn_in')} burn-in + "
               f"{pr.get('collect')} Gibbs sweeps)" if pr.get("features") == "gibbs" else
               f"MCEM MAP of the top layer ({pr.get('burn_in')} Gibbs sweeps, then "
               f"{pr.get('iterations')} MCEM iterations)")
            + f", decision values averaged over {m.get('n_models_averaged')} models")
        if m.get("per_model_test_error_pct"):
            bits.append("test error of each model alone: "
                        + ", ".join(f"{e:.2f}%" for e in m["per_model_test_error_pct"]))
    pre = cfg.get("pretrain") or {}
    ref = cfg.get("refine") or {}
    if method == "unsupervised_svm" and ref:
        td = cfg.get("topdown_features") or {}
        bits.append(
            f"joint refinement of all layers on {m.get('refine_n_images', ref.get('n_images'))} "
            f"images, {ref.get('burn_in')} burn-in + {ref.get('collect')} x {ref.get('thin')} "
            f"collection sweeps; top-down features: {td.get('burn_in')} burn-in + "
            f"{td.get('collect')} collection sweeps")
    if pre:
        tempered = round(float(pre.get("anneal_fraction") or 0) * int(pre.get("burn_in") or 0))
        bits.append(
            f"pretraining on {m.get('pretrain_n_images', pre.get('n_images'))} images, "
            f"{pre.get('burn_in')} burn-in + {pre.get('collect')} collection sweeps per layer"
            + (f" (the first {tempered} burn-in sweeps tempered)" if tempered else ""))
    feat = cfg.get("features") or {}
    if feat and method not in ("unsupervised_svm", "supervised"):
        chains = int(feat.get("chains") or 1)
        bits.append(f"features: {feat.get('burn_in')} burn-in + {feat.get('collect')} "
                    "collection sweeps" + (f", {chains} chains per image averaged" if chains > 1 else ""))
    svm = cfg.get("svm") or {}
    if svm and method != "supervised":
        bits.append(f"SVM: {svm.get('burn_in')} burn-in + {svm.get('collect')} collection")
    if m.get("dict_sizes") is not None:
        bits.append("dictionary sizes kept per layer: "
                    + ", ".join(str(k) for k in m["dict_sizes"]))
    if m.get("train_error_pct") is not None:
        bits.append(f"train error {m['train_error_pct']:.2f}%")
    if m.get("pretrained_same_subset_test_error_pct") is not None:
        bits.append("the same SVM on the pretrained features of the same images: test error "
                    f"{m['pretrained_same_subset_test_error_pct']:.2f}%")
    return f"`{method}` ran with " + "; ".join(bits) + "." if bits else ""


def _mcem_note(method: str, m: Mapping[str, Any]) -> str:
    """The large-data route's settings (stochastic MCEM, averaging, transfer)."""
    cfg = m.get("config", {}) or {}
    if method == "imagenet_transfer":
        t = cfg.get("transfer") or {}
        svm = cfg.get("svm") or {}
        return (f"`imagenet_transfer` ran with the layers of `{m.get('source')}` (its MCEM "
                f"estimate) fixed, images at {m.get('image_size')}x{m.get('image_size')}, "
                f"MCEM MAP features ({t.get('burn_in')} Gibbs sweeps, then "
                f"{t.get('iterations')} MCEM iterations), a new Bayesian SVM "
                f"({svm.get('burn_in')} burn-in + {svm.get('collect')} collection); accuracy "
                f"averaged over classes; train error {m.get('train_error_pct', float('nan')):.2f}%.")
    mc = cfg.get("mcem") or {}
    pr = cfg.get("mcem_predict") or {}
    text = (f"`{method}` ran with stochastic MCEM from the priors on {m.get('n_train')} images "
            f"({mc.get('iterations')} iterations of batch {mc.get('batch_size')}, "
            f"{mc.get('sweeps')} Gibbs sweeps per E-step); test: MCEM MAP of the top layer "
            f"({pr.get('burn_in')} Gibbs sweeps, then {pr.get('iterations')} MCEM iterations)")
    if method == "model_averaging":
        av = cfg.get("averaging") or {}
        text += (f", decision values averaged over {m.get('n_models_averaged')} posterior "
                 f"samples (one every {av.get('thin')} mini-batch Gibbs iterations)")
    if m.get("test_images_per_second") is not None:
        text += f"; test-time inference {m['test_images_per_second']:.3g} image-models/s"
    return text + "."


def _encoder_note(m: Mapping[str, Any]) -> str:
    """The reference row's settings (dgdm_tf.baselines.encoder), from its metrics.json."""
    cfg = m.get("config", {}) or {}
    enc = cfg.get("encoder") or {}
    pre = cfg.get("pretrain") or {}
    svm = cfg.get("svm") or {}
    layers = (cfg.get("model") or {}).get("layers") or [{}]
    p = layers[0].get("pool")
    k = (m.get("dict_sizes") or [None])[0]
    bits = [f"pretraining's layer-1 dictionary ({k} elements kept; pretrained on "
            f"{m.get('pretrain_n_images', pre.get('n_images'))} images, "
            f"{pre.get('burn_in')} burn-in + {pre.get('collect')} collection sweeps)",
            "no sampling: soft-threshold encoder (Coates & Ng 2011; correlation with each "
            f"unit-norm element, max(c - {enc.get('alpha')}, 0) and max(-c - "
            f"{enc.get('alpha')}, 0), {p}x{p} max-pool) giving {m.get('n_features')} features",
            _encoder_svm_text(m, enc, svm)]
    if m.get("train_error_pct") is not None:
        bits.append(f"train error {m['train_error_pct']:.2f}%")
    return f"`{ENCODER_METHOD}` (ours, not in the paper) ran with " + "; ".join(bits) + "."


def _encoder_svm_text(m: Mapping[str, Any], enc: Mapping[str, Any],
                      svm: Mapping[str, Any]) -> str:
    """How the reference row's SVM was fitted: ``encoder.svm_method`` (recorded by the
    svm rule as ``svm_method``), the model and prior / hinge settings of `svm`."""
    method = m.get("svm_method") or enc.get("svm_method") or svm.get("method") or "gibbs"
    steps = m.get("svm_iterations")
    if method == "em":
        bits = ([f"{steps} steps"] if steps is not None else [])
        rel = m.get("svm_em_last_rel_decrease")
        if rel is not None:
            bits.append(f"the objective's last relative decrease {rel:.2g}")
        if m.get("svm_em_solver") == "cg":
            its = m.get("svm_cg_iterations")
            bits.append("each step solved by conjugate gradients to "
                        f"{svm.get('em_cg_tol')} of its starting residual (first step "
                        f"{svm.get('em_cg_start_tol')}"
                        + (f"; {its} iterations in all" if its is not None else "") + ")")
        how = "EM towards its MAP" + (f" ({', '.join(bits)})" if bits else "")
        return (f"the SVM model of `pretrained_svm` (same prior and hinge settings) fitted "
                f"by {how} (`encoder.svm_method: em`; `pretrained_svm`: "
                f"{svm.get('method', 'gibbs')}), on its images")
    return (f"the SVM of `pretrained_svm` fitted by Gibbs ({svm.get('burn_in')} burn-in + "
            f"{svm.get('collect')} collection) on its images")


def _block_note(m: Mapping[str, Any]) -> str:
    """The block-posterior row's settings (dgdm_tf.pretrain.block_posterior), from its metrics.json."""
    cfg = m.get("config", {}) or {}
    blk = cfg.get("block_features") or {}
    svm = cfg.get("svm") or {}
    bits = [f"the pretrained layers of `pretrained_svm` ({m.get('dict_sizes')} elements kept)",
            "no sampling: each block's posterior mean given the image alone (every other "
            f"block off, theta at the chains' start, {blk.get('off')} on off; the pretrained "
            "D, gamma_w and mean gamma_e), layer by layer, giving "
            f"{m.get('n_features')} features",
            f"the SVM of `pretrained_svm` ({svm.get('burn_in')} burn-in + "
            f"{svm.get('collect')} collection) on its images; why: docs/design.md, \"Mixing\""]
    if m.get("train_error_pct") is not None:
        bits.append(f"train error {m['train_error_pct']:.2f}%")
    return f"`{BLOCK_METHOD}` (ours, not in the paper) ran with " + "; ".join(bits) + "."


def _cnn_note(m: Mapping[str, Any]) -> str:
    """The CNN baseline's settings and its best epoch, from its metrics.json."""
    cfg = m.get("config", {}) or {}
    c = cfg.get("cnn") or {}
    layers = (cfg.get("model") or {}).get("layers") or []
    convs = ", ".join(f"{L['dict_size']}x{L['dict_size']}x{L['n_dict']}"
                      + (f" + {L['pool']}x{L['pool']} max-pool" if L.get("pool", 1) > 1 else "")
                      for L in layers)
    bits = [f"conv {convs}" if convs else "",
            f"2 FC {c.get('fc_units')} with dropout {c.get('dropout')}",
            f"Adam {c.get('learning_rate')}, batch {c.get('batch_size')}, "
            f"{len(m.get('curve') or [])} epochs"]
    if m.get("best_test_error_pct") is not None:
        bits.append(f"best test error {m['best_test_error_pct']:.2f}% "
                    f"(epoch {m.get('best_epoch')}; the row shows the last epoch)")
    if m.get("train_error_pct") is not None:
        bits.append(f"train error {m['train_error_pct']:.2f}%")
    return "`cnn` ran with " + "; ".join(b for b in bits if b) + "."


def render_dataset_table(ds: str, block: Mapping[str, Any],
                         metrics: Mapping[tuple[str, str], Mapping[str, Any]], *,
                         implemented: Iterable[str] = IMPLEMENTED_METHODS) -> str:
    implemented = tuple(implemented)
    enabled = list(block.get("methods", []) or [])
    key = block.get("paper_table")
    table: PaperTable | None = PAPER_TABLES.get(key) if key else None
    if table is None:
        metric = "error"
        rows: tuple[PaperRow, ...] = tuple(
            PaperRow(METHOD_LABELS.get(mth, mth), None, mth)
            for mth in dict.fromkeys(enabled + list(implemented)))
        title = f"`{ds}` (own data, kind `{block.get('kind')}`; no paper reference)"
    else:
        metric, rows = table.metric, _with_our_rows(table.rows, enabled)
        title = f"`{ds}`: {table.title} ({table.source})"

    # the CNN at each Gibbs row's own images: a last column, where the dataset runs cnn
    peers = cnn_peer_runs(block)
    cnn_col = "cnn" in enabled
    n_cols = 7 if cnn_col else 6

    def peer_cell(method: str | None) -> list[str]:
        if not cnn_col:
            return []
        run = peers.get(method) if method is not None else None
        if run is None:
            return [DASH]
        m = metrics.get((ds, run))
        if m is None:
            return [f"missing (no `results/{ds}/{run}/metrics.json`)"]
        return [_ours_value(metric, m)]

    out = [f"## {title}", ""]
    out.append(_row(["method", f"ours: {METRIC_HEADERS[metric]}",
                     f"paper: {METRIC_HEADERS[metric]}", "config file",
                     "data size (train / test)", "wall time"]
                    + ([f"CNN, same images: {METRIC_HEADERS[metric]}"] if cnn_col else [])))
    out.append(_row(["---"] * n_cols))
    group = ""
    notes: list[str] = []
    for r in rows:
        if r.group and r.group != group:
            group = r.group
            out.append(_row([f"*{group}*"] + [""] * (n_cols - 1)))
        if r.method is None:
            out.append(_row([r.label, DASH, _fmt_value(r.value), DASH, DASH, DASH]
                            + peer_cell(None)))
            continue
        m = metrics.get((ds, r.method)) if r.method in enabled else None
        if r.method not in enabled:
            ours = _not_run(ds, r.method, enabled, implemented)
            out.append(_row([r.label, ours, _fmt_value(r.value), DASH, DASH, DASH]
                            + peer_cell(None)))
        elif m is None:
            ours = f"missing (no `results/{ds}/{r.method}/metrics.json`)"
            out.append(_row([r.label, ours, _fmt_value(r.value), DASH, DASH, DASH]
                            + peer_cell(r.method)))
        else:
            cfgf = m.get("config_file") or DASH
            size = f"{m.get('n_train', DASH)} / {m.get('n_test', DASH)}"
            out.append(_row([r.label, _ours_value(metric, m), _fmt_value(r.value),
                             f"`{cfgf}`", size, format_seconds(m.get("wall_seconds"))]
                            + peer_cell(r.method)))
            note = _run_note(ds, r.method, m)
            if note:
                notes.append(note)
    out.append("")
    if cnn_col and peers:
        out.append(_cnn_peer_note(ds, peers, metrics))
        out.append("")
    if table is not None and table.paper_dict_sizes:
        out.append(f"Paper's dictionary sizes per layer: "
                   f"{', '.join(map(str, table.paper_dict_sizes))} "
                   f"({table.paper_dict_sizes_note}).")
        out.append("")
    for n in notes + (list(table.notes) if table is not None else []):
        out.append(n)
        out.append("")
    if (ds, "inpainting") in metrics:
        out.append(render_inpainting(ds, metrics[(ds, "inpainting")]))
    return "\n".join(out)


def _with_our_rows(rows: tuple[PaperRow, ...], enabled: list[str]) -> tuple[PaperRow, ...]:
    """A paper table's rows plus our rows of the pretrained layers, right under the
    pretrained_svm row (in its group): pretrained_block_svm when it runs, the reference
    encoder_svm when pretrained_svm or encoder_svm runs (it says how to enable it when it
    did not run); at the end if the table has no pretrained_svm row."""
    ours = [m for m in (BLOCK_METHOD, ENCODER_METHOD)
            if m not in [r.method for r in rows]
            and (m in enabled or (m == ENCODER_METHOD and "pretrained_svm" in enabled))]
    out = list(rows)
    at = next((i for i, r in enumerate(out) if r.method == "pretrained_svm"), None)
    group = out[at].group if at is not None else ""
    for j, method in enumerate(ours):
        row = PaperRow(METHOD_LABELS[method], None, method, group)
        out.insert(len(out) if at is None else at + 1 + j, row)
    return tuple(out)


def _cnn_peer_note(ds: str, peers: Mapping[str, str],
                   metrics: Mapping[tuple[str, str], Mapping[str, Any]]) -> str:
    """What the "CNN, same images" column holds, run by run."""
    bits = []
    for method, run in peers.items():
        m = metrics.get((ds, run))
        size = f"{m.get('n_train')} / {m.get('n_test')} images" if m else "not run yet"
        where = ("the `cnn` run itself" if run == "cnn"
                 else f"`results/{ds}/{run}/`")
        bits.append(f"`{method}`: {where} ({size})")
    return ('"CNN, same images": the same-shape CNN (settings of `cnn`) trained and tested '
            "on exactly the train / test images of that row, the same seeded subsets; "
            + "; ".join(bits) + ".")


def render_tables(datasets: Mapping[str, Mapping[str, Any]],
                  metrics: Mapping[tuple[str, str], Mapping[str, Any]], *,
                  config_files: Iterable[str] = (),
                  implemented: Iterable[str] = IMPLEMENTED_METHODS) -> str:
    cf = ", ".join(f"`{c}`" for c in config_files) or "(none recorded)"
    head = [
        "# Results: ours beside Pu et al. (AISTATS 2016)",
        "",
        f"Generated by `snakemake --cores all results/tables.md` from "
        f"`results/<dataset>/<method>/metrics.json`; config: {cf}.",
        "The paper's numbers are copied from its Tables 1-6; \"—\" means no number "
        "(a peer we do not rerun, or a row the paper does not report). Our runs may "
        "use subsets and shorter chains than the paper: the data size column and the "
        "notes under each table say what ran. Wall time is summed over the rules that "
        "produced the number (prepare, pretraining layers, features, SVM; for the "
        "reference row: prepare, layer 1's pretraining, the encoder, SVM; for the CNN: "
        "prepare, then training and scoring).",
        "",
    ]
    body = [render_dataset_table(ds, block, metrics, implemented=implemented)
            for ds, block in datasets.items()]
    return "\n".join(head + body).rstrip() + "\n"


def dataset_methods(block: Mapping[str, Any],
                    implemented: Iterable[str] = IMPLEMENTED_METHODS) -> list[str]:
    """The methods a dataset's table has rows for (its paper table's rows of ours, in
    order), then its enabled and the implemented methods not among them."""
    table = PAPER_TABLES.get(block.get("paper_table") or "")
    rows = [r.method for r in table.rows if r.method] if table is not None else []
    return list(dict.fromkeys(rows + list(block.get("methods", []) or []) + list(implemented)))


def runs_of_dataset(results_dir: str | os.PathLike, ds: str, block: Mapping[str, Any], *,
                    implemented: Iterable[str] = IMPLEMENTED_METHODS
                    ) -> tuple[dict[str, dict], dict[str, str]]:
    """(method -> metrics.json of every enabled run that exists, method -> why there is
    none) over :func:`dataset_methods`, for figures that show what has run."""
    implemented = tuple(implemented)
    enabled = list(block.get("methods", []) or [])
    runs: dict[str, dict] = {}
    missing: dict[str, str] = {}
    for method in dataset_methods(block, implemented):
        p = metrics_path(results_dir, ds, method)
        if method in enabled and p.exists():
            runs[method] = json.loads(p.read_text())
        elif method in enabled:
            missing[method] = f"no {p}"
        elif method in implemented:
            missing[method] = f"not enabled in datasets.{ds}.methods"
        else:
            missing[method] = "not implemented yet"
    return runs, missing
