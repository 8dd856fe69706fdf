"""rule topdown_features: features of method unsupervised_svm -- the Rao-Blackwellised
posterior mean of the top layer under the refined model (dgdm_tf.topdown.chain.infer_topdown),
for the same seeded train/test subsets as the other methods (their first images).

Rule topdown_features_shard (config `shards` > 1) runs the per-image part of one split's
shard of the images; rule topdown_features then gathers the shards (the same bits) and
adds the diagnostics."""

import json

from _common import elapsed, gathered, layer1_mixing, plain, progress, shard_job, start

start(snakemake, tensorflow=True)

from dgdm_tf.core.random import seed_for  # noqa: E402
from dgdm_tf.data.subsets import shared_subset  # noqa: E402

import numpy as np  # noqa: E402

from dgdm_tf import data  # noqa: E402
from dgdm_tf.io import artifacts, atomic as atomic_io  # noqa: E402
from dgdm_tf.mcem import feature_routes  # noqa: E402
from dgdm_tf.topdown.options import Start  # noqa: E402

ds = snakemake.wildcards.ds
seed_ds = snakemake.params.seed_name  # an ablation draws as its base does: paired runs
seed = int(snakemake.params.seed)
cfg = plain(snakemake.params.cfg)
layers = plain(snakemake.params.layers)
hyper = plain(snakemake.params.hyper)
refined = artifacts.read_refined_model(snakemake.input.model)
held = Start(refined.D, layers, hyper, gamma_e_init=refined.gamma_e_mean, gamma_s_init=refined.gamma_s)
d = data.load_prepared(snakemake.input.data)
sizes = {"train": (snakemake.params.n_train, cfg["n_train"]), "test": (snakemake.params.n_test, cfg["n_test"])}


def per_image(x, split, images):
    """The per-image part of the split's features on ``images`` (a shard, or None: all)."""
    return feature_routes.per_image(x, held, cfg, seed=seed_for(seed, seed_ds, "topdown_features", split),
                                    images=images, progress=progress)


if snakemake.rule == "topdown_features_shard":  # one shard of one split
    split = snakemake.wildcards.split
    x = shared_subset(d, split, *sizes[split], seed, seed_ds)[0]
    shard_job(snakemake, len(x), feature_routes.route_batch(cfg), lambda images: per_image(x, split, images))
    progress(f"done in {elapsed():.1f} s")
    raise SystemExit(0)
out = {}
for split in ("train", "test"):
    # the other methods' subset, then its first `own` images
    x, y, idx = shared_subset(d, split, *sizes[split], seed, seed_ds)
    progress(f"{ds}: top-down features of {len(idx)} {split} images, {cfg}")
    res = gathered(snakemake, split, len(x), lambda images: per_image(x, split, images),
                   feature_routes.gather(cfg), "topdown_features_shard")
    res = feature_routes.summarise(
        x, held, cfg, res, progress=progress,
        check_seed=seed_for(seed, seed_ds, "posterior_check") if split == "train" else None)
    if split == "train":
        diag = layer1_mixing(res["layer1_pooled"], x, layers[0]["dict_size"], layers[0]["pool"],
                             snakemake.output.activity_png,
                             f"{ds}: layer-1 output of the top-down model (unsupervised_svm), "
                             f"{len(x)} train images")
        diag["chains"] = res["chains"]  # what was averaged: the smoke test reads it
        diag["half_distance"] = res.get("half_distance")  # how much the map order decides
        diag["convergence"] = res.get("convergence")  # R-hat and ESS across the chains
        if "chain_mixing" in res:  # the chains' traced scalars (two or more chains)
            diag["chain_mixing"] = res["chain_mixing"]
        diag["posterior_check"] = res.get("posterior_check")  # are the features a transient
        diag["route"], diag["alg2"] = cfg["route"], res.get("alg2")  # Algorithm 2's iterations
        diag["refine_chain"] = refined.settlement  # has the refinement settled (rule refine)
    out[split] = artifacts.FeatureSplit(res["features"].astype(np.float32), y, idx)
n_classes = data.class_count(d)
artifacts.write_features(snakemake.output.features, out["train"], out["test"], n_classes=n_classes,
                         wall_seconds=elapsed(), config=cfg)
atomic_io.write_text(snakemake.output.mixing, json.dumps(diag, indent=1) + "\n")
progress(f"done in {elapsed():.1f} s")
