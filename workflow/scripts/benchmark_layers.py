"""rule benchmark_layers: sweep speed of each pretraining layer against the convolution
floor, at each configured batch size (dgdm_tf.bench.sweeps), plus the machine's description."""

import itertools

from _common import plain, prepared_image_shape, progress, start

start(snakemake, tensorflow=True)

import pandas as pd  # noqa: E402

from dgdm_tf.io import atomic as atomic_io  # noqa: E402

from dgdm_tf.bench.sweeps import benchmark_pretrain_layers
from dgdm_tf.bench.timing import machine_info


bcfg = plain(snakemake.params.benchmark)
layers = plain(snakemake.params.layers)
hyper = plain(snakemake.params.hyper)
shape = prepared_image_shape(snakemake.input.prepared)
info = machine_info()
progress(f"machine: {info}")
progress(f"benchmarking {snakemake.params.dataset} layers {layers} on images {shape}")
rows = []
# the configured compilation modes of the (z, W) step (config key pretrain/features.jit_compile)
for b, jit in itertools.product(bcfg["batch_sizes"], [bool(j) for j in bcfg["jit_compile"]]):
    res = benchmark_pretrain_layers(shape, layers, batch_size=int(b),
                                    sweeps=int(bcfg["sweeps"]),
                                    seed=int(snakemake.params.seed), hyper=hyper,
                                    jit_compile=jit)
    for r in res:
        r = dict(r)
        r["dataset"] = snakemake.params.dataset
        progress(f"  {r}")
        rows.append(r)
df = pd.DataFrame(rows)
for k, v in info.items():
    df[f"machine_{k}"] = str(v)
with atomic_io.atomic_path(snakemake.output.csv) as tmp:
    df.to_csv(tmp, index=False)
atomic_io.write_json(snakemake.output.machine, info)
progress("done")
