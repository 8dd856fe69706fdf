# The Bayesian SVM on the features: metrics.json, predictions.csv and the run's config.


rule svm:
    """One-vs-all Bayesian SVM (Polson & Scott 2011) on {ds}'s pretrained features."""
    input:
        features="results/{ds}/pretrained_svm/features.npz",
        summary="results/{ds}/data/summary.json",
        layers=all_layer_files,
    output:
        metrics="results/{ds}/pretrained_svm/metrics.json",
        predictions="results/{ds}/pretrained_svm/predictions.csv",
        config="results/{ds}/pretrained_svm/config.yaml",
    params:
        svm=lambda wc: ds_cfg(wc.ds)["svm"],
        run_config=lambda wc: run_config(wc.ds),
        config_files=CONFIG_FILES,
        method="pretrained_svm",
    log:
        "results/logs/svm/{ds}.log",
    benchmark:
        "results/benchmarks/rules/svm/{ds}.tsv"
    threads: HEAVY_THREADS
    resources:
        **res("svm"),
    script:
        "../scripts/svm.py"
