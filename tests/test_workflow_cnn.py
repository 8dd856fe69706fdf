"""The workflow's CNN baseline: rule cnn, the error-vs-time figure, the CNN row of
results/tables.md, the CNN and scaling benchmarks, and the config keys they read.

Like tests/test_workflow.py (whose helpers it uses), every run happens in a temporary
copy of the repository on a generated MNIST-shaped dataset, offline.
"""

from __future__ import annotations

import copy
import json
import math
import re

import pandas as pd
import pytest
import yaml

from _workflow import dry_run_error, copy_repo, smoke_config, snakemake, write_config

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return copy_repo(tmp_path_factory.mktemp("repo_cnn"))


def test_default_run_schedules_the_cnn_its_figure_and_benchmarks(repo):
    r = snakemake(repo, "-n")
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    for rule in ("cnn", "error_vs_time", "benchmark_cnn", "benchmark_scaling", "benchmarks"):
        assert f"rule {rule}:" in out, rule
    assert "results/mnist/figures/error_vs_time.png" in out
    assert "results/benchmarks_scaling.png" in out


def test_bad_cnn_key_is_named(repo, tmp_path):
    out = dry_run_error(repo, tmp_path, lambda c: c["datasets"]["mnist"]["cnn"].update(dropout=1.5))
    assert "`datasets.mnist.cnn.dropout`" in out and "1.5" in out


@pytest.fixture(scope="module")
def cnn_run(tmp_path_factory):
    """The smoke config with only the CNN enabled: tables.md (and with it the figure)
    plus the CNN benchmark CSV (the smoke run of tests/test_workflow.py makes the scaling
    CSV, tests/test_baselines_cnn.py checks its axes)."""
    repo = copy_repo(tmp_path_factory.mktemp("cnn_repo"))
    path = smoke_config(tmp_path_factory.mktemp("cnn_data"))
    cfg = yaml.safe_load(path.read_text())
    cfg["datasets"]["mnist_smoke"]["methods"] = ["cnn"]
    path = write_config(path, cfg)
    r = snakemake(repo, "--cores", "2", "results/tables.md", "results/benchmarks/cnn.csv",
                  "--configfile", str(path), timeout=600)
    logs = "\n".join(f"== {p}\n{p.read_text()[-3000:]}"
                     for p in sorted((repo / "results" / "logs").rglob("*.log")))
    assert r.returncode == 0, r.stdout[-5000:] + r.stderr[-5000:] + logs
    return repo, cfg, path


@pytest.mark.slow
def test_cnn_run_directory(cnn_run):
    run = cnn_run[0] / "results/mnist_smoke/cnn"
    m = json.loads((run / "metrics.json").read_text())
    assert m["method"] == "cnn" and m["n_train"] == 300 and m["n_test"] == 200
    for k in ("test_error_pct", "train_error_pct", "best_test_error_pct", "wall_seconds",
              "train_images_per_s", "inference_images_per_s", "peak_rss_mb"):
        assert math.isfinite(m[k]), k
    assert len(m["curve"]) == 2 and m["config"]["cnn"]["epochs"] == 2
    assert set(m["wall_seconds_by_step"]) == {"prepare", "cnn"}
    assert "pretrain" not in m["config"] and m["machine"]["cores"] >= 1
    curve = pd.read_csv(run / "curve.csv")
    assert list(curve.columns[:3]) == ["epoch", "seconds_cumulative", "test_error_pct"]
    assert list(curve["epoch"]) == [1, 2]
    assert curve["test_error_pct"].iloc[-1] == pytest.approx(m["test_error_pct"])
    assert len(pd.read_csv(run / "predictions.csv")) == 200
    resolved = yaml.safe_load((run / "config.yaml").read_text())
    assert resolved["method"] == "cnn" and resolved["block"]["cnn"]["fc_units"] == 64


@pytest.mark.slow
def test_cnn_row_and_figure(cnn_run):
    cnn_run = cnn_run[0]
    md = (cnn_run / "results/tables.md").read_text()
    row = next(l for l in md.splitlines() if l.startswith("| CNN, same shape |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    m = json.loads((cnn_run / "results/mnist_smoke/cnn/metrics.json").read_text())
    assert float(cells[1]) == pytest.approx(m["test_error_pct"], abs=0.006)
    assert cells[2] == "—" and cells[4] == "300 / 200"
    assert "not run (enable with `methods: [cnn, pretrained_svm]`" in md
    png = cnn_run / "results/mnist_smoke/figures/error_vs_time.png"
    assert png.read_bytes()[:8] == PNG
    log = (cnn_run / "results/logs/error_vs_time/mnist_smoke.log").read_text()
    assert re.search(r"runs \['cnn'\]; not shown: .*pretrained_svm", log)


@pytest.mark.slow
def test_cnn_benchmark_csv(cnn_run):
    from dgdm_tf.bench.cnn import CNN_COLUMNS

    cnn_run = cnn_run[0]
    c = pd.read_csv(cnn_run / "results/benchmarks/cnn.csv")
    assert set(CNN_COLUMNS) <= set(c.columns) and len(c) == 2  # batch 16: step, inference
    assert (c["images_per_s"] > 0).all()


@pytest.mark.slow
def test_only_the_keys_a_rule_reads_rerun_it(cnn_run):
    """The cnn rule reruns when `cnn` changes, and nothing upstream of it does; a
    pretraining / SVM setting reruns neither the data rules nor the CNN."""
    repo, cfg, path = cnn_run
    target = "results/mnist_smoke/cnn/metrics.json"

    def dry_run(edit):
        # the same config file name: it is recorded (config_files), so it counts too
        c = copy.deepcopy(cfg)
        edit(c["datasets"]["mnist_smoke"])
        try:
            r = snakemake(repo, "-n", target, "--configfile", str(write_config(path, c)))
        finally:
            write_config(path, cfg)
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout + r.stderr

    out = dry_run(lambda b: (b["pretrain"].update(burn_in=7), b["svm"].update(collect=3)))
    assert "Nothing to be done" in out, out
    out = dry_run(lambda b: b["cnn"].update(epochs=3))
    assert re.search(r"^cnn\s+1$", out, re.M), out
    assert "rule prepare:" not in out and "rule download:" not in out, out
