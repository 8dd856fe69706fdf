"""CIFAR-10 / CIFAR-100: global contrast normalisation + ZCA, as Maxout, and the optional
flip-and-translate augmentation; read from a prepared TFDS folder or the binary archive."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dgdm_tf.data.errors import DataValidationError
from dgdm_tf.data.tfds_sets import TFDS_SETS, check_tfds_set


CIFAR_GCN_SCALE = 55.0  # Maxout's CIFAR preprocessing (Goodfellow et al. 2013)
CIFAR_ZCA_BIAS = 0.1    # added to the covariance's eigenvalues before whitening
CIFAR_MAX_SHIFT = 2     # augmentation: translations by up to this many pixels
_CIFAR_ARCHIVE = {"cifar10": ("cifar-10-batches-bin", [f"data_batch_{i}.bin" for i in range(1, 6)],
                              ["test_batch.bin"], "batches.meta.txt", 1),
                  "cifar100": ("cifar-100-binary", ["train.bin"], ["test.bin"],
                               "fine_label_names.txt", 2)}


def prepare_cifar(name: str, kind: str, spec: dict, raw: Path, *, seed: int) -> tuple[dict, str, str]:
    """CIFAR from a prepared TFDS folder or from the binary archive in the manual folder;
    images in [0, 1]; with ``augment`` one extra copy of every training image, flipped
    left-right with probability 1/2 and translated by up to ``CIFAR_MAX_SHIFT`` pixels
    (zero fill; seeded); then per-image GCN and ZCA, both fitted on the original
    training images only and applied unchanged to the test set."""
    from dgdm_tf.data import preprocess

    raw_path = Path(check_tfds_set(name, kind, spec, raw))
    if (raw_path / "dataset_info.json").is_file():
        splits, names = _tfds_load_cifar(kind, raw_path.parent.parent)
        source = "tfds"
    else:
        archive = raw_path / TFDS_SETS[kind]["files"][0][0]
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
    # imported here: dgdm_tf.core.random imports TensorFlow, which the data rules of
    # the other kinds never need (about 5 s of CPU a job)
    from dgdm_tf.core import random

    rng = random.numpy_rng(seed, "cifar_augment")
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

    tfds_name = TFDS_SETS[kind]["tfds_name"]
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
            f"download it again from {TFDS_SETS[kind]['files'][0][1]}.") from e
    return out, names
