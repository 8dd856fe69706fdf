"""Wall time of a config's rows on a cluster of nodes, projected from the kernels measured
on this machine (:mod:`dgdm_tf.bench.projection`) and the all-reduce measured on its
loopback.

A data-parallel chain splits its N images over W workers: each sweeps its images' local
variables, and the global conditionals draw from sums over images, all-reduced once per
product the conditional needs (:func:`reductions`). With ``cores_measured`` cores behind
a kernel's measured ``a + b N`` seconds a pass and ``n`` nodes of ``cores_per_node``
cores, a pass costs

    a + b N cores_measured / (n cores_per_node) + R (2 (n - 1) alpha + 2 (n - 1) / n B / beta)

where R all-reduces of B bytes in all cost the ring all-reduce's time, alpha the latency
of one exchange and beta the bandwidth (their sum of this machine's loopback, measured
with TensorFlow's collectives, and the network's, assumed). The per-image stages (test
features, MCEM iterations) split into jobs that exchange nothing. The core count scales
linearly: nodes run at this machine's measured rate per core.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from dataclasses import dataclass

import numpy as np

from dgdm_tf.bench.projection import (MCEM_ITERATION, REFINE_SWEEP, SUPERVISED_SWEEP,
                                      SVM_ITERATION, TEST_SWEEP, pretrain_kernel)

#: bytes of one all-reduced float (float32; the Fourier statistics are complex64: 2 floats)
FLOAT_BYTES = 4


@dataclass(frozen=True)
class Reductions:
    """What one pass of a kernel all-reduces across workers: ``count`` all-reduces of
    ``floats`` floats in all."""

    count: int
    floats: int

    @property
    def bytes(self) -> int:
        return self.floats * FLOAT_BYTES


def _d_statistics_floats(g) -> int:
    """D's exact conditional at a layer whose maps are drawn jointly (pretraining's layers,
    the top-down model's D[0]): the Fourier-domain sums F (hx, wf, K, C) and Q (hx, wf, K, K),
    complex, wf = wx // 2 + 1 (dgdm_tf.pretrain.dictionary.d_statistics)."""
    return 2 * g.hx * (g.wx // 2 + 1) * g.k * (g.c + g.k)


def _d_size(g) -> int:
    return g.dh * g.dw * g.c * g.k


def reductions(model, kernel: str, *, n_leapfrog: int, power_iterations: int, n_classes: int,
               svm_features: int | None = None) -> Reductions:
    """The all-reduces of one pass of ``kernel`` on ``model`` (a :class:`DeepModel`).

    Pretraining layer l: D[l]'s statistics, with its gamma and theta counts (K floats, one
    more all-reduce). Refinement and the supervised sweep: D[0]'s statistics; for each
    D[l >= 1] the HMC's products with the conditional's gradient or precision, each an
    all-reduce of D[l]: one Hutchinson probe, ``power_iterations`` power iterations, the
    start's gradient and ``n_leapfrog`` leapfrog gradients; theta's counts (K floats a
    layer) and the gamma sums (2 floats a layer). The supervised sweep adds the SVM's beta
    conditional: each class's precision and mean vector over the F + 1 features and bias.
    The SVM's Gibbs iteration alone: the same. Test sweeps and MCEM iterations: none.
    """
    if kernel in (TEST_SWEEP, MCEM_ITERATION):
        return Reductions(0, 0)
    f1 = (svm_features if svm_features is not None else model.top.hs * model.top.ws * model.top.k) + 1
    svm = Reductions(1, n_classes * (f1 * f1 + f1))
    if kernel == SVM_ITERATION:
        return svm
    for l, g in enumerate(model.geoms):
        if kernel == pretrain_kernel(l + 1):
            return Reductions(2, _d_statistics_floats(g) + g.k + 2)
    if kernel not in (REFINE_SWEEP, SUPERVISED_SWEEP):
        raise KeyError(f"no all-reduce count for kernel {kernel!r}")
    count, floats = 1, _d_statistics_floats(model.geoms[0])
    for g in model.geoms[1:]:
        products = 1 + power_iterations + 1 + n_leapfrog
        count += products
        floats += products * _d_size(g)
    count += 1
    floats += sum(g.k + 2 for g in model.geoms)
    if kernel == SUPERVISED_SWEEP:
        count += svm.count
        floats += svm.floats
    return Reductions(count, floats)


def ring_seconds(red: Reductions, nodes: int, *, latency_s: float, bytes_per_s: float) -> float:
    """Seconds of a pass's all-reduces over ``nodes`` workers by a ring: 2 (n - 1) exchanges
    of latency each, and 2 (n - 1) / n of the bytes through each link."""
    if nodes <= 1 or red.count == 0:
        return 0.0
    return red.count * 2 * (nodes - 1) * latency_s + 2 * (nodes - 1) / nodes * red.bytes / bytes_per_s


def project_nodes(rows: list[dict], kernels: dict[str, dict], reds: dict[str, Reductions], *,
                  nodes: list[int],
                  cores_per_node: int, cores_measured: int, latency_s: float,
                  bytes_per_s: float) -> list[dict]:
    """One row per (stage of :func:`dgdm_tf.bench.projection.project`'s ``rows``, node
    count): the stage's hours on ``n`` nodes (the module's formula; the kernel's ``a``, from
    ``kernels``, stays serial) and the share of it that is communication."""
    out = []
    for r in rows:
        red = reds[r["kernel"]]
        a = kernels[r["kernel"]]["a"]
        b_n = r["cpu_s_per_pass"] - a
        for n in nodes:
            compute = a + b_n * cores_measured / (n * cores_per_node)
            comm = ring_seconds(red, n, latency_s=latency_s, bytes_per_s=bytes_per_s)
            out.append({"dataset": r.get("dataset"), "row": r["row"], "stage": r["stage"],
                        "kernel": r["kernel"], "nodes": n, "passes": r["passes"],
                        "allreduces_per_pass": red.count, "mb_per_pass": red.bytes / 1e6,
                        "compute_s_per_pass": compute, "comm_s_per_pass": comm,
                        "hours": r["passes"] * (compute + comm) / 3600})
    return out


_WORKER = textwrap.dedent("""
    import json, os, sys, time
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    import numpy as np
    import tensorflow as tf
    sizes, repeats = json.loads(sys.argv[1]), int(sys.argv[2])
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    out = []
    for n in sizes:
        @tf.function
        def step(v):
            per_replica = strategy.run(tf.identity, args=(v,))
            return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)
        v = tf.ones([n], tf.float32)
        step(v)  # trace and warm up the collective
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            float(step(v)[0])
            times.append(time.perf_counter() - t0)
        out.append({"floats": n, "seconds": float(np.median(times))})
    print("RESULT " + json.dumps(out), flush=True)
""")


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def measure_allreduce(floats: list[int], *, workers: int = 2, repeats: int = 5,
                      timeout: float = 300) -> dict:
    """Time TensorFlow's all-reduce (MultiWorkerMirroredStrategy) of float32 vectors of
    each size in ``floats`` between ``workers`` processes on this machine's loopback (one
    CPU thread each): the latency is the smallest size's median, the bandwidth the bytes
    the largest size adds over it a second.
    Returns {'sizes': [{'floats', 'seconds'}], 'latency_s', 'bytes_per_s', 'workers'}."""
    if len(set(floats)) < 2:
        raise ValueError(f"need two sizes or more to fit latency and bandwidth, got {floats}")
    hosts = [f"localhost:{p}" for p in _free_ports(workers)]
    procs = []
    for i in range(workers):
        env = {**os.environ, "TF_CONFIG": json.dumps({"cluster": {"worker": hosts},
                                                      "task": {"type": "worker", "index": i}}),
               "CUDA_VISIBLE_DEVICES": "", "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1"}
        procs.append(subprocess.Popen([sys.executable, "-c", _WORKER, json.dumps(floats), str(repeats)],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = []
    try:
        for p in procs:
            so, se = p.communicate(timeout=timeout)
            if p.returncode != 0:
                raise RuntimeError(f"an all-reduce worker failed (exit {p.returncode}): {se[-2000:]}")
            outs.append(next(json.loads(line[7:]) for line in so.splitlines() if line.startswith("RESULT ")))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    # per size, the slower worker's median: an all-reduce ends when both have it
    sizes = [{"floats": a["floats"], "seconds": max(o[i]["seconds"] for o in outs)}
             for i, a in enumerate(outs[0])]
    # the smallest exchange is all latency; the largest adds its bytes' time (a least-squares
    # line through the sizes let one slow small exchange set a negative latency)
    lo, hi = min(sizes, key=lambda s: s["floats"]), max(sizes, key=lambda s: s["floats"])
    per_byte = max(hi["seconds"] - lo["seconds"], 0.0) / ((hi["floats"] - lo["floats"]) * FLOAT_BYTES)
    return {"sizes": sizes, "latency_s": lo["seconds"],
            "bytes_per_s": 1.0 / per_byte if per_byte > 0 else float("inf"), "workers": workers}


def combined_link(loopback: dict, *, network_latency_s: float, network_gbit_s: float) -> tuple[float, float]:
    """(latency, bytes a second) of an exchange between nodes: the software's cost as
    measured on the loopback, plus the network's (assumed) in series."""
    net_bps = network_gbit_s * 1e9 / 8
    lo_bps = loopback["bytes_per_s"]
    bps = 1.0 / (1.0 / net_bps + (0.0 if not np.isfinite(lo_bps) else 1.0 / lo_bps))
    return loopback["latency_s"] + network_latency_s, bps


#: the rule that runs each projected stage (by row and the stage's first words), and
#: whether that rule spreads over the nodes: the refinement as ``refine.workers``
#: data-parallel workers, the per-image rules as ``shards`` jobs. The pretraining, the
#: supervised chain and the SVM run as one job on one node.
STAGE_RULES = (
    ("(pretraining, shared)", "pretraining layer", "pretrain_layer", False),
    ("pretrained_svm", "top-down features", "features", True),
    ("unsupervised_svm", "refinement", "refine", True),
    ("unsupervised_svm", "top-down features", "topdown_features", True),
    ("supervised", "supervised chain", "supervised", False),
    ("supervised", "test features", "supervised_predict", True),
    (None, "Bayesian SVM", "svm", False),
)


def rule_runtimes(rows: list[dict], *, nodes: int, headroom: float = 1.5,
                  minimum: int = 10) -> dict[str, dict[str, int]]:
    """Each dataset's Slurm runtime (minutes) per rule from :func:`project_nodes`'s rows:
    ``headroom`` times the projected hours of the rule's stages, at ``nodes`` nodes for a
    rule that spreads over them (:data:`STAGE_RULES`) and at 1 node otherwise; one job per
    pretraining layer and per SVM row, so those take the largest of their stages."""
    hours: dict[tuple[str, str], float] = {}
    for r in rows:
        match = next(((rule, split) for row, stage, rule, split in STAGE_RULES
                      if (row is None or row == r["row"]) and r["stage"].startswith(stage)), None)
        if match is None or r["nodes"] != (nodes if match[1] else 1):
            continue
        key = (r["dataset"], match[0])
        if match[0] in ("pretrain_layer", "svm"):
            hours[key] = max(hours.get(key, 0.0), r["hours"])
        else:
            hours[key] = hours.get(key, 0.0) + r["hours"]
    out: dict[str, dict[str, int]] = {}
    for (ds, rule), h in sorted(hours.items()):
        out.setdefault(ds, {})[rule] = max(minimum, int(np.ceil(headroom * h * 60)))
    return out
