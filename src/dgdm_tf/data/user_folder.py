"""Your own images in class folders: split (flat layout) or as given (train / test)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from dgdm_tf.data.errors import DataValidationError
from dgdm_tf.data.images import IMAGE_EXTENSIONS, class_folders, decode_images, image_files
from dgdm_tf.data.spec import spec_shape


def load_folder(name: str, spec: dict, root: Path, *, seed: int) -> dict:
    size = spec_shape(name, spec, "image_size", (2,))
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
                    and bool(class_folders(train_dir)) and bool(class_folders(test_dir)))
    if split_layout:
        classes = sorted({p.name for p in class_folders(train_dir)}
                         | {p.name for p in class_folders(test_dir)})
        files = {}
        for split, d in (("train", train_dir), ("test", test_dir)):
            files[split] = [(f, i) for i, c in enumerate(classes) if (d / c).is_dir()
                            for f in image_files(d / c)]
            if not files[split]:
                raise DataValidationError(
                    f"{d}: no images ({', '.join(IMAGE_EXTENSIONS)}) in its class "
                    f"folders; the {split} split would be empty.")
    else:
        class_dirs = class_folders(root)
        if not class_dirs:
            raise DataValidationError(
                f"{root} (datasets.{name}.path) has no class sub-folders: put the images "
                f"in {root}/<class>/ (or {root}/train/<class>/ and {root}/test/<class>/).")
        classes = [d.name for d in class_dirs]
        files = {"train": [], "test": []}
        for i, d in enumerate(class_dirs):
            imgs = image_files(d)
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
        out[f"x_{split}"] = decode_images([p for p, _ in pairs], channels=channels,
                                           size=size, name=name)
        out[f"y_{split}"] = np.asarray([c for _, c in pairs], dtype=np.int64)
    return out
