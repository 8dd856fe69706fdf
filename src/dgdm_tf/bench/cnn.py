"""The CNN baseline's throughput: seconds and images/s of a training step and of
inference (:func:`benchmark_cnn`), with the resident memory of each measurement."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from dgdm_tf.baselines.cnn import build_cnn
from dgdm_tf.bench.timing import median_seconds
from dgdm_tf.core.memory import current_rss_mb, peak_rss_mb, reset_peak_rss

#: columns of :func:`benchmark_cnn`'s rows
CNN_COLUMNS = ("benchmark", "batch_size", "input_shape", "steps", "step_seconds",
               "images_per_s", "rss_before_mb", "peak_rss_mb", "peak_rss_is_per_row")


def random_batch(rng: np.random.Generator, batch_size: int, image_shape, n_classes: int):
    """Random images in [0, 1) and random labels: (x, y)."""
    x = rng.random((batch_size, *image_shape), dtype=np.float32)
    y = rng.integers(0, n_classes, size=batch_size).astype(np.int64)
    return x, y


def time_cnn(model, x, y, steps: int,
             kinds: tuple[str, ...] = ("cnn_train_step", "cnn_inference")) -> dict:
    """kind -> (median seconds, RSS before, peak RSS MB, whether the peak mark was reset
    first) of one training step and / or one inference pass over (x, y), each after one
    warm-up call (tracing)."""
    fns = {"cnn_train_step": lambda: model.train_on_batch(x, y),
           "cnn_inference": lambda: model.predict_on_batch(x)}
    out = {}
    for kind in kinds:
        fn = fns[kind]
        before, per_row = current_rss_mb(), reset_peak_rss()
        fn()  # warm-up: trace the step for this batch shape
        out[kind] = (median_seconds(fn, steps), before, peak_rss_mb(), per_row)
    return out


def benchmark_cnn(image_shape: tuple[int, ...], layers: list[dict], n_classes: int, *,
                  batch_sizes: list[int], steps: int, seed: int, fc_units: int = 1024,
                  dropout: float = 0.5, learning_rate: float = 1e-3) -> list[dict]:
    """The CNN baseline (:mod:`dgdm_tf.baselines.cnn`) on random images of ``image_shape``: seconds
    and images/s of one training step (forward, backward, Adam update) and of inference,
    at each batch size, with the resident memory before and at the peak of each
    measurement (``peak_rss_is_per_row``: whether the peak mark could be reset before
    it; else it is the process's peak so far). Two rows per batch size, keys
    :data:`CNN_COLUMNS`."""
    tf.keras.utils.set_random_seed(int(seed))
    model = build_cnn(image_shape, layers, n_classes, fc_units=fc_units, dropout=dropout,
                      learning_rate=learning_rate)
    rng = np.random.default_rng(seed)
    rows = []
    for b in batch_sizes:
        x, y = random_batch(rng, int(b), image_shape, n_classes)
        for kind, (sec, before, peak, per_row) in time_cnn(model, x, y, steps).items():
            rows.append({"benchmark": kind, "batch_size": int(b),
                         "input_shape": "x".join(str(s) for s in image_shape),
                         "steps": int(steps), "step_seconds": sec,
                         "images_per_s": int(b) / sec, "rss_before_mb": before,
                         "peak_rss_mb": peak, "peak_rss_is_per_row": per_row})
    return rows
