"""``results/tables.md``: our numbers beside the paper's, one table per configured dataset.

Input: the workflow config's ``datasets`` mapping and the ``metrics.json`` of every run
(``results/{dataset}/{method}/metrics.json``, written by the ``svm``, ``cnn`` and other
method rules; ``results/{dataset}/cnn_at/{method}/metrics.json`` and
``results/{dataset}/encoder_at/{method}/metrics.json``, the same-images peers below).
Output: Markdown, one table per dataset, one row per method of the paper's table for it
(:mod:`dgdm_tf.report.paper`), columns: method, ours, paper, config file, data size
(train / test), wall time. Rows of the paper's peers show "—" for ours; rows of our
methods that did not run say why.

Additions of ours, not in the paper:

- ``pretrained_block_svm`` ("Our pretrained model, block posteriors + SVM",
  :mod:`dgdm_tf.pretrain.block_posterior`), under ``pretrained_svm`` when it runs: the same
  pretrained layers and SVM on the same images, each block's posterior given the image
  alone as features instead of Gibbs posterior means (docs/findings/explaining_away_readout.md);

- a reference row, ``encoder_svm`` ("Reference: learned layer-1 dictionary +
  soft-threshold encoder + SVM", :mod:`dgdm_tf.baselines.encoder`), placed under the
  ``pretrained_svm`` row in every table of a dataset that runs ``pretrained_svm`` (or
  ``encoder_svm``; "not run" with how to enable it where only the former runs): the same layer-1 dictionary and the same SVM on the same images,
  features from a deterministic encoder instead of Gibbs inference;
- when the dataset runs ``encoder_svm``, a column "Reference, same images": for each of
  our Gibbs rows, the reference row trained and tested on exactly that row's images
  (:func:`dgdm_tf.report.runs.reference_peer_run`): ``encoder_svm`` itself, or
  ``results/{dataset}/encoder_at/{method}/`` where the row uses fewer images;
- when the dataset runs ``cnn``, a last column "CNN, same images": for each of our Gibbs
  rows (``pretrained_svm``, ``unsupervised_svm``, ``supervised``), the test error (or
  accuracy, as the table's metric) of the same-shape CNN trained and tested on exactly
  that row's train / test images (:func:`dgdm_tf.report.runs.row_subsets`,
  :func:`dgdm_tf.report.runs.cnn_peer_run`): the ``cnn`` run itself where the row uses
  the dataset's ``n_train`` / ``n_test`` subsets, else
  ``results/{dataset}/cnn_at/{method}/``.

When the dataset runs ``pretrained_svm``, the last column pairs each other row with it on
the test images both predicted (:func:`dgdm_tf.report.predictions.paired_against_reference`):
the difference of their test errors, its paired standard error and McNemar's exact p.

Under a dataset whose ``learning_curve.sizes`` is not empty, one line names its learning
curves' CSV and figure (rule ``learning_curve``, :mod:`dgdm_tf.report.learning_curves`).

Nothing is computed here that a run did not record. Which runs a table reads:
:mod:`dgdm_tf.report.runs`; the notes under it: :mod:`dgdm_tf.report.run_notes`.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from dgdm_tf.report.paper import METHOD_LABELS, METRIC_HEADERS, PAPER_TABLES, PaperRow, PaperTable
from dgdm_tf.report.run_notes import row_recipe, run_note
from dgdm_tf.report.runs import (BLOCK_METHOD, ENCODER_METHOD, IMPLEMENTED_METHODS, PAIRED_REFERENCE,
                                 cnn_peer_runs, curve_methods, reference_peer_runs)

DASH = "—"


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


def paired_cell(pair: Mapping[str, Any] | None) -> str:
    """A row's difference from the pretrained row on the test images both predicted:
    points (its paired SE), McNemar's exact p and the image count."""
    if pair is None:
        return DASH
    return (f"{pair['diff_pct_points']:+.2f} ± {pair['se_pct_points']:.2f}, "
            f"p {pair['mcnemar_exact_p']:.2g}, {pair['n_images']} images")


def render_dataset_table(ds: str, block: Mapping[str, Any],
                         metrics: Mapping[tuple[str, str], Mapping[str, Any]], *,
                         implemented: Iterable[str] = IMPLEMENTED_METHODS,
                         paired: Mapping[tuple[str, str], Mapping[str, Any]] | None = None) -> str:
    """One dataset's table; ``paired`` ((ds, method) -> the row against the pretrained
    row on the same test images, :func:`dgdm_tf.report.predictions.paired_against_reference`)
    adds the last column where the dataset runs ``pretrained_svm``."""
    implemented = tuple(implemented)
    enabled = list(block.get("methods", []) or [])
    pair_col = paired is not None and PAIRED_REFERENCE in enabled
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

    # the reference row and the CNN at each Gibbs row's own images: the last columns,
    # where the dataset runs them
    peer_cols = [(name, runs) for name, enabled_peer, runs in (
        ("Reference, same images", ENCODER_METHOD in enabled, reference_peer_runs(block)),
        ("CNN, same images", "cnn" in enabled, cnn_peer_runs(block))) if enabled_peer]
    n_cols = 6 + len(peer_cols) + int(pair_col)

    def pair_cell(method: str | None) -> list[str]:
        if not pair_col:
            return []
        if method == PAIRED_REFERENCE:
            return ["(the pairs' reference)"]
        return [paired_cell(paired.get((ds, method)) if method in enabled else None)]

    def peer_cell(method: str | None) -> list[str]:
        cells = []
        for _, runs in peer_cols:
            run = runs.get(method) if method is not None else None
            if run is None:
                cells.append(DASH)
            elif (ds, run) not in metrics:
                cells.append(f"missing (no `results/{ds}/{run}/metrics.json`)")
            else:
                cells.append(_ours_value(metric, metrics[(ds, run)]))
        return cells

    out = [f"## {title}", ""]
    out.append(_row(["method", f"ours: {METRIC_HEADERS[metric]}",
                     f"paper: {METRIC_HEADERS[metric]}", "config file",
                     "data size (train / test)", "wall time"]
                    + [f"{name}: {METRIC_HEADERS[metric]}" for name, _ in peer_cols]
                    + (["test error − pretrained + SVM's, same test images (points ± paired "
                        "SE, McNemar exact p)"] if pair_col else [])))
    out.append(_row(["---"] * n_cols))
    group = ""
    notes: list[str] = []
    for r in rows:
        if r.group and r.group != group:
            group = r.group
            out.append(_row([f"*{group}*"] + [""] * (n_cols - 1)))
        if r.method is None:
            out.append(_row([r.label, DASH, _fmt_value(r.value), DASH, DASH, DASH]
                            + peer_cell(None) + pair_cell(None)))
            continue
        m = metrics.get((ds, r.method)) if r.method in enabled else None
        if r.method not in enabled:
            ours = _not_run(ds, r.method, enabled, implemented)
            out.append(_row([r.label, ours, _fmt_value(r.value), DASH, DASH, DASH]
                            + peer_cell(None) + pair_cell(None)))
        elif m is None:
            ours = f"missing (no `results/{ds}/{r.method}/metrics.json`)"
            out.append(_row([r.label, ours, _fmt_value(r.value), DASH, DASH, DASH]
                            + peer_cell(r.method) + pair_cell(None)))
        else:
            cfgf = m.get("config_file") or DASH
            size = f"{m.get('n_train', DASH)} / {m.get('n_test', DASH)}"
            recipe = row_recipe(r.method, m)
            label = f"{r.label} ({recipe})" if recipe else r.label
            out.append(_row([label, _ours_value(metric, m), _fmt_value(r.value),
                             f"`{cfgf}`", size, format_seconds(m.get("wall_seconds"))]
                            + peer_cell(r.method) + pair_cell(r.method)))
            note = run_note(ds, r.method, m)
            if note:
                notes.append(note)
    out.append("")
    for name, runs in peer_cols:
        if runs:
            out.append(_peer_note(ds, name, runs, metrics))
            out.append("")
    if pair_col:
        out.append("The last column pairs each row with the pretrained row on the test images "
                   "both predicted (their `predictions.csv`): the difference of their errors, "
                   "its paired standard error, and McNemar's exact test on the images only one "
                   "of the two gets wrong.")
        out.append("")
    if table is not None and table.paper_dict_sizes:
        out.append(f"Paper's dictionary sizes per layer: "
                   f"{', '.join(map(str, table.paper_dict_sizes))} "
                   f"({table.paper_dict_sizes_note}).")
        out.append("")
    for n in notes + (list(table.notes) if table is not None else []):
        out.append(n)
        out.append("")
    curves = curve_methods(block)
    if curves:
        sizes = ", ".join(str(n) for n in block["learning_curve"]["sizes"])
        cnn_too = " (the CNN trained afresh)" if "cnn" in curves else ""
        out.append(f"Learning curves ({', '.join(f'`{m}`' for m in curves)}: each row's SVM "
                   f"refitted{cnn_too} on the first {sizes} of its training images, test error "
                   f"against training images): `results/{ds}/learning_curve.csv`, "
                   f"`results/{ds}/figures/learning_curve.png`.")
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


_PEER_WHAT = {
    "CNN, same images": "the same-shape CNN (settings of `cnn`)",
    "Reference, same images": ("the reference row (the pretrained layer-1 dictionary, the "
                               "soft-threshold encoder, the SVM of `encoder_svm`)"),
}


def _peer_note(ds: str, name: str, runs: Mapping[str, str],
               metrics: Mapping[tuple[str, str], Mapping[str, Any]]) -> str:
    """What a same-images column holds, run by run."""
    bits = []
    for method, run in runs.items():
        m = metrics.get((ds, run))
        size = f"{m.get('n_train')} / {m.get('n_test')} images" if m else "not run yet"
        where = f"the `{run}` run itself" if "/" not in run else f"`results/{ds}/{run}/`"
        bits.append(f"`{method}`: {where} ({size})")
    return (f'"{name}": {_PEER_WHAT[name]} trained and tested on exactly the train / test '
            "images of that row, the same seeded subsets; " + "; ".join(bits) + ".")


def render_tables(datasets: Mapping[str, Mapping[str, Any]],
                  metrics: Mapping[tuple[str, str], Mapping[str, Any]], *,
                  config_files: Iterable[str] = (),
                  implemented: Iterable[str] = IMPLEMENTED_METHODS,
                  paired: Mapping[tuple[str, str], Mapping[str, Any]] | None = None) -> str:
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
    body = [render_dataset_table(ds, block, metrics, implemented=implemented, paired=paired)
            for ds, block in datasets.items()]
    return "\n".join(head + body).rstrip() + "\n"


def _rounded(x: Any, digits: int) -> float | None:
    return None if x is None else round(float(x), digits)


def rows_summary(datasets: Mapping[str, Mapping[str, Any]],
                 metrics: Mapping[tuple[str, str], Mapping[str, Any]],
                 paired: Mapping[tuple[str, str], Mapping[str, Any]] | None = None, *,
                 config_files: Iterable[str] = ()) -> dict:
    """``results/rows.json``: each dataset's rows as its table quotes them, for a reader or
    a check to compare with. ``{"config_files": [...], "datasets": {dataset: {method:
    row}}}``, the dataset's enabled methods
    in order, those with a ``metrics.json``; a row holds ``test_error_pct`` and
    ``train_error_pct`` (2 decimals, None where the row records no training error),
    ``n_train`` / ``n_test`` and, for every row but the pretrained one where both
    predicted the same test images, ``vs_pretrained_svm``: the row's error minus the
    pretrained row's (points, 2 decimals), its paired standard error, McNemar's exact p
    (2 significant digits) and the shared image count
    (:func:`dgdm_tf.report.predictions.paired_against_reference`).

    ``docs/benchmarks/default_run.json`` is the default run's, committed in this format
    with a ``source`` key; ``tests/test_default_run_quotes.py`` checks the figures that
    README.md and config/config.yaml quote against it."""
    paired = paired or {}
    out: dict[str, dict] = {}
    for ds, block in datasets.items():
        rows = {}
        for method in block.get("methods", []) or []:
            m = metrics.get((ds, method))
            if m is None:
                continue
            row = {"test_error_pct": _rounded(m["test_error_pct"], 2),
                   "train_error_pct": _rounded(m.get("train_error_pct"), 2),
                   "n_train": m.get("n_train"), "n_test": m.get("n_test")}
            pair = paired.get((ds, method))
            if pair is not None:
                p = pair.get("mcnemar_exact_p")
                row[f"vs_{PAIRED_REFERENCE}"] = {
                    "diff_pct_points": _rounded(pair["diff_pct_points"], 2),
                    "se_pct_points": _rounded(pair["se_pct_points"], 2),
                    "mcnemar_exact_p": None if p is None else float(f"{p:.2g}"),
                    "n_images": pair.get("n_images")}
            rows[method] = row
        if rows:
            out[ds] = rows
    return {"config_files": list(config_files), "datasets": out}
