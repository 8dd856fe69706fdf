"""rule pretrain_layer: Gibbs pretraining of one layer (dgdm_tf.pretrain.chain.run_pretrain_layer).

Layer 1 is fitted to a seeded subset (`pretrain.n_images`) of the training images; layer
l > 1 to layer l-1's pooled posterior-mean features `x_next`. The chain checkpoints into
`params.checkpoint_dir` (not a Snakemake output, so it survives a kill and
`--rerun-incomplete` resumes from it); it is removed once the layer's npz is written,
unless `pretrain.keep_checkpoints` is true. With `pretrain.batch_size` the chain's
per-image state lives there too (dgdm_tf.pretrain.batched_chain), one batch in memory at a time.
"""

import shutil
from pathlib import Path

from _common import elapsed, plain, progress, start

start(snakemake, tensorflow=True)

from dgdm_tf.core.random import seed_for  # noqa: E402
from dgdm_tf.data.subsets import subset_indices  # noqa: E402

import numpy as np  # noqa: E402

from dgdm_tf.io import artifacts, atomic as atomic_io  # noqa: E402

from dgdm_tf.pretrain import chain

from dgdm_tf import data

from dgdm_tf.mcmc import diagnostics as mixing

from dgdm_tf.report import plots
from dgdm_tf.mcmc.checkpoint import CheckpointDir  # noqa: E402
from dgdm_tf.pretrain.options import Layer, PretrainOptions  # noqa: E402

ds = snakemake.wildcards.ds
seed_ds = snakemake.params.seed_name  # an ablation draws as its base does: paired runs
l = int(snakemake.wildcards.l)
layer = plain(snakemake.params.layer)
pre = plain(snakemake.params.pretrain)
hyper = plain(snakemake.params.hyper)
seed = int(snakemake.params.seed)
ckpt = Path(snakemake.params.checkpoint_dir)
ckpt.mkdir(parents=True, exist_ok=True)

idx = None  # layer 1's rows of x_train
if l == 1:
    x_all = data.load_prepared(snakemake.input.x)["x_train"]
    idx = subset_indices(len(x_all), pre["n_images"], seed_for(seed, seed_ds, "pretrain_images"))
    x = np.ascontiguousarray(x_all[idx], dtype=np.float32)
    del x_all
else:
    x = np.ascontiguousarray(artifacts.read_pretrained_layer(snakemake.input.x, x_next=True).x_next,
                             dtype=np.float32)
progress(f"{ds} layer {l}: input {x.shape}, layer {layer}, pretrain {pre}")

out = chain.run_pretrain_layer(
    x, Layer(**layer, hyper=hyper, index=l - 1, n_layers=int(snakemake.params.n_layers)),
    PretrainOptions.from_config(pre), seed=seed_for(seed, seed_ds, "pretrain", l),
    checkpoint=CheckpointDir(ckpt, trace="trace.tsv"), progress=progress)
kept = np.asarray(out["kept"])
chain_seconds = float(out["seconds"])
wall = elapsed()
progress(f"{ds} layer {l}: kept {len(kept)} of {layer['n_dict']} dictionary elements, "
         f"D {np.shape(out['D'])}, x_next {np.shape(out['x_next'])}, "
         f"{out['sweeps']} sweeps, chain {chain_seconds:.1f} s, script {wall:.1f} s")

# Does the layer's pooled activity follow its input's ink, or the sampler's scan order?
activity, ink = mixing.activity_map(out["x_next"]), mixing.ink_per_cell(
    x, int(layer["dict_size"]), int(layer["pool"]))
activity_ink = mixing.activity_ink_correlation(out["x_next"], x, int(layer["dict_size"]),
                                               int(layer["pool"]))
progress(f"{ds} layer {l}: activity-ink correlation of x_next {activity_ink:.3f}")
plots.plot_activity(activity, ink, activity_ink, snakemake.output.activity_png,
                    f"{ds}: layer {l} pretraining, pooled features (x_next) of {len(x)} inputs")

artifacts.write_pretrained_layer(
    snakemake.output.layer, artifacts.PretrainedLayer(
        D=out["D"], kept=kept, usage=out["usage"], x_next=out["x_next"],
        gamma_e=out["gamma_e"], gamma_w=out["gamma_w"], sweeps=out["sweeps"],
        chain_seconds=chain_seconds, wall_seconds=wall, n_input=len(x), activity_ink=activity_ink,
        layer_config=layer, pretrain_config=pre, image_indices=idx))
plots.plot_dictionary(np.asarray(out["D"]), snakemake.output.dictionary_png,
                      f"{ds}: layer {l} dictionary, collection average",
                      usage=np.asarray(out["usage"]))
plots.plot_trace(out["trace"], snakemake.output.trace_png,
                 f"{ds}: layer {l} pretraining chain (burn-in, then collection)")
trace = ckpt / "trace.tsv"
atomic_io.write_text(snakemake.output.trace, trace.read_text() if trace.exists() else "")
if not pre["keep_checkpoints"]:
    shutil.rmtree(ckpt, ignore_errors=True)
progress(f"done in {elapsed():.1f} s")
