"""The workers of a data-parallel chain (dgdm_tf.core.cluster): where their cluster comes
from (Slurm, TF_CONFIG, nothing) and how a rule starts them. The chains' exchange is
tested in test_topdown_refine_distributed."""

from __future__ import annotations

import json
import shutil
import sys

import pytest

from dgdm_tf.core import cluster

SLURM_TWO_TASKS = {"SLURM_JOB_ID": "123", "SLURM_NTASKS": "2", "SLURM_PROCID": "1",
                   "SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_NODELIST": "node[1-2]",
                   "SLURM_STEP_TASKS_PER_NODE": "1(x2)"}


def _clear(monkeypatch):
    for k in ("TF_CONFIG", *SLURM_TWO_TASKS, "SLURM_GPUS_ON_NODE"):
        monkeypatch.delenv(k, raising=False)


def test_one_process_is_one_worker(monkeypatch):
    _clear(monkeypatch)
    assert cluster.resolver() is None
    monkeypatch.setenv("SLURM_JOB_ID", "7")  # a Slurm job of one task: nothing to distribute
    monkeypatch.setenv("SLURM_NTASKS", "1")
    assert cluster.resolver() is None


def test_tf_config_names_the_workers(monkeypatch):
    _clear(monkeypatch)
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["a:1", "b:2", "c:3"]},
                                                "task": {"type": "worker", "index": 2}}))
    assert cluster.place(cluster.resolver()) == (3, 2)
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"chief": ["a:1"], "worker": ["b:2"]},
                                                "task": {"type": "worker", "index": 0}}))
    assert cluster.place(cluster.resolver()) == (2, 1)


@pytest.mark.skipif(shutil.which("scontrol") is None, reason="Slurm's scontrol expands node lists")
def test_slurm_tasks_are_the_workers_without_gpus(monkeypatch):
    """A CPU job step of two tasks on two nodes: task 1 is worker 1 of 2, each node on a
    port of the job's own (TensorFlow's resolver alone fails without GPUs)."""
    _clear(monkeypatch)
    monkeypatch.setenv("TF_CONFIG", "{}")  # Slurm comes first
    for k, v in SLURM_TWO_TASKS.items():
        monkeypatch.setenv(k, v)
    res = cluster.resolver()
    assert type(res).__name__ == "SlurmClusterResolver"
    assert cluster.place(res) == (2, 1)
    assert res.cluster_spec().as_dict() == {"worker": ["node1:21230", "node2:21230"]}


CHILD = ("import json, os, sys; c = json.loads(os.environ['TF_CONFIG']); i = c['task']['index']; "
         "open(os.path.join(sys.argv[1], str(i)), 'w').write(os.environ['DGDM_WORKER']); "
         "sys.exit(3 if sys.argv[2] == str(i) else 0)")


def test_local_workers_run_and_a_failure_is_raised(tmp_path, monkeypatch):
    _clear(monkeypatch)
    cluster.run_as_workers([sys.executable, "-c", CHILD, str(tmp_path), "none"], 2, threads=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["0", "1"]
    assert (tmp_path / "1").read_text() == "1"
    with pytest.raises(RuntimeError, match="worker 1 of 2 failed .exit code 3"):
        cluster.run_as_workers([sys.executable, "-c", CHILD, str(tmp_path), "1"], 2, threads=1)
