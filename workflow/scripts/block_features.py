"""rule block_features: features of pretrained_block_svm -- every block's posterior mean
given the image alone, layer by layer, with the pretrained dictionaries, gamma_w and
mean gamma_e (dgdm_tf.pretrain.block_posterior) -- for the train / test subsets of pretrained_svm
(the same seeded subsets: `dgdm_tf.data.subsets.shared_subset`). Writes layer 1's activity-ink
correlation (dgdm_tf.mcmc.diagnostics) beside them.

Rule block_features_shard (config `shards` > 1) computes one split's shard of the images;
rule block_features then gathers the shards (the same bits)."""

import json

from _common import elapsed, gathered, load_layers, plain, progress, shard_job, start

start(snakemake, tensorflow=True)

from dgdm_tf.core.shards import concat_parts  # noqa: E402
from dgdm_tf.data.subsets import shared_subset  # noqa: E402

import numpy as np  # noqa: E402

from dgdm_tf.io import artifacts, atomic as atomic_io  # noqa: E402

from dgdm_tf.pretrain import block_posterior

from dgdm_tf import data

from dgdm_tf.mcmc import diagnostics as mixing

from dgdm_tf.report import plots

ds = snakemake.wildcards.ds
seed_ds = snakemake.params.seed_name  # an ablation draws as its base does: paired runs
seed = int(snakemake.params.seed)
cfg = plain(snakemake.params.block)
pools = [int(p) for p in snakemake.params.pools]
dictionaries, gamma_ws, gamma_es = load_layers(snakemake.input.layers)
progress(f"{ds}: dictionaries {[d.shape for d in dictionaries]}, pools {pools}, "
         f"gamma_w {gamma_ws}, gamma_e {gamma_es}, {cfg}")
kw = dict(gamma_ws=gamma_ws, gamma_es=gamma_es, off=float(cfg["off"]),
          batch_size=int(cfg["batch_size"]))



def per_image(x, images):
    """The features and layer 1's pooled maps of ``images`` (a shard, or None: all)."""
    per_layer = []
    f = block_posterior.block_posterior_features(x, dictionaries, pools, layer_outputs=per_layer,
                                                 images=images, progress=progress, **kw)
    return {"features": f, "layer1_pooled": per_layer[0]}


d = data.load_prepared(snakemake.input.data)
sizes = {"train": snakemake.params.n_train, "test": snakemake.params.n_test}
if snakemake.rule == "block_features_shard":  # one shard of one split
    x = shared_subset(d, snakemake.wildcards.split, sizes[snakemake.wildcards.split], None, seed, seed_ds)[0]
    shard_job(snakemake, len(x), int(cfg["batch_size"]), lambda images: per_image(x, images))
    progress(f"done in {elapsed():.1f} s")
    raise SystemExit(0)
out = {}
for split in ("train", "test"):
    x, y, idx = shared_subset(d, split, sizes[split], None, seed, seed_ds)
    progress(f"{ds}: block-posterior features of {len(idx)} {split} images")
    res = gathered(snakemake, split, len(x), lambda images: per_image(x, images), concat_parts,
                   "block_features_shard")
    out[split] = artifacts.FeatureSplit(res["features"], y, idx)
    if split == "train":
        diag = mixing.layer1_diagnostics(res["layer1_pooled"], x, dictionaries[0].shape[0], pools[0])
        r = diag["activity_ink_layer1"]
        progress(f"{ds}: layer-1 activity-ink correlation {r:.3f}")
        plots.plot_activity(np.array(diag["activity_map_layer1"]), np.array(diag["ink_map_layer1"]),
                            r, snakemake.output.activity_png,
                            f"{ds}: layer-1 block posteriors (pretrained_block_svm), "
                            f"{len(x)} train images")
    progress(f"{ds}: {split} features {out[split].f.shape} ({elapsed():.1f} s so far)")
    del x

n_classes = data.class_count(d)
atomic_io.write_text(snakemake.output.mixing, json.dumps(diag, indent=1) + "\n")
artifacts.write_features(snakemake.output.features, out["train"], out["test"], n_classes=n_classes,
                         wall_seconds=elapsed(), config=cfg)
progress(f"done in {elapsed():.1f} s")
