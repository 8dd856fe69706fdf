"""workflow/lib/dgdm_workflow.explain_validation_error: the message names the key and what
is allowed, and says why a number given through ``--config`` arrived as text; and the
heavy rules' threads (heavy_threads)."""

from __future__ import annotations

import sys
from pathlib import Path

import jsonschema
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow" / "lib"))
from dgdm_workflow import explain_validation_error  # noqa: E402

SCHEMA = {"type": "object", "properties": {"datasets": {"type": "object", "properties": {
    "n_train": {"type": ["integer", "null"], "minimum": 1},
    "scan": {"enum": ["random", "fixed"]}}}}}


def _message(config: dict) -> str:
    err = next(jsonschema.Draft7Validator(SCHEMA).iter_errors(config))
    return explain_validation_error(err, ["config/config.yaml"])


@pytest.mark.parametrize("text", ["4000", "null", "0.5"])
def test_a_number_given_as_text_says_why_and_what_to_do(text):
    out = _message({"datasets": {"n_train": text}})
    assert "`datasets.n_train`" in out and "integer or null" in out
    assert "--config" in out and "--configfile config/config.yaml FILE" in out


@pytest.mark.parametrize("config", [{"datasets": {"n_train": "many"}},
                                    {"datasets": {"n_train": 0}},
                                    {"datasets": {"scan": "diagonal"}}])
def test_other_errors_carry_no_hint(config):
    out = _message(config)
    assert "Invalid config (config/config.yaml)" in out and "--configfile" not in out


def test_heavy_threads_inside_a_slurm_job_are_the_jobs_cpus(monkeypatch):
    """`threads` from the config wins; else, inside a Slurm job, the CPUs Slurm gave it
    (the job step runs with --cores all, and asking for the node's CPUs makes srun fail);
    else Snakemake's cores."""
    import dgdm_workflow as W

    monkeypatch.delenv("SLURM_CPUS_PER_TASK", raising=False)
    assert W.heavy_threads({"threads": None}, lambda: 2) == 2
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "1")
    assert W.heavy_threads({"threads": None}, lambda: 2) == 1
    assert W.heavy_threads({"threads": 4}, lambda: 2) == 4


@pytest.mark.parametrize("chunk, n_images, says", [
    (None, 40, "chunk is None. Set chunk to at most 20, or workers to 1"),
    (40, 40, "chunk is 40. Set chunk to at most 20,"),
    (100, None, "splits the 100 refined images"),  # pretraining's 100 images
    (20, 40, None), (50, None, None)])
def test_data_parallel_refinement_needs_a_chunk_per_worker(chunk, n_images, says):
    """refine.workers 2 without a chunk per worker is a config error before any job runs
    (it was the refine job's ValueError, 25 minutes into a Slurm run)."""
    import dgdm_workflow as W
    from snakemake.exceptions import WorkflowError

    block = {"refine": {"workers": 2, "chunk": chunk, "n_images": n_images}, "pretrain": {"n_images": 100}}
    if says is None:
        W.check_refine_workers("mnist", block, ["c.yaml"])
        return
    with pytest.raises(WorkflowError, match="datasets.mnist.refine.chunk") as e:
        W.check_refine_workers("mnist", block, ["c.yaml"])
    assert says in str(e.value)
    W.check_refine_workers("mnist", {**block, "refine": {**block["refine"], "workers": 1}}, ["c.yaml"])
