# Benchmarks: pretraining sweep speed against the convolution floor (dgdm_tf.bench.sweeps),
# the CNN baseline's training step and inference (dgdm_tf.bench.cnn), how both grow with
# batch size and image side (dgdm_tf.bench.scaling), plus the wall time and peak memory of
# every workflow job (Snakemake `benchmark:` files; dgdm_tf.bench.report).


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


rule benchmark_cnn:
    """The CNN baseline's training step and inference at benchmark.batch_sizes."""
    input:
        summary=lambda wc: f"results/{benchmark_dataset()}/data/summary.json",
    output:
        "results/benchmarks/cnn.csv",
    params:
        dataset=benchmark_dataset(),
        layers=lambda wc: benchmark_params(wc)["layers"],
        cnn=lambda wc: benchmark_params(wc)["cnn"],
        benchmark=config["benchmark"],
        seed=config["seed"],
    log:
        "results/logs/benchmark_cnn/benchmark_cnn.log",
    benchmark:
        "results/benchmarks/rules/benchmark_cnn/benchmark_cnn.tsv"
    threads: HEAVY_THREADS
    resources:
        **res("benchmark_cnn"),
    script:
        "../scripts/benchmark_cnn.py"


rule benchmark_scaling:
    """Throughput of a bottom-layer pretraining sweep and of a CNN training step against
    batch size and image side (benchmark.scaling_*)."""
    input:
        summary=lambda wc: f"results/{benchmark_dataset()}/data/summary.json",
    output:
        "results/benchmarks/scaling.csv",
    params:
        dataset=benchmark_dataset(),
        layers=lambda wc: benchmark_params(wc)["layers"],
        cnn=lambda wc: benchmark_params(wc)["cnn"],
        benchmark=config["benchmark"],
        hyper=config["hyper"],
        seed=config["seed"],
    log:
        "results/logs/benchmark_scaling/benchmark_scaling.log",
    benchmark:
        "results/benchmarks/rules/benchmark_scaling/benchmark_scaling.tsv"
    threads: HEAVY_THREADS
    resources:
        **res("benchmark_scaling"),
    script:
        "../scripts/benchmark_cnn.py"


rule benchmark_refine:
    """The top-down sampler's sweeps and steps against the floor (benchmark.refine_batch_sizes)."""
    input:
        summary=lambda wc: f"results/{benchmark_dataset()}/data/summary.json",
    output:
        "results/benchmarks/refine.csv",
    params:
        dataset=benchmark_dataset(),
        layers=lambda wc: benchmark_params(wc)["layers"],
        n_leapfrog=lambda wc: ds_cfg(benchmark_dataset())["refine"]["n_leapfrog"],
        power_iterations=lambda wc: ds_cfg(benchmark_dataset())["refine"]["power_iterations"],
        benchmark=config["benchmark"],
        hyper=config["hyper"],
        seed=config["seed"],
    log:
        "results/logs/benchmark_refine/benchmark_refine.log",
    benchmark:
        "results/benchmarks/rules/benchmark_refine/benchmark_refine.tsv"
    threads: HEAVY_THREADS
    resources:
        **res("benchmark_refine"),
    script:
        "../scripts/benchmark_refine.py"


rule benchmark_mcem:
    """Stochastic MCEM training and test-time inference at benchmark.mcem_shapes, each
    shape in its own process (dgdm_tf.bench.mcem)."""
    output:
        "results/benchmarks/mcem.csv",
    params:
        shapes=config["benchmark"]["mcem_shapes"],
    log:
        "results/logs/benchmark_mcem/benchmark_mcem.log",
    benchmark:
        "results/benchmarks/rules/benchmark_mcem/benchmark_mcem.tsv"
    threads: HEAVY_THREADS
    resources:
        **res("benchmark_mcem"),
    script:
        "../scripts/benchmark_mcem.py"


rule benchmark_projection:
    """The wall time of benchmark.projection.config's rows (config/paper.yaml), projected
    from kernels measured at each dataset's shapes (dgdm_tf.bench.projection), on this
    machine, a GPU and a cluster of nodes (dgdm_tf.bench.cluster)."""
    input:
        config=config["benchmark"]["projection"]["config"],
        # the top-down kernels measured there are taken where the shapes and settings match
        refine="results/benchmarks/refine.csv",
    output:
        projection="results/benchmarks/projection.csv",
        cluster="results/benchmarks/cluster.csv",
    params:
        projection=config["benchmark"]["projection"],
        schema=str(Path(workflow.basedir) / "workflow" / "schemas" / "config.schema.yaml"),
        sweeps=config["benchmark"]["sweeps"],
        seed=config["seed"],
        refine_measured=lambda wc: {"layers": benchmark_params(wc)["layers"], "hyper": config["hyper"],
                                    "n_leapfrog": ds_cfg(benchmark_dataset())["refine"]["n_leapfrog"],
                                    "power_iterations": ds_cfg(benchmark_dataset())["refine"]["power_iterations"]},
    log:
        "results/logs/benchmark_projection/benchmark_projection.log",
    benchmark:
        "results/benchmarks/rules/benchmark_projection/benchmark_projection.tsv"
    threads: HEAVY_THREADS
    resources:
        **res("benchmark_projection"),
    script:
        "../scripts/benchmark_projection.py"


rule benchmark_batched_pretrain:
    """Batched pretraining's peak memory and speed against the data set's size
    (benchmark.batched_pretrain_images), each size in its own process (dgdm_tf.bench.batched_pretrain)."""
    input:
        prepared=lambda wc: f"results/{benchmark_dataset()}/data/prepared.npz",
    output:
        "results/benchmarks/batched_pretrain.csv",
    params:
        dataset=benchmark_dataset(),
        layer=lambda wc: ds_cfg(benchmark_dataset())["model"]["layers"][0],
        start=lambda wc: ds_cfg(benchmark_dataset())["pretrain"]["start"],
        benchmark=config["benchmark"],
        hyper=config["hyper"],
        seed=config["seed"],
        workdir="results/benchmarks/batched_pretrain_state",
    log:
        "results/logs/benchmark_batched_pretrain/benchmark_batched_pretrain.log",
    benchmark:
        "results/benchmarks/rules/benchmark_batched_pretrain/benchmark_batched_pretrain.tsv"
    threads: HEAVY_THREADS
    resources:
        **res("benchmark_batched_pretrain"),
    script:
        "../scripts/benchmark_batched_pretrain.py"


rule benchmarks:
    """Collects results/benchmarks/rules/**/*.tsv of the jobs that have run; it needs
    tables.md so that the whole workflow has run before it looks (and the metrics of
    the pretrained_svm and cnn runs are there for the time-to-accuracy ratio)."""
    input:
        layers="results/benchmarks/pretrain_layers.csv",
        cnn="results/benchmarks/cnn.csv",
        scaling="results/benchmarks/scaling.csv",
        refine="results/benchmarks/refine.csv",
        machine="results/benchmarks/machine.json",
        tables="results/tables.md",
        mcem=["results/benchmarks/mcem.csv"] if config["benchmark"]["mcem_shapes"] else [],
        batched_pretrain=["results/benchmarks/batched_pretrain.csv"] if config["benchmark"]["batched_pretrain_images"] else [],
        projection=(["results/benchmarks/projection.csv"]
                    if config["benchmark"]["projection"]["datasets"] else []),
        cluster=(["results/benchmarks/cluster.csv"]
                 if config["benchmark"]["projection"]["datasets"] else []),
    output:
        md=report(
            "results/benchmarks.md",
            caption="../report/benchmarks.rst",
            category=CATEGORY["benchmarks"],
        ),
        csv="results/benchmarks.csv",
        rules_csv="results/benchmarks_rules.csv",
        scaling_csv="results/benchmarks_scaling.csv",
        scaling_png=report(
            "results/benchmarks_scaling.png",
            caption="../report/benchmarks_scaling.rst",
            category=CATEGORY["benchmarks"],
        ),
    params:
        rules_dir="results/benchmarks/rules",
        config_files=CONFIG_FILES,
        datasets=DATASETS,
    log:
        "results/logs/benchmarks/benchmarks.log",
    benchmark:
        "results/benchmarks/rules/benchmarks/benchmarks.tsv"
    threads: 1
    resources:
        **res("benchmarks"),
    script:
        "../scripts/benchmarks.py"
