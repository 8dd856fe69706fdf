"""Learning curves: a row's test error against the number of images its SVM trains on.

A row's features stay as its features rule wrote them; only its Bayesian SVM
(:class:`dgdm_tf.supervised.svm_classifier.BayesianSVM`, the row's ``svm`` options, view
and seed) is refitted on the first n of its training images for each n, and tested on
all of its test images. Where the curve still falls at the row's own size, more data
would close part of the distance to the paper; where it is flat, the rest is the
features (the pretraining's length and the inference route). Beside them, the CNN
baseline trained afresh on the same images at each size (:func:`cnn_learning_curve`).

Columns of a curve's rows (:data:`COLUMNS`): ``method``, ``n_train``, ``n_test``,
``test_error_pct``, ``se_pct`` (:func:`dgdm_tf.report.scores.standard_error_pct`), ``train_error_pct``,
``seconds`` (the fit and both predictions; the row's own fit: its svm or cnn rule's time),
``source`` (``fit``; ``row``: the row's own fit, read from its metrics.json;
``skipped``: more images than the row has) and ``note``.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from dgdm_tf.data.subsets import subset_indices
from dgdm_tf.report.paper import PAPER_TABLES
from dgdm_tf.report.scores import error_pct, standard_error_pct
from dgdm_tf.supervised.feature_view import svm_view
from dgdm_tf.supervised.options import SvmOptions

COLUMNS = ("method", "n_train", "n_test", "test_error_pct", "se_pct", "train_error_pct",
           "seconds", "source", "note")


def training_rows(idx: np.ndarray | None, y: np.ndarray, n: int, seed: int) -> np.ndarray:
    """The rows of a row's training set that its curve fits on at size ``n``.

    A set in the order of a seeded permutation (the shared subsets of
    :func:`dgdm_tf.data.subsets.shared_subset`): its first ``n``, as a row that trains on
    fewer images takes them. A set in file order (``idx`` increasing: ``n_train`` null,
    the whole split, whose order may follow the classes): the seeded subset of ``n``
    stratified by class (:func:`dgdm_tf.data.subsets.subset_indices`; with ``seed`` the
    train split's subset seed, :func:`dgdm_tf.data.subsets.subset_seeds`, the images that
    ``n_train: n`` would have drawn).
    """
    total = len(y)
    n = min(int(n), total)
    if idx is not None and total > 1 and np.all(np.diff(np.asarray(idx)) > 0):
        return subset_indices(total, n, seed, labels=np.asarray(y))
    return np.arange(n)


def curve_rows(method: str, n_avail: int, n_test: int, sizes: Iterable[int],
               fit: Callable[[int], tuple[float, float]], *,
               row_metrics: Mapping[str, Any] | None = None, view: str | None = None,
               progress: Callable[[str], None] | None = None) -> list[dict]:
    """One row's learning curve (:data:`COLUMNS`), sorted by size: ``fit(n)`` trains the
    row's classifier on its first ``n`` training images and returns its (test, train)
    error in %. A size above ``n_avail`` gives a ``skipped`` row. With ``row_metrics``
    (the row's metrics.json, on these very images: its ``n_train``, ``n_test`` and, where
    ``view`` is given, its ``svm_view``) the row's own fit is the point at its size, not
    fitted again. ``progress``: called once per fit."""
    say = progress or (lambda _msg: None)
    rows: list[dict] = []
    own = None
    if row_metrics is not None:
        same = (int(row_metrics.get("n_train", -1)) == n_avail
                and int(row_metrics.get("n_test", -1)) == n_test
                and (view is None or row_metrics.get("svm_view", view) == view))
        if same:
            err = float(row_metrics["test_error_pct"])
            by_step = row_metrics.get("wall_seconds_by_step") or {}
            own = {"method": method, "n_train": n_avail, "n_test": n_test,
                   "test_error_pct": err, "se_pct": standard_error_pct(err, n_test),
                   "train_error_pct": float(row_metrics["train_error_pct"]),
                   "seconds": by_step.get("svm", by_step.get(method)),
                   "source": "row", "note": "the row's own fit (its metrics.json)"}
            rows.append(own)
            say(f"{method}: {n_avail} training images (the row's own fit): test error "
                f"{err:.2f} +- {own['se_pct']:.2f}%")
        else:
            say(f"{method}: its metrics.json is of {row_metrics.get('n_train')} / "
                f"{row_metrics.get('n_test')} images, not these {n_avail} / {n_test}: not used")
    for n in sorted({int(s) for s in sizes}):
        if n > n_avail:
            rows.append({"method": method, "n_train": n, "n_test": n_test,
                         "test_error_pct": None, "se_pct": None, "train_error_pct": None,
                         "seconds": None, "source": "skipped",
                         "note": f"skipped: the row has {n_avail} training images"})
            say(f"{method}: {n} training images skipped (the row has {n_avail})")
            continue
        if own is not None and n == n_avail:
            continue
        t0 = time.perf_counter()
        err, train_err = fit(n)
        row = {"method": method, "n_train": n, "n_test": n_test, "test_error_pct": err,
               "se_pct": standard_error_pct(err, n_test), "train_error_pct": train_err,
               "seconds": time.perf_counter() - t0, "source": "fit", "note": ""}
        rows.append(row)
        say(f"{method}: {n} training images: test error {err:.2f} +- {row['se_pct']:.2f}% "
            f"(train {train_err:.2f}%), {row['seconds']:.1f} s")
    return sorted(rows, key=lambda r: r["n_train"])


def learning_curve(f_train, y_train, f_test, y_test, *, method: str, n_classes: int,
                   sizes: Iterable[int], svm: SvmOptions, seed: int,
                   view: str = "signed", idx_train=None, subset_seed: int = 0,
                   row_metrics: Mapping[str, Any] | None = None,
                   progress: Callable[[str], None] | None = None,
                   svm_progress: Callable[[str], None] | None = None) -> list[dict]:
    """One SVM row's learning curve (:func:`curve_rows`): its SVM refitted at each size.

    ``f_*``, ``y_*``: the row's features and labels as stored (its features.npz), read by
    the SVM under ``view`` (:func:`dgdm_tf.supervised.feature_view.svm_view`); ``svm``:
    the SVM's options (:class:`dgdm_tf.supervised.options.SvmOptions`, the svm rule's for
    this row); ``seed``: its seed (the svm rule's). At each n of ``sizes`` the SVM trains on
    :func:`training_rows` (``idx_train``, ``subset_seed``) and is scored on every test
    image. ``svm_progress``: per SVM sweep or EM step.
    """
    from dgdm_tf.supervised.svm_classifier import BayesianSVM

    y_train, y_test = np.asarray(y_train, np.int64), np.asarray(y_test, np.int64)
    f_train, f_test = svm_view(f_train, view), svm_view(f_test, view)

    def fit(n: int) -> tuple[float, float]:
        sel = training_rows(idx_train, y_train, n, subset_seed)
        model = BayesianSVM(n_classes, svm, seed=seed, progress=svm_progress)
        model.fit(f_train[sel], y_train[sel])
        return (error_pct(model.predict(f_test), y_test),
                error_pct(model.predict(f_train[sel]), y_train[sel]))

    return curve_rows(method, len(y_train), len(y_test), sizes, fit, row_metrics=row_metrics,
                      view=view, progress=progress)


def cnn_learning_curve(x_train, y_train, x_test, y_test, *, n_classes: int, sizes: Iterable[int],
                       options, layers, seed: int, idx_train=None, subset_seed: int = 0,
                       row_metrics: Mapping[str, Any] | None = None,
                       progress: Callable[[str], None] | None = None,
                       cnn_progress: Callable[[str], None] | None = None) -> list[dict]:
    """The CNN's learning curve (:func:`curve_rows`, method ``cnn``): the same-shape CNN
    (:func:`dgdm_tf.baselines.cnn.train_cnn` with ``options``, ``layers`` and ``seed``,
    the cnn rule's) trained afresh at each size on :func:`training_rows`, the images the
    SVM rows' curves take at that size, and scored on every test image."""
    from dgdm_tf.baselines.cnn import train_cnn

    y_train, y_test = np.asarray(y_train, np.int64), np.asarray(y_test, np.int64)
    quiet = cnn_progress or (lambda _msg: None)

    def fit(n: int) -> tuple[float, float]:
        sel = training_rows(idx_train, y_train, n, subset_seed)
        out = train_cnn((x_train[sel], y_train[sel]), (x_test, y_test), options, layers=layers,
                        n_classes=n_classes, seed=seed, progress=quiet)
        return float(out["test_error_pct"]), float(out["train_error_pct"])

    return curve_rows("cnn", len(y_train), len(y_test), sizes, fit, row_metrics=row_metrics,
                      progress=progress)


def paper_test_errors(paper_table: str | None) -> dict[str, float]:
    """method -> the paper's test error (%) of our rows in table ``paper_table``
    (:data:`dgdm_tf.report.paper.PAPER_TABLES`): the error itself, or 100 minus the
    accuracy (Caltech: averaged over classes); no entry where the paper has no number."""
    table = PAPER_TABLES.get(paper_table or "")
    if table is None or table.metric not in ("error", "accuracy"):
        return {}
    out = {}
    for r in table.rows:
        if r.method is not None and isinstance(r.value, (int, float)):
            out[r.method] = float(r.value) if table.metric == "error" else 100.0 - float(r.value)
    return out


def plot_learning_curves(rows: Iterable[Mapping[str, Any]], path: str | os.PathLike, title: str, *,
                         paper: Mapping[str, float] | None = None,
                         labels: Mapping[str, str] | None = None,
                         paper_metric: str = "error", notes: Iterable[str] = ()) -> None:
    """Test error (+-1 standard error) against training images on a log axis, one line
    per row (:func:`learning_curve`'s rows), the row's own fit as an open diamond; the
    paper's number of each row (``paper``: method -> test error %, :func:`paper_test_errors`)
    as a dashed line of the row's colour. Skipped sizes and ``notes`` are listed under it."""
    import matplotlib.ticker
    import pandas as pd
    import seaborn as sns

    from dgdm_tf.report.plots import caption, plt, save_figure

    labels, paper = dict(labels or {}), dict(paper or {})
    df = pd.DataFrame(list(rows), columns=list(COLUMNS))
    drawn = df[df["test_error_pct"].notna()]
    methods = list(dict.fromkeys(df["method"]))
    sns.set_theme(style="whitegrid", font_scale=0.8)
    fig, ax = plt.subplots(figsize=(7.0, 4.2))
    palette = sns.color_palette("colorblind", max(3, len(methods)))
    handles = []  # each row's line, then its paper line
    for i, method in enumerate(methods):
        part = drawn[drawn["method"] == method].sort_values("n_train")
        if len(part):
            x = part["n_train"].to_numpy(float)
            y = part["test_error_pct"].to_numpy(float)
            handles.append(ax.errorbar(x, y, yerr=part["se_pct"].to_numpy(float), marker="o", markersize=4,
                        capsize=3, lw=1.3, color=palette[i], label=labels.get(method, method)))
            own = part[part["source"] == "row"]
            if len(own):
                ax.scatter(own["n_train"].to_numpy(float), own["test_error_pct"].to_numpy(float),
                           s=70, marker="D", facecolors="none", edgecolors=palette[i], zorder=3)
            ax.annotate(f"{y[-1]:.2f}%", (x[-1], y[-1]), textcoords="offset points",
                        xytext=(5, 4), fontsize=7, color=palette[i])
        if method in paper:
            what = "paper" if paper_metric == "error" else "paper, 100 - accuracy"
            handles.append(ax.axhline(paper[method], ls="--", lw=1.0, color=palette[i],
                                      label=f"{what}: {paper[method]:g}%"))
    if len(drawn):
        ax.set_xscale("log")
        ticks = sorted({int(n) for n in drawn["n_train"]})
        ax.xaxis.set_major_locator(matplotlib.ticker.FixedLocator(ticks))
        ax.xaxis.set_major_formatter(matplotlib.ticker.FixedFormatter([str(t) for t in ticks]))
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.set_ylim(bottom=0)
        ax.legend(handles=handles, fontsize=7, loc="best")
    else:
        ax.text(0.5, 0.5, "no size was fitted", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("training images (log scale)")
    ax.set_ylabel("test error (%), +-1 standard error")
    ax.set_title(title, fontsize=9)
    skipped = df[df["source"] == "skipped"]
    lines = ["Open diamond: the row's own fit, as in results/tables.md. Bars: the binomial "
             "standard error of each test error, 100 sqrt(p (1 - p) / n_test)."]
    by_sizes: dict[tuple, list[str]] = {}  # (sizes, why) -> the rows that skipped them
    for method in dict.fromkeys(skipped["method"]):
        part = skipped[skipped["method"] == method]
        key = (", ".join(str(int(n)) for n in part["n_train"]),
               part["note"].iloc[0].removeprefix("skipped: "))
        by_sizes.setdefault(key, []).append(labels.get(method, method))
    for (sizes, why), names in by_sizes.items():
        lines.append(f"Skipped {sizes} training images ({why}): {'; '.join(names)}.")
    caption(fig, lines + list(notes))
    save_figure(fig, path)
