"""dgdm_tf.report.predictions and dgdm_tf.report.scores.error_pct: predictions.csv holds the
bytes the scripts' own pandas calls wrote (copied below as they were), and the error is
the share of wrong predictions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dgdm_tf.report.predictions import write_predictions
from dgdm_tf.report.scores import error_pct

RNG = np.random.default_rng(5)


def test_predictions_with_scores_are_the_bytes_the_scripts_wrote(tmp_path):
    idx, labels = np.sort(RNG.permutation(50)[:9]), RNG.integers(0, 4, 9)
    scores = RNG.standard_normal((9, 4)).astype(np.float32) * 1e3
    pred = np.argmax(scores, 1)
    # workflow/scripts/svm.py, before
    df = pd.DataFrame({"test_index": idx, "label": labels, "predicted": pred})
    for c in range(scores.shape[1]):
        df[f"score_{c}"] = scores[:, c]
    df.to_csv(tmp_path / "old.csv", index=False, float_format="%.6g")
    write_predictions(tmp_path / "new.csv", idx, labels, pred, scores)
    assert (tmp_path / "old.csv").read_bytes() == (tmp_path / "new.csv").read_bytes()
    back = pd.read_csv(tmp_path / "new.csv")
    assert list(back.columns) == ["test_index", "label", "predicted"] + [f"score_{c}" for c in range(4)]
    np.testing.assert_allclose(back[["score_0", "score_1"]].to_numpy(), scores[:, :2], rtol=1e-5)


def test_predictions_without_scores_are_the_bytes_the_cnn_wrote(tmp_path):
    idx, labels, pred = np.arange(6), RNG.integers(0, 3, 6), RNG.integers(0, 3, 6)
    # workflow/scripts/cnn_baseline.py, before
    pd.DataFrame({"test_index": idx, "label": labels, "predicted": pred}).to_csv(
        tmp_path / "old.csv", index=False)
    write_predictions(tmp_path / "new.csv", idx, labels, pred)
    assert (tmp_path / "old.csv").read_bytes() == (tmp_path / "new.csv").read_bytes()


@pytest.mark.parametrize("pred, labels, want", [([0, 1, 2, 3], [0, 1, 2, 3], 0.0),
                                                ([0, 1, 2, 3], [0, 1, 0, 0], 50.0),
                                                ([1], [0], 100.0)])
def test_error_pct_is_the_share_of_wrong_predictions(pred, labels, want):
    assert error_pct(np.array(pred), np.array(labels)) == want
    assert error_pct(pred, labels) == want  # lists as well as arrays
