"""The GPU check: every compiled sampler step of the smoke config on one GPU, against the CPU.

One command, for the day a GPU is lent (at most 8 minutes on one GPU)::

    python -m dgdm_tf.bench.gpu_check                # on a machine with an NVIDIA GPU
    python -m dgdm_tf.bench.gpu_check --cpu-only     # the dry run, on any machine

It does three things:

1. **Placement.** Every step of :func:`smoke_steps` (derived from the smoke config: the
   kernels :func:`dgdm_tf.bench.projection.plan` names for its rows, the top-down
   sampler's component steps of :func:`dgdm_tf.bench.sweeps.refine_steps`, and the batched
   pretraining's two steps where the config batches pretraining) is traced under
   ``tf.device(target)`` and run with soft device placement off, so an op the target
   cannot run raises instead of moving to the CPU. :func:`check_placement` reports a step
   as falling back where (a) an op of its graph (nested functions and loop bodies
   included) has no kernel registered for the target's device type and dtypes, (b) an op
   is pinned to another device, (c) the strict run raises, or (d) an output (other than
   int32, which TensorFlow keeps in host memory on a GPU) lands on another device.
2. **Timing.** Each step warmed up once (the trace), then the median seconds of a few
   calls on the target and on the CPU, its inputs copied to each device first.
3. **Projection.** Each projected config's rows (``--project``) by
   :func:`dgdm_tf.bench.projection.project`, its CPU kernels measured in this run at the
   config's shapes (:func:`dgdm_tf.bench.projection.measure_kernels`; a config of the
   smoke model takes the top-down kernels from part 2's CPU timings), the GPU's two
   figures measured where a GPU ran: R (the GPU's multiply-adds a second over the CPU's
   on the config's layer floors) and the step latency (the smoke steps' GPU seconds a
   sequential step, an upper bound); each figure is labelled ``measured`` or ``assumed``
   (``benchmark.projection.gpu_macs_per_s`` / ``gpu_step_latency_s`` of the config).
   With a GPU, a second estimate divides each stage's CPU hours by the smoke step's
   measured CPU/GPU ratio (assumed to carry to the config's shapes).

Without a GPU the command says so and exits 2; ``--cpu-only`` runs the three parts with
the CPU as the target (placement checked against ``/CPU:0``, timings CPU against CPU,
the GPU figures of the projection assumed) and lists the ops of each step with no GPU
kernel in this TensorFlow build's registry: the fall-backs a GPU run would meet.

Not covered: the compiled functions that are not sampler steps (the ridge start, the
block posteriors, the encoder, the SVM's EM, the label-share reader) and the stochastic
MCEM steps the smoke config does not run.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tensorflow as tf
import yaml

from dgdm_tf.bench import projection
from dgdm_tf.bench.exact_floor import layer_floor_macs
from dgdm_tf.bench.placement import check_placement, misplaced_outputs, same_device, strict_placement, to_device, traced
from dgdm_tf.bench.timing import machine_info, median_seconds
from dgdm_tf.bench.sweeps import pretrain_steps, refine_steps
from dgdm_tf.core.compiled import compiled
from dgdm_tf.core.layout import layer_geometries
from dgdm_tf.core.model import DeepModel
from dgdm_tf.core.ops import full_conv, full_conv_adjoint

GPU = "/GPU:0"
CPU = "/CPU:0"
#: dtypes TensorFlow keeps in host memory whichever device computes them
#: image shapes of the data kinds whose configs leave image_shape to the data
KIND_SHAPES = {"mnist": (28, 28, 1)}
DEFAULT_PROJECT = ("config/config.yaml:mnist", "config/paper.yaml:mnist:60000:10000")


def batched_step(layer: int) -> str:
    """The name of layer ``layer``'s (1-based) batched pretraining step (one batch's draws)."""
    return f"pretraining batch step, layer {layer}"


def batched_global_step(layer: int) -> str:
    """The name of layer ``layer``'s (1-based) batched pretraining global draws (D, gamma_w)."""
    return f"pretraining global step, layer {layer}"


@dataclass
class Step:
    """One compiled step ``fn(*args)`` over ``images`` images."""

    name: str
    fn: object
    args: tuple
    images: int


# ---------------------------------------------------------------------------------- steps
def smoke_steps(image_shape, ds: dict, hyper: dict | None, *, batch_size: int,
                pretrain_batch_size: int, svm_images: int, n_classes: int, seed: int) -> list[Step]:
    """Every compiled sampler step the dataset config ``ds`` runs, at ``image_shape`` on
    random inputs: the top-down steps of :func:`dgdm_tf.bench.sweeps.refine_steps` (whole
    sweeps and each conditional) at ``batch_size``, each layer's pretraining sweep
    (:func:`dgdm_tf.bench.sweeps.pretrain_steps`) and, where ``pretrain.batch_size`` is
    set, its batched step and global draws at ``pretrain_batch_size``, and the Bayesian
    SVM's Gibbs iteration on ``svm_images`` images of the top layer's width where the
    config's SVM is Gibbs. Named as :mod:`dgdm_tf.bench.projection` names its kernels."""
    layers = ds["model"]["layers"]
    r = refine_steps(tuple(image_shape), layers, batch_size=batch_size, seed=seed, hyper=hyper,
                     n_leapfrog=int(ds["refine"]["n_leapfrog"]),
                     power_iterations=int(ds["refine"]["power_iterations"]), n_classes=n_classes)
    steps = [Step(name, fn, (r.state, r.x), batch_size) for name, fn in r.steps.items()]
    batched = ds["pretrain"].get("batch_size") is not None
    for li, (g, fn, state, x) in enumerate(pretrain_steps(
            tuple(image_shape), layers, batch_size=pretrain_batch_size, seed=seed, hyper=hyper,
            scan=ds["pretrain"].get("scan", "random"))):
        steps.append(Step(projection.pretrain_kernel(li + 1), fn, (state, x), pretrain_batch_size))
        if batched:
            steps += _batched_steps(g, li, state, x, hyper, seed)
    if ds["svm"]["method"] == "gibbs":
        top = r.model.top
        steps.append(_svm_step(ds["svm"], top.hs * top.ws * top.k, n_classes, svm_images, seed))
    return steps


def _batched_steps(g, li: int, state, x, hyper, seed: int) -> list[Step]:
    """The batched pretraining's (dgdm_tf.pretrain.batched) two compiled steps of a layer."""
    from dgdm_tf.core.hyper import Hyper
    from dgdm_tf.pretrain import batched
    from dgdm_tf.pretrain.layer_model import LayerModel

    n = int(x.shape[0])
    model = LayerModel(g, Hyper.from_dict(hyper), top=(g.p == 1), n_images=n)
    local = {"z": tf.cast(state.z, tf.int8), "w": batched.compact_blocks(state.s),
             "log_theta": state.log_theta, "gamma_e": state.gamma_e}
    seeds = batched.sweep_seeds(tf.constant([seed, li], tf.int32))
    args = (local, x, state.d, state.gamma_w, seeds, tf.constant(0), tf.constant(np.inf, tf.float32))
    batch_fn = batched.make_batch_step(model)
    stats = batch_fn(*args)[2]  # the global step's inputs: one batch's statistics
    global_args = (state.d, stats.f_corr, stats.f_gram, stats.active, stats.sum_w2, seeds)
    return [Step(batched_step(li + 1), batch_fn, args, n),
            Step(batched_global_step(li + 1), batched.make_global_step(model), global_args, n)]


def _svm_step(svm: dict, width: int, n_classes: int, n: int, seed: int) -> Step:
    """One Gibbs scan of the Bayesian SVM (dgdm_tf.supervised.svm_classifier) on ``n``
    random images of ``width`` features, as :class:`BayesianSVM` builds it from ``svm``."""
    from dgdm_tf.core import random
    from dgdm_tf.supervised.svm_classifier import gibbs_sweep
    from dgdm_tf.supervised.svm_linalg import DTYPE, one_vs_all_targets

    laplace = svm.get("prior", "laplace") == "laplace"
    # built afresh (not the cached builder's): the check's traces would otherwise build the
    # cached one inside a graph, its constants with it, and spoil it for later fits
    fn = gibbs_sweep.__wrapped__(n_classes, width, laplace=laplace, sample_gamma=bool(svm.get("sample_gamma", False)),
                      bias_var=float(svm["bias_var"]), a_kappa=float(svm["a_kappa"]),
                      b_kappa=float(svm["b_kappa"]), a_gamma=float(svm["a_gamma"]),
                      b_gamma=float(svm["b_gamma"]))
    rng = np.random.default_rng(seed)
    design = np.concatenate([rng.normal(size=(n, width)), np.ones((n, 1))], axis=1)
    y = one_vs_all_targets(rng.integers(0, n_classes, n), n_classes)
    kappa = float(svm["kappa"])
    args = (tf.zeros((n_classes, width + 1), DTYPE),
            tf.fill([n_classes, width], tf.constant(1.0 / kappa if laplace else 1.0 / float(svm["ridge"]), DTYPE)),
            tf.fill([n_classes], tf.constant(kappa, DTYPE)), tf.constant(float(svm["gamma"]), DTYPE),
            tf.constant(1, tf.int64), random.salted(seed, "svm"), tf.constant(design, DTYPE),
            tf.constant(y, DTYPE))
    return Step(projection.SVM_ITERATION, fn, args, n)


# ------------------------------------------------------------------------------ placement
def time_step(fn, args, repeats: int) -> float:
    """Median seconds of ``repeats`` calls of a traced step (its warm-up done)."""
    return median_seconds(lambda: fn(*args), repeats)


def floor_rate(image_shape, layers, batch: int, device: str, repeats: int, seed: int) -> float:
    """Multiply-adds a second of every layer's convolution floor at ``batch`` on ``device``
    (the rate :func:`dgdm_tf.bench.projection.measure_kernels` measures on the CPU)."""
    rng = np.random.default_rng(seed)
    macs, secs = 0, 0.0
    for g in layer_geometries(tuple(image_shape), layers):
        fn = compiled(lambda s, d: full_conv_adjoint(full_conv(s, d), d))
        with tf.device(device):
            s = tf.constant(rng.normal(size=(batch, g.hs, g.ws, g.k)).astype(np.float32))
            d = tf.constant(rng.normal(size=(g.dh, g.dw, g.c, g.k)).astype(np.float32))
            fn(s, d)
            secs += median_seconds(lambda: fn(s, d), max(3, repeats))
        macs += layer_floor_macs(g, batch)
    return macs / secs


# ----------------------------------------------------------------------------- the check
def load_config(path: str, schema: str | None) -> dict:
    """A config file, its schema's defaults filled in where ``schema`` is given (as rule
    benchmark_projection does)."""
    with open(path) as f:
        cfg = yaml.safe_load(f)
    if schema:
        from snakemake.utils import validate

        validate(cfg, schema)
    return cfg


def parse_target(spec: str) -> dict:
    """``PATH:DATASET[:N_TRAIN:N_TEST[:HxWxC]]`` (empty fields: the dataset block's own)."""
    parts = spec.split(":")
    if len(parts) < 2 or len(parts) > 5:
        raise ValueError(f"--project takes PATH:DATASET[:N_TRAIN:N_TEST[:HxWxC]], got {spec!r}")
    out = {"config": parts[0], "dataset": parts[1]}
    for key, val in zip(("n_train", "n_test"), parts[2:4]):
        if val:
            out[key] = int(val)
    if len(parts) == 5 and parts[4]:
        out["image_shape"] = tuple(int(v) for v in parts[4].split("x"))
    return out


def image_shape_of(ds: dict, given=None) -> tuple[int, int, int]:
    shape = given or ds.get("image_shape") or KIND_SHAPES.get(ds.get("kind"))
    if not shape:
        raise ValueError(f"dataset of kind {ds.get('kind')!r} leaves image_shape to the data: "
                         "give it as PATH:DATASET:N_TRAIN:N_TEST:HxWxC")
    return tuple(int(v) for v in shape)


def smoke_dataset(cfg: dict, name: str | None) -> tuple[str, dict]:
    names = list(cfg["datasets"])
    name = name or names[0]
    if name not in cfg["datasets"]:
        raise ValueError(f"no dataset {name!r} in the smoke config (it has {names})")
    return name, cfg["datasets"][name]


def run_check(*, smoke: str, dataset: str | None, targets: list[dict], out_dir: str,
              cpu_only: bool, repeats: int, batch_size: int, pretrain_batch_size: int,
              svm_images: list[int], n_classes: int, seed: int, schema: str | None,
              budget_s: float, progress=print) -> dict:
    """The three parts (module docstring); writes ``gpu_check.json`` and ``gpu_check.md``
    under ``out_dir`` and returns what it wrote. Raises nothing on a misplaced step: the
    result's ``ok`` says."""
    from dgdm_tf.io.atomic import write_json, write_text

    t0 = time.perf_counter()
    target = CPU if cpu_only else GPU
    scfg = load_config(smoke, schema)
    name, ds = smoke_dataset(scfg, dataset)
    shape = image_shape_of(ds)
    progress(f"smoke config {smoke} ({name}, {shape}): target {target}"
             + (" (--cpu-only: a dry run, no GPU figure measured)" if cpu_only else ""))
    steps = smoke_steps(shape, ds, scfg.get("hyper"), batch_size=batch_size,
                        pretrain_batch_size=pretrain_batch_size, svm_images=int(svm_images[0]),
                        n_classes=n_classes, seed=seed)
    rows, placements = [], []
    for i, step in enumerate(steps):
        p, fn, args = check_placement(step, target)
        placements.append(p)
        row = {"step": step.name, "images": step.images, "ops": p.n_ops, "placement": "ok" if p.ok else "FALLBACK",
               "first_run_s": p.first_run_s,
               "problems": p.problems(), "no_gpu_kernel": p.no_gpu_kernel}
        if p.strict_error:
            row.update(target_s=None, cpu_s=None, speedup=None)
        else:
            # the trace is keyed on the device scope, its executable on the placement
            # setting: timed as the check ran it, whose run was the warm-up
            with strict_placement(), tf.device(target):
                row["target_s"] = time_step(fn, args, repeats)
            if same_device(target, CPU):  # the dry run: the same trace
                row["cpu_s"] = row["target_s"]
            else:
                cfn, cargs = traced(step), to_device(step.args, CPU)
                with strict_placement(), tf.device(CPU):
                    cfn(*cargs)  # warm-up: trace and build
                    row["cpu_s"] = time_step(cfn, cargs, repeats)
            row["speedup"] = row["cpu_s"] / row["target_s"]
        rows.append(row)
        progress(f"[{i + 1}/{len(steps)}] {step.name}: {row['placement']}, {p.n_ops} ops, "
                 + (f"{row['target_s']:.4g} s on {target}, {row['cpu_s']:.4g} s on {CPU}"
                    if row["target_s"] is not None else "not timed")
                 + f" ({time.perf_counter() - t0:.0f} s)")
        for msg in p.problems():
            progress(f"    {msg}")
    proj = project_targets(targets, rows, ds, shape, scfg.get("hyper"), cpu_only=cpu_only, seed=seed,
                           batch_size=batch_size, pretrain_batch_size=pretrain_batch_size,
                           svm_images=svm_images, n_classes=n_classes, schema=schema,
                           repeats=repeats, progress=progress)
    elapsed = time.perf_counter() - t0
    result = {"ok": all(p.ok for p in placements), "target": target, "cpu_only": cpu_only,
              "smoke_config": smoke, "dataset": name, "image_shape": list(shape),
              "batch_size": batch_size, "pretrain_batch_size": pretrain_batch_size,
              "repeats": repeats, "machine": machine_info(), "steps": rows, "projection": proj,
              "seconds": elapsed, "budget_s": budget_s, "over_budget": elapsed > budget_s}
    out = Path(out_dir)
    write_json(out / "gpu_check.json", result)
    md = markdown(result)
    write_text(out / "gpu_check.md", md)
    progress(f"wrote {out / 'gpu_check.json'} and {out / 'gpu_check.md'} after {elapsed:.0f} s"
             + (f" (over the {budget_s:.0f} s budget)" if elapsed > budget_s else ""))
    return result


def model_key(shape, ds: dict, hyper: dict | None) -> tuple:
    """What the top-down kernels' cost depends on: the image shape, the layers, the
    hyperparameters and refinement's leapfrog and power iterations."""
    return (tuple(shape), yaml.safe_dump(ds["model"]["layers"]), yaml.safe_dump(hyper),
            int(ds["refine"]["n_leapfrog"]), int(ds["refine"]["power_iterations"]))


def step_latency(rows: list[dict], q: dict[str, int]) -> tuple[float, dict[str, float]]:
    """Seconds a sequential step of the target: each projection kernel's seconds a pass
    over its ``q`` sequential steps, and their median (an upper bound: a small batch's
    arithmetic is in it too)."""
    per = {r["step"]: r["target_s"] / q[r["step"]] for r in rows
           if r["step"] in q and r.get("target_s") is not None}
    return (statistics.median(per.values()) if per else math.nan), per


def project_targets(targets, rows, smoke_ds, smoke_shape, smoke_hyper, *, cpu_only: bool, seed: int,
                    batch_size: int, pretrain_batch_size: int, svm_images, n_classes: int,
                    schema, repeats: int, progress=print) -> list[dict]:
    """Each target config's projection (module docstring, part 3), one dict per target
    with its GPU figures (each with ``source``: measured or assumed) and its stages."""
    smoke_model = DeepModel(smoke_shape, smoke_ds["model"]["layers"], smoke_hyper)
    lam_measured, lam_per = step_latency(rows, projection.sequential_steps(smoke_model))
    ratio = {r["step"]: r["speedup"] for r in rows if r.get("speedup")}
    out, cache = [], {}
    # a projected config of the smoke model takes the check's own CPU timings of the
    # top-down kernels (the same steps at the same batch) instead of tracing them again
    smoke_key = model_key(smoke_shape, smoke_ds, smoke_hyper)
    own = [{"step": r["step"], "seconds": r["cpu_s"]} for r in rows
           if r["step"] in projection.TOPDOWN_KERNELS and r.get("cpu_s") is not None]
    for t in targets:
        cfg = load_config(t["config"], schema)
        if t["dataset"] not in cfg["datasets"]:
            raise ValueError(f"--project names {t['dataset']!r}, which {t['config']} does not have "
                             f"(it has {sorted(cfg['datasets'])})")
        ds = cfg["datasets"][t["dataset"]]
        shape = image_shape_of(ds, t.get("image_shape"))
        n_train = int(t.get("n_train") or ds.get("n_train") or 0)
        n_test = int(t.get("n_test") or ds.get("n_test") or 0)
        if not (n_train and n_test):
            raise ValueError(f"{t['config']}:{t['dataset']} leaves n_train / n_test to the data: "
                             "give them as PATH:DATASET:N_TRAIN:N_TEST")
        layers, hyper = ds["model"]["layers"], cfg.get("hyper")
        key = model_key(shape, ds, hyper)
        if key not in cache:
            progress(f"CPU kernels of {t['config']}:{t['dataset']} at {shape} (batch {batch_size})")
            reuse = key == smoke_key and len(own) == len(projection.TOPDOWN_KERNELS)
            kernels, cpu_rate = projection.measure_kernels(
                shape, layers, batch_size=batch_size, pretrain_batch_size=pretrain_batch_size,
                svm_images=list(svm_images), n_classes=n_classes, sweeps=repeats, seed=seed,
                hyper=hyper, n_leapfrog=int(ds["refine"]["n_leapfrog"]),
                power_iterations=int(ds["refine"]["power_iterations"]),
                topdown_rows=own if reuse else None, topdown_from="this check's CPU timings",
                progress=progress)
            gpu_rate = None if cpu_only else floor_rate(shape, layers, pretrain_batch_size, GPU, repeats, seed)
            cache[key] = kernels, cpu_rate, gpu_rate
        kernels, cpu_rate, gpu_rate = cache[key]
        pcfg = cfg.get("benchmark", {}).get("projection", {})
        if gpu_rate is None:
            r_fig = {"value": float(pcfg["gpu_macs_per_s"]) / cpu_rate,
                     "source": f"assumed: benchmark.projection.gpu_macs_per_s of {t['config']} "
                               f"({float(pcfg['gpu_macs_per_s']):.3g}) over this CPU's measured floor rate"}
            lam_fig = {"value": float(pcfg["gpu_step_latency_s"]),
                       "source": f"assumed: benchmark.projection.gpu_step_latency_s of {t['config']}"}
        else:
            r_fig = {"value": gpu_rate / cpu_rate,
                     "source": "measured: this GPU's over this CPU's floor rate at the config's layers, "
                               f"batch {pretrain_batch_size}"}
            lam_fig = {"value": lam_measured, "per_kernel": lam_per,
                       "source": "measured: the smoke steps' GPU seconds a sequential step, their median "
                                 "(an upper bound)"}
        stages, left_out = projection.plan(ds, n_train, n_test)
        prow = projection.project(stages, kernels, gpu_speedup=r_fig["value"], step_latency_s=lam_fig["value"])
        gpu_source = ("measured" if gpu_rate is not None else "assumed")
        for r in prow:
            r["cpu_source"] = f"measured: this CPU, {kernels[r['kernel']]['measured_at']}"
            r["gpu_source"] = f"{gpu_source} (R and step latency {gpu_source})"
            s = ratio.get(r["kernel"])
            r["gpu_hours_by_ratio"] = None if (cpu_only or not s) else r["cpu_hours"] / s
            r["ratio_source"] = ("none: no GPU" if cpu_only else
                                 f"assumed: the smoke step's measured CPU/GPU ratio {s:.3g} carried to these shapes"
                                 if s else "none: no smoke step of this kernel")
        out.append({"config": t["config"], "dataset": t["dataset"], "n_train": n_train, "n_test": n_test,
                    "image_shape": list(shape), "gpu_speedup": r_fig, "step_latency_s": lam_fig,
                    "cpu_macs_per_s": cpu_rate, "gpu_macs_per_s": gpu_rate, "stages": prow,
                    "left_out": left_out,
                    "cpu_hours": sum(r["cpu_hours"] for r in prow),
                    "gpu_hours": sum(r["gpu_hours"] for r in prow),
                    "gpu_hours_source": gpu_source,
                    "gpu_hours_by_ratio": (None if any(r["gpu_hours_by_ratio"] is None for r in prow)
                                           else sum(r["gpu_hours_by_ratio"] for r in prow))})
        p = out[-1]
        progress(f"projection {t['config']}:{t['dataset']} ({n_train} / {n_test} images): "
                 f"{p['cpu_hours']:.1f} h on this CPU (measured kernels), {p['gpu_hours']:.1f} h on "
                 f"the GPU ({gpu_source}: R {r_fig['value']:.3g}, step latency {lam_fig['value']:.3g} s)")
    return out


def _fmt(v, spec=".4g") -> str:
    return "-" if v is None else format(v, spec)


def markdown(result: dict) -> str:
    """The check's tables: steps (placement and timing), then each projection."""
    dev = result["target"]
    lines = [f"# GPU check: {result['smoke_config']} ({result['dataset']}), target {dev}", ""]
    if result["cpu_only"]:
        lines += ["**Dry run (--cpu-only): no GPU figure is measured here.** The target is the CPU; "
                  "the projections' GPU figures are assumed.", ""]
    m = result["machine"]
    lines += [f"Machine: {m['cpu']}, {m['cores']} cores, GPU {m['gpu']}, TensorFlow {m['tensorflow']}. "
              f"Batch {result['batch_size']} (top-down), {result['pretrain_batch_size']} (pretraining); "
              f"median of {result['repeats']} calls after a traced warm-up; {result['seconds']:.0f} s in all.", "",
              f"| step | images | ops | placement | {dev} s | {CPU} s | CPU / target | ops without a GPU kernel |",
              "|---|---|---|---|---|---|---|---|"]
    for r in result["steps"]:
        lines.append(f"| {r['step']} | {r['images']} | {r['ops']} | {r['placement']} | {_fmt(r['target_s'])} | "
                     f"{_fmt(r['cpu_s'])} | {_fmt(r['speedup'], '.3g')} | {', '.join(r['no_gpu_kernel']) or 'none'} |")
    bad = [r for r in result["steps"] if r["problems"]]
    if bad:
        lines += ["", "Fall-backs:"] + [f"- {r['step']}: {msg}" for r in bad for msg in r["problems"]]
    for p in result["projection"]:
        lines += ["", f"## Projection: {p['config']}, {p['dataset']} ({p['n_train']} / {p['n_test']} images)", "",
                  f"- R (GPU / CPU arithmetic) = {p['gpu_speedup']['value']:.4g}: {p['gpu_speedup']['source']}",
                  f"- step latency = {p['step_latency_s']['value']:.4g} s: {p['step_latency_s']['source']}",
                  "- CPU kernels: measured on this CPU in this run", "",
                  "| row | stage | kernel | images | passes | CPU h (measured) | GPU h | GPU h source | bound "
                  "| GPU h by smoke ratio (assumed) |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for r in p["stages"]:
            lines.append(f"| {r['row']} | {r['stage']} | {r['kernel']} | {r['images']} | {r['passes']} | "
                         f"{r['cpu_hours']:.3g} | {r['gpu_hours']:.3g} | {p['gpu_hours_source']} | "
                         f"{r['gpu_bound']} | {_fmt(r['gpu_hours_by_ratio'], '.3g')} |")
        lines.append(f"| **all stages** | | | | | **{p['cpu_hours']:.3g}** | **{p['gpu_hours']:.3g}** | "
                     f"{p['gpu_hours_source']} | | {_fmt(p['gpu_hours_by_ratio'], '.3g')} |")
        if p["left_out"]:
            lines += ["", "Not projected: " + "; ".join(p["left_out"]) + "."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dgdm_tf.bench.gpu_check", description=__doc__.split("\n")[0])
    ap.add_argument("--smoke", default="config/smoke.yaml", help="the config whose steps are checked")
    ap.add_argument("--dataset", default=None, help="its dataset (default: its first)")
    ap.add_argument("--project", nargs="*", default=list(DEFAULT_PROJECT),
                    help="configs to project: PATH:DATASET[:N_TRAIN:N_TEST[:HxWxC]]")
    ap.add_argument("--out", default="results/benchmarks/gpu_check", help="folder of gpu_check.json / .md")
    ap.add_argument("--cpu-only", action="store_true", help="the dry run: the CPU as the target")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=4, help="images of the top-down steps")
    ap.add_argument("--pretrain-batch-size", type=int, default=8)
    ap.add_argument("--svm-images", type=int, nargs="+", default=[20, 400],
                    help="images of the SVM's step (the first) and of its fitted line (all)")
    ap.add_argument("--n-classes", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--schema", default="workflow/schemas/config.schema.yaml",
                    help="fills the configs' defaults ('' skips)")
    ap.add_argument("--budget-s", type=float, default=480.0, help="the time the run should stay within")
    a = ap.parse_args(argv)
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus and not a.cpu_only:
        print("gpu_check: no GPU visible to TensorFlow (tf.config.list_physical_devices('GPU') is empty): "
              "nothing measured. --cpu-only runs the dry run with the CPU as the target.", file=sys.stderr)
        return 2

    def progress(msg):
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)

    result = run_check(smoke=a.smoke, dataset=a.dataset, targets=[parse_target(s) for s in a.project],
                       out_dir=a.out, cpu_only=a.cpu_only, repeats=a.repeats, batch_size=a.batch_size,
                       pretrain_batch_size=a.pretrain_batch_size, svm_images=a.svm_images,
                       n_classes=a.n_classes, seed=a.seed, schema=a.schema or None, budget_s=a.budget_s,
                       progress=progress)
    print(markdown(result))
    if not result["ok"]:
        print("gpu_check: FAILED: a step falls back from " + result["target"], file=sys.stderr)
        return 1
    if result["over_budget"] and not a.cpu_only:
        print(f"gpu_check: over the {a.budget_s:.0f} s budget", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
