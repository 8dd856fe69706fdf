"""How class-specific a model's top-layer elements are: the paper's Fig. 2 claim in figures.

The paper says the supervised model's top-layer elements are each "unique to a single
number" where the unsupervised model's are "blurry". Read on labelled images, element k's
usage u_nk >= 0 by image n (for example the posterior mean of |S[L]| summed over its
positions) splits over the classes as p_kc = sum_{n: y_n = c} u_nk / sum_n u_nk. An element
unique to one class has max_c p_kc = 1 and entropy 0; one used alike by every class has
the classes' shares (about 1 / C) and entropy log C.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np


def class_shares(usage: np.ndarray, labels: np.ndarray, n_classes: int) -> np.ndarray:
    """(K, C) share p_kc of element k's usage that falls on class c (rows sum to 1; an
    element no image uses gets NaN). ``usage`` is (N, K), nonnegative."""
    usage = np.asarray(usage, np.float64)
    labels = np.asarray(labels, np.int64)
    if usage.ndim != 2 or len(usage) != len(labels):
        raise ValueError(f"usage must be (N, K) with N = {len(labels)} labels, got {usage.shape}")
    if (usage < 0).any() or not np.isfinite(usage).all():
        raise ValueError("usage must be finite and nonnegative (take |features| or on-counts)")
    if labels.min() < 0 or labels.max() >= n_classes:
        raise ValueError(f"labels must lie in [0, {n_classes}), got {labels.min()}..{labels.max()}")
    per_class = np.zeros((usage.shape[1], n_classes))
    np.add.at(per_class.T, labels, usage)
    total = per_class.sum(1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return per_class / total


def class_purity(usage: np.ndarray, labels: np.ndarray, n_classes: int) -> dict:
    """Each element's purity (max_c p_kc) and normalised entropy (H_k / log C), and their
    usage-weighted means over the elements; beside them the same figures with the labels
    permuted once at random (seed 0), what elements blind to the class would give on these
    images. The weights are each element's share of all usage, so rarely used elements
    count little."""
    usage = np.asarray(usage, np.float64)
    p = class_shares(usage, labels, n_classes)
    w = usage.sum(0)
    used = w > 0
    w = w[used] / w[used].sum()

    def figures(p):
        p = p[used]
        purity = p.max(1)
        with np.errstate(divide="ignore", invalid="ignore"):
            h = -np.where(p > 0, p * np.log(p), 0.0).sum(1) / np.log(n_classes)
        return purity, h

    purity, h = figures(p)
    shuffled = np.random.default_rng(0).permutation(np.asarray(labels))
    purity0, h0 = figures(class_shares(usage, shuffled, n_classes))
    return {"n_elements": int(used.sum()), "n_images": int(len(usage)),
            "purity": purity, "entropy": h,
            "weighted_purity": float(w @ purity), "weighted_entropy": float(w @ h),
            "median_purity": float(np.median(purity)),
            "shuffled_weighted_purity": float(w @ purity0),
            "shuffled_weighted_entropy": float(w @ h0)}


def checkpoint_usage(path) -> tuple[np.ndarray, int]:
    """(usage (N, K), sweep) from a refinement or supervised chain's checkpoint
    (:func:`dgdm_tf.topdown.refine.run_refine`): the running sum of the posterior-mean top
    layer over the collected sweeps (``acc_features`` / ``acc_count``, the features the
    chain hands to its SVM), element k's usage by image n the sum of its |S[L]| over
    positions; the checkpoint's sweep."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run the chain first")
    with np.load(path) as z:
        if float(z["acc_count"]) < 1:
            raise ValueError(f"{path} has no collected sweep yet (acc_count 0): run the chain "
                             "past its burn-in")
        feats = z["acc_features"] / float(z["acc_count"])
        hs, ws, k = z["state_s_top"].shape[1:]
        sweep = int(z["sweep"])
    return np.abs(feats.reshape(len(feats), hs, ws, k)).sum((1, 2)), sweep
