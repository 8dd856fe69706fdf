# The row pretrained_block_svm (ours): the pretrained dictionaries and precisions, every
# block's posterior given the image alone (src/dgdm_tf/pretrain/block_posterior.py), layer by
# layer, then the svm rule with the settings and images of pretrained_svm.

# the settings of rule block_features and of its shards
BLOCK_FEATURES_PARAMS = dict(
    pools=lambda wc: [L["pool"] for L in ds_cfg(wc.ds)["model"]["layers"]],
    block=lambda wc: ds_cfg(wc.ds)["block_features"],
    n_train=lambda wc: ds_cfg(wc.ds)["n_train"],
    n_test=lambda wc: ds_cfg(wc.ds)["n_test"],
    seed=config["seed"],
    seed_name=seed_name,
)


rule block_features:
    """Features of {ds} for pretrained_block_svm (dgdm_tf.pretrain.block_posterior): each block's
    posterior mean given the image alone, every layer, the pretrained D, gamma_w and
    gamma_e; no sampling. The images of pretrained_svm (n_train / n_test). With `shards`
    > 1 it gathers the per-image work of rule block_features_shard."""
    input:
        data="results/{ds}/data/prepared.npz",
        layers=all_layer_files,
        shards=shard_inputs("block_features"),
    output:
        features="results/{ds}/pretrained_block_svm/features.npz",
        mixing="results/{ds}/pretrained_block_svm/mixing.json",
        activity_png=report(
            "results/{ds}/figures/block_features_layer1_activity.png",
            caption="../report/block_features_activity.rst",
            category=CATEGORY["pretraining"],
            subcategory="{ds}",
            labels={"figure": "activity vs ink: block posteriors", "layer": "1"},
        ),
    params:
        **BLOCK_FEATURES_PARAMS,
    log:
        "results/logs/block_features/{ds}.log",
    benchmark:
        "results/benchmarks/rules/block_features/{ds}.tsv"
    threads: HEAVY_THREADS
    resources:
        **res("block_features"),
    script:
        "../scripts/block_features.py"


rule block_features_shard:
    """Shard {i} of {n} of {ds}'s {split} images (config `shards`, whole batches): the
    block posteriors of rule block_features, which gathers the shards."""
    input:
        data="results/{ds}/data/prepared.npz",
        layers=all_layer_files,
    output:
        shard="results/{ds}/pretrained_block_svm/shards/{split}_{i}of{n}.npz",
    params:
        **BLOCK_FEATURES_PARAMS,
    log:
        "results/logs/block_features_shard/{ds}_{split}_{i}of{n}.log",
    benchmark:
        "results/benchmarks/rules/block_features_shard/{ds}_{split}_{i}of{n}.tsv"
    threads: HEAVY_THREADS
    resources:
        **res("block_features"),
    script:
        "../scripts/block_features.py"
