"""Test scores the paper's tables use: error, top-k error (ImageNet) and accuracy averaged
over classes (Caltech 101/256, whose classes have very different test sizes); the
binomial standard error of a test error."""

from __future__ import annotations

import math

import numpy as np


def topk_errors(scores, labels, ks=(1, 5)) -> dict:
    """Top-k error (%) of (N, C) decision values: the label is not among the k largest."""
    scores, labels = np.asarray(scores), np.asarray(labels)
    order = np.argsort(-scores, axis=1, kind="stable")
    out = {}
    for k in ks:
        hit = np.any(order[:, :min(k, scores.shape[1])] == labels[:, None], axis=1)
        out[f"top{k}_error_pct"] = 100.0 * float(1.0 - hit.mean())
    return out


def error_pct(predicted, labels) -> float:
    """Test (or train) error in percent: the share of ``predicted`` that differ from ``labels``."""
    return 100.0 * float(np.mean(np.asarray(predicted) != np.asarray(labels)))


def class_mean_accuracy(labels, predicted, n_classes: int | None = None) -> float:
    """Mean over the classes present in ``labels`` of each class's accuracy (%)."""
    labels, predicted = np.asarray(labels), np.asarray(predicted)
    classes = np.unique(labels) if n_classes is None else [c for c in range(n_classes)
                                                           if np.any(labels == c)]
    return 100.0 * float(np.mean([np.mean(predicted[labels == c] == c) for c in classes]))


def standard_error_pct(error_pct: float, n_test: int) -> float:
    """The binomial standard error of a test error measured on ``n_test`` images, in
    percent: 100 sqrt(p (1 - p) / n_test) with p = error_pct / 100."""
    p = float(error_pct) / 100.0
    return 100.0 * math.sqrt(p * (1.0 - p) / int(n_test))
