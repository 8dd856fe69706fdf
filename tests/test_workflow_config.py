"""The Snakemake workflow without a full run: dry runs of every config and profile,
config validation, missing data, which jobs a change plans, and resuming a killed
pretraining chain.

Each test runs snakemake in a temporary copy of the repository (no results/ or data/),
so it never touches the working tree's outputs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from _workflow import (CORES, copy_repo, dry_run_error, load_config, planned_jobs, smoke_config,
                       snakemake, write_config)

CONFIGS = ["config.yaml", "paper.yaml", "smoke.yaml"]


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    return copy_repo(tmp_path_factory.mktemp("repo"))


# ------------------------------------------------------------------------ dry runs
@pytest.mark.parametrize("name", CONFIGS)
def test_dry_run_resolves(repo, name):
    r = snakemake(repo, "-n", "results/tables.md", "--configfile", f"config/{name}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "rule tables:" in r.stdout + r.stderr


@pytest.mark.parametrize("profile,config", [("slurm", "paper.yaml"), ("local", "config.yaml")])
def test_profile_resolves_the_whole_dag(repo, profile, config):
    """`snakemake -n --profile profiles/<p>` resolves every job; every job carries its
    memory, runtime and `gpu` resources (what the SLURM executor turns into sbatch flags)."""
    r = snakemake(repo, "-n", "--profile", f"profiles/{profile}", "results/tables.md",
                  "--configfile", f"config/{config}")
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "rule tables:" in out
    jobs = out.split("rule ")[1:]
    res = [re.search(r"resources: (.*)", j).group(1) for j in jobs]
    for key in ("mem_mb", "runtime", "gpu"):
        assert all(re.search(rf"\b{key}=\d+", r) for r in res), key


def test_dry_run_default_target_and_single_ablation(repo):
    r = snakemake(repo, "-n")  # rule all: tables + benchmarks, default config
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "rule benchmarks:" in out and "rule benchmark_layers:" in out
    r = snakemake(repo, "-n", "results/mnist/pretrained_svm/metrics.json")
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "rule svm:" in out and "rule tables:" not in out


# --------------------------------------------------------------------- bad configs
def test_negative_burn_in_names_the_key(repo, tmp_path):
    out = dry_run_error(repo, tmp_path, lambda c: c["datasets"]["mnist"]["pretrain"].update(burn_in=-3))
    assert "`datasets.mnist.pretrain.burn_in`" in out
    assert ">= 0" in out and "-3" in out


def test_unknown_kind_names_the_key_and_the_choices(repo, tmp_path):
    out = dry_run_error(repo, tmp_path, lambda c: c["datasets"]["mnist"].update(kind="mnistt"))
    assert "`datasets.mnist.kind`" in out and "'cifar10'" in out and "'npz'" in out


def test_unknown_key_is_named(repo, tmp_path):
    out = dry_run_error(repo, tmp_path, lambda c: c["datasets"]["mnist"]["svm"].update(burnin=3))
    assert "'burnin'" in out and "`datasets.mnist.svm`" in out and "burn_in" in out


def test_top_layer_must_not_pool(repo, tmp_path):
    out = dry_run_error(repo, tmp_path,
                        lambda c: c["datasets"]["mnist"]["model"]["layers"][-1].update(pool=2))
    assert "`datasets.mnist.model.layers[1].pool`" in out


def test_per_layer_jit_list_needs_one_flag_per_layer(repo, tmp_path):
    out = dry_run_error(repo, tmp_path,
                        lambda c: c["datasets"]["mnist"]["features"].update(jit_compile=[True]))
    assert "`datasets.mnist.features.jit_compile`" in out and "one flag per layer (2" in out


def test_unknown_method_is_rejected(repo, tmp_path):
    out = dry_run_error(repo, tmp_path, lambda c: c["datasets"]["mnist"].update(methods=["supervisd"]))
    assert "`datasets.mnist.methods[0]`" in out and "pretrained_svm" in out


# ------------------------------------------------------------------- missing data
def _missing(repo: Path, tmp_path: Path, block: dict) -> str:
    cfg = load_config("smoke.yaml")
    base = cfg["datasets"].pop("mnist_smoke")
    base.update(block)
    cfg["datasets"] = {"mine": base}
    path = write_config(tmp_path / "missing.yaml", cfg)
    r = snakemake(repo, "--cores", "1", "results/mine/data/prepared.npz",
                  "--configfile", str(path), timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    return out


def test_missing_npz_gives_dataset_missing_error(repo, tmp_path):
    out = _missing(repo, tmp_path, {"kind": "npz", "paper_table": None,
                                    "path": str(tmp_path / "nope.npz")})
    assert "DatasetMissingError" in out
    assert "nope.npz" in out and "datasets.mine.path" in out


def test_missing_cifar10_gives_dataset_missing_error(repo, tmp_path):
    raw = tmp_path / "empty_raw"
    raw.mkdir()
    out = _missing(repo, tmp_path, {"kind": "cifar10", "paper_table": "cifar10",
                                    "raw_dir": str(raw), "download": False})
    assert "DatasetMissingError" in out
    assert "cifar-10-binary.tar.gz" in out and "is not on disk" in out



def test_supervised_from_the_pretrained_layers_needs_no_refinement(repo, tmp_path):
    """With `supervised.start_from: pretrained` (config/paper.yaml's choice) the supervised
    row alone runs no refinement chain; from `refined` it does."""
    c = yaml.safe_load(Path(smoke_config(tmp_path)).read_text())
    for start, refine in (("pretrained", False), ("refined", True)):
        c["datasets"]["mnist_smoke"]["supervised"]["start_from"] = start
        jobs = planned_jobs(repo, "results/mnist_smoke/supervised/metrics.json",
                            write_config(tmp_path / f"{start}.yaml", c))
        assert jobs.get("supervised") == 1 and ("refine" in jobs) == refine, jobs



# ------------------------------------------------- kill and resume pretraining
@pytest.mark.slow
def test_killed_pretraining_resumes_to_the_same_dictionaries(tmp_path):
    """Kill the snakemake job (SIGKILL, whole process group) once the chain has written a
    checkpoint, rerun with --rerun-incomplete: the layer ends with the dictionaries of an
    uninterrupted run with the same seed. The batched chain, two batches with the state
    on disk (killed wherever the sweep then is): the checkpoint folder is no output, so
    Snakemake keeps it. The in-memory chain's resumption is tests/test_pretrain_chain.py's."""
    batch_size, ckpt_name, resumed = 50, "batches/head.npz", "resuming from the batched state"
    import signal

    repo = copy_repo(tmp_path / "repo")
    cfg = smoke_config(tmp_path, n_images=100, burn_in=12, collect=4, checkpoint_every=2,
                       batch_size=batch_size)
    target = "results/mnist_smoke/pretrain/layer1.npz"
    ckpt = repo / "results/mnist_smoke/pretrain/layer1_ckpt" / ckpt_name

    r = snakemake(repo, "--cores", CORES, target, "--configfile", str(cfg))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    with np.load(repo / target) as z:
        want = {k: z[k] for k in ("D", "kept", "usage", "x_next", "gamma_e")}
    (repo / target).unlink()

    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", CORES, target,
                             "--configfile", str(cfg)], cwd=repo, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    killed_at = None
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if ckpt.exists():
            try:
                with np.load(ckpt) as z:
                    killed_at = int(z["sweep"])
            except Exception:  # being replaced right now
                killed_at = None
            if killed_at is not None and killed_at >= 2:
                os.killpg(proc.pid, signal.SIGKILL)
                break
        time.sleep(0.05)
    proc.wait(timeout=60)
    assert killed_at is not None and 2 <= killed_at < 16, "the job was not killed mid-chain"
    assert not (repo / target).exists()
    assert ckpt.exists(), "the checkpoint must survive the kill"

    # a SIGKILLed snakemake leaves its lock behind (README: "snakemake --unlock")
    r = snakemake(repo, "--unlock", "--configfile", str(cfg))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    r = snakemake(repo, "--cores", CORES, target, "--configfile", str(cfg), "--rerun-incomplete",
                  timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    log = (repo / "results/logs/pretrain_layer/mnist_smoke/layer1.log").read_text()
    assert resumed in log
    with np.load(repo / target) as z:
        for k, v in want.items():
            np.testing.assert_array_equal(z[k], v, err_msg=k)
