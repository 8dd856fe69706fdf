# Stochastic MCEM (supplement Algorithm 1), model averaging, test-time MAP prediction
# (Algorithm 2) and ImageNet -> Caltech transfer: the paper's large-data route.
#
# Data: an imagenet2012 dataset is streamed (rule stream: results/{ds}/data/stream.json);
# any other dataset trains from its prepared .npz in memory.
# Crash safety: training and averaging checkpoint into results/{ds}/mcem/*ckpt/ (not
# outputs), so `--rerun-incomplete` resumes there, losing at most checkpoint_every
# iterations.


rule stream:
    """Where {ds} is streamed from (TFDS folder, built from the manual archives if
    needed, or train/ + val/ class folders), its sizes and classes."""
    input:
        "results/{ds}/data/fetch.json",
    output:
        report(
            "results/{ds}/data/stream.json",
            caption="../report/data_stream.rst",
            category=CATEGORY["data"],
            subcategory="{ds}",
        ),
    params:
        spec=lambda wc: data_spec(wc.ds),
        stream=lambda wc: ds_cfg(wc.ds)["stream"],
        tfds_data_dir=lambda wc: tfds_data_dir(wc.ds),
    log:
        "results/logs/stream/{ds}.log",
    benchmark:
        "results/benchmarks/rules/stream/{ds}.tsv"
    threads: HEAVY_THREADS
    resources:
        **res("stream"),
    script:
        "../scripts/stream.py"


rule mcem_train:
    """Stochastic MCEM of {ds}'s supervised model from the priors."""
    input:
        data=mcem_data,
    output:
        model="results/{ds}/mcem/model.npz",
        trace="results/{ds}/mcem/trace.tsv",
        trace_png=report(
            "results/{ds}/figures/mcem_trace.png",
            caption="../report/mcem_trace.rst",
            category=CATEGORY["supervised"],
            subcategory="{ds}",
            labels={"figure": "stochastic MCEM trace"},
        ),
        dict_png=report(
            "results/{ds}/figures/mcem_dictionary_layer1.png",
            caption="../report/mcem_dictionary.rst",
            category=CATEGORY["supervised"],
            subcategory="{ds}",
            labels={"figure": "layer-1 dictionary (stochastic MCEM)"},
        ),
    params:
        cfg=lambda wc: ds_cfg(wc.ds)["mcem"],
        stream=lambda wc: ds_cfg(wc.ds)["stream"],
        layers=lambda wc: ds_cfg(wc.ds)["model"]["layers"],
        n_train=lambda wc: mcem_n_train(wc.ds),
        hyper=lambda wc: hyper_of(wc.ds),
        seed=config["seed"],
        seed_name=seed_name,
        checkpoint_dir=lambda wc: f"results/{wc.ds}/mcem/ckpt",
    log:
        "results/logs/mcem_train/{ds}.log",
    benchmark:
        "results/benchmarks/rules/mcem_train/{ds}.tsv"
    threads: HEAVY_THREADS
    resources:
        **res("mcem_train"),
    script:
        "../scripts/mcem_train.py"


rule mcem_average:
    """Posterior samples of {ds}'s D and beta (Gibbs on mini-batches) from the MCEM estimate."""
    input:
        data=mcem_data,
        model="results/{ds}/mcem/model.npz",
    output:
        samples="results/{ds}/mcem/averaging_samples.npz",
    params:
        cfg=lambda wc: ds_cfg(wc.ds)["averaging"],
        mcem=lambda wc: ds_cfg(wc.ds)["mcem"],
        stream=lambda wc: ds_cfg(wc.ds)["stream"],
        layers=lambda wc: ds_cfg(wc.ds)["model"]["layers"],
        n_train=lambda wc: mcem_n_train(wc.ds),
        hyper=lambda wc: hyper_of(wc.ds),
        seed=config["seed"],
        seed_name=seed_name,
        checkpoint_dir=lambda wc: f"results/{wc.ds}/mcem/averaging_ckpt",
    log:
        "results/logs/mcem_average/{ds}.log",
    benchmark:
        "results/benchmarks/rules/mcem_average/{ds}.tsv"
    threads: HEAVY_THREADS
    resources:
        **res("mcem_average"),
    script:
        "../scripts/mcem_average.py"


# the settings of rule mcem_predict and of its shards
MCEM_PREDICT_PARAMS = dict(
    cfg=lambda wc: ds_cfg(wc.ds)["mcem_predict"],
    mcem=lambda wc: ds_cfg(wc.ds)["mcem"],
    stream=lambda wc: ds_cfg(wc.ds)["stream"],
    layers=lambda wc: ds_cfg(wc.ds)["model"]["layers"],
    run_config=lambda wc: run_config(wc.ds),
    seed_name=seed_name,
    config_files=CONFIG_FILES,
)


rule mcem_predict:
    """Classify {ds}'s test images: MAP estimate (mcem_map) or averaged posterior samples
    (model_averaging); top-1 / top-5 error. With `shards` > 1 it gathers the test chunks
    of rule mcem_predict_shard."""
    input:
        unpack(mcem_predict_inputs),
        shards=shard_inputs("mcem_predict"),
    output:
        metrics="results/{ds}/{method}/metrics.json",
        predictions="results/{ds}/{method}/predictions.csv",
        config="results/{ds}/{method}/config.yaml",
    wildcard_constraints:
        method="mcem_map|model_averaging",
    params:
        **MCEM_PREDICT_PARAMS,
    log:
        "results/logs/mcem_predict/{ds}_{method}.log",
    benchmark:
        "results/benchmarks/rules/mcem_predict/{ds}_{method}.tsv"
    threads: HEAVY_THREADS
    resources:
        **res("mcem_predict"),
    script:
        "../scripts/mcem_predict.py"


rule mcem_predict_shard:
    """Shard {i} of {n} of {ds}'s test chunks (config `shards`): their decision values
    under mcem_map's or model_averaging's models, which rule mcem_predict gathers."""
    input:
        unpack(mcem_predict_inputs),
    output:
        shard="results/{ds}/{method}/shards/{split}_{i}of{n}.npz",
    wildcard_constraints:
        method="mcem_map|model_averaging",
        split="test",
    params:
        **MCEM_PREDICT_PARAMS,
    log:
        "results/logs/mcem_predict_shard/{ds}_{method}_{split}_{i}of{n}.log",
    benchmark:
        "results/benchmarks/rules/mcem_predict_shard/{ds}_{method}_{split}_{i}of{n}.tsv"
    threads: HEAVY_THREADS
    resources:
        **res("mcem_predict"),
    script:
        "../scripts/mcem_predict.py"


rule transfer:
    """ImageNet -> {ds}: the source's layers fixed, a new Bayesian SVM on {ds}'s features."""
    input:
        fetch="results/{ds}/data/fetch.json",
        model=lambda wc: f"results/{transfer_source(wc.ds)}/mcem/model.npz",
    output:
        data="results/{ds}/imagenet_transfer/data.npz",
        features="results/{ds}/imagenet_transfer/features.npz",
        metrics="results/{ds}/imagenet_transfer/metrics.json",
        predictions="results/{ds}/imagenet_transfer/predictions.csv",
        config="results/{ds}/imagenet_transfer/config.yaml",
    params:
        cfg=lambda wc: ds_cfg(wc.ds)["transfer"],
        spec=lambda wc: data_spec(wc.ds),
        raw_dir=lambda wc: raw_dir(wc.ds),
        data_seed=config["seed"],
        source=lambda wc: transfer_source(wc.ds),
        source_layers=lambda wc: ds_cfg(transfer_source(wc.ds))["model"]["layers"],
        gamma_s=lambda wc: ds_cfg(transfer_source(wc.ds))["mcem"]["gamma_s"],
        scan=lambda wc: ds_cfg(transfer_source(wc.ds))["mcem"]["scan"],
        svm=lambda wc: ds_cfg(wc.ds)["svm"],
        run_config=lambda wc: run_config(wc.ds),
        seed_name=seed_name,
        config_files=CONFIG_FILES,
    log:
        "results/logs/transfer/{ds}.log",
    benchmark:
        "results/benchmarks/rules/transfer/{ds}.tsv"
    threads: HEAVY_THREADS
    resources:
        **res("transfer"),
    script:
        "../scripts/transfer.py"
