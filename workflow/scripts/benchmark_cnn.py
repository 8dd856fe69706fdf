"""rules benchmark_cnn and benchmark_scaling (dgdm_tf.bench.cnn, dgdm_tf.bench.scaling).

benchmark_cnn: the CNN baseline's training step and inference (images/s, memory) at the
benchmark batch sizes. benchmark_scaling: throughput of one bottom-layer pretraining
sweep and of one CNN training step as the batch and the image side grow."""

import json

from _common import plain, progress, start

start(snakemake, tensorflow=True)

import pandas as pd  # noqa: E402

from dgdm_tf.io import atomic as atomic_io  # noqa: E402

from dgdm_tf.bench.cnn import CNN_COLUMNS, benchmark_cnn
from dgdm_tf.bench.scaling import SCALING_COLUMNS, benchmark_scaling

bcfg = plain(snakemake.params.benchmark)
ccfg = plain(snakemake.params.cnn)
layers = plain(snakemake.params.layers)
summary = json.loads(open(snakemake.input.summary).read())
shape = tuple(int(s) for s in summary["image_shape"])
common = dict(steps=int(bcfg["cnn_steps"]), seed=int(snakemake.params.seed),
              fc_units=int(ccfg["fc_units"]), dropout=float(ccfg["dropout"]),
              learning_rate=float(ccfg["learning_rate"]))
progress(f"{snakemake.rule} of {snakemake.params.dataset}: layers {layers}, CNN {ccfg}, "
         f"images {shape}, benchmark {bcfg}")
if snakemake.rule == "benchmark_cnn":
    columns = CNN_COLUMNS
    rows = benchmark_cnn(shape, layers, int(summary["n_classes"]),
                         batch_sizes=[int(b) for b in bcfg["batch_sizes"]], **common)
else:
    columns = SCALING_COLUMNS
    rows = benchmark_scaling(
        shape, layers, int(summary["n_classes"]),
        batch_sizes=[int(b) for b in bcfg["scaling_batch_sizes"]],
        side_factors=[float(f) for f in bcfg["scaling_side_factors"]],
        side_batch_size=int(bcfg["scaling_side_batch_size"]), sweeps=int(bcfg["sweeps"]),
        k_factors=[float(f) for f in bcfg["scaling_k_factors"]],
        topdown_max_gb=float(bcfg["scaling_topdown_max_gb"]),
        hyper=plain(snakemake.params.hyper), **common)
for r in rows:
    progress(f"  {r}")
df = pd.DataFrame(rows, columns=list(columns)).assign(dataset=snakemake.params.dataset)
with atomic_io.atomic_path(snakemake.output[0]) as tmp:
    df.to_csv(tmp, index=False)
progress("done")
