"""Wall time of a config's rows, projected from kernels measured at its shapes.

Each row of a dataset runs stages (:func:`plan`): a stage runs one kernel over N images
for P passes (sweeps, MCEM iterations, SVM iterations), as the config sets them. A
kernel's measured cost (:func:`measure_kernels`) is ``a + b N`` seconds a pass, with
``a = 0`` for the samplers (their work is per image) and both fitted for the Bayesian
SVM's Gibbs iteration (C F^3 per pass, C N F^2 per image). On the machine measured

    T_cpu = sum_stages P (a + b N)

On a device R times faster at arithmetic (``R = gpu_macs_per_s`` over the CPU's rate,
measured on the layers' floor convolutions) whose sequential steps cost ``lam`` seconds each,
with q the kernel's sequential steps a pass (a Gibbs step per (colour, map), one per map
for the dictionaries) and B the stage's batch:

    T_gpu = sum_stages P max((a + b N) / R, ceil(N / B) q lam)

Both GPU figures are assumptions of the config, not measurements (no GPU here).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# the top-down kernels keep the names benchmark_refine gives them
from dgdm_tf.bench.exact_floor import layer_floor_macs
from dgdm_tf.bench.sweeps import (MCEM_ITERATION, REFINE_SWEEP, SUPERVISED_SWEEP, TEST_SWEEP,
                                  benchmark_pretrain_layers, benchmark_refine)
from dgdm_tf.core.model import DeepModel
from dgdm_tf.supervised.options import SvmOptions
from dgdm_tf.supervised.svm_classifier import BayesianSVM

SVM_ITERATION = "SVM Gibbs iteration"
TOPDOWN_KERNELS = (TEST_SWEEP, REFINE_SWEEP, SUPERVISED_SWEEP, MCEM_ITERATION)


def pretrain_kernel(layer: int) -> str:
    """The name of layer ``layer``'s (1-based) pretraining sweep."""
    return f"pretraining sweep, layer {layer}"


@dataclass(frozen=True)
class Stage:
    """One kernel run over ``images`` images for ``passes`` passes, in batches of ``batch``."""

    row: str
    stage: str
    kernel: str
    images: int
    passes: int
    batch: int


def _sweeps(c: dict) -> int:
    """burn-in plus every collected sweep (``thin`` of them a kept draw)."""
    return int(c["burn_in"]) + int(c["collect"]) * int(c.get("thin", 1))


def plan(ds: dict, n_train: int, n_test: int) -> tuple[list[Stage], list[str]]:
    """The stages of a dataset config ``ds``'s methods on ``n_train`` / ``n_test`` images,
    and the steps left out (one pass over the data, EM solvers, the CNN: minutes where the
    chains take hours; their own benchmarks time them).

    A stage two rows share (pretraining, refinement) is listed once, under the first row.
    """
    layers = ds["model"]["layers"]
    pre = ds["pretrain"]
    n_pre = int(pre.get("n_images") or n_train)
    stages = [Stage("(pretraining, shared)", f"pretraining layer {l + 1}", pretrain_kernel(l + 1),
                    n_pre, _sweeps(pre), int(pre.get("batch_size") or n_pre))
              for l in range(len(layers))]
    left_out: list[str] = []
    refined = False

    def svm(row: str) -> None:
        s = ds["svm"]
        if s["method"] != "gibbs":
            left_out.append(f"{row}: the SVM by EM")
            return
        stages.append(Stage(row, "Bayesian SVM (Gibbs)", SVM_ITERATION, n_train, _sweeps(s), n_train))

    def refine(row: str) -> None:
        nonlocal refined
        if not refined:
            r = ds["refine"]
            n = int(r.get("n_images") or n_train)
            stages.append(Stage(row, "refinement", REFINE_SWEEP, n, _sweeps(r), int(r.get("chunk") or n)))
            refined = True

    def topdown_features(row: str, images: int) -> None:
        """The top layer read out as block ``topdown_features`` says (the features rule
        reads it for pretrained_svm too): Algorithm 2 (its burn-in sweeps, then at most
        ``max_iterations`` MCEM iterations: images that meet ``tol`` stop earlier, so this
        is an upper bound) or the chains' sweeps."""
        t = ds["topdown_features"]
        if t.get("route", "chain") == "alg2":
            a = t["alg2"]
            stages.append(Stage(row, "top-down features (train + test): sweeps", TEST_SWEEP,
                                images, int(a["burn_in"]), int(a["batch_size"])))
            stages.append(Stage(row, "top-down features (train + test): MCEM iterations, at most",
                                MCEM_ITERATION, images, int(a["max_iterations"]), int(a["batch_size"])))
        else:
            stages.append(Stage(row, "top-down features (train + test)", TEST_SWEEP, images,
                                int(t.get("chains", 1)) * _sweeps(t), int(t["batch_size"])))

    for method in ds["methods"]:
        if method == "pretrained_svm":
            f = ds["features"]
            if f["route"] == "topdown":
                topdown_features(method, n_train + n_test)
            else:
                left_out.append(f"{method}: layer-wise features (the pretraining sweeps without D)")
            svm(method)
        elif method == "pretrained_block_svm":
            left_out.append(f"{method}: block posteriors (one pass)")
            svm(method)
        elif method == "encoder_svm":
            left_out.append(f"{method}: the encoder (one pass) and its SVM by EM")
        elif method == "unsupervised_svm":
            refine(method)
            f = ds["topdown_features"]
            topdown_features(method, int(f.get("n_train") or n_train) + int(f.get("n_test") or n_test))
            svm(method)
        elif method == "supervised":
            s = ds["supervised"]
            if s.get("start_from") == "refined":
                refine(method)
            stages.append(Stage(method, "supervised chain", SUPERVISED_SWEEP,
                                int(s.get("n_train") or n_train), _sweeps(s), int(s.get("chunk") or n_train)))
            p = s["predict"]
            n_models = min(int(p["models"]), int(s["collect"]))
            # the test images, and the training images re-inferred by the test route
            nt = int(s.get("n_test") or n_test) + int(p.get("mismatch_images", 0))
            stages.append(Stage(method, f"test features, {n_models} models: sweeps", TEST_SWEEP, nt,
                                n_models * (int(p["burn_in"]) if p["features"] == "mcem"
                                            else int(p.get("chains", 1)) * _sweeps(p)),
                                int(p["batch_size"])))
            if p["features"] == "mcem":
                stages.append(Stage(method, f"test features, {n_models} models: MCEM iterations",
                                    MCEM_ITERATION, nt, n_models * int(p["iterations"]),
                                    int(p["batch_size"])))
        elif method == "cnn":
            left_out.append("cnn: the baseline (benchmark_cnn times its steps)")
        else:
            left_out.append(f"{method}: not projected")
    return stages, left_out


def sequential_steps(model) -> dict[str, int]:
    """Sequential steps a pass of each kernel takes on a ``DeepModel``: one per (colour,
    map) of every layer's Gibbs step, plus one per map for the dictionaries' draws."""
    gibbs = sum(c.g_h * c.g_w * g.k for c, g in zip(model.colourings, model.geoms))
    maps = sum(g.k for g in model.geoms)
    steps = {TEST_SWEEP: gibbs, MCEM_ITERATION: gibbs, REFINE_SWEEP: gibbs + maps,
             SUPERVISED_SWEEP: gibbs + maps, SVM_ITERATION: 1}
    for l, g in enumerate(model.geoms):
        steps[pretrain_kernel(l + 1)] = g.gh * g.gw * g.k + g.k
    return steps


def project(stages: list[Stage], kernels: dict[str, dict], *, gpu_speedup: float,
            step_latency_s: float) -> list[dict]:
    """One row per stage with its projected hours on the machine measured and on the
    assumed GPU (the module's formulas). ``kernels[name]``: ``a`` and ``b`` (seconds a
    pass, per pass and per image) and ``q`` (sequential steps a pass)."""
    if not gpu_speedup > 0 or not step_latency_s >= 0:
        raise ValueError(f"need gpu_speedup > 0 and step_latency_s >= 0, got {gpu_speedup}, {step_latency_s}")
    rows = []
    for s in stages:
        if s.kernel not in kernels:
            raise KeyError(f"no measurement of kernel {s.kernel!r} (stage {s.stage!r} of {s.row})")
        k = kernels[s.kernel]
        per_pass = k["a"] + k["b"] * s.images
        arith = per_pass / gpu_speedup
        latency = math.ceil(s.images / max(1, s.batch)) * k["q"] * step_latency_s
        rows.append({"row": s.row, "stage": s.stage, "kernel": s.kernel, "images": s.images,
                     "passes": s.passes, "batch": s.batch,
                     "cpu_s_per_pass": per_pass, "cpu_hours": s.passes * per_pass / 3600,
                     "gpu_hours": s.passes * max(arith, latency) / 3600,
                     "gpu_bound": "arithmetic" if arith >= latency else "sequential steps"})
    return rows


def fit_linear(n: list[int], seconds: list[float]) -> tuple[float, float]:
    """``(a, b)`` of ``seconds = a + b n`` by least squares, neither below 0. Where the
    timings' noise hides any growth (a fitted slope below 0, at small sizes), the dearest
    timing as a constant: a cost can be flat in n, never falling."""
    b, a = np.polyfit(np.asarray(n, float), np.asarray(seconds, float), 1)
    if b < 0:
        return float(max(seconds)), 0.0
    return max(0.0, float(a)), float(b)


def measure_kernels(image_shape: tuple[int, int, int], layers: list[dict], *, batch_size: int,
                    pretrain_batch_size: int, svm_images: list[int], n_classes: int, sweeps: int,
                    seed: int, hyper: dict | None = None, n_leapfrog: int, power_iterations: int,
                    topdown_rows: list[dict] | None = None, topdown_from: str = "benchmark_refine's",
                    progress=print) -> tuple[dict[str, dict], float]:
    """Every kernel :func:`plan` names, measured on random inputs at these shapes.

    The top-down kernels at ``batch_size`` (:func:`dgdm_tf.bench.sweeps.benchmark_refine`),
    the pretraining sweeps at ``pretrain_batch_size``
    (:func:`dgdm_tf.bench.sweeps.benchmark_pretrain_layers`), the SVM's Gibbs iteration on
    random features of the top layer's width at each of ``svm_images`` (a line fitted
    through them). ``topdown_rows``: those four kernels' rows as
    :func:`dgdm_tf.bench.sweeps.benchmark_refine` already measured them at these shapes,
    settings and ``batch_size`` (the workflow's ``benchmark_refine`` rule, or the GPU
    check's CPU timings), taken in place of measuring them again and labelled
    ``topdown_from``. Returns ``(kernels, cpu_macs_per_s)``: the latter the CPU's
    multiply-adds a second on the layers' floors at ``pretrain_batch_size``.
    """
    if len(set(svm_images)) < 2:
        raise ValueError(f"svm_images needs two sizes or more to fit a + b N, got {svm_images}")
    model = DeepModel(tuple(image_shape), layers, hyper)
    q = sequential_steps(model)
    kernels: dict[str, dict] = {}
    if topdown_rows is not None:
        refine_rows = [r for r in topdown_rows if r["step"] in TOPDOWN_KERNELS]
        if sorted(r["step"] for r in refine_rows) != sorted(TOPDOWN_KERNELS):
            raise ValueError(f"topdown_rows has {sorted(r['step'] for r in refine_rows)}, not one row of "
                             f"each of {sorted(TOPDOWN_KERNELS)}")
        where = f"batch {batch_size}, {topdown_from}"
        progress(f"top-down kernels at {image_shape}, batch {batch_size}: {topdown_from}")
    else:
        progress(f"top-down kernels at {image_shape}, batch {batch_size}")
        refine_rows = benchmark_refine(image_shape, layers, batch_size=batch_size, sweeps=sweeps, seed=seed,
                                       hyper=hyper, n_leapfrog=n_leapfrog, power_iterations=power_iterations,
                                       only=TOPDOWN_KERNELS)
        where = f"batch {batch_size}"
    for r in refine_rows:
        kernels[r["step"]] = {"a": 0.0, "b": float(r["seconds"]) / batch_size, "q": q[r["step"]],
                              "measured_at": where}
    progress(f"pretraining sweeps at {image_shape}, batch {pretrain_batch_size}")
    floor_macs_done, floor_s = 0, 0.0
    for r in benchmark_pretrain_layers(image_shape, layers, batch_size=pretrain_batch_size,
                                       sweeps=sweeps, seed=seed, hyper=hyper):
        # the CPU's rate from every layer's floor at this batch: the top-down floor at a
        # small batch lasts milliseconds and gave rates 1.8x apart from run to run
        floor_macs_done += layer_floor_macs(model.geoms[r["layer"] - 1], pretrain_batch_size)
        floor_s += r["floor_seconds"]
        name = pretrain_kernel(r["layer"])
        kernels[name] = {"a": 0.0, "b": r["sweep_seconds"] / pretrain_batch_size, "q": q[name],
                         "measured_at": f"batch {pretrain_batch_size}"}
    width = model.top.hs * model.top.ws * model.top.k
    rng = np.random.default_rng(seed)
    per_iteration = []
    for n in svm_images:
        progress(f"SVM Gibbs iterations on {n} x {width} features")
        svm = BayesianSVM(n_classes, SvmOptions(method="gibbs", burn_in=0, collect=max(3, sweeps)),
                          seed=seed)
        svm.fit(rng.normal(size=(n, width)).astype(np.float32), rng.integers(0, n_classes, n))
        per_iteration.append(float(np.median([t["seconds"] for t in svm.trace[1:]])))
    a, b = fit_linear(list(svm_images), per_iteration)
    kernels[SVM_ITERATION] = {"a": a, "b": b, "q": q[SVM_ITERATION],
                              "measured_at": "images " + "/".join(str(n) for n in svm_images)}
    return kernels, floor_macs_done / floor_s
