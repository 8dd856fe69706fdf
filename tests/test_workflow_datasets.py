"""Every small data set's route through the workflow at mock size, end to end, offline,
in one snakemake run: CIFAR-10 and CIFAR-100 from TFDS folders that TFDS's own builders
prepare here from fake binary batches, Caltech 101 from a TFDS folder its builder
prepares from a fake image folder, and Caltech 256 from a fake
``256_ObjectCategories.tar``. CIFAR-10 (augmentation on: the augmented table; GCN and ZCA
fitted on the training images) and Caltech 256 (per-class training sizes, resizing,
local contrast normalisation, accuracy averaged over classes) go on through pretraining,
features and the Bayesian SVM to their tables in results/tables.md; CIFAR-100 and
Caltech 101 through the prepare rule (the method rules after it are the same for every
dataset; CI's 19 minutes leave no room for two more chains), their tables saying so.
(The MNIST smoke run covers the other methods; ImageNet and the transfer to a Caltech
256 folder run in test_workflow_scale.py; each preparation has its own test in
test_data.py.)"""

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import numpy as np
import pytest

from _caltech_files import caltech_members, write_tar
from _workflow import CORES, copy_repo, load_config, snakemake, write_config

CIFAR_LAYERS = [{"dict_size": 5, "n_dict": 4, "pool": 2}, {"dict_size": 4, "n_dict": 4, "pool": 1}]


def build_offline(name: str, data_dir: Path, downloaded) -> Path:
    """TFDS's own ``name`` builder prepares ``data_dir``, its download replaced by the
    local ``downloaded`` folder (written by the caller in the real archive's layout)."""
    import tensorflow_datasets as tfds

    with mock.patch.object(tfds.download.DownloadManager, "download_and_extract",
                           return_value=downloaded):
        tfds.builder(name, data_dir=str(data_dir)).download_and_prepare()
    return data_dir


def tfds_cifar10(data_dir: Path, n_train: int = 40, n_test: int = 20, seed: int = 0) -> Path:
    """A prepared TFDS ``cifar10`` in ``data_dir``, written by TFDS's cifar10 builder from
    fake batches in the real archive layout (its download replaced by that folder)."""
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
    return build_offline("cifar10", data_dir, src)


def tfds_cifar100(data_dir: Path, n_train: int = 30, n_test: int = 12, seed: int = 1) -> Path:
    """As :func:`tfds_cifar10` for ``cifar100``: records of (coarse, fine) label + image."""
    rng = np.random.default_rng(seed)
    src = data_dir / "extracted"
    folder = src / "cifar-100-binary"
    folder.mkdir(parents=True)
    (folder / "coarse_label_names.txt").write_text("\n".join(f"super{i}" for i in range(20)) + "\n")
    (folder / "fine_label_names.txt").write_text("\n".join(f"class{i}" for i in range(100)) + "\n")
    for name, n in (("train.bin", n_train), ("test.bin", n_test)):
        fine = rng.integers(0, 100, n).astype(np.uint8)
        x = rng.integers(0, 256, (n, 3 * 32 * 32), dtype=np.uint8)
        (folder / name).write_bytes(np.concatenate([fine[:, None] // 5, fine[:, None], x], 1).tobytes())
    return build_offline("cifar100", data_dir, src)


def _jpeg(rng, h: int, w: int) -> bytes:
    import tensorflow as tf

    return tf.io.encode_jpeg(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).numpy()


def tfds_caltech101(data_dir: Path, classes=("accordion", "anchor"), n: int = 31, seed: int = 2) -> Path:
    """A prepared TFDS ``caltech101`` in ``data_dir``, written by TFDS's builder from a
    fake ``101_ObjectCategories`` folder (it needs > 30 images a class: its own split)."""
    import tensorflow_datasets as tfds

    rng = np.random.default_rng(seed)
    images = data_dir / "extracted_images"
    for c in classes:
        (images / "101_ObjectCategories" / c).mkdir(parents=True)
        for j in range(n):
            (images / "101_ObjectCategories" / c / f"image_{j:04d}.jpg").write_bytes(
                _jpeg(rng, 20 + j % 5, 26 - j % 4))
    # the builder extracts the zip's inner tar.gz again: that too is the local folder
    with mock.patch.object(tfds.download.DownloadManager, "extract", return_value=images):
        return build_offline("caltech101", data_dir, data_dir)


def caltech256_tar(raw: Path) -> Path:
    """A fake ``256_ObjectCategories.tar`` in ``raw``: 3 classes of 5 images and the
    clutter class (left out), by test_data's archive writers."""
    members = caltech_members(np.random.default_rng(3), {
        f"256_ObjectCategories/{c}": 5 for c in ("001.ak47", "002.bat", "003.backpack", "257.clutter")})
    raw.mkdir(parents=True)
    write_tar(raw / "256_ObjectCategories.tar", members)
    return raw


def datasets_config(tmp: Path) -> Path:
    base = load_config("smoke.yaml")
    block = base["datasets"]["mnist_smoke"]
    common = {**block, "raw_dir": str(tmp / "raw"), "download": False, "image_shape": None,
              "n_train": None, "n_test": None, "methods": ["pretrained_svm"],
              "model": {"layers": CIFAR_LAYERS}, "pretrain": {**block["pretrain"], "n_images": 40},
              # the smoke run covers the default route (topdown); this one the layer-wise
              "features": {**block["features"], "route": "layerwise"},
              # the smoke run covers the learning curves: none here (each is SVM fits)
              "learning_curve": {**block["learning_curve"], "sizes": []}}
    # CIFAR-10 also covers the SVM's polarity-split view (the smoke run: the signed default)
    c10 = {**common, "kind": "cifar10", "paper_table": "cifar10_aug", "augment": True,
           "svm_view": "split", "tfds_data_dir": str(tfds_cifar10(tmp / "tfds10"))}
    c100 = {**common, "kind": "cifar100", "paper_table": "cifar100", "methods": [],
            "tfds_data_dir": str(tfds_cifar100(tmp / "tfds100"))}
    # Caltech at 24 x 24 (the paper: 128 x 128), the paper's 15 training images a class
    c101 = {**common, "kind": "caltech101", "paper_table": "caltech101_15", "image_size": [24, 24],
            "train_per_class": 15, "methods": [], "tfds_data_dir": str(tfds_caltech101(tmp / "tfds101"))}
    c256 = {**common, "kind": "caltech256", "paper_table": "caltech256_15", "image_size": [24, 24],
            "train_per_class": 2, "raw_dir": str(caltech256_tar(tmp / "raw256"))}
    cfg = {**base, "datasets": {"c10": c10, "c100": c100, "c101": c101, "c256": c256}}
    return write_config(tmp / "datasets.yaml", cfg)


@pytest.mark.slow
def test_mock_small_datasets_end_to_end(tmp_path):
    repo = copy_repo(tmp_path / "repo")
    cfg = datasets_config(tmp_path)
    r = snakemake(repo, "--cores", CORES, "results/tables.md", "results/c100/data/summary.json",
                  "results/c101/data/summary.json", "--configfile", str(cfg), timeout=900)
    logs = "\n".join(f"== {p}\n{p.read_text()[-2000:]}"
                     for p in sorted((repo / "results" / "logs").rglob("*.log")))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:] + logs
    res = repo / "results"
    tables = (res / "tables.md").read_text()

    def row_of(title: str) -> str:
        section = tables.split(title, 1)[1].split("\n## ", 1)[0]
        return next(line for line in section.splitlines() if line.startswith("| Our pretrained"))

    # CIFAR-10, augmented
    prep = json.loads((res / "c10" / "data" / "summary.json").read_text())
    assert prep["source"] == "tfds" and prep["raw"].endswith("cifar10/3.0.2")
    assert (prep["n_train"], prep["n_test"]) == (80, 20)  # 40 images and their augmented copies
    assert prep["image_shape"] == [32, 32, 3] and abs(prep["x_mean_train"]) < 0.05  # GCN
    m = json.loads((res / "c10" / "pretrained_svm" / "metrics.json").read_text())
    assert (m["n_train"], m["n_test"]) == (80, 20) and 0 <= m["test_error_pct"] <= 100
    # 32 -> 28, pool 2 -> 14 -> 11, K = 4; split: each feature's two polarities
    assert m["n_features"] == 2 * 11 * 11 * 4 and m["svm_view"] == "split"
    assert json.loads((res / "c10" / "pretrained_svm" / "mixing.json").read_text())["route"] == "layerwise"
    row = row_of("## `c10`: CIFAR-10, with data augmentation")
    assert f"| {m['test_error_pct']:.2f} | 20.62 |" in row and "80 / 20" in row

    # CIFAR-100: fine labels, no augmentation; prepared only, its table says so
    prep = json.loads((res / "c100" / "data" / "summary.json").read_text())
    assert prep["raw"].endswith("cifar100/3.0.2") and (prep["n_train"], prep["n_test"]) == (30, 12)
    assert prep["n_classes"] == 100 and prep["image_shape"] == [32, 32, 3]
    assert "not run (enable with `methods: [pretrained_svm]`" in row_of("## `c100`: CIFAR-100")

    # Caltech 101 (from the TFDS folder, prepared only) and 256 (from the tar, to its
    # class-averaged table): per-class sizes, 24 x 24
    for name, per_train, per_test in (("c101", [15, 15], [16, 16]), ("c256", [2, 2, 2], [3, 3, 3])):
        prep = json.loads((res / name / "data" / "summary.json").read_text())
        assert prep["train_per_class"] == per_train and prep["test_per_class"] == per_test, prep
        assert prep["image_shape"] == [24, 24, 3]
    m = json.loads((res / "c256" / "pretrained_svm" / "metrics.json").read_text())
    assert 0 <= m["class_mean_accuracy_pct"] <= 100
    assert f"| {m['class_mean_accuracy_pct']:.2f} |" in row_of("## `c256`: Caltech 256, 15"), tables
