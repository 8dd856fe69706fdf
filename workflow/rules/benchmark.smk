# Benchmarks: pretraining sweep speed against the convolution floor (dgdm_tf.benchmark),
# plus the wall time and peak memory of every workflow job (Snakemake `benchmark:` files).


rule benchmark_layers:
    input:
        prepared=lambda wc: f"results/{benchmark_dataset()}/data/prepared.npz",
    output:
        csv="results/benchmarks/pretrain_layers.csv",
        machine="results/benchmarks/machine.json",
    params:
        dataset=benchmark_dataset(),
        layers=lambda wc: ds_cfg(benchmark_dataset())["model"]["layers"],
        benchmark=config["benchmark"],
        hyper=config["hyper"],
        seed=config["seed"],
    log:
        "results/logs/benchmark_layers/benchmark_layers.log",
    benchmark:
        "results/benchmarks/rules/benchmark_layers/benchmark_layers.tsv"
    threads: HEAVY_THREADS
    resources:
        **res("benchmark_layers"),
    script:
        "../scripts/benchmark_layers.py"


rule benchmarks:
    """Collects results/benchmarks/rules/**/*.tsv of the jobs that have run; it needs
    tables.md so that the whole workflow has run before it looks."""
    input:
        layers="results/benchmarks/pretrain_layers.csv",
        machine="results/benchmarks/machine.json",
        tables="results/tables.md",
    output:
        md="results/benchmarks.md",
        csv="results/benchmarks.csv",
        rules_csv="results/benchmarks_rules.csv",
    params:
        rules_dir="results/benchmarks/rules",
        config_files=CONFIG_FILES,
    log:
        "results/logs/benchmarks/benchmarks.log",
    benchmark:
        "results/benchmarks/rules/benchmarks/benchmarks.tsv"
    threads: 1
    resources:
        **res("benchmarks"),
    script:
        "../scripts/benchmarks.py"
