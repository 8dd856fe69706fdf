# The paper's CNN baseline, "CNN, same shape" (src/dgdm_tf/baselines/cnn.py): the model's layers
# as convolutions + max-pooling, two fully connected layers with dropout, softmax.
# Rule cnn trains it on the dataset's n_train / n_test subsets; rule cnn_at trains the
# same CNN (same script, same `cnn` settings) on exactly the images of a Gibbs row whose
# sizes differ (dgdm_tf.report.runs.cnn_peer_run), for the tables' "CNN, same images" column.


rule cnn:
    """Train the CNN baseline on {ds}'s n_train subset, score the n_test subset after
    every epoch (the same subsets as the SVM of pretrained_svm)."""
    input:
        data="results/{ds}/data/prepared.npz",
        summary="results/{ds}/data/summary.json",
    output:
        metrics="results/{ds}/cnn/metrics.json",
        curve=report(
            "results/{ds}/cnn/curve.csv",
            caption="../report/cnn_curve.rst",
            category=CATEGORY["baselines"],
            subcategory="{ds}",
            labels={"CNN trained and tested on": "the n_train / n_test subsets (cnn)"},
        ),
        predictions="results/{ds}/cnn/predictions.csv",
        config="results/{ds}/cnn/config.yaml",
    params:
        run_config=lambda wc: cnn_run_config(wc.ds),
        seed_name=seed_name,
        config_files=CONFIG_FILES,
        method="cnn",
    log:
        "results/logs/cnn/{ds}.log",
    benchmark:
        "results/benchmarks/rules/cnn/{ds}.tsv"
    threads: HEAVY_THREADS
    resources:
        **res("cnn"),
    script:
        "../scripts/cnn_baseline.py"


rule cnn_at:
    """The CNN baseline trained and tested on exactly the images of {ds}'s Gibbs row
    {method} (its own n_train / n_test: the first images of the shared seeded subsets),
    with the `cnn` settings: the row's "CNN, same images" cell in results/tables.md."""
    input:
        data="results/{ds}/data/prepared.npz",
        summary="results/{ds}/data/summary.json",
    output:
        metrics="results/{ds}/cnn_at/{method}/metrics.json",
        curve=report(
            "results/{ds}/cnn_at/{method}/curve.csv",
            caption="../report/cnn_curve.rst",
            category=CATEGORY["baselines"],
            subcategory="{ds}",
            labels={"CNN trained and tested on": "the images of {method} (cnn_at)"},
        ),
        predictions="results/{ds}/cnn_at/{method}/predictions.csv",
        config="results/{ds}/cnn_at/{method}/config.yaml",
    wildcard_constraints:
        method="unsupervised_svm|supervised",
    params:
        run_config=lambda wc: cnn_run_config(wc.ds, cnn_at_row(wc)),
        seed_name=seed_name,
        config_files=CONFIG_FILES,
        method="cnn",
    log:
        "results/logs/cnn_at/{ds}_{method}.log",
    benchmark:
        "results/benchmarks/rules/cnn_at/{ds}_{method}.tsv"
    threads: HEAVY_THREADS
    resources:
        **res("cnn_at"),
    script:
        "../scripts/cnn_baseline.py"
