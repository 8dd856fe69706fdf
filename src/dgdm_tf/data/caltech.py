"""Caltech 101 / 256: images resized to 128x128, local contrast normalisation (Jarrett et
al. 2009), N training images per class."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from dgdm_tf.data.errors import DataValidationError, DatasetMissingError
from dgdm_tf.data.images import IMAGE_EXTENSIONS, class_folders, decode_one, image_files
from dgdm_tf.data.spec import spec_int, spec_shape, spec_source
from dgdm_tf.data.tfds_sets import TFDS_SETS, check_tfds_set


CALTECH256_FILE = "256_ObjectCategories.tar"
CALTECH256_URL = ("https://data.caltech.edu/records/nyy15-4j048 (file "
                  "256_ObjectCategories.tar, 1.2 GB, md5 67b4f42ca05d46448c6bb8ecd2220f6d)")


def check_caltech256(name: str, spec: dict, raw: Path) -> str:
    spec_source(name, spec, ("auto", "tar"))
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


CALTECH_IMAGE_SIZE = (128, 128)
CALTECH_LCN_WINDOW = 9  # Jarrett et al. (2009)'s 9x9 Gaussian window
CALTECH256_EXCLUDED = ("257.clutter",)  # the background class, not one of the 256


def prepare_caltech(name: str, kind: str, spec: dict, raw: Path, *, seed: int) -> tuple[dict, str, str]:
    """Every image of every class, resized to ``image_size`` (default 128x128, RGB);
    per class, ``train_per_class`` images chosen with a seeded permutation for training,
    the rest for testing; then local contrast normalisation of each image."""
    from dgdm_tf.data import preprocess

    per_class = spec_int(name, spec, "train_per_class", minimum=1)
    size = tuple(spec_shape(name, spec, "image_size", (2,)) or CALTECH_IMAGE_SIZE)
    raw_path = Path(check_caltech256(name, spec, raw) if kind == "caltech256"
                    else check_tfds_set(name, kind, spec, raw))
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
        raw_path = raw_path / TFDS_SETS[kind]["files"][0][0]
        classes, items = _caltech101_zip_items(raw_path)
        source = "archive"
    # imported here: dgdm_tf.core.random imports TensorFlow, which the data rules of
    # the other kinds never need (about 5 s of CPU a job)
    from dgdm_tf.core import random

    rng = random.numpy_rng(seed, "caltech_split")
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
        x = np.stack([decode_one(load(), channels=3, size=size, what=what) for _, load, what in its])
        if spec.get("normalise") == "imagenet":  # the transfer rows: ImageNet's own input scaling
            from dgdm_tf.data.imagenet import standardise
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
        dirs = [d for d in class_folders(root) if keep(d.name)]
        classes = [d.name for d in dirs]
        items = [(i, (lambda f=f: f.read_bytes()), str(f)) for i, d in enumerate(dirs)
                 for f in image_files(d)]
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
            f"{TFDS_SETS['caltech101']['files'][0][1]}.") from e
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
