"""Config `shards`: each per-image rule splits into shard jobs by images, and the rule
itself gathers them. A dry run plans the shards and the gathers; the real run of rule
features in shards, gathered to the unsplit run's bytes, is the default tier's tiny run's
(tests/test_workflow_tiny.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from _workflow import copy_repo, planned_jobs, smoke_config, snakemake, write_config

SPLIT = {"features": 2, "topdown_features": 2, "block_features": 2, "supervised_predict": 2}


def _config(tmp_path: Path, shards: int, **block) -> Path:
    c = yaml.safe_load(Path(smoke_config(tmp_path)).read_text())
    c["shards"] = shards
    c["datasets"]["mnist_smoke"].update(block)
    return write_config(tmp_path / f"shards{shards}.yaml", c)


def test_dry_run_plans_the_shards_and_their_gathers(tmp_path):
    """shards 3: three jobs per split of each split rule (train and test; the supervised
    row's test and mismatch images), one gather each; shards 1: no shard job."""
    repo = copy_repo(tmp_path / "repo")
    jobs = planned_jobs(repo, "results/tables.md", _config(tmp_path, 3))
    for rule, splits in SPLIT.items():
        assert jobs.get(f"{rule}_shard") == 3 * splits and jobs.get(rule) == 1, (rule, jobs)
    jobs = planned_jobs(repo, "results/tables.md", _config(tmp_path, 1))
    assert not any(r.endswith("_shard") for r in jobs) and jobs.get("features") == 1, jobs
