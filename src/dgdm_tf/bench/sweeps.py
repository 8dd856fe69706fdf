"""Throughput benchmarks: Gibbs sweeps against the floor of one generative + adjoint pass.

The floor (SPEC sec. 3): for a batch, one ``full_conv`` of every map and its adjoint --
the least work any sampler that touches every feature-map entry must do per sweep.
Figures are wall-clock medians of repeated runs after a warm-up (the first call traces
and compiles), so they describe this machine, which :func:`machine_info` names.

Also here: the CNN baseline's training-step and inference throughput
(:func:`benchmark_cnn`), how the cost of a pretraining sweep and of a CNN training step
grows with the batch size and the image side (:func:`benchmark_scaling`), and how long
the CNN needs to match a dgdm run's test error (:func:`time_to_accuracy`).
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
import pandas as pd
import tensorflow as tf

from dgdm_tf.baselines.cnn import build_cnn, conv_shapes
from dgdm_tf.core.compiled import compiled
from dgdm_tf.core.layout import layer_geometries
from dgdm_tf.core.ops import full_conv, full_conv_adjoint
from dgdm_tf.pretrain.kernel import Hyper, LayerModel, init_state, make_sweep_fn
from dgdm_tf.core.memory import current_rss_mb, peak_rss_mb, reset_peak_rss
from dgdm_tf.report.tables import format_seconds


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
    src = str(Path(__file__).resolve().parents[1])
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
        floor_fn = compiled(lambda s, d: full_conv_adjoint(full_conv(s, d), d))
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


# ------------------------------------------------------------------ the CNN baseline
#: columns of :func:`benchmark_cnn`'s rows
CNN_COLUMNS = ("benchmark", "batch_size", "input_shape", "steps", "step_seconds",
               "images_per_s", "rss_before_mb", "peak_rss_mb", "peak_rss_is_per_row")


def _random_batch(rng: np.random.Generator, batch_size: int, image_shape, n_classes: int):
    x = rng.random((batch_size, *image_shape), dtype=np.float32)
    y = rng.integers(0, n_classes, size=batch_size).astype(np.int64)
    return x, y


def _time_cnn(model, x, y, steps: int,
              kinds: tuple[str, ...] = ("cnn_train_step", "cnn_inference")) -> dict:
    """kind -> (median seconds, RSS before, peak RSS MB, whether the peak mark was reset
    first) of one training step and / or one inference pass over (x, y), each after one
    warm-up call (tracing)."""
    fns = {"cnn_train_step": lambda: model.train_on_batch(x, y),
           "cnn_inference": lambda: model.predict_on_batch(x)}
    out = {}
    for kind in kinds:
        fn = fns[kind]
        before, per_row = current_rss_mb(), reset_peak_rss()
        fn()  # warm-up: trace the step for this batch shape
        out[kind] = (_median_seconds(fn, steps), before, peak_rss_mb(), per_row)
    return out


def benchmark_cnn(image_shape: tuple[int, ...], layers: list[dict], n_classes: int, *,
                  batch_sizes: list[int], steps: int, seed: int, fc_units: int = 1024,
                  dropout: float = 0.5, learning_rate: float = 1e-3) -> list[dict]:
    """The CNN baseline (:mod:`dgdm_tf.baselines.cnn`) on random images of ``image_shape``: seconds
    and images/s of one training step (forward, backward, Adam update) and of inference,
    at each batch size, with the resident memory before and at the peak of each
    measurement (``peak_rss_is_per_row``: whether the peak mark could be reset before
    it; else it is the process's peak so far). Two rows per batch size, keys
    :data:`CNN_COLUMNS`."""
    tf.keras.utils.set_random_seed(int(seed))
    model = build_cnn(image_shape, layers, n_classes, fc_units=fc_units, dropout=dropout,
                      learning_rate=learning_rate)
    rng = np.random.default_rng(seed)
    rows = []
    for b in batch_sizes:
        x, y = _random_batch(rng, int(b), image_shape, n_classes)
        for kind, (sec, before, peak, per_row) in _time_cnn(model, x, y, steps).items():
            rows.append({"benchmark": kind, "batch_size": int(b),
                         "input_shape": "x".join(str(s) for s in image_shape),
                         "steps": int(steps), "step_seconds": sec,
                         "images_per_s": int(b) / sec, "rss_before_mb": before,
                         "peak_rss_mb": peak, "peak_rss_is_per_row": per_row})
    return rows


# -------------------------------------------------------- how cost grows with work
#: columns of :func:`benchmark_scaling`'s rows
SCALING_COLUMNS = ("benchmark", "sweep", "batch_size", "image_side", "input_shape",
                   "n_dict", "seconds", "images_per_s", "megapixels_per_s",
                   "ratio_to_floor", "rss_before_mb", "peak_rss_mb", "note")


def scaled_shape(image_shape: tuple[int, ...], factor: float) -> tuple[int, ...]:
    """``image_shape`` (H, W, C) with H and W multiplied by ``factor`` (rounded)."""
    h, w, c = image_shape
    return (max(1, int(round(h * factor))), max(1, int(round(w * factor))), c)


def benchmark_scaling(image_shape: tuple[int, int, int], layers: list[dict], n_classes: int,
                      *, batch_sizes: list[int], side_factors: list[float],
                      side_batch_size: int, sweeps: int, steps: int, seed: int,
                      k_factors: list[float] = (), hyper: dict | None = None,
                      fc_units: int = 1024, dropout: float = 0.5,
                      learning_rate: float = 1e-3) -> list[dict]:
    """Throughput as the work grows, for two kernels: one pretraining sweep of the bottom
    layer (``layers[0]``, graph mode, :func:`benchmark_pretrain_layers`) and one CNN
    training step (:func:`benchmark_cnn`'s model, all ``layers``).

    Three series each: ``sweep == "batch_size"`` (every batch size at ``image_shape``),
    ``sweep == "image_side"`` (H and W times each factor, at ``side_batch_size``) and
    ``sweep == "n_dict"`` (every layer's K times each of ``k_factors``, at
    ``side_batch_size``); a point two series share is measured once. The pretraining
    rows also give the sweep's ratio to its floor (one generative + adjoint pass at the
    same K). Rows have the keys
    :data:`SCALING_COLUMNS`; a shape the CNN's layers do not fit (a filter larger than
    its input) gets NaN figures and says so in ``note`` instead of failing.
    """
    image_shape = tuple(int(s) for s in image_shape)
    points = [("batch_size", int(b), 1.0, 1.0) for b in batch_sizes]
    points += [("image_side", int(side_batch_size), float(f), 1.0) for f in side_factors]
    points += [("n_dict", int(side_batch_size), 1.0, float(f)) for f in k_factors]
    rng = np.random.default_rng(seed)
    cache: dict[tuple, dict] = {}
    rows = []
    for kind in ("pretrain_sweep", "cnn_train_step"):
        for series, b, factor, k_factor in points:
            shape = scaled_shape(image_shape, factor)
            lays = [{**lay, "n_dict": max(1, int(round(lay["n_dict"] * k_factor)))}
                    for lay in layers]
            key = (kind, b, shape, lays[0]["n_dict"])
            if key not in cache:
                cache[key] = _scaling_point(kind, shape, b, lays, n_classes, rng,
                                            sweeps=sweeps, steps=steps, seed=seed,
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
                         "rss_before_mb": pt["rss_before_mb"], "peak_rss_mb": pt["peak_rss_mb"],
                         "note": pt["note"]})
    return rows


def _scaling_point(kind, shape, b, layers, n_classes, rng, *, sweeps, steps, seed, hyper,
                   fc_units, dropout, learning_rate) -> dict:
    """seconds, peak RSS and a note of one point of :func:`benchmark_scaling`."""
    nan = float("nan")
    try:
        conv_shapes(shape, layers if kind == "cnn_train_step" else layers[:1])
    except ValueError as e:
        return {"seconds": nan, "rss_before_mb": nan, "peak_rss_mb": nan,
                "note": f"skipped: {e}"}
    if kind == "pretrain_sweep":
        before, per_row = current_rss_mb(), reset_peak_rss()
        r = benchmark_pretrain_layers(shape, [dict(layers[0])], batch_size=b, sweeps=sweeps,
                                      seed=seed, hyper=hyper)[0]
        return {"seconds": r["sweep_seconds"], "rss_before_mb": before,
                "peak_rss_mb": r["peak_rss_mb"], "ratio_to_floor": r["ratio_to_floor"],
                "note": "" if per_row else "peak RSS of the process so far"}
    tf.keras.utils.set_random_seed(int(seed))
    model = build_cnn(shape, layers, n_classes, fc_units=fc_units, dropout=dropout,
                      learning_rate=learning_rate)
    x, y = _random_batch(rng, b, shape, n_classes)
    sec, before, peak, per_row = _time_cnn(model, x, y, steps,
                                           ("cnn_train_step",))["cnn_train_step"]
    return {"seconds": sec, "rss_before_mb": before, "peak_rss_mb": peak,
            "note": "" if per_row else "peak RSS of the process so far"}


# ------------------------------------------------------------ time to accuracy
def time_to_accuracy(dgdm: dict, cnn: dict) -> dict:
    """How long the CNN needs to match a dgdm run.

    ``dgdm``, ``cnn``: the runs' metrics.json (``test_error_pct``, ``wall_seconds``; the
    CNN's per-epoch ``curve`` with ``seconds_cumulative`` and ``test_error_pct``). The
    CNN's time is its training time up to the first epoch whose test error is the dgdm
    run's or better (``cnn_reached``), or up to its best epoch if none is.
    ``ratio``: dgdm wall seconds / that CNN time (above 1: the CNN is faster).
    """
    curve = cnn.get("curve") or []
    if not curve:
        raise ValueError("time_to_accuracy: the CNN metrics have no per-epoch 'curve'")
    target = float(dgdm["test_error_pct"])
    hit = next((c for c in curve if float(c["test_error_pct"]) <= target), None)
    pick = hit or min(curve, key=lambda c: (float(c["test_error_pct"]), c["epoch"]))
    dgdm_s = float(dgdm["wall_seconds"])
    cnn_s = float(pick["seconds_cumulative"])
    return {"dgdm_method": dgdm.get("method", "pretrained_svm"),
            "dgdm_test_error_pct": target, "dgdm_wall_seconds": dgdm_s,
            "cnn_reached": hit is not None, "cnn_epoch": int(pick["epoch"]),
            "cnn_test_error_pct": float(pick["test_error_pct"]), "cnn_seconds": cnn_s,
            "ratio": dgdm_s / cnn_s if cnn_s > 0 else float("inf")}


# ------------------------------------------------------- results/benchmarks.md and .csv
def collect_rule_benchmarks(root: str | os.PathLike) -> pd.DataFrame:
    """The last row of every Snakemake ``benchmark:`` file under ``root``
    (``<rule>/<job>.tsv``): wall s, peak RSS, CPU s, mean load. Unreadable files are
    skipped (reported on stdout), not fatal."""
    rows = []
    root = Path(root)
    for tsv in sorted(root.rglob("*.tsv")):
        rel = tsv.relative_to(root)
        try:
            b = pd.read_csv(tsv, sep="\t")
        except Exception as e:  # a half-written or foreign file: report, do not fail
            print(f"skipping {tsv}: {e}")
            continue
        if b.empty or "s" not in b:
            continue
        last = b.iloc[-1]
        rows.append({
            "rule": rel.parts[0],
            "job": str(Path(*rel.parts[1:]).with_suffix("")),
            "wall_s": float(last["s"]),
            "max_rss_mb": float(last["max_rss"]) if "max_rss" in b else float("nan"),
            "cpu_time_s": float(last["cpu_time"]) if "cpu_time" in b else float("nan"),
            "mean_load": float(last["mean_load"]) if "mean_load" in b else float("nan"),
            "measured": time.strftime("%Y-%m-%d %H:%M", time.localtime(tsv.stat().st_mtime)),
        })
    return pd.DataFrame(rows, columns=["rule", "job", "wall_s", "max_rss_mb", "cpu_time_s",
                                       "mean_load", "measured"])


def combined_table(layers: pd.DataFrame, cnn: pd.DataFrame,
                   machine: dict, refine: pd.DataFrame | None = None) -> pd.DataFrame:
    """``results/benchmarks.csv``: the pretraining-sweep rows (``benchmark ==
    "pretrain_sweep"``), the CNN rows (``cnn_train_step``, ``cnn_inference``) and the
    top-down sampler's rows (``refine_step``) in one table, columns the union, plus
    ``machine_<key>`` on every row."""
    layers = layers[[c for c in layers.columns if not c.startswith("machine_")]]
    layers = layers.assign(benchmark="pretrain_sweep")
    parts = [layers, cnn]
    if refine is not None and len(refine):
        parts.append(refine[[c for c in refine.columns if not c.startswith("machine_")]]
                     .assign(benchmark="refine_step"))
    df = pd.concat(parts, ignore_index=True, sort=False)
    df = df[["benchmark"] + [c for c in df.columns if c != "benchmark"]]
    for k, v in machine.items():
        df[f"machine_{k}"] = str(v)
    return df


def _fmt(v) -> str:
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if not isinstance(v, (float, np.floating)):
        return str(v)
    if v != v:  # NaN
        return "—"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def md_table(df: pd.DataFrame) -> str:
    """A Markdown table of ``df`` (floats to 3 significant digits or so, NaN as "—")."""
    cols = list(df.columns)
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, r in df.iterrows():
        out.append("| " + " | ".join(_fmt(v) for v in r) + " |")
    return "\n".join(out)


def machine_line(machine: dict) -> str:
    return ", ".join(f"{k}: {v}" for k, v in machine.items())


def render_benchmarks_md(*, machine: dict, config_files, layers: pd.DataFrame,
                         cnn: pd.DataFrame, scaling: pd.DataFrame,
                         time_to_acc: list[dict], cnn_runs: list[dict],
                         jobs: pd.DataFrame, scaling_png: str,
                         refine: pd.DataFrame | None = None,
                         mcem: pd.DataFrame | None = None,
                         stream: pd.DataFrame | None = None) -> str:
    """``results/benchmarks.md``. ``time_to_acc``: :func:`time_to_accuracy` rows with a
    ``dataset`` key (or a ``dataset`` + ``missing`` note where a run is missing);
    ``cnn_runs``: the CNN runs' metrics.json (their measured throughput)."""
    lcols = [c for c in layers.columns if not c.startswith("machine_")]
    md = [
        "# Benchmarks",
        "",
        "Config: " + (", ".join(f"`{c}`" for c in config_files) or "(none)"),
        "",
        "Machine: " + machine_line(machine),
        "",
        "## Pretraining sweeps against the floor",
        "",
        "One exact Gibbs sweep of each pretraining layer (`dgdm_tf.bench.sweeps`), against the "
        "floor: one generative + one adjoint convolution pass over the same batch "
        "(SPEC sec. 6).",
        "",
        md_table(layers[lcols]),
        "",
    ]
    if refine is not None and len(refine):
        md += [
            "## The top-down sampler against the floor",
            "",
            "Sweeps of the L-layer model (`dgdm_tf.topdown.conditionals`): refinement (every "
            "conditional), test time (dictionaries fixed: what features, missing data and "
            "the SVM's inputs cost) and each step alone, against the floor: one generative "
            "pass of the whole model from the top layer to the image plus its adjoint, over "
            "the same batch. Random inputs at the dataset's shapes. The supervised model "
            "(`dgdm_tf.supervised.joint_svm`): its training sweep (the SVM's terms in the top units' "
            "conditional, then lambda, beta, omega, kappa; 10 classes) and one iteration of "
            "test-time MCEM (`dgdm_tf.mcem.test_time`, Algorithm 2: an E-step sample, the "
            "units' (z, w) maximisation, one RMSprop step); a test image costs "
            "`predict.burn_in` test-time sweeps plus `predict.iterations` MCEM "
            "iterations per averaged model.",
            "",
            md_table(refine[[c for c in REFINE_COLUMNS if c in refine.columns]]),
            "",
        ]
    md += [
        "## The CNN baseline: training step and inference",
        "",
        "The \"CNN, same shape\" baseline (`dgdm_tf.baselines.cnn`) of the benchmarked dataset, on "
        "random images at the same batch sizes: median seconds of one training step "
        "(forward, backward, Adam update) and of one inference pass, after a warm-up; "
        "resident memory before and at the peak of each measurement (`peak_rss_is_per_row` "
        "False: the process's peak so far; TensorFlow keeps memory it allocated for earlier "
        "rows, so `rss_before_mb` shows what was already held).",
        "",
        md_table(cnn[[c for c in CNN_COLUMNS if c in cnn.columns]]) if len(cnn) else "No rows.",
        "",
    ]
    md += _sweep_vs_cnn_lines(layers, cnn)
    if cnn_runs:
        md += ["Measured during the CNN runs themselves (`results/<dataset>/cnn/metrics.json`: "
               "median over epochs after the first):", ""]
        runs = [{"dataset": m.get("dataset"), "epochs": len(m.get("curve") or []),
                 "batch_size": (m.get("config") or {}).get("cnn", {}).get("batch_size"),
                 "train_images_per_s": m.get("train_images_per_s"),
                 "inference_images_per_s": m.get("inference_images_per_s"),
                 "peak_rss_mb": m.get("peak_rss_mb")} for m in cnn_runs]
        md += [md_table(pd.DataFrame(runs)), ""]
    md += ["## Time to accuracy", "",
           "Wall time of the dgdm run (`pretrained_svm`: every rule that produced its "
           "number) against the CNN's training time up to the first epoch whose test error "
           "is the same or better (or, if none is, up to its best epoch). Same data "
           "subsets, same machine. ratio = dgdm / CNN.", ""]
    md += _time_to_acc_lines(time_to_acc)
    if mcem is not None and len(mcem):
        md += [
            "## Stochastic MCEM and test-time inference",
            "",
            "One MCEM iteration of the supervised model (`dgdm_tf.mcem.stochastic.train`: E-step "
            "of one Gibbs sweep with the SVM, delta-recursion gradient, RMSprop, beta's "
            "closed-form step) and test-time MCEM MAP inference (Algorithm 2, 2 Gibbs "
            "sweeps + 4 iterations) on random images, each shape in its own process "
            "(`dgdm_tf.bench.mcem`; peak RSS of that process; tracing excluded).",
            "",
            md_table(mcem),
            "",
        ]
    if stream is not None and len(stream):
        md += [
            "## Pretraining in batches: memory against the data set's size",
            "",
            "Layer 1 pretrained with `pretrain.batch_size` (`dgdm_tf.pretrain.stream_chain`: one "
            "batch's state in memory, the rest on disk, D drawn from statistics summed over "
            "the batches) on random images of the dataset's shape, each size in its own "
            "process (`dgdm_tf.bench.stream`): its start (the configured "
            "`pretrain.start`), then `stream_sweeps` sweeps. `peak_rss_mb`: the process's "
            "peak; `state_on_disk_mb`: both buffers of the per-image state; "
            "`in_memory_state_mb`: what the unbatched chain holds between sweeps at that "
            "size (its transients come on top); `ratio_to_floor`: a sweep against one "
            "generative + adjoint pass over the same images.",
            "",
            md_table(stream),
            "",
        ]
    md += [
        "## How cost grows with work",
        "",
        "Throughput as the batch grows (at the dataset's image size), as the image side "
        "grows and as every layer's K grows (at one batch size), for one pretraining sweep "
        "of the bottom layer (graph mode; with its ratio to the floor at the same shape) "
        "and one CNN training step, with the resident memory before and at the peak of "
        "each point. `results/benchmarks_scaling.csv` has these rows.",
        "",
        f"![throughput vs batch size and image side]({scaling_png})",
        "",
        md_table(scaling[[c for c in SCALING_COLUMNS if c in scaling.columns]])
        if len(scaling) else "No rows.",
        "",
        "## Workflow jobs",
        "",
        "From the Snakemake `benchmark:` file of each job that has run (the latest run of "
        "each output): wall seconds, peak resident memory (max_rss, MB), CPU seconds.",
        "",
        md_table(jobs.assign(wall=jobs["wall_s"].map(format_seconds))[
            ["rule", "job", "wall", "wall_s", "max_rss_mb", "cpu_time_s", "measured"]]),
        "",
        f"Total wall time of the listed jobs: {format_seconds(jobs['wall_s'].sum())}; "
        f"largest peak RSS: {jobs['max_rss_mb'].max():.0f} MB." if len(jobs) else "No jobs.",
        "",
    ]
    return "\n".join(md)


def _sweep_vs_cnn_lines(layers: pd.DataFrame, cnn: pd.DataFrame) -> list[str]:
    """One line per batch size: all layers' pretraining sweeps vs one CNN training step."""
    out = []
    if not len(cnn) or not len(layers):
        return out
    graph = layers[layers["jit_compile"].astype(str) == "False"] \
        if "jit_compile" in layers else layers
    for b, g in graph.groupby("batch_size"):
        step = cnn[(cnn["benchmark"] == "cnn_train_step") & (cnn["batch_size"] == b)]
        if not len(step):
            continue
        sweep_s = float(g["sweep_seconds"].sum())
        step_s = float(step["step_seconds"].iloc[0])
        out.append(f"- batch {b}: one pretraining sweep of all {len(g)} layers (graph mode) "
                   f"{sweep_s:.3g} s, one CNN training step {step_s:.3g} s "
                   f"({sweep_s / step_s:.3g} x).")
    return out + [""] if out else out


def _time_to_acc_lines(rows: list[dict]) -> list[str]:
    out = []
    for r in rows:
        if "missing" in r:
            out.append(f"- `{r['dataset']}`: {r['missing']}")
            continue
        how = (f"reaches {r['cnn_test_error_pct']:.2f}% (<= {r['dgdm_test_error_pct']:.2f}%) "
               f"after epoch {r['cnn_epoch']}" if r["cnn_reached"] else
               f"never reaches {r['dgdm_test_error_pct']:.2f}%; its best, "
               f"{r['cnn_test_error_pct']:.2f}%, after epoch {r['cnn_epoch']}")
        out.append(f"- `{r['dataset']}`: `{r['dgdm_method']}` {r['dgdm_test_error_pct']:.2f}% "
                   f"in {format_seconds(r['dgdm_wall_seconds'])}; the CNN {how}, "
                   f"{format_seconds(r['cnn_seconds'])} of training: ratio "
                   f"{r['ratio']:.3g}.")
    return (out or ["No dataset has both a `pretrained_svm` and a `cnn` run."]) + [""]


def time_to_accuracy_rows(metrics, datasets, dgdm_method: str = "pretrained_svm") -> list[dict]:
    """:func:`time_to_accuracy` of every dataset with both runs; ``metrics``:
    (dataset, method) -> metrics.json (:func:`dgdm_tf.report.tables.load_metrics`). A dataset
    with only one of the two runs gets a row with a ``missing`` note instead."""
    rows = []
    for ds in datasets:
        d, c = metrics.get((ds, dgdm_method)), metrics.get((ds, "cnn"))
        if d is None and c is None:
            continue
        if d is None or c is None:
            absent = dgdm_method if d is None else "cnn"
            rows.append({"dataset": ds, "missing": f"no `{absent}` run (needs both "
                         f"`results/{ds}/{dgdm_method}/metrics.json` and "
                         f"`results/{ds}/cnn/metrics.json`)."})
            continue
        rows.append({"dataset": ds, **time_to_accuracy(d, c)})
    return rows


REFINE_COLUMNS = ("step", "batch_size", "input_shape", "dicts", "seconds", "images_per_s",
                  "floor_seconds", "ratio_to_floor", "peak_rss_mb")


def benchmark_refine(image_shape: tuple[int, int, int], layers: list[dict], *, batch_size: int,
                     sweeps: int, seed: int, hyper: dict | None = None,
                     n_leapfrog: int = 10) -> list[dict]:
    """Top-down sampler (dgdm_tf.topdown.conditionals) at ``batch_size``: a refinement sweep (every
    conditional), a test-time sweep (dictionaries fixed) and each of its steps, against
    the floor: one generative pass of the whole model from the top layer to the image
    and its adjoint (the gradient back to the top layer). Random inputs and dictionaries
    at the configured shapes; the cost does not depend on the values."""
    from dgdm_tf.topdown import conditionals as G
    from dgdm_tf.core.model import DeepModel, layer_inputs

    model = DeepModel(tuple(image_shape), layers, hyper)
    rng = np.random.default_rng(seed)
    x = rng.random((batch_size, *model.image_shape), dtype=np.float32)
    ds = [(rng.normal(size=(g.dh, g.dw, g.c, g.k)) / np.sqrt(g.dh * g.dw * g.c)).astype(np.float32)
          for g in model.geoms]
    xt = tf.constant(x)
    st = G.init_state(x, model, ds, tf.constant([seed, 1], tf.int32), gamma_e_init=100.0)
    s = tf.constant(rng.normal(size=st.s_top.shape).astype(np.float32))
    zd = G.dense_z(st, model)

    @compiled
    def floor_fn(s):
        with tf.GradientTape() as tape:
            tape.watch(s)
            r = xt - layer_inputs(s, model, st.d, zd)[0]
            loss = 0.5 * tf.reduce_sum(r * r)
        return tape.gradient(loss, s)

    floor_fn(s)
    floor_s = _median_seconds(lambda: floor_fn(s), max(sweeps, 3))
    steps = {
        "refinement sweep": G.make_sweep_fn(model, n_leapfrog=n_leapfrog),
        "test-time sweep (D fixed)": G.make_sweep_fn(model, update_globals=False),
        "top units": compiled(lambda st, x: G.resample_top(st, x, model, st.seed)),
    }
    # the supervised model (Sec. 2.3): its sweep (SVM terms in S[L], then the SVM's own
    # draws) on random labels, and one test-time MCEM iteration (Algorithm 2)
    from dgdm_tf.mcem import test_time as deep_mcem
    from dgdm_tf.supervised import joint_svm as deep_svm

    sup_model = DeepModel(tuple(image_shape), layers, hyper, supervised=True)
    n_classes = 10
    mean, std = deep_svm.standardisation(s)
    svm = deep_svm.init_svm(n_classes, mean, std, batch_size, deep_svm.SvmHyper())._replace(
        beta=tf.constant(rng.normal(size=(n_classes, mean.size + 1)) * 0.1))
    y = deep_svm.targets(rng.integers(0, n_classes, batch_size), n_classes)
    sup_fn = G.make_sweep_fn(sup_model, n_leapfrog=n_leapfrog, svm_hyper=deep_svm.SvmHyper())
    steps["supervised sweep (with the SVM)"] = lambda st, x: sup_fn(st, svm, x, y)
    mcem_fn = deep_mcem.make_iteration_fn(model, lr=1e-3, decay=0.95, steps=1)
    steps["test-time MCEM iteration (supervised)"] = (
        lambda st, x: mcem_fn(st, st.s_top, tf.zeros_like(st.s_top), x))
    for l in range(model.n_layers - 1):
        steps[f"blocks of layer {l + 1}"] = compiled(
            lambda st, x, l=l: G.resample_z(st, x, model, l, st.seed))
    steps["D[1] (exact Gaussian)"] = compiled(lambda st, x: G.resample_d(st, x, model, 0, st.seed)[0])
    for l in range(1, model.n_layers):
        steps[f"D[{l + 1}] (HMC, {n_leapfrog} leapfrog)"] = compiled(
            lambda st, x, l=l: G.resample_d(st, x, model, l, st.seed, n_leapfrog=n_leapfrog)[0])
    rows = []
    dicts = ", ".join(f"{g.dh}x{g.dw}x{g.k}/p{g.p}" for g in model.geoms)
    for name, fn in steps.items():
        def state_of(out):  # a sweep returns (state, stats), a step the state
            return out if isinstance(out, G.DeepState) else out[0]

        holder = {"st": state_of(fn(st, xt))}  # warm-up: trace

        def one(fn=fn):
            holder["st"] = state_of(fn(holder["st"], xt))
            return holder["st"].resid

        sec = _median_seconds(one, sweeps)
        rows.append({"step": name, "batch_size": batch_size,
                     "input_shape": "x".join(map(str, model.image_shape)), "dicts": dicts,
                     "seconds": sec, "images_per_s": batch_size / sec, "floor_seconds": floor_s,
                     "ratio_to_floor": sec / floor_s, "peak_rss_mb": peak_rss_mb()})
    return rows
