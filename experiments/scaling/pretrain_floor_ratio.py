"""The pretraining sweeps against their floors, with and without other processes on the
cores: what moves the ratio the benchmark_layers rule reports.

Times ``dgdm_tf.bench.sweeps.benchmark_pretrain_layers`` (the rule's own measurement: the
sweep the workflow runs, a median of ``--sweeps`` after a warm-up, beside one
generative + adjoint convolution pass of the same batch) for layer 1 (``--layers 1 2``:
and layer 2) of the default config's MNIST model, at each batch size, compilation mode
and scan order, while
``--contend`` busy processes (one Python loop each, started here and ended after each
measurement) compete for the cores; the settings alternate, ``--repeats`` rounds. Each
row also gives the 1-minute load average and this process's CPU seconds over the
measurement. docs/findings/pretrain_floor_ratio_load.md.

    python experiments/scaling/pretrain_floor_ratio.py --results <out>
    python experiments/scaling/pretrain_floor_ratio.py --results <out> --batches 256 2500 --contend 0 2
"""
from __future__ import annotations

import argparse
import itertools
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pandas as pd  # noqa: E402

from dgdm_tf.bench.sweeps import benchmark_pretrain_layers  # noqa: E402

#: config/config.yaml's MNIST model
LAYERS = [{"dict_size": 8, "n_dict": 50, "pool": 3}, {"dict_size": 6, "n_dict": 200, "pool": 1}]
SMOKE_LAYERS = [{"dict_size": 3, "n_dict": 4, "pool": 2}, {"dict_size": 2, "n_dict": 3, "pool": 1}]


def busy_processes(n: int) -> list[subprocess.Popen]:
    """``n`` processes that spin on one core each until ended."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def end(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.kill()
        p.wait()


def measure(shape, layers, *, batch, jit, scan, contend, sweeps, seed) -> list[dict]:
    """One row a layer: its sweep and floors at these settings, ``contend`` busy processes
    running throughout (every layer up to the last of ``layers`` is measured)."""
    procs = busy_processes(contend)
    try:
        time.sleep(1.0 if contend else 0.0)  # let them reach the cores
        cpu0 = time.process_time()
        rows = benchmark_pretrain_layers(shape, layers, batch_size=batch, sweeps=sweeps, seed=seed,
                                         jit_compile=jit, scan=scan)
        cpu = time.process_time() - cpu0
    finally:
        end(procs)
    return [{"layer": r["layer"], "batch_size": batch, "jit_compile": jit, "scan": scan,
             "contend": contend, "sweep_s": r["sweep_seconds"], "floor_s": r["floor_seconds"],
             "ratio_to_floor": r["ratio_to_floor"], "exact_floor_ms": r["exact_floor_ms"],
             "ratio_to_exact_floor": r["ratio_to_exact_floor"], "load_1min": r["load_1min"],
             "process_cpu_s": cpu} for r in rows]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--results", required=True, help="folder for pretrain_floor_ratio.csv")
    p.add_argument("--layers", type=int, nargs="+", default=[1], choices=[1, 2])
    p.add_argument("--batches", type=int, nargs="+", default=[256])
    p.add_argument("--jit", choices=["graph", "xla", "both"], default="both")
    p.add_argument("--scan", choices=["random", "fixed", "both"], default="both")
    p.add_argument("--contend", type=int, nargs="+", default=[0, 2],
                   help="busy processes beside the measurement, one setting each")
    p.add_argument("--repeats", type=int, default=2, help="rounds over every setting")
    p.add_argument("--sweeps", type=int, default=3, help="timed sweeps a measurement (median)")
    p.add_argument("--smoke", action="store_true", help="a tiny layer, to check the probe runs")
    a = p.parse_args(argv)
    shape, layers = (28, 28, 1), LAYERS
    if a.smoke:
        shape, layers = (12, 12, 1), SMOKE_LAYERS
        a.batches, a.jit, a.scan, a.contend, a.repeats, a.sweeps = [4], "graph", "both", [0, 1], 1, 1
    jits = {"graph": [False], "xla": [True], "both": [False, True]}[a.jit]
    scans = ["random", "fixed"] if a.scan == "both" else [a.scan]
    rows = []
    for rep in range(a.repeats):
        for contend, batch, jit, scan in itertools.product(a.contend, a.batches, jits, scans):
            for row in measure(shape, layers[: max(a.layers)], batch=batch, jit=jit, scan=scan,
                               contend=contend, sweeps=a.sweeps, seed=0):
                if row["layer"] in a.layers:
                    row = {"round": rep, **row}
                    print(row, flush=True)
                    rows.append(row)
    df = pd.DataFrame(rows)
    out = Path(a.results)
    out.mkdir(parents=True, exist_ok=True)
    df.to_csv(out / "pretrain_floor_ratio.csv", index=False)
    keys = ["layer", "contend", "batch_size", "jit_compile", "scan"]
    summary = df.groupby(keys)[["sweep_s", "floor_s", "ratio_to_floor", "ratio_to_exact_floor",
                                "load_1min"]].median().reset_index()
    print(summary.to_string(index=False))
    return {"rows": rows, "summary": summary}


if __name__ == "__main__":
    main()
