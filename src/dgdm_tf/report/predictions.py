"""A row's predictions.csv: every test image's label, prediction and decision values; two
rows compared on the test images they share (paired, McNemar's exact test)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from dgdm_tf.io import atomic as atomic_io
from dgdm_tf.report.runs import PAIRED_REFERENCE
from dgdm_tf.report.scores import paired_errors


def write_predictions(path, test_index, labels, predicted, scores=None) -> None:
    """Write predictions.csv atomically: columns test_index, label, predicted, and with
    (N, C) decision values ``scores`` one column score_<c> per class (6 significant digits)."""
    df = pd.DataFrame({"test_index": np.asarray(test_index), "label": np.asarray(labels),
                       "predicted": np.asarray(predicted)})
    if scores is not None:
        scores = np.asarray(scores)
        for c in range(scores.shape[1]):
            df[f"score_{c}"] = scores[:, c]
    with atomic_io.atomic_path(path) as tmp:
        df.to_csv(tmp, index=False, float_format="%.6g")


def read_predictions(path) -> pd.DataFrame:
    """A predictions.csv's columns test_index, label and predicted (the scores left out)."""
    df = pd.read_csv(path, usecols=["test_index", "label", "predicted"])
    if df["test_index"].duplicated().any():
        raise ValueError(f"{path}: test_index repeats an image; the file is not one row's "
                         "predictions (rerun the rule that wrote it)")
    return df


def paired_on_shared_images(reference: pd.DataFrame, row: pd.DataFrame) -> dict | None:
    """Row against the reference row on the test images both predicted (the same
    ``test_index``): :func:`dgdm_tf.report.scores.paired_errors` (row's error minus the
    reference's, McNemar's exact p) with ``n_images``, the shared count; None when no
    image is shared. Labels must agree on every shared image."""
    both = reference.merge(row, on="test_index", suffixes=("_ref", "_row"))
    if both.empty:
        return None
    if not np.array_equal(both["label_ref"].to_numpy(), both["label_row"].to_numpy()):
        raise ValueError("two rows' predictions give one test_index different labels: they "
                         "were not made on the same prepared data")
    out = paired_errors(both["predicted_ref"].to_numpy(), both["predicted_row"].to_numpy(),
                        both["label_ref"].to_numpy())
    return {**out, "n_images": int(len(both))}


def paired_against_reference(results_dir, datasets, reference: str = PAIRED_REFERENCE) -> dict:
    """{(dataset, method): :func:`paired_on_shared_images` of the method's predictions
    against ``reference``'s} for every enabled method of each dataset whose
    ``results/<dataset>/<method>/predictions.csv`` exists beside the reference's."""
    out = {}
    for ds, block in datasets.items():
        ref = Path(results_dir) / ds / reference / "predictions.csv"
        if not ref.exists():
            continue
        ref_pred = read_predictions(ref)
        for method in block.get("methods", []) or []:
            p = Path(results_dir) / ds / method / "predictions.csv"
            if method != reference and p.exists():
                pair = paired_on_shared_images(ref_pred, read_predictions(p))
                if pair is not None:
                    out[(ds, method)] = pair
    return out


def paired_with_base(results_dir, name: str, base: str, methods) -> dict:
    """{method: :func:`paired_on_shared_images` of ablation ``name``'s predictions against
    its base dataset's} for each method both have predicted."""
    out = {}
    for method in methods:
        a, b = (Path(results_dir) / d / method / "predictions.csv" for d in (base, name))
        if a.exists() and b.exists():
            pair = paired_on_shared_images(read_predictions(a), read_predictions(b))
            if pair is not None:
                out[method] = pair
    return out
