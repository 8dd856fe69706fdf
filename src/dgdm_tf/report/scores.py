"""Test scores the paper's tables use: error, top-k error (ImageNet) and accuracy averaged
over classes (Caltech 101/256, whose classes have very different test sizes); the
binomial standard error of a test error; two classifiers compared on the same images
(McNemar's exact test)."""

from __future__ import annotations

import math
from fractions import Fraction

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


def mcnemar_exact_p(a: int, b: int) -> float:
    """Two-sided exact McNemar test of a vs b discordant images: Binomial(a + b, 1/2)."""
    n = a + b
    if n == 0:
        return 1.0
    # an exact integer ratio: 2.0 ** n overflows a float past 1023 discordant images
    tail = Fraction(sum(math.comb(n, k) for k in range(min(a, b) + 1)), 2 ** n)
    return min(1.0, float(2 * tail))


def paired_errors(pred_a, pred_b, labels) -> dict:
    """Classifier b against a on the same images: b's error minus a's (percentage
    points), its paired standard error, the images only a / only b / both get wrong, and
    McNemar's exact p on the discordant ones."""
    y = np.asarray(labels)
    wa, wb = np.asarray(pred_a) != y, np.asarray(pred_b) != y
    n, only_a, only_b = len(y), int(np.sum(wa & ~wb)), int(np.sum(wb & ~wa))
    diff = (only_b - only_a) / n
    se = math.sqrt(max(only_a + only_b - n * diff * diff, 0.0)) / n
    return {"diff_pct_points": 100 * diff, "se_pct_points": 100 * se, "wrong_only_a": only_a,
            "wrong_only_b": only_b, "wrong_both": int(np.sum(wa & wb)),
            "mcnemar_exact_p": float(mcnemar_exact_p(only_a, only_b))}
