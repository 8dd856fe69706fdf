"""The workflow's CNN baseline as planned: the default run schedules rule cnn, its
figure and benchmarks, and a bad CNN key is named. The CNN's run directory, row and
figure are read from the default tier's tiny run (tests/test_workflow_tiny.py), its
benchmark CSV from the smoke run (tests/test_workflow.py).
"""

from __future__ import annotations

import pytest
from _workflow import copy_repo, dry_run_error, snakemake


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
