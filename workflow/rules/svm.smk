# The Bayesian SVM on the features: metrics.json, predictions.csv and the run's config.


rule svm:
    """One-vs-all Bayesian SVM (Polson & Scott 2011) on {ds}'s features of {method}:
    pretrained (pretrained_svm: Gibbs posterior means; pretrained_block_svm: block
    posteriors given the image alone), refined top-down (unsupervised_svm) or the reference
    row's soft-threshold encoder on the layer-1 dictionary (encoder_svm; encoder_at/<row>:
    the same at the images of Gibbs row <row>)."""
    input:
        unpack(svm_inputs),
    output:
        metrics="results/{ds}/{method}/metrics.json",
        predictions="results/{ds}/{method}/predictions.csv",
        config="results/{ds}/{method}/config.yaml",
    wildcard_constraints:
        method="pretrained_svm|pretrained_block_svm|unsupervised_svm|encoder_svm|encoder_at/(unsupervised_svm|supervised)",
    params:
        svm=svm_settings,
        view=svm_view,
        run_config=lambda wc: run_config(wc.ds),
        seed_name=seed_name,
        config_files=CONFIG_FILES,
        method=lambda wc: wc.method,
        reference=lambda wc: is_reference(wc.method),
    log:
        "results/logs/svm/{ds}_{method}.log",
    benchmark:
        "results/benchmarks/rules/svm/{ds}_{method}.tsv"
    threads: HEAVY_THREADS
    resources:
        **res("svm"),
    script:
        "../scripts/svm.py"
