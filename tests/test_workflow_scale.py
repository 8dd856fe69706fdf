"""The paper's large-data route through the workflow at mock size: a tiny ImageNet image
folder (streamed: random crops, colour alteration, flips; centre crops at test), stochastic
MCEM from the priors (killed mid-run and resumed from its checkpoint), model averaging,
MAP and averaged predictions (top-1 / top-5), and ImageNet -> Caltech 256 transfer on a
tiny Caltech folder. Everything offline, made here."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from _workflow import CORES, copy_repo, load_config, snakemake, write_config

TINY_LAYERS = [{"dict_size": 3, "n_dict": 4, "pool": 2}, {"dict_size": 3, "n_dict": 4, "pool": 1}]


def _jpegs(folder: Path, n: int, rng, hw=(14, 20)):
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        img = rng.integers(0, 256, size=(*hw, 3), dtype=np.uint8)
        (folder / f"{i:03d}.jpg").write_bytes(tf.io.encode_jpeg(img).numpy())


def scale_config(tmp: Path, *, iterations=6, checkpoint_every=50) -> Path:
    rng = np.random.default_rng(0)
    for c in range(4):
        _jpegs(tmp / "imnet" / "train" / f"n0{c}", 6, rng)
        _jpegs(tmp / "imnet" / "val" / f"n0{c}", 2, rng)
    for c in range(3):
        _jpegs(tmp / "c256" / f"00{c + 1}.thing{c}", 5, rng, hw=(18, 16))
    base = load_config("smoke.yaml")
    block = base["datasets"]["mnist_smoke"]
    im = {**block, "kind": "imagenet2012", "paper_table": "imagenet2012", "raw_dir": None,
          "source": "folder", "path": str(tmp / "imnet"), "image_shape": None, "n_train": None,
          "n_test": None, "methods": ["mcem_map", "model_averaging"],
          "model": {"layers": TINY_LAYERS},
          "stream": {"resize_short": 14, "crop": 12, "colour_std": 0.1, "flip": True,
                     "shuffle_buffer": 100},
          "mcem": {**block["mcem"], "batch_size": 8, "iterations": iterations, "sweeps": 2,
                   "checkpoint_every": checkpoint_every},
          "averaging": {**block["averaging"], "keep": 2, "thin": 2, "sweeps": 1, "n_leapfrog": 3},
          "mcem_predict": {**block["mcem_predict"], "chunk": 8, "burn_in": 1, "iterations": 2,
                           "batch_size": 8}}
    cal = {**block, "kind": "caltech256", "paper_table": "caltech256_15", "raw_dir": None,
           "path": str(tmp / "c256"), "image_shape": None, "train_per_class": 2,
           "n_train": None, "n_test": None, "methods": ["imagenet_transfer"],
           "transfer": {**block["transfer"], "source": "imnet", "image_size": 14, "burn_in": 1,
                        "iterations": 2, "batch_size": 8}}
    cfg = {**base, "datasets": {"imnet": im, "cal": cal}}
    return write_config(tmp / "scale.yaml", cfg)


def _run_until_checkpoint(repo: Path, cfg: Path, target: str, ck: Path) -> int:
    """Start snakemake, SIGKILL its whole process group once ``ck`` exists; the
    checkpoint's iteration."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    p = subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", CORES, target,
                          "--configfile", str(cfg)], cwd=repo, env=env, start_new_session=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t0 = time.time()
    while not ck.exists() and time.time() - t0 < 600 and p.poll() is None:
        time.sleep(0.2)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    assert ck.exists(), "no checkpoint was written"
    with np.load(ck) as z:
        return int(z["step"])


@pytest.mark.slow
def test_mock_imagenet_and_transfer_end_to_end(tmp_path):
    """The whole large-data route on mock data, with mcem_train killed after its first
    checkpoint: the rerun (--rerun-incomplete) resumes there (its log says so), finishes
    with every iteration in the trace, and the run completes to results/tables.md."""
    repo = copy_repo(tmp_path / "repo")
    cfg = scale_config(tmp_path, iterations=6, checkpoint_every=2)
    ck = repo / "results" / "imnet" / "mcem" / "ckpt" / "mcem_checkpoint.npz"
    done = _run_until_checkpoint(repo, cfg, "results/tables.md", ck)
    assert 2 <= done < 6
    assert snakemake(repo, "--unlock", "results/tables.md", "--configfile", str(cfg)).returncode == 0
    r = snakemake(repo, "--cores", CORES, "results/tables.md", "--configfile", str(cfg),
                  "--rerun-incomplete", timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
    res = repo / "results"
    log = (res / "logs" / "mcem_train" / "imnet.log").read_text()
    assert f"resuming stochastic MCEM at iteration {done}/6" in log
    for method, n_models in (("mcem_map", 1), ("model_averaging", 2)):
        m = json.loads((res / "imnet" / method / "metrics.json").read_text())
        assert m["n_test"] == 8 and m["n_train"] == 24 and m["n_models_averaged"] == n_models
        assert 0 <= m["test_error_pct"] <= 100 and m["top5_error_pct"] == 0.0  # 4 classes
        pred = (res / "imnet" / method / "predictions.csv").read_text().splitlines()
        assert pred[0].split(",")[-1] == "score_3" and len(pred) == 9
    trace = (res / "imnet" / "mcem" / "trace.tsv").read_text().splitlines()
    assert "train_error" in trace[0]
    assert [int(line.split("\t")[0]) for line in trace[1:]] == list(range(1, 7))
    assert not (res / "imnet" / "mcem" / "ckpt").exists()
    assert (res / "imnet" / "figures" / "mcem_trace.png").stat().st_size > 0
    t = json.loads((res / "cal" / "imagenet_transfer" / "metrics.json").read_text())
    assert t["n_train"] == 6 and t["n_test"] == 9 and t["image_size"] == 14
    assert t["n_features"] == 4 * 4 * 4  # 14 -> 12 (3x3), pool 2 -> 6 -> 4 (3x3), K = 4
    tables = (res / "tables.md").read_text()
    row = next(line for line in tables.splitlines() if line.startswith("| Our model averaging"))
    avg = json.loads((res / "imnet" / "model_averaging" / "metrics.json").read_text())
    assert f"{avg['test_error_pct']:.2f} / 0.00" in row
    assert "ImageNet-pretrained layers" in tables and f"{t['class_mean_accuracy_pct']:.2f}" in tables
    assert "stochastic MCEM from the priors on 24 images" in tables
    assert "averaged over 2 posterior samples" in tables
