"""rule benchmark_batched_pretrain: results/benchmarks/batched_pretrain.csv, one row per
benchmark.batched_pretrain_images size: batched pretraining of the benchmarked dataset's layer 1
on that many random images of its shape (dgdm_tf.bench.batched_pretrain.run_isolated: its own
process, so its own peak RSS)."""

from _common import isolated_rows_csv, plain, prepared_image_shape, progress, start

start(snakemake)

import os  # noqa: E402

from dgdm_tf.bench.batched_pretrain import run_isolated  # noqa: E402

os.environ["OMP_NUM_THREADS"] = str(snakemake.threads)
bcfg = plain(snakemake.params.benchmark)
shape = list(prepared_image_shape(snakemake.input.prepared))
specs = [{"name": f"{snakemake.params.dataset}_layer1_{n}", "image_shape": shape,
          "layer": plain(snakemake.params.layer), "n_images": int(n),
          "batch_size": int(bcfg["batched_pretrain_batch_size"]), "sweeps": int(bcfg["batched_pretrain_sweeps"]),
          "seed": int(snakemake.params.seed), "hyper": plain(snakemake.params.hyper),
          "start": plain(snakemake.params.start), "workdir": snakemake.params.workdir}
         for n in bcfg["batched_pretrain_images"]]
isolated_rows_csv(specs, run_isolated, snakemake.output[0], "batched pretraining benchmark")
progress("done")
