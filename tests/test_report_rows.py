"""dgdm_tf.report.rows: a row's metrics.json and predictions.csv, written one way."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from dgdm_tf.io import artifacts
from dgdm_tf.report import rows


def _row(**kw):
    base = dict(dataset="toy", method="pretrained_svm", labels=[0, 1, 2, 1], predicted=[0, 1, 1, 1],
                n_classes=3, n_train=10, by_step={"prepare": 1.0, "svm": 2.5},
                provenance={"seed": 7}, train_error_pct=5.0)
    base.update(kw)
    return rows.RowResult(**base)


def test_write_row_writes_the_metrics_and_the_predictions(tmp_path):
    scores = np.array([[2, 0, 0, 9], [0, 2, 1, 0], [0, 2, 1, 0], [0, 3, 0, 0]], float)
    m = rows.write_row(_row(scores=scores, test_index=[5, 6, 7, 8], fields={"svm_view": "signed"}),
                            metrics=tmp_path / "metrics.json", predictions=tmp_path / "p.csv")
    assert json.loads((tmp_path / "metrics.json").read_text()) == m
    assert m["test_error_pct"] == 25.0 and m["test_accuracy_pct"] == 75.0
    assert m["class_mean_accuracy_pct"] == pytest.approx(100 * (1 + 1 + 0) / 3)
    assert (m["n_train"], m["n_test"], m["n_classes"], m["svm_view"], m["seed"]) == (10, 4, 3, "signed", 7)
    assert m["wall_seconds"] == 3.5 and m["wall_seconds_by_step"] == {"prepare": 1.0, "svm": 2.5}
    df = pd.read_csv(tmp_path / "p.csv")
    # one score column per class: the model's fourth column is not the data set's
    assert list(df.columns) == ["test_index", "label", "predicted", "score_0", "score_1", "score_2"]
    assert df["test_index"].tolist() == [5, 6, 7, 8]


def test_write_row_topk_reads_the_error_from_the_scores_ranking(tmp_path):
    scores = np.array([[0.1, 0.9, 0.0], [0.0, 0.2, 0.8], [0.0, 0.9, 0.1], [0.3, 0.6, 0.1]])
    m = rows.write_row(_row(labels=[1, 2, 2, 0], predicted=scores.argmax(1), scores=scores,
                                 topk=True, train_error_pct=None),
                            metrics=tmp_path / "m.json", predictions=tmp_path / "p.csv")
    assert m["test_error_pct"] == 50.0 and m["top5_error_pct"] == 0.0
    assert "train_error_pct" not in m
    assert pd.read_csv(tmp_path / "p.csv")["test_index"].tolist() == [0, 1, 2, 3]


def test_write_row_refuses_a_nan_and_writes_nothing(tmp_path):
    with pytest.raises(artifacts.ArtifactError, match=r"/chain\[1\]/rhat is not a finite"):
        rows.write_row(_row(fields={"chain": [{"rhat": 1.0}, {"rhat": float("nan")}]}),
                            metrics=tmp_path / "m.json", predictions=tmp_path / "p.csv")
    with pytest.raises(artifacts.ArtifactError, match="wall_seconds"):
        rows.write_row(_row(by_step={"svm": float("inf")}),
                            metrics=tmp_path / "m.json", predictions=tmp_path / "p.csv")
    assert list(tmp_path.iterdir()) == []


def test_a_row_that_does_not_add_up_is_refused():
    with pytest.raises(ValueError, match="4 labels, 3 predictions"):
        _row(predicted=[0, 1, 1])
    with pytest.raises(ValueError, match="topk reads the error from the scores"):
        _row(topk=True)
    with pytest.raises(ValueError, match=r"fields \['seed', 'test_error_pct'\] are computed"):
        _row(fields={"test_error_pct": 1.0, "seed": 3})


def test_every_row_script_writes_its_files_through_write_row():
    """A script that writes a row's predictions writes its metrics through write_row alone:
    no row's error or provenance is assembled or written by hand."""
    from pathlib import Path

    scripts = sorted(p for p in (Path(__file__).parents[1] / "workflow" / "scripts").glob("*.py")
                     if "output.predictions" in p.read_text())
    assert {p.stem for p in scripts} >= {"svm", "supervised_predict", "mcem_predict",
                                         "cnn_baseline", "transfer"}
    for p in scripts:
        src = p.read_text()
        assert "rows.write_row(" in src, p.name
        assert "write_predictions(" not in src and "output.metrics" not in src.replace(
            "metrics=snakemake.output.metrics", ""), p.name
