# The paper's CNN baseline, "CNN, same shape" (src/dgdm_tf/cnn.py): the model's layers
# as convolutions + max-pooling, two fully connected layers with dropout, softmax.
# Rule cnn trains it on the dataset's n_train / n_test subsets; rule cnn_at trains the
# same CNN (same script, same `cnn` settings) on exactly the images of a Gibbs row whose
# sizes differ (dgdm_tf.tables.cnn_peer_run), for the tables' "CNN, same images" column.


def cnn_run_config(ds: str, row: str | None = None) -> dict:
    """What the CNN run of `ds` depends on, recorded in its results and compared on
    rerun: the seed, the data subsets, the model's layers and the `cnn` block (not the
    Gibbs settings: changing those does not rerun the CNN). For the CNN at row `row`'s
    images, also the row and the first how many images of each subset it uses
    (dgdm_tf.tables.row_subsets: only those keys of the row's settings)."""
    block = DATASETS[ds]
    keep = ("kind", "paper_table", "n_train", "n_test", "model", "cnn")
    out = {"seed": config["seed"], "dataset": ds,
           "block": {k: block[k] for k in keep if k in block}}
    if row is not None:
        out["same_images_as"] = row
        out["subsets"] = row_subsets(block, row)
    return out


def cnn_at_rows(ds: str) -> list:
    """The Gibbs rows of `ds` whose CNN peer is a cnn_at run (not the cnn run itself)."""
    return [m for m, run in cnn_peer_runs(DATASETS[ds]).items() if run == f"cnn_at/{m}"]


def cnn_at_row(wc) -> str:
    if wc.method not in cnn_at_rows(wc.ds):
        raise WorkflowError(
            f"results/{wc.ds}/cnn_at/{wc.method}/: {wc.method} of {wc.ds} has no CNN at its "
            f"own sizes (it is not enabled, the dataset does not run cnn, or the row uses "
            f"the dataset's n_train / n_test subsets: see results/{wc.ds}/cnn/)")
    return wc.method


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


rule cnn_at:
    """The CNN baseline trained and tested on exactly the images of {ds}'s Gibbs row
    {method} (its own n_train / n_test: the first images of the shared seeded subsets),
    with the `cnn` settings: the row's "CNN, same images" cell in results/tables.md."""
    input:
        data="results/{ds}/data/prepared.npz",
        summary="results/{ds}/data/summary.json",
    output:
        metrics="results/{ds}/cnn_at/{method}/metrics.json",
        curve="results/{ds}/cnn_at/{method}/curve.csv",
        predictions="results/{ds}/cnn_at/{method}/predictions.csv",
        config="results/{ds}/cnn_at/{method}/config.yaml",
    wildcard_constraints:
        method="unsupervised_svm|supervised",
    params:
        run_config=lambda wc: cnn_run_config(wc.ds, cnn_at_row(wc)),
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
