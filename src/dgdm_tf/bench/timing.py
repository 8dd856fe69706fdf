"""What the benchmarks share: the machine's description, median wall-clock timings and
runs in a process of their own.

Figures are wall-clock medians of repeated runs after a warm-up (the first call traces
and compiles), so they describe this machine, which :func:`machine_info` names.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time

from pathlib import Path

import numpy as np
import tensorflow as tf


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


def run_module_isolated(module: str, spec: dict, timeout: float) -> dict:
    """``python -m <module> '<json spec>'`` in a fresh process (so its peak RSS is its
    own) of this package; its last JSON line, or {'name', 'error'} where it failed
    (memory, time)."""
    # the child imports the package this process runs, not whichever one is installed
    src = str(Path(__file__).resolve().parents[2])  # src/, above dgdm_tf/bench/
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [src] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    try:
        r = subprocess.run([sys.executable, "-m", module, json.dumps(spec)],
                           capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"name": spec["name"], "error": f"over {timeout:.0f} s"}
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        tail = (r.stderr or "").strip().splitlines()[-1:] or [f"exit {r.returncode}"]
        return {"name": spec["name"], "error": tail[0][:300]}
    return json.loads(lines[-1])


def median_seconds(fn, repeats: int) -> float:
    """Median seconds of ``repeats`` calls of ``fn``, its results materialised."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        # materialise results so asynchronous execution is inside the timing
        tf.nest.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else t, out)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))
