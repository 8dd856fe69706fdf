"""``results/benchmarks.md`` and ``results/benchmarks.csv``: the benchmarks' rows, the
workflow jobs' Snakemake ``benchmark:`` files and the machine, as tables."""

from __future__ import annotations

import os
import time

from pathlib import Path

import numpy as np
import pandas as pd

from dgdm_tf.bench.cnn import CNN_COLUMNS
from dgdm_tf.bench.scaling import SCALING_COLUMNS
from dgdm_tf.bench.sweeps import REFINE_COLUMNS
from dgdm_tf.report.tables import format_seconds


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
    """``key: value`` pairs of ``machine``, comma-separated."""
    return ", ".join(f"{k}: {v}" for k, v in machine.items())



def render_benchmarks_md(*, machine: dict, config_files, layers: pd.DataFrame,
                         cnn: pd.DataFrame, scaling: pd.DataFrame,
                         time_to_acc: list[dict], cnn_runs: list[dict],
                         jobs: pd.DataFrame, scaling_png: str,
                         refine: pd.DataFrame | None = None,
                         mcem: pd.DataFrame | None = None,
                         batched_pretrain: pd.DataFrame | None = None,
                         projection: pd.DataFrame | None = None,
                         cluster: pd.DataFrame | None = None) -> str:
    """``results/benchmarks.md``. ``time_to_acc``:
    :func:`dgdm_tf.bench.time_to_accuracy.time_to_accuracy` rows with a ``dataset`` key (or
    a ``dataset`` + ``missing`` note where a run is missing); ``cnn_runs``: the CNN runs'
    metrics.json (their measured throughput)."""
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
        "(docs/scaling.md), and against the exact floor: the multiply-adds the sweep's exact "
        "conditionals need (`dgdm_tf.bench.exact_floor`: every block position's correlation, "
        "the drawn atoms, D's exact Gaussian) at the rate this machine reached on the floor "
        "(`exact_floor_ms`, `ratio_to_exact_floor`; the target is at most 2x). `load_1min`: "
        "the load average as the row was measured; above the machine's cores, other "
        "processes shared them and the sweeps' ratios read several times their quiet value "
        "(docs/findings/pretrain_floor_ratio_load.md).",
        "",
        md_table(layers[lcols]),
        "",
    ]
    if refine is not None and len(refine):
        md += [
            "## The top-down sampler against the floor",
            "",
            "Sweeps of the L-layer model (`dgdm_tf.topdown.sweep`): refinement (every "
            "conditional), test time (dictionaries fixed: what features, missing data and "
            "the SVM's inputs cost) and each step alone, against the floor: one generative "
            "pass of the whole model from the top layer to the image plus its adjoint, over "
            "the same batch. Random inputs at the dataset's shapes. The supervised model "
            "(`dgdm_tf.supervised.joint_svm`): its training sweep (the SVM's terms in the top units' "
            "conditional, then lambda, beta, omega, kappa; 10 classes) and one iteration of "
            "test-time MCEM (`dgdm_tf.mcem.test_time`, Algorithm 2: an E-step sample, the "
            "units' (z, w) maximisation, one RMSprop step); a test image costs "
            "`predict.burn_in` test-time sweeps plus `predict.iterations` MCEM "
            "iterations per averaged model. Beside each step's floor, its exact floor: the "
            "multiply-adds its exact conditional needs (`dgdm_tf.bench.exact_floor`: the "
            "candidates' data-plane images of the top units and the blocks, the exact "
            "Gaussian of D[1], the HMC passes of D[l >= 2], the SVM's beta) at the rate "
            "this machine reached on the floor (`exact_floor_ms`, `ratio_to_exact_floor`; "
            "the target is at most 2x); `load_1min` as in the table above.",
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
    if batched_pretrain is not None and len(batched_pretrain):
        md += [
            "## Pretraining in batches: memory against the data set's size",
            "",
            "Layer 1 pretrained with `pretrain.batch_size` (`dgdm_tf.pretrain.batched_chain`: one "
            "batch's state in memory, the rest on disk, D drawn from statistics summed over "
            "the batches) on random images of the dataset's shape, each size in its own "
            "process (`dgdm_tf.bench.batched_pretrain`): its start (the configured "
            "`pretrain.start`), then `batched_pretrain_sweeps` sweeps. `peak_rss_mb`: the process's "
            "peak; `state_on_disk_mb`: both buffers of the per-image state; "
            "`in_memory_state_mb`: what the unbatched chain holds between sweeps at that "
            "size (its transients come on top); `ratio_to_floor`: a sweep against one "
            "generative + adjoint pass over the same images; `ratio_to_exact_floor`: against "
            "the sweep's exact floor at the floor's rate (`dgdm_tf.bench.exact_floor`).",
            "",
            md_table(batched_pretrain),
            "",
        ]
    if projection is not None and len(projection):
        md += projection_lines(projection)
    if cluster is not None and len(cluster):
        md += cluster_lines(cluster)
    md += [
        "## How cost grows with work",
        "",
        "Throughput as the batch grows (at the dataset's image size), as the image side "
        "grows and as every layer's K grows (at one batch size), for one pretraining sweep "
        "of the bottom layer (graph mode), one test-time sweep of the whole top-down model "
        "(dictionaries fixed; both with their ratios to the floor and to the exact floor at "
        "the same shape) and one CNN training step, with the resident memory before and at the peak of each point. "
        "`results/benchmarks_scaling.csv` has these rows.",
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


def projection_lines(projection: pd.DataFrame) -> list[str]:
    """The section of :func:`dgdm_tf.bench.projection.project`'s rows: per stage, then
    per row and dataset."""
    p = projection
    speeds = p.groupby("dataset", sort=False)["gpu_speedup"].first()
    speed = ", ".join(f"{ds} {g:.0f}x" for ds, g in speeds.items())
    source = f"`{p['config'].iloc[0]}`" if "config" in p.columns else "the projected config"
    md = [
        f"## Projected wall time of {source}'s rows",
        "",
        "Each stage runs a kernel over N images for P passes as the projected config sets "
        "them; the kernels were measured here at each dataset's shapes on random inputs "
        "(`dgdm_tf.bench.projection`), costing a + b N seconds a pass (a = 0 for the "
        "samplers; fitted for the SVM's Gibbs iteration). On this machine "
        "T = sum P (a + b N). On one GPU, from two assumptions (benchmark.projection: "
        "gpu_macs_per_s, gpu_step_latency_s; no GPU was measured): "
        "T = sum P max((a + b N) / R, ceil(N / B) q lam), with R the assumed rate over "
        f"this CPU's rate measured on every layer's floor convolutions ({speed}), q the "
        "kernel's sequential steps a pass, lam the latency of one, B the stage's batch.",
        "",
    ]
    totals = (p.groupby(["dataset", "row"], sort=False)[["cpu_hours", "gpu_hours"]].sum()
              .reset_index())
    totals = pd.concat([totals, p.groupby("dataset", sort=False)[["cpu_hours", "gpu_hours"]].sum()
                        .reset_index().assign(row="all rows, one after another")])
    totals = totals.assign(cpu_days=totals["cpu_hours"] / 24, gpu_days=totals["gpu_hours"] / 24)
    md += [md_table(totals[["dataset", "row", "cpu_hours", "cpu_days", "gpu_hours", "gpu_days"]]), ""]
    cols = ["dataset", "row", "stage", "kernel", "images", "passes", "batch", "measured_at",
            "cpu_s_per_pass", "cpu_hours", "q", "gpu_hours", "gpu_bound"]
    md += [md_table(p[[c for c in cols if c in p.columns]]), ""]
    left = [f"{ds}: {v}" for ds, v in p.groupby("dataset", sort=False)["left_out"].first().items()
            if isinstance(v, str) and v]
    if left:
        md += ["Not projected (one pass over the data, or their own benchmarks): "
               + "; ".join(left) + ".", ""]
    return md


def cluster_lines(cluster: pd.DataFrame, *, budget_hours: float = 24.0) -> list[str]:
    """The section of :func:`dgdm_tf.bench.cluster.project_nodes`' rows: each row's hours
    at each node count, the rows one after another, the stage that takes longest at each
    count and whether the rows fit ``budget_hours``."""
    c = cluster
    first = c.iloc[0]
    lo = ("not measured (benchmark.projection.cluster.allreduce_floats: [])"
          if not first["loopback_latency_s"] else
          f"latency {1e3 * first['loopback_latency_s']:.2f} ms and "
          f"{first['loopback_bytes_per_s'] / 1e6:.0f} MB/s")
    md = [
        "## Projected wall time on a cluster",
        "",
        f"The rows above on n nodes of {int(first['cores_per_node'])} cores, each core as fast "
        f"as one of the {int(first['cores_measured'])} the kernels were measured with "
        "(`dgdm_tf.bench.cluster`): a chain over the training images splits them over the "
        "nodes and all-reduces its sums by a ring each time a global conditional needs them "
        "(`allreduces_per_pass`, `mb_per_pass`); the per-image stages split into jobs that "
        "exchange nothing. An exchange costs the all-reduce's latency and bandwidth measured "
        f"between 2 local TensorFlow workers on this machine's loopback ({lo}) plus the "
        "network's (assumed: benchmark.projection.cluster). The SVM's a, its per-class "
        "solves, stays serial.",
        "",
    ]
    hours = c.pivot_table(index=["dataset", "row"], columns="nodes", values="hours", aggfunc="sum",
                          sort=False)
    total = c.groupby(["dataset", "nodes"], sort=False)["hours"].sum().unstack("nodes")
    total.index = pd.MultiIndex.from_tuples([(d, "all rows, one after another") for d in total.index],
                                            names=["dataset", "row"])
    table = pd.concat([hours, total])
    table.columns = [f"hours on {n} node{'s' if n > 1 else ''}" for n in table.columns]
    md += [md_table(table.reset_index()), ""]
    for (ds, n), part in c.groupby(["dataset", "nodes"], sort=False):
        worst = part.loc[part["hours"].idxmax()]
        comm = float((part["passes"] * part["comm_s_per_pass"]).sum() / 3600)
        fits = "within" if part["hours"].sum() <= budget_hours else "over"
        md.append(f"- {ds} on {n} node{'s' if n > 1 else ''}: {part['hours'].sum():.1f} h, {fits} "
                  f"{budget_hours:.0f} h; the longest stage is {worst['row']}'s {worst['stage']} "
                  f"({worst['hours']:.1f} h), communication {comm:.2f} h in all.")
    cols = ["dataset", "row", "stage", "kernel", "nodes", "passes", "allreduces_per_pass", "mb_per_pass",
            "compute_s_per_pass", "comm_s_per_pass", "hours"]
    md += ["", md_table(c[c["nodes"] == c["nodes"].max()][cols]), ""]
    return md
