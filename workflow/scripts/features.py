"""rule features: top-layer features of the train/test subsets with the pretrained layers
(method pretrained_svm). Route `topdown` (the paper's test-time route): the test-time
top-down chain through the whole pretrained model (dgdm_tf.topdown.chain, the chain
settings of `topdown_features`); route `layerwise`: each layer's chain on the pooled
output of the layer below (dgdm_tf.pretrain.features).

The subsets (`n_train`, `n_test`; null = all) are the methods' shared seeded subsets
(dgdm_tf.data.subsets), the same for every method run with the same seed.

Rule features_shard (config `shards` > 1, route topdown) runs the per-image part of one
split's shard of the images; rule features then gathers the shards (the same bits) and
adds the diagnostics."""

import json

from _common import (elapsed, gathered, layer1_mixing, load_layers, plain, progress, shard_job,
                     start)

start(snakemake, tensorflow=True)

from dgdm_tf.core.random import seed_for  # noqa: E402
from dgdm_tf.data.subsets import shared_subset  # noqa: E402

import numpy as np  # noqa: E402

from dgdm_tf import data  # noqa: E402
from dgdm_tf.io import artifacts, atomic as atomic_io  # noqa: E402
from dgdm_tf.mcem import feature_routes  # noqa: E402
from dgdm_tf.topdown.options import Start  # noqa: E402
from dgdm_tf.pretrain import features  # noqa: E402
from dgdm_tf.pretrain.options import FeatureOptions, Pretrained  # noqa: E402

ds = snakemake.wildcards.ds
seed_ds = snakemake.params.seed_name  # an ablation draws as its base does: paired runs
seed = int(snakemake.params.seed)
fcfg = plain(snakemake.params.features)
tcfg = plain(snakemake.params.topdown)
layers = plain(snakemake.params.layers)
hyper = plain(snakemake.params.hyper)
pools = [int(L["pool"]) for L in layers]
route = str(fcfg["route"])

# each chain starts at the layer's mean pretrained noise precision
dictionaries, gamma_ws, gamma_e_inits = load_layers(snakemake.input.layers)
progress(f"{ds}: route {route}, dictionaries {[d.shape for d in dictionaries]}, pools {pools}, "
         f"gamma_w {gamma_ws}")
# the whole pretrained model for route topdown: gamma_s from the top layer's gamma_w,
# gamma_e from layer 1's
held = Start(dictionaries, layers, hyper, gamma_e_init=gamma_e_inits[0], gamma_s_init=gamma_ws[-1])


def layerwise(x, split):
    """Each layer's Gibbs chain on the pooled output of the one below; layer 1's output
    and the per-layer chain statistics for the mixing diagnostics."""
    per_layer, stats = [], []
    f = features.infer_features(
        x, Pretrained(dictionaries, pools, gamma_ws, gamma_e_inits, hyper),
        FeatureOptions.from_config(fcfg), seed=seed_for(seed, seed_ds, "features", split),
        layer_outputs=per_layer, layer_stats=stats, progress=progress)
    extra = {"chains": int(fcfg["chains"]),
             "half_distance_per_layer": [s_.get("half_distance") for s_ in stats]}
    if int(fcfg["chains"]) > 1:  # R-hat and bulk ESS of each layer's chains' traced scalars
        extra["chain_mixing_per_layer"] = [s_["chain_mixing"] for s_ in stats]
    return f, per_layer[0], extra


def topdown_images(x, split, images):
    """The per-image part of :func:`topdown` on ``images`` (a shard, or None: all)."""
    return feature_routes.per_image(x, held, tcfg, seed=seed_for(seed, seed_ds, "features", split),
                                    images=images, progress=progress)


def topdown(x, split):
    """The top layer given the whole pretrained model: the chain of unsupervised_svm with
    the pretrained layers (gamma_s from the top layer's gamma_w, gamma_e from layer 1's)."""
    check = seed_for(seed, seed_ds, "posterior_check") if split == "train" else None
    res = gathered(snakemake, split, len(x), lambda images: topdown_images(x, split, images),
                   feature_routes.gather(tcfg), "features_shard")
    res = feature_routes.summarise(x, held, tcfg, res, check_seed=check, progress=progress)
    extra = {"chains": res["chains"], "half_distance": res.get("half_distance"),
             "convergence": res.get("convergence"), "posterior_check": res.get("posterior_check"),
             "topdown_route": tcfg["route"], "alg2": res.get("alg2")}
    if "chain_mixing" in res:  # the chains' traced scalars (two or more chains)
        extra["chain_mixing"] = res["chain_mixing"]
    return res["features"], res["layer1_pooled"], extra


d = data.load_prepared(snakemake.input.data)
if snakemake.rule == "features_shard":  # one shard of one split's top-down features
    split = snakemake.wildcards.split
    x = shared_subset(d, split, {"train": snakemake.params.n_train, "test": snakemake.params.n_test}[split],
                      None, seed, seed_ds)[0]
    shard_job(snakemake, len(x), feature_routes.route_batch(tcfg), lambda images: topdown_images(x, split, images))
    progress(f"done in {elapsed():.1f} s")
    raise SystemExit(0)
infer = {"layerwise": layerwise, "topdown": topdown}[route]
out = {}
for split, size in (("train", snakemake.params.n_train), ("test", snakemake.params.n_test)):
    x, y, idx = shared_subset(d, split, size, None, seed, seed_ds)
    progress(f"{ds}: inferring features of {len(idx)} of {len(d[f'x_{split}'])} {split} images")
    f, pooled1, extra = infer(x, split)
    if split == "train":
        diag = layer1_mixing(pooled1, x, dictionaries[0].shape[0], pools[0],
                             snakemake.output.activity_png,
                             f"{ds}: layer-1 features (pretrained_svm, route {route}), "
                             f"{len(x)} train images")
        diag.update(route=route, **extra)
    f = np.asarray(f, dtype=np.float32)
    progress(f"{ds}: {split} features {f.shape} ({elapsed():.1f} s so far)")
    out[split] = artifacts.FeatureSplit(f, y, idx)

n_classes = data.class_count(d)
atomic_io.write_text(snakemake.output.mixing, json.dumps(diag, indent=1) + "\n")
artifacts.write_features(snakemake.output.features, out["train"], out["test"], n_classes=n_classes,
                         wall_seconds=elapsed(), config={**fcfg, "topdown": tcfg} if route == "topdown" else fcfg)
progress(f"done in {elapsed():.1f} s")
