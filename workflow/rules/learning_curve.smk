# Learning curves: each SVM row's test error against the images its SVM trains on, and the
# CNN's against the images it trains on (src/dgdm_tf/report/learning_curves.py).


rule learning_curve:
    """Each row of {ds}'s `learning_curve.methods` that runs: its features as they are,
    its SVM (the svm rule's settings, view and seed) refitted on the first n of its
    training images for each n of `learning_curve.sizes` and tested on all of its test
    images; the row's own fit (its metrics.json) is the point at its size, sizes above it
    are skipped with a note; the CNN's curve (rule cnn_learning_curve) beside them where
    `cnn` is on the curve."""
    input:
        unpack(learning_curve_inputs),
    output:
        csv="results/{ds}/learning_curve.csv",
        png=report(
            "results/{ds}/figures/learning_curve.png",
            caption="../report/learning_curve.rst",
            category=CATEGORY["tables"],
            subcategory="{ds}",
            labels={"figure": "test error against training images"},
        ),
    params:
        rows=learning_curve_rows,
        sizes=lambda wc: ds_cfg(wc.ds)["learning_curve"]["sizes"],
        not_run=lambda wc: [m for m in ds_cfg(wc.ds)["learning_curve"]["methods"]
                            if m not in learning_curve_methods(wc.ds)],
        paper_table=lambda wc: ds_cfg(wc.ds)["paper_table"],
        seed=config["seed"],
        seed_name=seed_name,
    log:
        "results/logs/learning_curve/{ds}.log",
    benchmark:
        "results/benchmarks/rules/learning_curve/{ds}.tsv"
    threads: HEAVY_THREADS
    resources:
        **res("learning_curve"),
    script:
        "../scripts/learning_curve.py"


rule cnn_learning_curve:
    """The CNN baseline (the cnn rule's settings and seed) trained afresh on the first n of
    {ds}'s training images for each n of `learning_curve.sizes` below its own (the images
    the SVM rows' curves take at n), tested on all of its test images; its own run
    (results/{ds}/cnn/metrics.json) is the point at its size."""
    input:
        data="results/{ds}/data/prepared.npz",
        metrics="results/{ds}/cnn/metrics.json",
    output:
        csv="results/{ds}/cnn/learning_curve.csv",
    params:
        run_config=lambda wc: cnn_run_config(wc.ds),
        sizes=lambda wc: ds_cfg(wc.ds)["learning_curve"]["sizes"],
        seed_name=seed_name,
    log:
        "results/logs/cnn_learning_curve/{ds}.log",
    benchmark:
        "results/benchmarks/rules/cnn_learning_curve/{ds}.tsv"
    threads: HEAVY_THREADS
    resources:
        **res("cnn_learning_curve"),
    script:
        "../scripts/cnn_learning_curve.py"
