"""The CIFAR route through the workflow at mock size, end to end, offline: CIFAR-10 from
a TFDS folder that TFDS's own cifar10 builder prepares here from fake binary batches
(augmentation on: the augmented table; GCN and ZCA fitted on the training images), then
pretraining, features and the Bayesian SVM, to its table in results/tables.md.
(The methods' rules are the same for every dataset: the MNIST smoke run covers the
others; ImageNet and the transfer to a Caltech 256 folder, with its class-averaged
table, run in test_workflow_scale.py; each preparation has its own test in
test_data.py.)"""

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import numpy as np
import pytest

from test_workflow import copy_repo, load_config, snakemake, write_config

CIFAR_LAYERS = [{"dict_size": 5, "n_dict": 4, "pool": 2}, {"dict_size": 4, "n_dict": 4, "pool": 1}]


def tfds_cifar10(data_dir: Path, n_train: int = 40, n_test: int = 20, seed: int = 0) -> Path:
    """A prepared TFDS ``cifar10`` in ``data_dir``, written by TFDS's cifar10 builder from
    fake batches in the real archive layout (its download replaced by that folder)."""
    import tensorflow_datasets as tfds

    rng = np.random.default_rng(seed)
    src = data_dir / "extracted"
    folder = src / "cifar-10-batches-bin"
    folder.mkdir(parents=True)
    names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    (folder / "batches.meta.txt").write_text("\n".join(names) + "\n")
    files = [(f"data_batch_{i}.bin", n_train // 5) for i in range(1, 6)] + [("test_batch.bin", n_test)]
    for name, n in files:
        y = rng.integers(0, 10, n).astype(np.uint8)
        x = rng.integers(0, 256, (n, 3 * 32 * 32), dtype=np.uint8)
        (folder / name).write_bytes(np.concatenate([y[:, None], x], axis=1).tobytes())
    with mock.patch.object(tfds.download.DownloadManager, "download_and_extract",
                           return_value=str(src)):
        tfds.builder("cifar10", data_dir=str(data_dir)).download_and_prepare()
    return data_dir


def cifar_config(tmp: Path) -> Path:
    base = load_config("smoke.yaml")
    block = base["datasets"]["mnist_smoke"]
    c10 = {**block, "kind": "cifar10", "paper_table": "cifar10_aug", "raw_dir": str(tmp / "raw"),
           "download": False, "tfds_data_dir": str(tfds_cifar10(tmp / "tfds")), "augment": True,
           "image_shape": None, "n_train": None, "n_test": None, "methods": ["pretrained_svm"],
           "model": {"layers": CIFAR_LAYERS}, "pretrain": {**block["pretrain"], "n_images": 40}}
    return write_config(tmp / "cifar.yaml", {**base, "datasets": {"c10": c10}})


@pytest.mark.slow
def test_mock_cifar10_end_to_end(tmp_path):
    repo = copy_repo(tmp_path / "repo")
    cfg = cifar_config(tmp_path)
    r = snakemake(repo, "--cores", "2", "results/tables.md", "--configfile", str(cfg), timeout=900)
    logs = "\n".join(f"== {p}\n{p.read_text()[-2000:]}"
                     for p in sorted((repo / "results" / "logs").rglob("*.log")))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:] + logs
    res = repo / "results"
    prep = json.loads((res / "c10" / "data" / "summary.json").read_text())
    assert prep["source"] == "tfds" and prep["raw"].endswith("cifar10/3.0.2")
    assert (prep["n_train"], prep["n_test"]) == (80, 20)  # 40 images and their augmented copies
    assert prep["image_shape"] == [32, 32, 3] and abs(prep["x_mean_train"]) < 0.05  # GCN
    m = json.loads((res / "c10" / "pretrained_svm" / "metrics.json").read_text())
    assert (m["n_train"], m["n_test"]) == (80, 20) and 0 <= m["test_error_pct"] <= 100
    assert m["n_features"] == 11 * 11 * 4  # 32 -> 28, pool 2 -> 14 -> 11, K = 4
    tables = (res / "tables.md").read_text()
    assert "## `c10`: CIFAR-10, with data augmentation" in tables
    row = next(line for line in tables.splitlines() if line.startswith("| Our pretrained"))
    assert f"| {m['test_error_pct']:.2f} | 20.62 |" in row and "80 / 20" in row
