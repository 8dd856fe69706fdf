"""How the cost of a pretraining sweep, a top-down test-time sweep and a CNN training step
grows with the batch size, the image side and the dictionaries' size
(:func:`benchmark_scaling`)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from dgdm_tf.baselines.cnn import build_cnn, conv_shapes
from dgdm_tf.bench.cnn import random_batch, time_cnn
from dgdm_tf.bench.sweeps import TEST_SWEEP, benchmark_pretrain_layers, benchmark_refine
from dgdm_tf.core.memory import current_rss_mb, reset_peak_rss
from dgdm_tf.core.model import DeepModel

#: columns of :func:`benchmark_scaling`'s rows
SCALING_COLUMNS = ("benchmark", "sweep", "batch_size", "image_side", "input_shape",
                   "n_dict", "seconds", "images_per_s", "megapixels_per_s",
                   "ratio_to_floor", "ratio_to_exact_floor", "rss_before_mb", "peak_rss_mb",
                   "note")


def scaled_shape(image_shape: tuple[int, ...], factor: float) -> tuple[int, ...]:
    """``image_shape`` (H, W, C) with H and W multiplied by ``factor`` (rounded)."""
    h, w, c = image_shape
    return (max(1, int(round(h * factor))), max(1, int(round(w * factor))), c)


def benchmark_scaling(image_shape: tuple[int, int, int], layers: list[dict], n_classes: int,
                      *, batch_sizes: list[int], side_factors: list[float],
                      side_batch_size: int, sweeps: int, steps: int, seed: int,
                      k_factors: list[float] = (), hyper: dict | None = None,
                      fc_units: int = 1024, dropout: float = 0.5,
                      learning_rate: float = 1e-3, topdown_max_gb: float = 4.0) -> list[dict]:
    """Throughput as the work grows, for three kernels: one pretraining sweep of the bottom
    layer (``layers[0]``, graph mode, :func:`dgdm_tf.bench.sweeps.benchmark_pretrain_layers`),
    one test-time sweep of the whole top-down model (``topdown_sweep``: dictionaries fixed,
    :func:`dgdm_tf.bench.sweeps.benchmark_refine`) and one CNN training step
    (:func:`dgdm_tf.bench.cnn.benchmark_cnn`'s model, all ``layers``).

    Three series each: ``sweep == "batch_size"`` (every batch size at ``image_shape``),
    ``sweep == "image_side"`` (H and W times each factor, at ``side_batch_size``) and
    ``sweep == "n_dict"`` (every layer's K times each of ``k_factors``, at
    ``side_batch_size``); a point two series share is measured once. The pretraining
    rows also give the sweep's ratio to its floor (one generative + adjoint pass at the
    same K), and so do the top-down rows (the floor: one generative + adjoint pass of the
    whole model). Rows have the keys
    :data:`SCALING_COLUMNS`; a shape the CNN's layers do not fit (a filter larger than
    its input) gets NaN figures and says so in ``note`` instead of failing, and so does
    a two-layer top-down point whose batch of top units' images (every unit's image,
    held at once) would exceed ``topdown_max_gb``.
    """
    image_shape = tuple(int(s) for s in image_shape)
    points = [("batch_size", int(b), 1.0, 1.0) for b in batch_sizes]
    points += [("image_side", int(side_batch_size), float(f), 1.0) for f in side_factors]
    points += [("n_dict", int(side_batch_size), 1.0, float(f)) for f in k_factors]
    rng = np.random.default_rng(seed)
    cache: dict[tuple, dict] = {}
    rows = []
    for kind in ("pretrain_sweep", "topdown_sweep", "cnn_train_step"):
        for series, b, factor, k_factor in points:
            shape = scaled_shape(image_shape, factor)
            lays = [{**lay, "n_dict": max(1, int(round(lay["n_dict"] * k_factor)))}
                    for lay in layers]
            key = (kind, b, shape, lays[0]["n_dict"])
            if key not in cache:
                cache[key] = _scaling_point(kind, shape, b, lays, n_classes, rng,
                                            sweeps=sweeps, steps=steps, seed=seed,
                                            topdown_max_gb=topdown_max_gb,
                                            hyper=hyper, fc_units=fc_units,
                                            dropout=dropout, learning_rate=learning_rate)
            pt = cache[key]
            sec = pt["seconds"]
            rows.append({"benchmark": kind, "sweep": series, "batch_size": b,
                         "image_side": shape[0],
                         "input_shape": "x".join(str(s) for s in shape),
                         "n_dict": lays[0]["n_dict"], "seconds": sec, "images_per_s": b / sec,
                         "megapixels_per_s": b * shape[0] * shape[1] / sec / 1e6,
                         "ratio_to_floor": pt.get("ratio_to_floor", float("nan")),
                         "ratio_to_exact_floor": pt.get("ratio_to_exact_floor", float("nan")),
                         "rss_before_mb": pt["rss_before_mb"], "peak_rss_mb": pt["peak_rss_mb"],
                         "note": pt["note"]})
    return rows


def _scaling_point(kind, shape, b, layers, n_classes, rng, *, sweeps, steps, seed, hyper,
                   fc_units, dropout, learning_rate, topdown_max_gb) -> dict:
    """seconds, peak RSS and a note of one point of :func:`benchmark_scaling`."""
    nan = float("nan")
    try:  # the top-down kind checks its own model's shapes below
        if kind != "topdown_sweep":
            conv_shapes(shape, layers[:1] if kind == "pretrain_sweep" else layers)
    except ValueError as e:
        return {"seconds": nan, "rss_before_mb": nan, "peak_rss_mb": nan,
                "note": f"skipped: {e}"}
    if kind == "pretrain_sweep":
        before, per_row = current_rss_mb(), reset_peak_rss()
        r = benchmark_pretrain_layers(shape, [dict(layers[0])], batch_size=b, sweeps=sweeps,
                                      seed=seed, hyper=hyper)[0]
        return {"seconds": r["sweep_seconds"], "rss_before_mb": before,
                "peak_rss_mb": r["peak_rss_mb"], "ratio_to_floor": r["ratio_to_floor"],
                "ratio_to_exact_floor": r["ratio_to_exact_floor"],
                "note": "" if per_row else "peak RSS of the process so far"}
    if kind == "topdown_sweep":
        try:  # the top-down model's own shape rules (its unpooling blocks must tile)
            model = DeepModel(shape, layers, hyper)
        except ValueError as e:
            return {"seconds": nan, "rss_before_mb": nan, "peak_rss_mb": nan, "note": f"skipped: {e}"}
        # two layers: the top units' step holds every unit's image of the batch at once
        # (topdown.top_units), units x pixels floats an image: side^4
        gb = (b * model.top.hs * model.top.ws * model.top.k * int(np.prod(shape)) * 4 / 1e9
              if model.n_layers == 2 else 0.0)
        if gb > topdown_max_gb:
            return {"seconds": nan, "rss_before_mb": nan, "peak_rss_mb": nan,
                    "note": f"skipped: the top units' images of {b} images need {gb:.1f} GB "
                            f"(> {topdown_max_gb:g} GB)"}
        before, per_row = current_rss_mb(), reset_peak_rss()
        r = benchmark_refine(shape, [dict(l) for l in layers], batch_size=b, sweeps=sweeps, seed=seed,
                             hyper=hyper, only=(TEST_SWEEP,))[0]
        return {"seconds": r["seconds"], "rss_before_mb": before, "peak_rss_mb": r["peak_rss_mb"],
                "ratio_to_floor": r["ratio_to_floor"], "ratio_to_exact_floor": r["ratio_to_exact_floor"],
                "note": "" if per_row else "peak RSS of the process so far"}
    tf.keras.utils.set_random_seed(int(seed))
    model = build_cnn(shape, layers, n_classes, fc_units=fc_units, dropout=dropout,
                      learning_rate=learning_rate)
    x, y = random_batch(rng, b, shape, n_classes)
    sec, before, peak, per_row = time_cnn(model, x, y, steps,
                                          ("cnn_train_step",))["cnn_train_step"]
    return {"seconds": sec, "rss_before_mb": before, "peak_rss_mb": peak,
            "note": "" if per_row else "peak RSS of the process so far"}
