"""rule generate: images drawn top-down from random top-layer weights with the refined
dictionaries (Fig. 3; dgdm_tf.core.model.sample_prior_images)."""

import json

from _common import elapsed, plain, progress, start

start(snakemake, tensorflow=True)

from dgdm_tf.core.random import seed_for  # noqa: E402

import numpy as np  # noqa: E402

from dgdm_tf.io import artifacts  # noqa: E402
from dgdm_tf.report import model_plots as deep_plots  # noqa: E402
from dgdm_tf.core.model import DeepModel, sample_prior_images  # noqa: E402

ds = snakemake.wildcards.ds
seed_ds = snakemake.params.seed_name  # an ablation draws as its base does: paired runs
cfg = plain(snakemake.params.cfg)
layers = plain(snakemake.params.layers)
refined = artifacts.read_refined_model(snakemake.input.model)
dictionaries, theta = refined.D, [np.asarray(t) for t in refined.theta]
on_rate, gamma_s = np.asarray(refined.on_rate), refined.gamma_s
with open(snakemake.input.summary) as f:
    shape = tuple(int(v) for v in json.load(f)["image_shape"])
model = DeepModel(shape, layers, snakemake.params.hyper).with_ks([d.shape[-1] for d in dictionaries])
imgs = sample_prior_images(model, dictionaries, n=int(cfg["n_images"]),
                           seed=[seed_for(int(snakemake.params.seed), seed_ds, "generate"), 0],
                           on_rate=on_rate if cfg["pi"] == "usage" else None, gamma_s=gamma_s,
                           theta=theta, unpooling=cfg["unpooling"])
progress(f"{ds}: generated {imgs.shape}, pixel range [{imgs.min():.3g}, {imgs.max():.3g}]")
pi_says = "pi from its prior" if cfg["pi"] == "prior" else "pi at the chain's usage"
z_says = "mean unpooling" if cfg["unpooling"] == "mean" else "unpooling drawn"
deep_plots.plot_image_grid(imgs, snakemake.output.png,
                           f"{ds}: images generated from random top-layer weights "
                           f"(refined model; {pi_says}, {z_says})")
progress(f"done in {elapsed():.1f} s")
