"""One job on every core, or one job a core side by side: which gets more images through
the top-down sampler's steps on this machine?

Each heavy rule of the workflow runs with ``threads`` TensorFlow intra-op threads (the
config's ``threads``, else all cores given to Snakemake), so on 2 cores Snakemake runs one
2-thread job at a time; with ``--config threads=1`` it runs two 1-thread jobs at once.
This times the steps the image-scaling rules spend their time in
(``dgdm_tf.bench.sweeps.refine_steps``: the supervised chain's sweep, the test-time sweep
of the features rule, one Algorithm 2 iteration of the top-down features rules), at the
default config's MNIST model and the rules' batch sizes, in fresh processes:

- ``2 threads``: one process with ``--threads`` intra-op threads;
- ``1 thread``: one process with 1 thread;
- ``side by side``: ``--threads`` processes with 1 thread each, timed together (each
  process waits, after its warm-up, until all are warm).

Each figure is a median of ``--sweeps`` timed calls after one warm-up call; the
throughput (images/s) of the side-by-side setting is the sum over its processes. The
ratio side-by-side / 2-threads is the gain from running two 1-thread jobs at once, where
the DAG has two jobs to run.

    python experiments/scaling/threads_side_by_side.py --results <out>
    python experiments/scaling/threads_side_by_side.py --results <out> --steps supervised_sweep --batch 250
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pandas as pd  # noqa: E402

#: config/config.yaml's MNIST model
LAYERS = [{"dict_size": 8, "n_dict": 50, "pool": 3}, {"dict_size": 6, "n_dict": 200, "pool": 1}]
SMOKE_LAYERS = [{"dict_size": 3, "n_dict": 4, "pool": 2}, {"dict_size": 2, "n_dict": 3, "pool": 1}]
#: the step of each image-scaling rule, at the default config's batch of that rule
#: (supervised.chunk, features.batch_size (its test-time sweeps), topdown_features.alg2.batch_size)
STEPS = {"supervised_sweep": 250, "test_sweep": 2500, "mcem_iteration": 256}
#: the Bayesian SVM's fit (NumPy and TensorFlow), on ``--svm-features`` rows; not a default step
SVM_FIT = "svm_fit"


def svm_fit(spec: dict):
    """(fn, args): the Bayesian SVM (the svm rule's default options, signed view) fitted on
    the first ``spec['batch']`` training rows of ``spec['features']`` (a features rule's
    features.npz), or of random features when that is None."""
    import numpy as np

    from dgdm_tf.supervised.options import SvmOptions
    from dgdm_tf.supervised.svm_classifier import BayesianSVM

    n = spec["batch"]
    if spec.get("features"):
        d = np.load(spec["features"])
        f, y, n_classes = d["f_train"][:n].astype(np.float32), d["y_train"][:n], int(d["n_classes"])
    else:
        rng = np.random.default_rng(spec["seed"])
        f, y, n_classes = rng.normal(size=(n, 8)).astype(np.float32), rng.integers(0, 3, n), 3
    opts = SvmOptions(burn_in=spec.get("svm_sweeps", 100), collect=spec.get("svm_sweeps", 100))
    return (lambda: BayesianSVM(n_classes, opts, seed=spec["seed"]).fit(f, y)), ()


def worker(spec: dict) -> dict:
    """Time one step in this process at ``spec['threads']`` threads; wait at the barrier
    (``spec['barrier']``: a folder, ``spec['n']`` processes) between warm-up and timing."""
    os.environ["OMP_NUM_THREADS"] = str(spec["threads"])  # as the workflow's jobs set it
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(spec["threads"])
    tf.config.threading.set_inter_op_parallelism_threads(min(2, spec["threads"]))
    from dgdm_tf.bench.sweeps import refine_steps, step_state
    from dgdm_tf.bench.timing import median_seconds

    from dgdm_tf.bench import exact_floor

    if spec["step"] == SVM_FIT:
        fn, args = svm_fit(spec)
        fn(*args)  # warm-up
    else:
        names = {"supervised_sweep": exact_floor.SUPERVISED_SWEEP, "test_sweep": exact_floor.TEST_SWEEP,
                 "mcem_iteration": exact_floor.MCEM_ITERATION}
        r = refine_steps(tuple(spec["shape"]), spec["layers"], batch_size=spec["batch"], seed=spec["seed"])
        fn = r.steps[names[spec["step"]]]
        holder = {"st": step_state(fn(r.state, r.x))}  # warm-up: trace and compile
        holder["st"].resid.numpy()
    barrier = Path(spec["barrier"])
    (barrier / str(os.getpid())).touch()
    while len(list(barrier.iterdir())) < spec["n"]:
        time.sleep(0.05)
    cpu0 = time.process_time()

    def one():
        if spec["step"] == SVM_FIT:
            return fn(*args)
        holder["st"] = step_state(fn(holder["st"], r.x))
        return holder["st"].resid

    sec = median_seconds(one, spec["sweeps"])
    return {"seconds": sec, "cpu_s": time.process_time() - cpu0}


def run_setting(step: str, batch: int, *, threads: int, processes: int, shape, layers,
                sweeps: int, seed: int, **extra) -> dict:
    """``processes`` workers of ``threads`` threads each, timed together (``extra``: the
    SVM fit's ``features`` and ``svm_sweeps``)."""
    with tempfile.TemporaryDirectory() as barrier:
        spec = {"step": step, "batch": batch, "threads": threads, "n": processes, "shape": shape,
                "layers": layers, "sweeps": sweeps, "seed": seed, "barrier": barrier, **extra}
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [str(Path(__file__).resolve().parents[2] / "src")]
            + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
        procs = [subprocess.Popen([sys.executable, __file__, "--worker", json.dumps(spec)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
                 for _ in range(processes)]
        outs = []
        for p in procs:
            out, err = p.communicate()
            if p.returncode != 0:
                # TensorFlow's own log lines (E0000..., W0000...) are not the error
                lines = [ln for ln in err.strip().splitlines() if not ln[:5] in ("E0000", "W0000", "I0000")]
                raise RuntimeError(f"worker for {step} at batch {batch} failed "
                                   f"(exit {p.returncode}): {lines[-1:]}")
            outs.append(json.loads(out.strip().splitlines()[-1]))
    return {"step": step, "batch": batch, "threads": threads, "processes": processes,
            "seconds": max(o["seconds"] for o in outs),
            "images_per_s": sum(batch / o["seconds"] for o in outs),
            "cpu_per_wall": sum(o["cpu_s"] for o in outs) / (sweeps * max(o["seconds"] for o in outs))}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    if argv is None and len(sys.argv) > 2 and sys.argv[1] == "--worker":
        print(json.dumps(worker(json.loads(sys.argv[2]))))
        return None
    p.add_argument("--results", required=True, help="folder for threads_side_by_side.csv")
    p.add_argument("--steps", nargs="+", default=list(STEPS), choices=[*STEPS, SVM_FIT])
    p.add_argument("--svm-features", default=None,
                   help=f"{SVM_FIT}: a features rule's features.npz (default: random features)")
    p.add_argument("--svm-sweeps", type=int, default=100, help=f"{SVM_FIT}: burn-in and collection sweeps")
    p.add_argument("--batch", type=int, default=None, help="one batch for every step (default: each rule's)")
    p.add_argument("--threads", type=int, default=2, help="the cores: threads of the one job, "
                   "and 1-thread jobs side by side")
    p.add_argument("--sweeps", type=int, default=3, help="timed calls a measurement (median)")
    p.add_argument("--repeats", type=int, default=1, help="rounds over the three settings")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--smoke", action="store_true", help="a tiny model and batch, to check the probe runs")
    a = p.parse_args(argv)
    shape, layers = ([8, 8, 1], SMOKE_LAYERS) if a.smoke else ([28, 28, 1], LAYERS)
    rows = []
    for _ in range(a.repeats):
        for step in a.steps:
            batch = a.batch or (4 if a.smoke else STEPS.get(step, 5000))
            for threads, processes in ((a.threads, 1), (1, 1), (1, a.threads)):
                row = run_setting(step, batch, threads=threads, processes=processes, shape=shape,
                                  layers=layers, sweeps=a.sweeps, seed=a.seed,
                                  features=a.svm_features, svm_sweeps=a.svm_sweeps)
                row["load_1min"] = os.getloadavg()[0]
                rows.append(row)
                print(f"{step:17s} batch {batch:5d}  {processes} x {threads} thread(s): "
                      f"{row['seconds']:.3f} s a call, {row['images_per_s']:.1f} images/s, "
                      f"CPU/wall {row['cpu_per_wall']:.2f}", flush=True)
    df = pd.DataFrame(rows)
    out = Path(a.results)
    out.mkdir(parents=True, exist_ok=True)
    df.to_csv(out / "threads_side_by_side.csv", index=False)
    med = df.groupby(["step", "batch", "threads", "processes"])["images_per_s"].median()
    summary = []
    for (step, batch), g in med.groupby(level=[0, 1]):
        one_job = g.xs((a.threads, 1), level=[2, 3]).iloc[0]
        single = g.xs((1, 1), level=[2, 3]).iloc[0]
        side = g.xs((1, a.threads), level=[2, 3]).iloc[0]
        summary.append({"step": step, "batch": batch, f"one job, {a.threads} threads": one_job,
                        "one job, 1 thread": single, f"{a.threads} jobs side by side": side,
                        "side by side / one job": side / one_job,
                        f"{a.threads} threads / 1 thread": one_job / single})
    print(pd.DataFrame(summary).to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    return {"rows": rows, "summary": summary}


if __name__ == "__main__":
    main()
