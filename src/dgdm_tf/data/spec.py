"""A dataset's config block read and checked: its kind, source, download switch, integer
and shape keys, TFDS folder and user path (keys: :mod:`dgdm_tf.data`'s docstring)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dgdm_tf.data.errors import DataValidationError, DatasetMissingError


PAPER_DATASETS = ("mnist", "cifar10", "cifar100", "caltech101", "caltech256", "imagenet2012")
USER_KINDS = ("npz", "folder")
KINDS = PAPER_DATASETS + USER_KINDS


def dataset_kind(name: str, spec: dict) -> str:
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


def spec_source(name: str, spec: dict, allowed: tuple[str, ...]) -> str:
    source = spec.get("source") or "auto"
    if source not in allowed:
        raise DataValidationError(
            f"config key datasets.{name}.source is {source!r}: for kind "
            f"{spec.get('kind') or name} use one of {list(allowed)} (or null = auto).")
    return source


def download_allowed(name: str, spec: dict) -> bool:
    value = spec.get("download")
    if value is None:
        return True
    if not isinstance(value, bool):
        raise DataValidationError(
            f"config key datasets.{name}.download must be true or false, got {value!r}.")
    return value


def spec_int(name: str, spec: dict, key: str, *, minimum: int) -> int | None:
    value = spec.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise DataValidationError(
            f"config key datasets.{name}.{key} must be an integer >= {minimum} or null, "
            f"got {value!r}.")
    return int(value)


def spec_shape(name: str, spec: dict, key: str, lengths: tuple[int, ...]) -> tuple | None:
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


def tfds_data_dir(spec: dict, raw: Path) -> Path:
    return Path(spec.get("tfds_data_dir") or raw / "tfds")


def user_path(name: str, spec: dict, kind: str) -> Path:
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


def short_list(items: list, k: int = 5) -> str:
    items = list(items)
    more = f", ... ({len(items)} in all)" if len(items) > k else ""
    return ", ".join(map(str, items[:k])) + more
