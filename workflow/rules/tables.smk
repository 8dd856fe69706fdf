# results/tables.md: our numbers beside the paper's (src/dgdm_tf/tables.py).


rule tables:
    input:
        [f"results/{ds}/{method}/metrics.json" for ds, method in enabled_runs()],
    output:
        "results/tables.md",
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
