"""results/<ablation>/tables.md (dgdm_tf.report.ablations): the changes, each method
beside the main run's with the difference and its SE, then the ablation's own table."""

from __future__ import annotations

import math

import pytest
import yaml

from dgdm_tf.report.ablations import error_and_se, render_ablation

BLOCK = {"paper_table": "mnist", "methods": ["unsupervised_svm", "supervised"]}
ABLATION = {"base": "mnist", "description": "gamma_s global.", "hyper_changes": {"gamma_s": "global"},
            "changes": {"methods": ["unsupervised_svm", "supervised"]}, "block": BLOCK,
            "file": "config/ablations/gamma_s_global.yaml"}


def test_error_and_se_is_the_binomial_se():
    e, se = error_and_se({"test_error_pct": 10.0, "n_test": 400})
    assert e == pytest.approx(10.0) and se == pytest.approx(100 * math.sqrt(0.1 * 0.9 / 400))
    assert error_and_se(None) is None and error_and_se({"test_error_pct": 5.0}) is None


def test_the_table_puts_each_method_beside_the_main_runs():
    metrics = {("gamma_s_global", "unsupervised_svm"): {"test_error_pct": 6.0, "n_test": 5000,
                                                         "n_train": 10000},
               ("gamma_s_global", "supervised"): {"test_error_pct": 7.0, "n_test": 5000,
                                                  "n_train": 10000}}
    base = {"unsupervised_svm": {"test_error_pct": 5.0, "n_test": 5000}}
    md = render_ablation("gamma_s_global", ABLATION, metrics, base,
                         config_files=["config/config.yaml"])
    assert md.startswith("# Ablation `gamma_s_global` of dataset `mnist`")
    block = md.split("```yaml\n")[1].split("```")[0]
    assert yaml.safe_load(block) == {"datasets.mnist": ABLATION["changes"],
                                     "hyper": {"gamma_s": "global"}}
    row = next(l for l in md.splitlines() if l.startswith("| Our unsupervised model"))
    se = math.hypot(100 * math.sqrt(0.06 * 0.94 / 5000), 100 * math.sqrt(0.05 * 0.95 / 5000))
    assert f"| +1.00 ± {se:.2f} |" in row and "| 10000 / 5000 |" in row
    row = next(l for l in md.splitlines() if l.startswith("| Our supervised model"))
    assert "not run (`results/mnist/supervised/`)" in row and "| 7.00 ± " in row
    assert "| 0.37 |" in md  # the ablation's own table, the paper's numbers beside it


def test_the_paired_column_compares_the_same_test_images():
    metrics = {("gamma_s_global", "unsupervised_svm"): {"test_error_pct": 6.0, "n_test": 5000,
                                                         "n_train": 10000}}
    base = {"unsupervised_svm": {"test_error_pct": 5.0, "n_test": 5000}}
    pair = {"diff_pct_points": 1.0, "se_pct_points": 0.31, "mcnemar_exact_p": 0.0012,
            "wrong_only_a": 20, "wrong_only_b": 70, "wrong_both": 230, "n_images": 5000}
    md = render_ablation("gamma_s_global", ABLATION, metrics, base,
                         paired={"unsupervised_svm": pair})
    row = next(l for l in md.splitlines() if l.startswith("| Our unsupervised model"))
    assert "| +1.00 ± 0.31, p 0.0012, 5000 images |" in row
    row = next(l for l in md.splitlines() if l.startswith("| Our supervised model"))
    assert row.count("| — |") >= 2  # neither run: no difference, no pair
