# Figures across methods: test error against wall time (src/dgdm_tf/report/plots.py).


rule error_vs_time:
    """Test error vs wall time of every run of {ds}: one point per dgdm run (its total
    wall time), the CNN's per-epoch curve; methods without a run are listed under it."""
    input:
        enabled_metrics,
    output:
        report(
            "results/{ds}/figures/error_vs_time.png",
            caption="../report/error_vs_time.rst",
            category=CATEGORY["tables"],
            subcategory="{ds}",
        ),
    params:
        block=lambda wc: ds_cfg(wc.ds),
    log:
        "results/logs/error_vs_time/{ds}.log",
    benchmark:
        "results/benchmarks/rules/error_vs_time/{ds}.tsv"
    threads: 1
    resources:
        **res("error_vs_time"),
    script:
        "../scripts/error_vs_time.py"
