"""rule benchmarks: results/benchmarks.md (+ .csv) from the pretraining-layer and CNN
benchmarks, the time-to-accuracy of every dataset with both a pretrained_svm and a cnn
run, the scaling sweep (results/benchmarks_scaling.png / .csv), and the Snakemake
`benchmark:` files of every job that has run (wall s, peak RSS)."""

import json
import os
from pathlib import Path

from _common import plain, progress, start

start(snakemake)

import pandas as pd  # noqa: E402

from dgdm_tf.io import atomic as atomic_io  # noqa: E402

from dgdm_tf.bench.report import collect_rule_benchmarks, combined_table, render_benchmarks_md
from dgdm_tf.bench.time_to_accuracy import time_to_accuracy_rows

from dgdm_tf.report import plots
from dgdm_tf.report.runs import load_metrics

layers = pd.read_csv(snakemake.input.layers)
cnn = pd.read_csv(snakemake.input.cnn)
scaling = pd.read_csv(snakemake.input.scaling)
refine = pd.read_csv(snakemake.input.refine)
machine = json.loads(Path(snakemake.input.machine).read_text())
jobs = collect_rule_benchmarks(snakemake.params.rules_dir)
datasets = plain(snakemake.params.datasets)
metrics = load_metrics("results", datasets)
tta = time_to_accuracy_rows(metrics, datasets)
cnn_runs = [m for (ds, method), m in metrics.items() if method == "cnn"]
progress(f"time to accuracy: {tta}")

with atomic_io.atomic_path(snakemake.output.csv) as tmp:
    combined_table(layers, cnn, machine, refine).to_csv(tmp, index=False)
with atomic_io.atomic_path(snakemake.output.rules_csv) as tmp:
    jobs.to_csv(tmp, index=False)
with atomic_io.atomic_path(snakemake.output.scaling_csv) as tmp:
    scaling.assign(**{f"machine_{k}": str(v) for k, v in machine.items()}).to_csv(
        tmp, index=False)
plots.plot_scaling(scaling, snakemake.output.scaling_png, machine=machine)
mcem = pd.read_csv(snakemake.input.mcem[0]) if snakemake.input.mcem else None
batched_pretrain = (pd.read_csv(snakemake.input.batched_pretrain[0]) if snakemake.input.batched_pretrain
                    else None)
projection = pd.read_csv(snakemake.input.projection[0]) if snakemake.input.projection else None
cluster = pd.read_csv(snakemake.input.cluster[0]) if snakemake.input.cluster else None
md = render_benchmarks_md(
    machine=machine, config_files=snakemake.params.config_files, layers=layers, cnn=cnn,
    scaling=scaling, time_to_acc=tta, cnn_runs=cnn_runs, jobs=jobs, refine=refine, mcem=mcem,
    batched_pretrain=batched_pretrain, projection=projection, cluster=cluster,
    scaling_png=os.path.relpath(snakemake.output.scaling_png,
                                Path(snakemake.output.md).parent))
atomic_io.write_text(snakemake.output.md, md)
progress("done")
