# Top-layer features of the (subset) train and test images, all dictionaries fixed.


rule features:
    """Features of {ds} with the pretrained layers (method pretrained_svm): the top-down
    chain through the whole pretrained model (features.route topdown) or each layer's
    chain on the layer below (layerwise)."""
    input:
        data="results/{ds}/data/prepared.npz",
        layers=all_layer_files,
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
        layers=lambda wc: ds_cfg(wc.ds)["model"]["layers"],
        features=lambda wc: ds_cfg(wc.ds)["features"],
        topdown=lambda wc: ds_cfg(wc.ds)["topdown_features"],
        n_train=lambda wc: ds_cfg(wc.ds)["n_train"],
        n_test=lambda wc: ds_cfg(wc.ds)["n_test"],
        hyper=lambda wc: hyper_of(wc.ds),
        seed=config["seed"],
    log:
        "results/logs/features/{ds}.log",
    benchmark:
        "results/benchmarks/rules/features/{ds}.tsv"
    threads: HEAVY_THREADS
    resources:
        **res("features"),
    script:
        "../scripts/features.py"
