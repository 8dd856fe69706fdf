"""A row's predictions.csv: every test image's label, prediction and decision values."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dgdm_tf.io import atomic as atomic_io


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
