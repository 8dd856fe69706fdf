"""The mini-batches and test images of a dataset for the MCEM rules: streamed
(:mod:`dgdm_tf.data.imagenet`, ``stream.json``) or in memory (a prepared ``.npz``)."""

from __future__ import annotations

import hashlib
import json
from typing import Callable, Iterator

import numpy as np
import tensorflow as tf

from dgdm_tf.data import imagenet
from dgdm_tf.data import select_subset


class McemData:
    """``batches(start)`` for :func:`dgdm_tf.mcem.stochastic.train`, ``test_chunks(size)``,
    ``n_total``, ``n_classes``, ``image_shape``, ``data_id`` (what a checkpoint is for)."""

    def __init__(self, path: str, *, seed: int, batch_size: int, stream_cfg: dict | None = None,
                 n_train: int | None = None, n_test: int | None = None,
                 subset_seeds: dict | None = None):
        """``n_train`` / ``n_test`` of a prepared ``.npz`` are its seeded class-stratified
        subsets (:func:`dgdm_tf.data.select_subset`, seeds ``subset_seeds['train' |
        'test']``: the Gibbs methods' own subsets when given the same seeds); a stream
        takes every training image and the first ``n_test`` validation images."""
        self.batch_size = int(batch_size)
        self.n_test_limit = n_test
        if str(path).endswith(".json"):
            info = json.loads(open(path).read())
            scfg = dict(stream_cfg or {})
            self._stream = imagenet.open_stream(info, imagenet.View.from_dict(scfg),
                                                int(scfg.get("shuffle_buffer") or 10000))
            self.n_total = self._stream.count("train")
            self.n_classes = self._stream.n_classes
            self.image_shape = tuple(info["image_shape"])
            self.n_test = min(self._stream.count("test"), n_test or self._stream.count("test"))
            self.data_id = {"stream": {k: info[k] for k in ("source", "path", "data_dir", "n_train")},
                            "view": scfg}
            self.batches = lambda start: self._stream.train_batches(seed, self.batch_size, start)
            self._x = None
        else:
            with np.load(path) as z:
                x, y = z["x_train"], z["y_train"]
                xt, yt = z["x_test"], z["y_test"]
                self.n_classes = int(len(z["class_names"])) if "class_names" in z else int(y.max()) + 1
            seeds = subset_seeds or {}
            x, y = select_subset(x, y, n_train, int(seeds.get("train", 0)))
            xt, yt = select_subset(xt, yt, n_test or None, int(seeds.get("test", 0)))
            self._x, self._y = np.ascontiguousarray(x, np.float32), np.asarray(y, np.int64)
            self._xt, self._yt = xt, yt
            self.n_total, self.n_test = len(self._x), len(self._xt)
            self.image_shape = tuple(self._x.shape[1:])
            self.batch_size = min(self.batch_size, self.n_total)
            self.data_id = {"n": self.n_total, "sha": hashlib.sha256(self._x.tobytes()).hexdigest()[:16]}
            self.batches = array_batches(self._x, self._y, self.batch_size, seed)

    def test_chunks(self, size: int) -> Iterator[tuple]:
        """(x, y) of the test images, ``size`` at a time (the centre crop when streamed)."""
        if self._x is not None:
            for i in range(0, self.n_test, size):
                yield np.asarray(self._xt[i:i + size], np.float32), np.asarray(self._yt[i:i + size])
            return
        yield from self._stream.eval_batches(size, self.n_test)


class ArrayData:
    """In-memory images ``x`` (N, H, W, C) with labels ``y`` (None: none, the unsupervised
    model) as the MCEM entry points read a dataset (the attributes of :class:`McemData`):
    ``batches(start)`` of ``batch_size`` images (at most N; :func:`array_batches` seeded
    by ``seed``), ``n_total``, ``n_classes`` (None without labels; else given, or the
    labels' largest + 1), ``image_shape``, ``data_id``."""

    def __init__(self, x: np.ndarray, y: np.ndarray | None, batch_size: int, seed: int,
                 n_classes: int | None = None):
        x = np.asarray(x, np.float32)
        self.n_total, self.image_shape = len(x), tuple(x.shape[1:])
        self.batch_size = min(int(batch_size), len(x))
        self.n_classes = None if y is None else int(n_classes if n_classes is not None
                                                    else np.max(y) + 1)
        self.data_id = {"n": len(x), "shape": list(x.shape), "sum": float(np.sum(x, dtype=np.float64)),
                        "labels": None if y is None else
                        hashlib.sha256(np.asarray(y, np.int64).tobytes()).hexdigest()}
        self.batch_indices = batch_indices(len(x), self.batch_size, seed)
        self.batches = array_batches(x, y, self.batch_size, seed)


def batch_indices(n: int, batch_size: int, seed: int) -> Callable[[int], np.ndarray]:
    """Iteration t's mini-batch, as sorted image indices: a block of epoch t // per_epoch's
    seeded ``tf.data`` shuffle of range(n) (reshuffled every epoch)."""
    b = min(int(batch_size), int(n))
    per_epoch = -(-int(n) // b)
    order = epoch_orders(int(n), b, seed)

    def indices(t: int) -> np.ndarray:
        return np.sort(order(t // per_epoch)[(t % per_epoch) * b:(t % per_epoch) * b + b])

    return indices


def array_batches(x: np.ndarray, y: np.ndarray | None, batch_size: int, seed: int):
    """``batches(start)`` over in-memory images: iteration t's mini-batch is the images
    :func:`batch_indices` gives."""
    indices = batch_indices(len(x), batch_size, seed)

    def batches(start: int):
        t = int(start)
        while True:
            idx = indices(t)
            yield t, x[idx], (None if y is None else y[idx])
            t += 1

    return batches


def epoch_orders(n: int, b: int, seed: int) -> Callable[[int], np.ndarray]:
    """Epoch e's image order: a seeded tf.data shuffle of range(n) (same seed, same order)."""
    cache: dict[int, np.ndarray] = {}

    def order(epoch: int) -> np.ndarray:
        if epoch not in cache:
            ds = tf.data.Dataset.range(n).shuffle(n, seed=int(seed) * 100003 + epoch,
                                                  reshuffle_each_iteration=False)
            cache[epoch] = np.fromiter(ds.as_numpy_iterator(), np.int64, count=n)
        return cache[epoch]

    return order
