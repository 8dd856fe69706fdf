"""rule benchmark_refine: the top-down sampler's sweeps and steps against the floor of
one generative + adjoint pass of the whole model (dgdm_tf.bench.sweeps.benchmark_refine)."""

from _common import machine_rows_csv, plain, progress, start

start(snakemake, tensorflow=True)

import json  # noqa: E402

from dgdm_tf.bench.sweeps import benchmark_refine

bcfg = plain(snakemake.params.benchmark)
with open(snakemake.input.summary) as f:
    shape = tuple(int(v) for v in json.load(f)["image_shape"])
rows = []
for b in bcfg["refine_batch_sizes"]:
    res = benchmark_refine(shape, plain(snakemake.params.layers), batch_size=int(b),
                           sweeps=int(bcfg["sweeps"]), seed=int(snakemake.params.seed),
                           hyper=plain(snakemake.params.hyper),
                           n_leapfrog=int(snakemake.params.n_leapfrog),
                           power_iterations=int(snakemake.params.power_iterations))
    for r in res:
        progress(f"  {r}")
        rows.append(dict(r, dataset=snakemake.params.dataset))
machine_rows_csv(rows, snakemake.output[0])
progress("done")
