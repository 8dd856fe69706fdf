"""Throughput and peak memory of stochastic MCEM training (one iteration: E-step, delta
gradient, RMSprop, beta's M-step) and of test-time inference (Algorithm 2) at a given
model shape, on random images; each shape in its own process so that its peak RSS is its
own:  python -m dgdm_tf.bench.mcem '<json spec>'  prints one JSON line;
python -m dgdm_tf.bench.mcem steps '<json spec>'  prints each E-step step's seconds
(windowed and whole-plane) and :func:`sweep_cost`'s multiply-adds.

The figures exclude tracing: the first iteration is timed apart (``first_iteration_s``)
and the first inference batch is run once before the clock starts.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np


def sweep_cost(model) -> list[dict]:
    """Multiply-adds of one Gibbs sweep's windowed passes per image, by layer (layer 0's
    blocks take the footprint-correlation path: about p^2 K_0 dh dw C per block, small).
    Each (colour, map) pushes p^2 candidates (1 at the top) of every real member down
    through dense convolutions over its windows (:mod:`dgdm_tf.core.windows`), so
    MACs = maps x sum over colours of candidates x members x sum over levels of
    (window area x K_in x dh x dw x K_out). A planning figure, not a measurement."""
    rows = []
    for l in range(1, model.n_layers):
        g, col = model.geoms[l], model.colourings[l]
        top = l == model.n_layers - 1
        cands = 1 if top else g.p * g.p
        macs, passes = 0, 0
        for a, b in col.colours():
            s_grids, _ = model.member_grids(l, a, b)
            members = int(col.real(a, b).sum())
            per = col.unit * col.unit * g.dh * g.dw * g.c  # the block (or unit) into X[l]
            for j, grid in s_grids.items():
                gj = model.geoms[j]
                per += grid.size_h * grid.size_w * gj.k * gj.dh * gj.dw * gj.c
            macs += cands * members * per
            passes += 1
        rows.append({"layer": l + 1, "what": "top units" if top else "unpooling blocks",
                     "sequential_steps": passes * g.k, "macs": macs * g.k})
    return rows


def measure(spec: dict) -> dict:
    """spec: name, image_shape, layers, batch_size, iterations, n_classes, infer_iterations,
    infer_burn_in, seed. Returns the spec's name with train/test images per second, the
    seconds per iteration and the process's peak RSS (MB)."""
    import tensorflow as tf

    from dgdm_tf.mcem import test_time as deep_mcem, stochastic as deep_smcem
    from dgdm_tf.mcem.options import MapOptions, McemOptions, McemStart
    from dgdm_tf.data.minibatches import ArrayData
    from dgdm_tf.topdown.options import Start
    from dgdm_tf.core.model import DeepModel
    from dgdm_tf.core.memory import peak_rss_mb

    shape = tuple(spec["image_shape"])
    b, its = int(spec["batch_size"]), int(spec["iterations"])
    rng = np.random.default_rng(int(spec.get("seed", 0)))
    n = b * (its + 1)
    x = rng.normal(size=(n, *shape)).astype(np.float32)
    y = rng.integers(0, int(spec["n_classes"]), size=n)
    model = DeepModel(shape, spec["layers"])
    data = ArrayData(x, y, b, seed=2, n_classes=int(spec["n_classes"]))
    data.data_id = {"bench": spec["name"]}  # what a checkpoint would be for
    def note(msg):  # progress on stderr: a run cut short still shows how far it got
        print(f"[{time.strftime('%H:%M:%S')}] {spec['name']}: {msg}", file=sys.stderr, flush=True)

    # one run of its + 1 iterations: the first traces every function, the rest are the
    # steady state; each iteration's own seconds come from the run's trace (the SVM's
    # defaults from the first iteration; the random scan)
    options = McemOptions(iterations=its + 1, batch_size=b, sweeps=1, n_samples=1, scan="random",
                          jit_compile=bool(spec.get("jit_compile", False)))
    warm = deep_smcem.train(data, McemStart(spec["layers"]), options, seed=1, progress=note)
    secs = [float(r["seconds"]) for r in warm["trace"]]
    first, steady = secs[0], float(np.mean(secs[1:]))
    note(f"first (traced) iteration: {first:.1f} s")
    d = [tf.constant(v) for v in warm["D"]]
    xi = x[:b]
    ikw = dict(seed=3, progress=None)
    start = Start(d, spec["layers"], gamma_s_init=1.0)
    map_options = MapOptions(burn_in=int(spec.get("infer_burn_in", 2)),
                             iterations=int(spec.get("infer_iterations", 4)), batch_size=b)
    note(f"{its} timed iterations: {steady:.1f} s each")
    deep_mcem.infer_map(xi, start, map_options, **ikw)  # trace
    note("inference traced")
    t0 = time.perf_counter()
    deep_mcem.infer_map(x[b: 3 * b] if n >= 3 * b else xi, start, map_options, **ikw)
    n_inf = min(2 * b, n - b) if n >= 3 * b else b
    infer = time.perf_counter() - t0
    return {"name": spec["name"], "image_shape": "x".join(map(str, shape)),
            "layers": len(spec["layers"]), "top_features": int(model.top.hs * model.top.ws * model.top.k),
            "batch_size": b, "iterations": its, "seconds_per_iteration": steady,
            "train_images_per_s": b / steady, "first_iteration_s": first,
            "infer_images_per_s": n_inf / infer,
            "peak_rss_mb": peak_rss_mb(),
            "device": tf.config.list_physical_devices("GPU")[0].name
            if tf.config.list_physical_devices("GPU") else "CPU"}


def step_times(spec: dict, *, generic: bool = True) -> list[dict]:
    """Seconds of each per-image Gibbs step of the supervised model's E-step (the top
    units, the blocks of every layer below) at the spec's shape on random images and
    dictionaries, each compiled alone and timed on its second call; with ``generic``
    also the whole-plane path it replaces (the same draws)."""
    import tensorflow as tf

    from dgdm_tf.topdown.state import init_state
    from dgdm_tf.topdown.top_units import resample_top
    from dgdm_tf.topdown.unpooling import resample_z
    from dgdm_tf.core.compiled import compiled
    from dgdm_tf.core.model import DeepModel
    shape, b = tuple(spec["image_shape"]), int(spec["batch_size"])
    model = DeepModel(shape, spec["layers"], supervised=True)
    rng = np.random.default_rng(int(spec.get("seed", 0)))
    x = tf.constant(rng.normal(size=(b, *shape)).astype(np.float32))
    d = [tf.constant(rng.normal(size=(g.dh, g.dw, g.c, g.k)).astype(np.float32)
                     / np.sqrt(g.dh * g.dw * g.c)) for g in model.geoms]
    st = init_state(x, model, d, [1, 2])
    costs = {r["layer"]: r["macs"] for r in sweep_cost(model)}
    steps = [("top units", model.n_layers, lambda s, f: resample_top(s, x, model, tf.constant([3, 4]), fast=f))]
    steps += [(f"blocks of layer {l + 1}", l + 1,
               lambda s, f, l=l: resample_z(s, x, model, l, tf.constant([5, l]), fast=f))
              for l in range(model.n_layers - 2, -1, -1)]
    rows = []
    for name, layer, step in steps:
        row = {"name": spec["name"], "step": name, "batch_size": b,
               "windowed_macs_per_image": costs.get(layer, 0)}
        for label, fast in (("fast", True), ("generic", False)) if generic else (("fast", True),):
            fn = compiled(lambda s, fast=fast, step=step: step(s, fast).resid)
            float(tf.reduce_sum(fn(st)))  # trace
            t0 = time.perf_counter()
            float(tf.reduce_sum(fn(st)))
            row[f"{label}_seconds"] = time.perf_counter() - t0
        rows.append(row)
        print(f"[{time.strftime('%H:%M:%S')}] {row}", file=sys.stderr, flush=True)
    return rows


def run_isolated(spec: dict, timeout: float = 3600) -> dict:
    """:func:`measure` in a fresh Python process (its own peak RSS); a failure (memory,
    time) is returned as {'name', 'error'}."""
    from dgdm_tf.bench.timing import run_module_isolated
    return run_module_isolated("dgdm_tf.bench.mcem", spec, timeout)


if __name__ == "__main__":
    if sys.argv[1] == "steps":  # python -m dgdm_tf.bench.mcem steps '<json spec>'
        print(json.dumps(step_times(json.loads(sys.argv[2]))), flush=True)
    else:
        print(json.dumps(measure(json.loads(sys.argv[1]))), flush=True)
