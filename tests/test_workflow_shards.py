"""Config `shards`: each per-image rule splits into shard jobs by images, and the rule
itself gathers them. A dry run plans the shards and the gathers; a real run of rule
features on a tiny config writes, gathered, the same bytes as the unsplit run."""

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


def _outputs(repo: Path) -> dict:
    with np.load(repo / "results/mnist_smoke/pretrained_svm/features.npz") as z:
        out = {k: z[k] for k in z.files if k != "wall_seconds"}
    mixing = json.loads((repo / "results/mnist_smoke/pretrained_svm/mixing.json").read_text())
    mixing["alg2"].pop("seconds")  # a time, not a result
    return out, mixing


@pytest.mark.slow
def test_split_features_gather_the_unsplit_output_bitwise(tmp_path):
    """The pretrained row's Algorithm 2 features of 40 train and 20 test images (batches
    of 20), unsplit and in 2 shards per split (the test split's second shard empty):
    every array of features.npz and every value of mixing.json equal, times aside. The
    other split rules share the scripts' shard path; their functions' shards are
    checked bit for bit in tests/test_core_shards.py."""
    repo = copy_repo(tmp_path / "repo")
    pretrain = yaml.safe_load((repo / "config/smoke.yaml").read_text())["datasets"]["mnist_smoke"]["pretrain"]
    block = dict(n_train=40, n_test=20,
                 pretrain={**pretrain, "n_images": 40, "burn_in": 2, "collect": 1, "batch_size": None})
    target = "results/mnist_smoke/pretrained_svm/features.npz"
    r = snakemake(repo, "--cores", "2", target, "--configfile", str(_config(tmp_path, 1, **block)),
                  timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    whole, whole_mixing = _outputs(repo)
    # the shards are new inputs of rule features: it reruns, now as shard jobs and a gather
    r = snakemake(repo, "--cores", "2", target, "--configfile", str(_config(tmp_path, 2, **block)),
                  timeout=900)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-6000:]
    assert "rule features_shard:" in out and "rule pretrain_layer:" not in out
    assert len(list((repo / "results/mnist_smoke/pretrained_svm/shards").glob("*_?of2.npz"))) == 4
    got, got_mixing = _outputs(repo)
    assert set(got) == set(whole)
    for k in whole:
        assert np.array_equal(got[k], whole[k]), k
    assert got_mixing == whole_mixing
    shutil.rmtree(repo / "results")
