"""rule benchmark_mcem: results/benchmarks/mcem.csv, one row per benchmark.mcem_shapes
entry (dgdm_tf.mcem_benchmark.run_isolated: its own process, so its own peak RSS)."""

from _common import plain, progress, start

start(snakemake)

import os  # noqa: E402

import pandas as pd  # noqa: E402

from dgdm_tf import atomic_io  # noqa: E402
from dgdm_tf.mcem_benchmark import run_isolated  # noqa: E402

os.environ["OMP_NUM_THREADS"] = str(snakemake.threads)
rows = []
for spec in plain(snakemake.params.shapes):
    progress(f"MCEM benchmark {spec['name']}: {spec}")
    row = run_isolated(spec)
    progress(f"  {row}")
    rows.append(row)
with atomic_io.atomic_path(snakemake.output[0]) as tmp:
    pd.DataFrame(rows).to_csv(tmp, index=False)
