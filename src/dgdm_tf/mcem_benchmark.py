"""Throughput and peak memory of stochastic MCEM training (one iteration: E-step, delta
gradient, RMSprop, beta's M-step) and of test-time inference (Algorithm 2) at a given
model shape, on random images; each shape in its own process so that its peak RSS is its
own:  python -m dgdm_tf.mcem_benchmark '<json spec>'  prints one JSON line.

The figures exclude tracing: the first iteration (and the first inference batch) are run
once before the clock starts.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time

import numpy as np


def measure(spec: dict) -> dict:
    """spec: name, image_shape, layers, batch_size, iterations, n_classes, infer_iterations,
    infer_burn_in, seed. Returns the spec's name with train/test images per second, the
    seconds per iteration and the process's peak RSS (MB)."""
    import tensorflow as tf

    from dgdm_tf import deep_mcem, deep_smcem
    from dgdm_tf.ops import avoid_grappler_addn_bug

    avoid_grappler_addn_bug()
    from dgdm_tf.deep_model import DeepModel

    shape = tuple(spec["image_shape"])
    b, its = int(spec["batch_size"]), int(spec["iterations"])
    rng = np.random.default_rng(int(spec.get("seed", 0)))
    n = b * (its + 1)
    x = rng.normal(size=(n, *shape)).astype(np.float32)
    y = rng.integers(0, int(spec["n_classes"]), size=n)
    model = DeepModel(shape, spec["layers"])
    svm = {"hyper": {}, "start": 0, "step_power": 0.7}
    kw = dict(n_total=n, seed=1, batch_size=b, data_id={"bench": spec["name"]}, sweeps=1,
              n_samples=1, n_classes=int(spec["n_classes"]), svm=svm, progress=None,
              jit_compile=bool(spec.get("jit_compile", False)))
    batches = deep_smcem.array_batches(x, y, b, seed=2)
    def note(msg):  # progress on stderr: a run cut short still shows how far it got
        print(f"[{time.strftime('%H:%M:%S')}] {spec['name']}: {msg}", file=sys.stderr, flush=True)

    kw["progress"] = note
    t0 = time.perf_counter()
    warm = deep_smcem.train(batches, shape, spec["layers"], iterations=1, **kw)
    note(f"first (traced) iteration: {time.perf_counter() - t0:.1f} s")
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    deep_smcem.train(batches, shape, spec["layers"], iterations=its + 1, **kw)
    total = time.perf_counter() - t0
    # the second call traced again (new tf.functions): its first iteration costs about
    # what the warm-up call cost; the rest are steady-state iterations
    steady = max(total - first, 1e-9) / its
    d = [tf.constant(v) for v in warm["D"]]
    xi = x[:b]
    ikw = dict(seed=3, burn_in=int(spec.get("infer_burn_in", 2)),
               iterations=int(spec.get("infer_iterations", 4)), batch_size=b, gamma_s=1.0,
               progress=None)
    note(f"{its} timed iterations: {steady:.1f} s each")
    cache: dict = {}
    deep_mcem.infer_map(xi, d, spec["layers"], fn_cache=cache, **ikw)  # trace
    note("inference traced")
    t0 = time.perf_counter()
    deep_mcem.infer_map(x[b: 3 * b] if n >= 3 * b else xi, d, spec["layers"], fn_cache=cache, **ikw)
    n_inf = min(2 * b, n - b) if n >= 3 * b else b
    infer = time.perf_counter() - t0
    return {"name": spec["name"], "image_shape": "x".join(map(str, shape)),
            "layers": len(spec["layers"]), "top_features": int(model.top.hs * model.top.ws * model.top.k),
            "batch_size": b, "iterations": its, "seconds_per_iteration": steady,
            "train_images_per_s": b / steady, "first_iteration_s": first,
            "infer_images_per_s": n_inf / infer,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
            "device": tf.config.list_physical_devices("GPU")[0].name
            if tf.config.list_physical_devices("GPU") else "CPU"}


def run_isolated(spec: dict, timeout: float = 3600) -> dict:
    """:func:`measure` in a fresh Python process (its own peak RSS); a failure (memory,
    time) is returned as {'name', 'error'}."""
    try:
        r = subprocess.run([sys.executable, "-m", "dgdm_tf.mcem_benchmark", json.dumps(spec)],
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"name": spec["name"], "error": f"over {timeout:.0f} s"}
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        tail = (r.stderr or "").strip().splitlines()[-1:] or [f"exit {r.returncode}"]
        return {"name": spec["name"], "error": tail[0][:300]}
    return json.loads(lines[-1])


if __name__ == "__main__":
    print(json.dumps(measure(json.loads(sys.argv[1]))), flush=True)
