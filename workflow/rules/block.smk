# The row pretrained_block_svm (ours): the pretrained dictionaries and precisions, every
# block's posterior given the image alone (src/dgdm_tf/pretrain/block_posterior.py), layer by
# layer, then the svm rule with the settings and images of pretrained_svm.


rule block_features:
    """Features of {ds} for pretrained_block_svm (dgdm_tf.pretrain.block_posterior): each block's
    posterior mean given the image alone, every layer, the pretrained D, gamma_w and
    gamma_e; no sampling. The images of pretrained_svm (n_train / n_test)."""
    input:
        data="results/{ds}/data/prepared.npz",
        layers=all_layer_files,
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
        pools=lambda wc: [L["pool"] for L in ds_cfg(wc.ds)["model"]["layers"]],
        block=lambda wc: ds_cfg(wc.ds)["block_features"],
        n_train=lambda wc: ds_cfg(wc.ds)["n_train"],
        n_test=lambda wc: ds_cfg(wc.ds)["n_test"],
        seed=config["seed"],
    log:
        "results/logs/block_features/{ds}.log",
    benchmark:
        "results/benchmarks/rules/block_features/{ds}.tsv"
    threads: HEAVY_THREADS
    resources:
        **res("block_features"),
    script:
        "../scripts/block_features.py"
