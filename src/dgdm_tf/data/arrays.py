"""A prepared set's arrays: loading, validation with messages that say what to fix, seeded
stratified subsets."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dgdm_tf.data.errors import DataValidationError
from dgdm_tf.data.spec import short_list
from dgdm_tf.io.npz_files import NpzFormatError, read_npz


def load_prepared(path: str) -> dict[str, np.ndarray]:
    """Load a file written by :func:`prepare_dataset` (validated again on the way in)."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(
            f"prepared dataset {p} does not exist: run the workflow's 'prepare' rule "
            f"(snakemake {p}) first.")
    try:
        out = read_npz(p)
    except NpzFormatError as exc:
        raise DataValidationError(
            f"{p} {exc.problem}: it was not written by dgdm_tf.data.prepare_dataset: delete "
            f"it and run the 'prepare' rule again (snakemake --force {p}).") from exc
    missing = [k for k in ("x_train", "y_train", "x_test", "y_test", "class_names")
               if k not in out]
    if missing:
        raise DataValidationError(
            f"{p}: missing arrays {missing} (it has {sorted(out)}); it was not written by "
            f"dgdm_tf.data.prepare_dataset: delete it and run the 'prepare' rule again.")
    validate_arrays(out["x_train"], out["y_train"], out["x_test"], out["y_test"],
                    n_classes=len(out["class_names"]))
    return out


def class_count(prepared: dict) -> int:
    """The number of classes of a prepared set: its class names, or (arrays without
    names) one more than the largest label of either split."""
    if "class_names" in prepared:
        return len(prepared["class_names"])
    return int(max(prepared["y_train"].max(), prepared["y_test"].max()) + 1)


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
        bad = (y < 0) | (y >= n_classes) if n_classes is not None else y < 0
        if bad.any():
            bound = f"[0, {n_classes})" if n_classes is not None else "[0, C)"
            values, counts = np.unique(y[bad], return_counts=True)
            found = ", ".join(f"{v} ({k}x)" for v, k in zip(values[:10].tolist(), counts[:10].tolist()))
            top = f"0..{n_classes - 1} or fix n_classes / class_names" if n_classes else "0..C-1"
            raise DataValidationError(
                f"{ykey}: labels must be in {bound}, found {found} ({int(bad.sum())} of "
                f"{len(y)} labels out of range); labels per class: "
                f"{per_class(y, n_classes or max(int(y.max()) + 1, 0))}. Map classes to {top}.")


def per_class(y: np.ndarray, n_classes: int, names=None) -> str:
    """``"label: count, ..."`` of the labels in ``[0, n_classes)`` (the first 20 classes,
    then those with no label), with each class's name where it differs from its index."""
    y = np.asarray(y)
    counts = np.bincount(y[(y >= 0) & (y < n_classes)], minlength=n_classes)
    names = [str(c) for c in range(n_classes)] if names is None else [str(c) for c in names]

    def one(c: int) -> str:
        return f"{c}: {counts[c]}" if names[c] == str(c) else f"{c} ({names[c]}): {counts[c]}"
    shown = list(range(min(n_classes, 20)))
    rest = [c for c in range(20, n_classes) if counts[c] == 0]
    text = ", ".join(one(c) for c in shown + rest[:20])
    hidden = n_classes - len(shown) - len(rest[:20])
    return text + (f", ... ({hidden} more classes, each with {counts[20:].min()} to "
                   f"{counts[20:].max()})" if hidden else "")


def check_training_classes(y_train: np.ndarray, class_names, every_class: bool = True) -> None:
    """Raise :class:`DataValidationError` unless there are at least two classes and
    (``every_class``) every one of them has a training image: a class without one is never
    learnt, the one-vs-rest Bayesian SVM (Sec. 2.3) having no positive example of it."""
    c = len(class_names)
    if c < 2:
        raise DataValidationError(
            f"the data have {c} class{'es' if c != 1 else ''} "
            f"({per_class(y_train, c, class_names) or 'no labels'} training images); a "
            f"classifier needs at least two")
    counts = np.bincount(y_train, minlength=c)
    missing = np.flatnonzero(counts == 0)
    if every_class and len(missing):
        raise DataValidationError(
            f"{len(missing)} of the {c} classes have no training image (classes "
            f"{short_list([class_names[i] for i in missing])}; training images per class: "
            f"{per_class(y_train, c, class_names)})")


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
