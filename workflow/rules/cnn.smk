# The paper's CNN baseline, "CNN, same shape" (src/dgdm_tf/cnn.py): the model's layers
# as convolutions + max-pooling, two fully connected layers with dropout, softmax.


def cnn_run_config(ds: str) -> dict:
    """What the CNN run of `ds` depends on, recorded in its results and compared on
    rerun: the seed, the data subsets, the model's layers and the `cnn` block (not the
    Gibbs settings: changing those does not rerun the CNN)."""
    block = DATASETS[ds]
    keep = ("kind", "paper_table", "n_train", "n_test", "model", "cnn")
    return {"seed": config["seed"], "dataset": ds,
            "block": {k: block[k] for k in keep if k in block}}


rule cnn:
    """Train the CNN baseline on {ds}'s n_train subset, score the n_test subset after
    every epoch (the same subsets as the SVM of pretrained_svm)."""
    input:
        data="results/{ds}/data/prepared.npz",
        summary="results/{ds}/data/summary.json",
    output:
        metrics="results/{ds}/cnn/metrics.json",
        curve="results/{ds}/cnn/curve.csv",
        predictions="results/{ds}/cnn/predictions.csv",
        config="results/{ds}/cnn/config.yaml",
    params:
        run_config=lambda wc: cnn_run_config(wc.ds),
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
