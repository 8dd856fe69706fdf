"""rule benchmark_mcem: results/benchmarks/mcem.csv, one row per benchmark.mcem_shapes
entry (dgdm_tf.bench.mcem.run_isolated: its own process, so its own peak RSS)."""

from _common import isolated_rows_csv, plain, start

start(snakemake)

import os  # noqa: E402

from dgdm_tf.bench.mcem import run_isolated  # noqa: E402

os.environ["OMP_NUM_THREADS"] = str(snakemake.threads)
isolated_rows_csv(plain(snakemake.params.shapes), run_isolated, snakemake.output[0],
                  "MCEM benchmark")
