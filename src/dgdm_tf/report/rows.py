"""A table row's two files: metrics.json (its test error and what the row says beside it)
and predictions.csv (every test image's label, prediction and decision values). Every row's
script (svm, supervised_predict, mcem_predict, cnn) builds a :class:`RowResult` and calls
:func:`write_row`, so the error, the sizes, the time by step and the provenance are
computed and written one way, and a row that diverged writes nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dgdm_tf.io import atomic as atomic_io
from dgdm_tf.io.artifacts import ArtifactError
from dgdm_tf.report.predictions import write_predictions
from dgdm_tf.report.scores import class_mean_accuracy, error_pct, topk_errors


#: the metrics.json keys write_row computes (a row's own fields may not reuse them)
COMPUTED = frozenset({"dataset", "method", "test_error_pct", "top5_error_pct", "test_accuracy_pct",
                      "class_mean_accuracy_pct", "train_error_pct", "n_train", "n_test", "n_classes",
                      "wall_seconds", "wall_seconds_by_step"})


@dataclass(frozen=True)
class RowResult:
    """One table row's classification of its test images, and what its metrics.json says
    beside the scores.

    ``labels`` / ``predicted`` (N,) and, when given, ``scores`` (N, >= n_cls) decision
    values (the first n_cls columns written to predictions.csv); ``test_index`` the
    images' indices in the test split (None: 0..N-1). ``topk``: the error is read from the scores' ranking (top-1 and
    top-5), as the large-class rows report it, not from ``predicted``. ``fields`` are the
    row's own keys, ``by_step`` the wall seconds of every rule behind the number, and
    ``provenance`` the keys every metrics.json ends with (seed, config, versions)."""

    dataset: str
    method: str
    labels: Any
    predicted: Any
    n_classes: int
    n_train: int
    by_step: dict
    provenance: dict
    train_error_pct: float | None = None
    scores: Any = None
    test_index: Any = None
    topk: bool = False
    fields: dict | None = None

    def __post_init__(self):
        n = len(self.labels)
        if len(self.predicted) != n or (self.scores is not None and len(self.scores) != n):
            raise ValueError(f"{self.dataset} {self.method}: {n} labels, {len(self.predicted)} "
                             f"predictions, {None if self.scores is None else len(self.scores)} score rows")
        if self.topk and self.scores is None:
            raise ValueError(f"{self.dataset} {self.method}: topk reads the error from the scores; give scores")
        taken = set(self.fields or {}) & (COMPUTED | set(self.provenance))
        if taken:
            raise ValueError(f"{self.dataset} {self.method}: fields {sorted(taken)} are computed "
                             "or provenance keys; name the row's own key otherwise")

    def metrics(self) -> dict:
        """metrics.json's keys: the test error (and accuracy, class-mean accuracy), the
        sizes, the row's own fields, the time by step and its total, the provenance."""
        labels, predicted = np.asarray(self.labels), np.asarray(self.predicted)
        if self.topk:
            err = topk_errors(self.scores, labels)
            errors = {"test_error_pct": err["top1_error_pct"], "top5_error_pct": err["top5_error_pct"]}
        else:
            errors = {"test_error_pct": error_pct(predicted, labels)}
        out = {"dataset": self.dataset, "method": self.method, **errors,
               "test_accuracy_pct": 100.0 - errors["test_error_pct"],
               "class_mean_accuracy_pct": class_mean_accuracy(labels, predicted, self.n_classes)}
        if self.train_error_pct is not None:
            out["train_error_pct"] = self.train_error_pct
        out.update({"n_train": int(self.n_train), "n_test": int(len(labels)),
                    "n_classes": int(self.n_classes), **(self.fields or {}),
                    "wall_seconds": float(sum(self.by_step.values())),
                    "wall_seconds_by_step": dict(self.by_step), **self.provenance})
        return out


def _first_not_finite(v: Any, key: str = "") -> str | None:
    """The key path of the first NaN or infinite number in a JSON-like value, or None."""
    if isinstance(v, dict):
        return next((p for k, x in v.items() if (p := _first_not_finite(x, f"{key}/{k}"))), None)
    if isinstance(v, (list, tuple)):
        return next((p for i, x in enumerate(v) if (p := _first_not_finite(x, f"{key}[{i}]"))), None)
    if isinstance(v, (float, np.floating)) and not np.isfinite(v):
        return key or "/"
    return None


def write_row(row: RowResult, *, metrics, predictions) -> dict:
    """Write a row's predictions.csv and metrics.json (each atomically; the metrics last,
    so a row with metrics has its predictions) and return the metrics. A NaN or infinite
    number among the metrics raises :class:`ArtifactError` naming its key, before either
    file is written."""
    out = row.metrics()
    bad = _first_not_finite(out)
    if bad is not None:
        raise ArtifactError(f"{row.dataset} {row.method}: metrics.json key {bad} is not a finite "
                            f"number; nothing was written (the run that produced it diverged)")
    labels = np.asarray(row.labels)
    index = np.arange(len(labels)) if row.test_index is None else row.test_index
    # predictions.csv keeps one score column per class (a model may carry more columns)
    scores = None if row.scores is None else np.asarray(row.scores)[:, :row.n_classes]
    write_predictions(predictions, index, labels, row.predicted, scores)
    atomic_io.write_json(metrics, out)
    return out
