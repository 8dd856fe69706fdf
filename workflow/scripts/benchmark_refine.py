"""rule benchmark_refine: the top-down sampler's sweeps and steps against the floor of
one generative + adjoint pass of the whole model (dgdm_tf.bench.sweeps.benchmark_refine)."""

from _common import plain, progress, start

start(snakemake, tensorflow=True)

import json  # noqa: E402

import pandas as pd  # noqa: E402

from dgdm_tf.io import atomic as atomic_io  # noqa: E402

from dgdm_tf.bench.sweeps import benchmark_refine
from dgdm_tf.bench.timing import machine_info

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
df = pd.DataFrame(rows)
for k, v in machine_info().items():
    df[f"machine_{k}"] = str(v)
with atomic_io.atomic_path(snakemake.output[0]) as tmp:
    df.to_csv(tmp, index=False)
progress("done")
