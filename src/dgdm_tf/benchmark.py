"""Throughput benchmarks: Gibbs sweeps against the floor of one generative + adjoint pass.

The floor (SPEC sec. 3): for a batch, one ``full_conv`` of every map and its adjoint --
the least work any sampler that touches every feature-map entry must do per sweep.
Figures are wall-clock medians of repeated runs after a warm-up (the first call traces
and compiles), so they describe this machine, which :func:`machine_info` names.
"""

from __future__ import annotations

import os
import platform
import resource
import time

import numpy as np
import tensorflow as tf

from dgdm_tf.layout import layer_geometries
from dgdm_tf.ops import full_conv, full_conv_adjoint
from dgdm_tf.pretrain import Hyper, LayerModel, init_state, make_sweep_fn


def machine_info() -> dict:
    """CPU model, logical cores, GPUs visible to TensorFlow, TF and Python versions."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    gpus = tf.config.list_physical_devices("GPU")
    gpu_names = []
    for g in gpus:
        details = tf.config.experimental.get_device_details(g)
        gpu_names.append(details.get("device_name", g.name))
    return {"cpu": cpu, "cores": os.cpu_count(), "gpu": ", ".join(gpu_names) or "none",
            "tensorflow": tf.__version__, "python": platform.python_version()}


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _median_seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        # materialise results so asynchronous execution is inside the timing
        tf.nest.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else t, out)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def benchmark_pretrain_layers(image_shape: tuple[int, int, int], layers: list[dict], *,
                              batch_size: int, sweeps: int, seed: int,
                              hyper: dict | None = None, update_d: bool = True,
                              jit_compile: bool = False) -> list[dict]:
    """One row per layer: seconds per pretraining sweep vs the floor, at ``batch_size``.

    Inputs are random, at each layer's true shape; the sweep's cost does not depend on
    the values (every block is visited whatever its state).
    """
    geoms = layer_geometries(tuple(image_shape), layers)
    hyp = Hyper.from_dict(hyper)
    rng = np.random.default_rng(seed)
    rows = []
    for li, g in enumerate(geoms):
        x = rng.random((batch_size, g.hx, g.wx, g.c), dtype=np.float32)
        model = LayerModel(g, hyp, top=(g.p == 1), n_images=batch_size)
        state = init_state(x, model, tf.constant([seed, li], tf.int32))
        # the sweep the workflow runs: with the Rao-Blackwellised pooled features
        fn = make_sweep_fn(model, update_d=update_d, jit_compile=jit_compile,
                           return_expected_pool=True)
        xt = tf.constant(x)
        holder = {"st": fn(state, xt)[0]}  # warm-up: trace and compile

        def one_sweep():
            holder["st"], expected = fn(holder["st"], xt)
            return expected

        sweep_s = _median_seconds(one_sweep, sweeps)
        s = tf.constant(rng.normal(size=(batch_size, g.hs, g.ws, g.k)).astype(np.float32))
        d = tf.constant(rng.normal(size=(g.dh, g.dw, g.c, g.k)).astype(np.float32))
        floor_fn = tf.function(lambda s, d: full_conv_adjoint(full_conv(s, d), d))
        floor_fn(s, d)
        floor_s = _median_seconds(lambda: floor_fn(s, d), max(sweeps, 3))
        rows.append({
            "layer": li + 1, "batch_size": batch_size, "jit_compile": jit_compile,
            "input_shape": f"{g.hx}x{g.wx}x{g.c}", "dict": f"{g.dh}x{g.dw}x{g.k}", "pool": g.p,
            "sweep_seconds": sweep_s, "images_per_s": batch_size / sweep_s,
            "floor_seconds": floor_s, "floor_images_per_s": batch_size / floor_s,
            "ratio_to_floor": sweep_s / floor_s, "peak_rss_mb": peak_rss_mb(),
        })
    return rows
