# Top-layer features of the (subset) train and test images, all dictionaries fixed.

# the settings of rule features and of its shards
FEATURES_PARAMS = dict(
    layers=lambda wc: ds_cfg(wc.ds)["model"]["layers"],
    features=lambda wc: ds_cfg(wc.ds)["features"],
    topdown=lambda wc: ds_cfg(wc.ds)["topdown_features"],
    n_train=lambda wc: ds_cfg(wc.ds)["n_train"],
    n_test=lambda wc: ds_cfg(wc.ds)["n_test"],
    hyper=lambda wc: hyper_of(wc.ds),
    seed=config["seed"],
    seed_name=seed_name,
)


rule features:
    """Features of {ds} with the pretrained layers (method pretrained_svm): the top-down
    chain through the whole pretrained model (features.route topdown) or each layer's
    chain on the layer below (layerwise). With `shards` > 1 (route topdown) it gathers
    the per-image work of rule features_shard."""
    input:
        data="results/{ds}/data/prepared.npz",
        layers=all_layer_files,
        shards=shard_inputs("features"),
    output:
        features="results/{ds}/pretrained_svm/features.npz",
        mixing="results/{ds}/pretrained_svm/mixing.json",
        activity_png=report(
            "results/{ds}/figures/features_layer1_activity.png",
            caption="../report/features_activity.rst",
            category=CATEGORY["pretraining"],
            subcategory="{ds}",
            labels={"figure": "activity vs ink: pretrained_svm features", "layer": "1"},
        ),
    params:
        **FEATURES_PARAMS,
    log:
        "results/logs/features/{ds}.log",
    benchmark:
        "results/benchmarks/rules/features/{ds}.tsv"
    threads: HEAVY_THREADS
    resources:
        **res("features"),
    script:
        "../scripts/features.py"


rule features_shard:
    """Shard {i} of {n} of {ds}'s {split} images (config `shards`, whole batches): the
    per-image part of rule features' route topdown, which gathers the shards."""
    input:
        data="results/{ds}/data/prepared.npz",
        layers=all_layer_files,
    output:
        shard="results/{ds}/pretrained_svm/shards/{split}_{i}of{n}.npz",
    params:
        **FEATURES_PARAMS,
    log:
        "results/logs/features_shard/{ds}_{split}_{i}of{n}.log",
    benchmark:
        "results/benchmarks/rules/features_shard/{ds}_{split}_{i}of{n}.tsv"
    threads: HEAVY_THREADS
    resources:
        **res("features"),
    script:
        "../scripts/features.py"
