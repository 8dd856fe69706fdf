"""Your own data as one ``.npz``: either layout, converted and checked."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dgdm_tf.data.errors import DataValidationError
from dgdm_tf.io.npz_files import SAVE_ADVICE, NpzFormatError, read_npz

_LAYOUTS = ("'x_train', 'y_train', 'x_test', 'y_test' or 'images', 'labels', 'split' "
            "(optionally 'class_names')")


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


def load_user_npz(name: str, path: Path) -> dict:
    try:
        data = read_npz(path)
    except NpzFormatError as exc:
        fix = (SAVE_ADVICE if exc.objects else
               f"point datasets.{name}.path at an .npz written by np.savez (or "
               f"np.savez_compressed) holding {_LAYOUTS}")
        raise DataValidationError(f"{path} (datasets.{name}.path) {exc.problem}: {fix}.") from exc
    except OSError as exc:
        raise DataValidationError(
            f"{path} (datasets.{name}.path) cannot be read ({exc}): check the file and its "
            f"permissions.") from exc
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
