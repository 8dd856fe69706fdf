# results/tables.md: our numbers beside the paper's (src/dgdm_tf/report/tables.py).


rule tables:
    input:
        [f"results/{ds}/{method}/metrics.json" for ds, method in enabled_runs()],
        # the test error vs wall time figure of every dataset that runs a method
        figures=[f"results/{ds}/figures/error_vs_time.png" for ds, b in DATASETS.items()
                 if b["methods"]],
        # the top-down model's figures and missing-data scores, where it is refined
        topdown=[f"results/{ds}/{f}" for ds, b in DATASETS.items()
                 if "unsupervised_svm" in b["methods"]
                 for f in ("inpainting/metrics.json", "figures/generated.png")],
        # Fig. 2's comparison, where the supervised model runs
        supervised=[f"results/{ds}/figures/top_dictionary_unsupervised_vs_supervised.png"
                    for ds, b in DATASETS.items() if "supervised" in b["methods"]],
        # the CNN on each Gibbs row's own images ("CNN, same images"), where cnn runs
        cnn_at=[f"results/{ds}/cnn_at/{m}/metrics.json" for ds in DATASETS
                for m in cnn_at_rows(ds)],
        # the reference row on each Gibbs row's own images ("Reference, same images")
        encoder_at=[f"results/{ds}/encoder_at/{m}/metrics.json" for ds in DATASETS
                    for m in encoder_at_rows(ds)],
        # each SVM row's test error against its training images, where the dataset asks
        curves=[f"results/{ds}/learning_curve.csv" for ds in DATASETS
                if learning_curve_methods(ds)],
    output:
        report(
            "results/tables.md",
            caption="../report/tables.rst",
            category=CATEGORY["tables"],
            subcategory="all datasets",
        ),
        # the same rows and paired figures as data (docs/benchmarks/default_run.json: the
        # default run's, committed)
        rows=report(
            "results/rows.json",
            caption="../report/rows.rst",
            category=CATEGORY["tables"],
            subcategory="all datasets",
        ),
    params:
        datasets=DATASETS,
        config_files=CONFIG_FILES,
    log:
        "results/logs/tables/tables.log",
    benchmark:
        "results/benchmarks/rules/tables/tables.tsv"
    threads: 1
    resources:
        **res("tables"),
    script:
        "../scripts/tables.py"


# results/<ablation>/tables.md: one ablation's rows beside the paper's and, where the main
# run has made them, its base dataset's (config/ablations/<ablation>.yaml).
rule ablation_tables:
    input:
        ablation_inputs,
    output:
        report(
            "results/{ablation}/tables.md",
            caption="../report/ablation_tables.rst",
            category=CATEGORY["tables"],
            subcategory="{ablation}",
        ),
    params:
        ablation=lambda wc: ABLATIONS[wc.ablation],
        config_files=CONFIG_FILES,
    log:
        "results/logs/ablation_tables/{ablation}.log",
    benchmark:
        "results/benchmarks/rules/ablation_tables/{ablation}.tsv"
    threads: 1
    resources:
        **res("tables"),
    script:
        "../scripts/ablation_tables.py"
