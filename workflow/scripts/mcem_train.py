"""rule mcem_train: stochastic MCEM (supplement Algorithm 1) of the supervised model from
the priors (dgdm_tf.mcem.stochastic.train): every layer's D by RMSprop, beta in closed form.

Checkpoints into `params.checkpoint_dir` every `mcem.checkpoint_every` iterations (not an
output: it survives a kill, and `--rerun-incomplete` resumes from it); removed when done
unless `mcem.keep_checkpoints`.
"""

import shutil
from pathlib import Path

from _common import elapsed, plain, progress, start

start(snakemake, tensorflow=True)

from dgdm_tf.core.random import seed_for  # noqa: E402
from dgdm_tf.data.subsets import subset_seeds  # noqa: E402

from dgdm_tf.io import artifacts  # noqa: E402

from dgdm_tf.report import model_plots as deep_plots, plots

from dgdm_tf.mcem import stochastic as deep_smcem
from dgdm_tf.data.minibatches import McemData  # noqa: E402
from dgdm_tf.mcem.options import McemOptions, McemStart  # noqa: E402
from dgdm_tf.mcmc.checkpoint import CheckpointDir  # noqa: E402

ds = snakemake.wildcards.ds
seed_ds = snakemake.params.seed_name  # an ablation draws as its base does: paired runs
cfg = plain(snakemake.params.cfg)
layers = plain(snakemake.params.layers)
hyper = plain(snakemake.params.hyper)
seed = int(snakemake.params.seed)
ckpt = Path(snakemake.params.checkpoint_dir)
ckpt.mkdir(parents=True, exist_ok=True)

options = McemOptions.from_config(cfg)
data = McemData(snakemake.input.data, seed=seed_for(seed, seed_ds, "mcem_batches"),
                batch_size=int(options.batch_size), stream_cfg=plain(snakemake.params.stream),
                n_train=snakemake.params.n_train, subset_seeds=subset_seeds(seed, seed_ds))
progress(f"{ds}: stochastic MCEM on {data.n_total} images of {data.image_shape}, "
         f"{data.n_classes} classes, batch {data.batch_size}, {cfg['iterations']} iterations, "
         f"layers {layers}")
import tensorflow as tf  # noqa: E402

gpus = [d.name for d in tf.config.list_logical_devices("GPU")]
devices = gpus if cfg["distribute"] and len(gpus) > 1 else None
progress(f"{ds}: devices: {devices or (gpus[:1] or ['CPU'])}")
# the trace is an output, not in the checkpoint's folder: an absolute path stands as it is
res = deep_smcem.train(
    data, McemStart(layers, hyper), options, seed=seed_for(seed, seed_ds, "mcem"), devices=devices,
    checkpoint=CheckpointDir(ckpt, trace=str(Path(snakemake.output.trace).resolve())),
    progress=progress)
if res["beta"] is None:
    raise ValueError(f"datasets.{ds}.mcem.supervise_from ({cfg['supervise_from']}) must be "
                     f"below mcem.iterations ({cfg['iterations']}): beta was never fitted")
artifacts.write_mcem_model(snakemake.output.model, artifacts.McemModel(
    D=res["D"], beta=res["beta"], mean=res["mean"], std=res["std"], n_total=data.n_total,
    n_classes=data.n_classes, image_shape=data.image_shape, train_seconds=res["seconds"],
    wall_seconds=elapsed()))
deep_plots.plot_mcem_trace(res["trace"], snakemake.output.trace_png,
                           f"{ds}: stochastic MCEM ({data.n_total} images, batch {data.batch_size})")
plots.plot_dictionary(res["D"][0], snakemake.output.dict_png, f"{ds}: layer-1 dictionary (MCEM)")
if not cfg["keep_checkpoints"]:
    shutil.rmtree(ckpt, ignore_errors=True)
progress(f"{ds}: MCEM done, {res['seconds']:.1f} s in iterations, {elapsed():.1f} s in all")
