"""ImageNet 2012's input pipeline (Sec. 4.4): images streamed from disk with
``tf.data``, never held in memory as a whole.

Training view of an image (Krizhevsky et al. 2012, as the paper):
  short side resized to ``resize_short`` (256), a ``crop`` x ``crop`` (224) window at a
  random place, colour alteration (AlexNet's PCA lighting noise: RGB += V (a * e), a ~
  N(0, ``colour_std``^2) per image, e and V the eigenvalues / eigenvectors of ImageNet's
  pixel covariance), a horizontal flip with probability 1/2, then per-channel
  standardisation.
Test view: the same resize and the centre crop, no alteration.

Every random draw is stateless, seeded by fold-in of (epoch, position in the epoch)
into the run's seed, so a batch depends only on the seed and the iteration number:
a resumed run sees exactly the batches an uninterrupted run sees.

Two sources, same interface (:class:`ImageStream`):
* ``tfds``: the prepared TFDS ``imagenet2012`` folder (built once by TFDS from the two
  archives in ``manual_dir``: :func:`build_tfds`). Records are read undecoded; on a resume
  the epoch's records before the iteration are skipped without decoding them.
* ``folder``: ``<path>/train/<class>/*.JPEG`` and ``<path>/val/<class>/*.JPEG`` (the usual
  extracted layout; class folders sorted by name give the label index).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Iterator

import numpy as np
import tensorflow as tf
from dgdm_tf.core import random

#: ImageNet's per-channel pixel mean and sd, RGB in [0, 1] (the values torchvision and
#: most ImageNet code use)
CHANNEL_MEAN = (0.485, 0.456, 0.406)
CHANNEL_STD = (0.229, 0.224, 0.225)
#: eigenvalues and eigenvectors (columns) of ImageNet's RGB covariance, pixels in [0, 1]
#: (Krizhevsky et al. 2012, sec. 4.1; the values of fb.resnet.torch)
PCA_EIGVAL = (0.2175, 0.0188, 0.0045)
PCA_EIGVEC = ((-0.5675, 0.7192, 0.4009),
              (-0.5808, -0.0045, -0.8140),
              (-0.5836, -0.6948, 0.4203))
IMAGE_SUFFIXES = (".jpeg", ".jpg", ".png")


@dataclasses.dataclass(frozen=True)
class View:
    """How an image becomes a model input (config ``datasets.<ds>.stream``)."""

    resize_short: int = 256
    crop: int = 224
    colour_std: float = 0.1
    flip: bool = True

    def __post_init__(self):
        if not 1 <= self.crop <= self.resize_short:
            raise ValueError(f"stream: need 1 <= crop <= resize_short, got crop {self.crop}, "
                             f"resize_short {self.resize_short}")
        if self.colour_std < 0:
            raise ValueError(f"stream.colour_std must be >= 0, got {self.colour_std}")

    @classmethod
    def from_dict(cls, d: dict | None) -> "View":
        d = dict(d or {})
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls) if d.get(f.name) is not None})


def resize_short_side(image, short: int) -> tf.Tensor:
    """uint8 / float (H, W, 3) -> float32 in [0, 1] with min(H, W) = ``short`` (bilinear,
    antialiased; the aspect ratio kept)."""
    image = tf.convert_to_tensor(image)
    if image.dtype == tf.uint8:
        image = tf.cast(image, tf.float32) / 255.0
    hw = tf.cast(tf.shape(image)[:2], tf.float32)
    scale = float(short) / tf.reduce_min(hw)
    size = tf.maximum(tf.cast(tf.round(hw * scale), tf.int32), short)
    return tf.image.resize(image, size, antialias=True)


def colour_alteration(image, seed, std: float) -> tf.Tensor:
    """AlexNet's lighting noise: every pixel += V (a * e), a ~ N(0, std^2) (3,), one draw
    per image."""
    a = tf.random.stateless_normal([3], seed) * std
    shift = tf.linalg.matvec(tf.constant(PCA_EIGVEC), a * tf.constant(PCA_EIGVAL))
    return image + shift


def standardise(image) -> tf.Tensor:
    return (image - tf.constant(CHANNEL_MEAN)) / tf.constant(CHANNEL_STD)


def train_view(image, seed, view: View) -> tf.Tensor:
    """The training view (random crop, colour alteration, flip), seeded."""
    s_crop, s_colour, s_flip = tf.unstack(tf.random.experimental.stateless_split(seed, 3))
    im = resize_short_side(image, view.resize_short)
    im = tf.image.stateless_random_crop(im, [view.crop, view.crop, 3], s_crop)
    if view.colour_std > 0:
        im = colour_alteration(im, s_colour, view.colour_std)
    if view.flip:
        im = tf.image.stateless_random_flip_left_right(im, s_flip)
    return standardise(im)


def test_view(image, view: View) -> tf.Tensor:
    """The test view: the centre ``crop`` x ``crop`` window of the resized image."""
    im = resize_short_side(image, view.resize_short)
    h, w = tf.shape(im)[0], tf.shape(im)[1]
    top, left = (h - view.crop) // 2, (w - view.crop) // 2
    return standardise(im[top: top + view.crop, left: left + view.crop, :])


def _decode(data) -> tf.Tensor:
    return tf.io.decode_image(data, channels=3, expand_animations=False)


def _example_seed(seed: int, epoch, index):
    s = random.fold(random.salted(seed, "imagenet_epoch"), epoch)
    return tf.random.experimental.stateless_fold_in(s, index)


class ImageStream:
    """Mini-batches of ImageNet-style data. ``source``: ``"tfds"`` (``data_dir`` a TFDS
    data_dir holding a prepared ``imagenet2012``) or ``"folder"`` (``path`` with
    ``train/`` and ``val/`` class folders). ``shuffle_buffer``: tfds only (records are
    shuffled by file, then within this buffer)."""

    def __init__(self, source: str, *, data_dir=None, path=None, tfds_name: str = "imagenet2012",
                 view: View = View(), shuffle_buffer: int = 10000):
        self.source, self.view, self.shuffle_buffer = source, view, int(shuffle_buffer)
        if source == "tfds":
            import tensorflow_datasets as tfds

            self._tfds, self._name, self._data_dir = tfds, tfds_name, str(data_dir)
            builder = tfds.builder(tfds_name, data_dir=self._data_dir)
            self.class_names = list(builder.info.features["label"].names)
            self._counts = {"train": self._tfds_count("train"), "test": self._tfds_count("validation")}
        elif source == "folder":
            root = Path(path)
            for sub in ("train", "val"):
                _class_folders(root / sub)
            self._files = {}
            train_classes = _class_folders(root / "train")
            self.class_names = [p.name for p in train_classes]
            index = {c: i for i, c in enumerate(self.class_names)}
            for split, sub in (("train", "train"), ("test", "val")):
                files, labels = [], []
                for folder in _class_folders(root / sub):
                    if folder.name not in index:
                        raise ValueError(f"{root / sub}: class folder {folder.name!r} has no "
                                         f"training folder in {root / 'train'}")
                    fs = sorted(f for f in folder.iterdir() if f.suffix.lower() in IMAGE_SUFFIXES)
                    files += [str(f) for f in fs]
                    labels += [index[folder.name]] * len(fs)
                if not files:
                    raise ValueError(f"no images (*.JPEG, *.jpg, *.png) under {root / sub}/<class>/")
                self._files[split] = (np.asarray(files), np.asarray(labels, np.int64))
            self._counts = {k: len(v[0]) for k, v in self._files.items()}
        else:
            raise ValueError(f"stream source must be 'tfds' or 'folder', got {source!r}")

    def _tfds_count(self, split: str) -> int:
        ds = self._tfds.load(self._name, split=split, data_dir=self._data_dir,
                             decoders={"image": self._tfds.decode.SkipDecoding()})
        n = int(ds.cardinality())
        if n < 1:
            raise ValueError(f"TFDS {self._name} in {self._data_dir}: split {split!r} has no "
                             f"known size; prepare the dataset first (build_tfds)")
        return n

    @property
    def n_classes(self) -> int:
        return len(self.class_names)

    def count(self, split: str) -> int:
        return self._counts[split]

    def _epoch_records(self, split: str, seed: int | None, epoch: int) -> tf.data.Dataset:
        """(encoded image, label) of one epoch, shuffled by (seed, epoch) when seed is given."""
        if self.source == "folder":
            files, labels = self._files[split]
            ds = tf.data.Dataset.from_tensor_slices((files, labels))
            if seed is not None:
                ds = ds.shuffle(len(files), seed=_np_seed(seed, epoch), reshuffle_each_iteration=False)
            return ds.map(lambda f, y: (tf.io.read_file(f), y))
        tfds = self._tfds
        ds = tfds.load(self._name, split="train" if split == "train" else "validation",
                       data_dir=self._data_dir, shuffle_files=seed is not None,
                       decoders={"image": tfds.decode.SkipDecoding()},
                       read_config=tfds.ReadConfig(shuffle_seed=None if seed is None
                                                   else _np_seed(seed, epoch)))
        ds = ds.map(lambda ex: (ex["image"], ex["label"]))
        if seed is not None:
            ds = ds.shuffle(self.shuffle_buffer, seed=_np_seed(seed, epoch + 7919),
                            reshuffle_each_iteration=False)
        return ds

    def train_batches(self, seed: int, batch_size: int, start: int = 0) -> Iterator[tuple]:
        """Iteration t = start, start + 1, ...: (t, x (B, crop, crop, 3), y (B,)) numpy;
        epochs of floor(N / B) full batches, reshuffled each epoch."""
        n = self.count("train")
        b = int(batch_size)
        if b > n:
            raise ValueError(f"batch size {b} exceeds the {n} training images")
        per_epoch = n // b
        t = int(start)
        while True:
            epoch, offset = divmod(t, per_epoch)
            ds = self._epoch_records("train", seed, epoch).take(per_epoch * b).enumerate()
            ds = ds.skip(offset * b)
            view = self.view
            ds = ds.map(lambda i, r: (train_view(_decode(r[0]), _example_seed(seed, epoch, i), view),
                                      r[1]), num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
            for xb, yb in ds.batch(b).prefetch(2).as_numpy_iterator():
                yield t, xb, yb
                t += 1

    def eval_batches(self, batch_size: int, limit: int | None = None,
                     split: str = "test") -> Iterator[tuple]:
        """(x, y) of the first ``limit`` images of ``split`` in file order, test view."""
        ds = self._epoch_records(split, None, 0)
        if limit is not None:
            ds = ds.take(int(limit))
        view = self.view
        ds = ds.map(lambda r, y: (test_view(_decode(r), view), y),
                    num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        yield from ds.batch(int(batch_size)).prefetch(2).as_numpy_iterator()


def _np_seed(seed: int, salt: int) -> int:
    return int((int(seed) * 1000003 + int(salt)) % (2**31 - 1))


def _class_folders(root: Path) -> list[Path]:
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a folder: an ImageNet folder source needs "
                                f"train/<class>/ and val/<class>/ image folders")
    out = sorted(p for p in root.iterdir() if p.is_dir())
    if not out:
        raise FileNotFoundError(f"{root} has no class folders")
    return out


def build_tfds(data_dir, manual_dir, tfds_name: str = "imagenet2012") -> str:
    """TFDS builds ``imagenet2012`` from ILSVRC2012_img_train.tar and _val.tar in
    ``manual_dir`` (no network; hours for the full set). Returns the prepared folder."""
    import tensorflow_datasets as tfds

    builder = tfds.builder(tfds_name, data_dir=str(data_dir))
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(
        manual_dir=str(manual_dir)))
    return str(builder.data_dir)


def locate(spec: dict, raw_path: str, tfds_data_dir: str) -> dict:
    """Where a dataset's stream reads from, as recorded in ``stream.json``: the folder
    source as is; for TFDS, the prepared data_dir (building it from the archives in the
    manual folder first when ``raw_path`` is that folder)."""
    if (spec.get("source") or "auto") == "folder":
        return {"source": "folder", "path": str(raw_path), "data_dir": None}
    p = Path(raw_path)
    if (p / "dataset_info.json").is_file():  # <data_dir>/imagenet2012/<version>
        return {"source": "tfds", "path": None, "data_dir": str(p.parent.parent)}
    return {"source": "tfds", "path": None, "data_dir": str(Path(build_tfds(tfds_data_dir, p)).parent.parent)}


def open_stream(where: dict, view: View, shuffle_buffer: int) -> ImageStream:
    """The :class:`ImageStream` of a :func:`locate` record."""
    return ImageStream(where["source"], data_dir=where.get("data_dir"), path=where.get("path"),
                       view=view, shuffle_buffer=shuffle_buffer)
