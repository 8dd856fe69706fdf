"""Images decoded from files (``tf.io``): class folders, image files, decoding to a size
and a number of channels."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dgdm_tf.data.errors import DataValidationError


IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".gif")


def decode_one(data, *, channels: int, size: tuple[int, int] | None, what: str) -> np.ndarray:
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


def class_folders(root: Path) -> list[Path]:
    return sorted((p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")),
                  key=lambda p: p.name)


def image_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir()
                  if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS
                  and not p.name.startswith("."))


def decode_images(files: list[Path], *, channels: int, size: tuple[int, int] | None,
                   name: str) -> np.ndarray:
    out = []
    first_shape = None
    for f in files:
        img = decode_one(f.read_bytes(), channels=channels, size=size,
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
