"""rule benchmarks: results/benchmarks.md (+ .csv) from the pretraining-layer benchmark
and the Snakemake `benchmark:` files of every job that has run (wall s, peak RSS)."""

import json
import time
from pathlib import Path

from _common import progress, start

start(snakemake)

import pandas as pd  # noqa: E402

from dgdm_tf import atomic_io  # noqa: E402
from dgdm_tf.tables import format_seconds  # noqa: E402

layers = pd.read_csv(snakemake.input.layers)
machine = json.loads(Path(snakemake.input.machine).read_text())

rows = []
root = Path(snakemake.params.rules_dir)
for tsv in sorted(root.rglob("*.tsv")):
    rel = tsv.relative_to(root)
    try:
        b = pd.read_csv(tsv, sep="\t")
    except Exception as e:  # a half-written or foreign file: report, do not fail
        progress(f"skipping {tsv}: {e}")
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
jobs = pd.DataFrame(rows, columns=["rule", "job", "wall_s", "max_rss_mb", "cpu_time_s",
                                   "mean_load", "measured"])

with atomic_io.atomic_path(snakemake.output.csv) as tmp:
    layers.to_csv(tmp, index=False)
with atomic_io.atomic_path(snakemake.output.rules_csv) as tmp:
    jobs.to_csv(tmp, index=False)


def fmt(v) -> str:
    if not isinstance(v, float):
        return str(v)
    if v != v:  # NaN
        return "—"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def md_table(df: pd.DataFrame) -> str:
    cols = list(df.columns)
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, r in df.iterrows():
        cells = [fmt(v) for v in r]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


lcols = [c for c in layers.columns if not c.startswith("machine_")]
md = [
    "# Benchmarks",
    "",
    "Config: " + (", ".join(f"`{c}`" for c in snakemake.params.config_files) or "(none)"),
    "",
    "Machine: " + ", ".join(f"{k}: {v}" for k, v in machine.items()),
    "",
    "## Pretraining sweeps against the floor",
    "",
    "One exact Gibbs sweep of each pretraining layer (`dgdm_tf.benchmark`), against the "
    "floor: one generative + one adjoint convolution pass over the same batch "
    "(SPEC sec. 6).",
    "",
    md_table(layers[lcols]),
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
atomic_io.write_text(snakemake.output.md, "\n".join(md))
progress("done")
