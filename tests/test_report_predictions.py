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


# ------------------------------------------- two rows on the test images they share
def _csv(path, idx, labels, pred):
    write_predictions(path, np.asarray(idx), np.asarray(labels), np.asarray(pred))
    return path


def test_rows_are_paired_on_the_test_images_both_predicted(tmp_path):
    """Rows in different orders and over different images are paired by test_index only:
    the counts are the hand count of the 6 shared images, and McNemar's p is the exact
    binomial tail."""
    from dgdm_tf.report.predictions import paired_on_shared_images, read_predictions
    from dgdm_tf.report.scores import mcnemar_exact_p

    labels = {i: i % 3 for i in range(10)}
    ref = {0: 0, 1: 1, 2: 0, 3: 0, 4: 1, 5: 2, 9: 1}  # wrong on 2, 9
    row = {5: 0, 4: 1, 3: 1, 2: 2, 1: 0, 0: 0, 7: 2}  # wrong on 5, 3, 1; 7 unshared
    a = read_predictions(_csv(tmp_path / "a.csv", list(ref), [labels[i] for i in ref], list(ref.values())))
    b = read_predictions(_csv(tmp_path / "b.csv", list(row), [labels[i] for i in row], list(row.values())))
    pair = paired_on_shared_images(a, b)
    # shared 0..5: ref wrong {2}, row wrong {1, 3, 5}: only ref 1, only row 3, both 0
    assert (pair["n_images"], pair["wrong_only_a"], pair["wrong_only_b"], pair["wrong_both"]) == (6, 1, 3, 0)
    assert pair["diff_pct_points"] == pytest.approx(100 * 2 / 6)
    # two-sided: 2 P(Binomial(4, 1/2) <= 1) = 2 * 5/16
    assert pair["mcnemar_exact_p"] == pytest.approx(mcnemar_exact_p(1, 3)) == pytest.approx(0.625)
    assert paired_on_shared_images(a, b.iloc[::-1]) == pair  # the order of the rows is no matter
    none = read_predictions(_csv(tmp_path / "c.csv", [20, 21], [0, 1], [0, 1]))
    assert paired_on_shared_images(a, none) is None


def test_pairing_refuses_rows_of_other_data(tmp_path):
    from dgdm_tf.report.predictions import paired_on_shared_images, read_predictions

    a = read_predictions(_csv(tmp_path / "a.csv", [0, 1, 2], [0, 1, 2], [0, 1, 2]))
    b = read_predictions(_csv(tmp_path / "b.csv", [0, 1, 2], [0, 2, 2], [0, 1, 2]))
    with pytest.raises(ValueError, match="different labels"):
        paired_on_shared_images(a, b)
    with pytest.raises(ValueError, match="repeats an image"):
        read_predictions(_csv(tmp_path / "d.csv", [0, 0], [1, 1], [1, 1]))


def test_each_row_is_paired_with_the_pretrained_row_and_each_ablation_with_its_base(tmp_path):
    from dgdm_tf.report.predictions import paired_against_reference, paired_with_base

    y = [0, 1, 0, 1]
    for ds, method, pred in [("m", "pretrained_svm", [0, 1, 1, 1]), ("m", "supervised", [0, 0, 0, 0]),
                             ("abl", "supervised", [0, 1, 0, 1])]:
        (tmp_path / ds / method).mkdir(parents=True)
        _csv(tmp_path / ds / method / "predictions.csv", range(4), y, pred)
    got = paired_against_reference(tmp_path, {"m": {"methods": ["pretrained_svm", "supervised", "cnn"]},
                                              "abl": {"methods": ["supervised"]}})
    assert list(got) == [("m", "supervised")]  # no cnn predictions; abl has no pretrained row
    assert (got[("m", "supervised")]["wrong_only_a"], got[("m", "supervised")]["wrong_only_b"]) == (1, 2)
    base = paired_with_base(tmp_path, "abl", "m", ["supervised", "pretrained_svm"])
    assert list(base) == ["supervised"] and base["supervised"]["diff_pct_points"] == pytest.approx(-50.0)
