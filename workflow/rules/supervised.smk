# The supervised model (Sec. 2.3): the top-down model and the Bayesian SVM refined
# jointly on labelled images, then test images classified from the MCEM MAP of their
# top layer (supplement Algorithm 2), decision values averaged over collected models.
#
# Crash safety as refinement: the chain checkpoints into results/{ds}/supervised/ckpt/,
# which is not an output, so `--rerun-incomplete` resumes from it.


rule supervised:
    """Train {ds}'s supervised model: Gibbs over every layer and the SVM jointly."""
    input:
        data="results/{ds}/data/prepared.npz",
        layers=all_layer_files,
        refine=refined_start,
    output:
        model="results/{ds}/supervised/model.npz",
        trace="results/{ds}/supervised/trace.csv",
        trace_png=report(
            "results/{ds}/figures/supervised_trace.png",
            caption="../report/supervised_trace.rst",
            category=CATEGORY["supervised"],
            subcategory="{ds}",
            labels={"figure": "chain trace (supervised training)"},
        ),
        top_png=report(
            "results/{ds}/figures/top_dictionary_supervised.png",
            caption="../report/top_dictionary_supervised.rst",
            category=CATEGORY["supervised"],
            subcategory="{ds}",
            labels={"figure": "top-layer elements, supervised (Fig. 2)"},
        ),
        compare_png=report(
            "results/{ds}/figures/top_dictionary_unsupervised_vs_supervised.png",
            caption="../report/top_dictionary_compare.rst",
            category=CATEGORY["supervised"],
            subcategory="{ds}",
            labels={"figure": "top-layer elements, unsupervised vs supervised (Fig. 2)"},
        ),
    params:
        # training settings only: of `predict` just `models` (which samples are kept), so
        # a change of the test-time settings reruns supervised_predict, not the training
        cfg=lambda wc: training_cfg(ds_cfg(wc.ds)["supervised"]),
        layers=lambda wc: ds_cfg(wc.ds)["model"]["layers"],
        n_train=lambda wc: ds_cfg(wc.ds)["n_train"],
        hyper=lambda wc: hyper_of(wc.ds),
        seed=config["seed"],
        seed_name=seed_name,
        checkpoint_dir=lambda wc: f"results/{wc.ds}/supervised/ckpt",
    log:
        "results/logs/supervised/{ds}.log",
    benchmark:
        "results/benchmarks/rules/supervised/{ds}.tsv"
    threads: HEAVY_THREADS
    resources:
        **res("supervised"),
    script:
        "../scripts/supervised.py"


# the settings of rule supervised_predict and of its shards
SUPERVISED_PREDICT_PARAMS = dict(
    cfg=lambda wc: ds_cfg(wc.ds)["supervised"],
    layers=lambda wc: ds_cfg(wc.ds)["model"]["layers"],
    n_test=lambda wc: ds_cfg(wc.ds)["n_test"],
    n_train=lambda wc: ds_cfg(wc.ds)["n_train"],
    run_config=lambda wc: run_config(wc.ds, "supervised"),
    config_files=CONFIG_FILES,
    hyper=lambda wc: hyper_of(wc.ds),
    seed=config["seed"],
    seed_name=seed_name,
)


rule supervised_predict:
    """Classify {ds}'s test images with the supervised model: metrics.json,
    predictions.csv (all C decision values), the confusion matrix. With `shards` > 1 it
    gathers the per-image work of rule supervised_predict_shard."""
    input:
        data="results/{ds}/data/prepared.npz",
        model="results/{ds}/supervised/model.npz",
        summary="results/{ds}/data/summary.json",
        layers=all_layer_files,
        refine=refined_start,
        shards=shard_inputs("supervised_predict"),
    output:
        metrics="results/{ds}/supervised/metrics.json",
        predictions="results/{ds}/supervised/predictions.csv",
        config="results/{ds}/supervised/config.yaml",
        confusion_png=report(
            "results/{ds}/figures/confusion_supervised.png",
            caption="../report/confusion.rst",
            category=CATEGORY["supervised"],
            subcategory="{ds}",
            labels={"figure": "confusion matrix (test images)"},
        ),
    params:
        **SUPERVISED_PREDICT_PARAMS,
    log:
        "results/logs/supervised_predict/{ds}.log",
    benchmark:
        "results/benchmarks/rules/supervised_predict/{ds}.tsv"
    threads: HEAVY_THREADS
    resources:
        **res("supervised_predict"),
    script:
        "../scripts/supervised_predict.py"


rule supervised_predict_shard:
    """Shard {i} of {n} (config `shards`, whole batches) of {ds}'s test images
    ({split} test) or of the mismatch check's training images ({split} mismatch): the
    kept models' decision values, which rule supervised_predict gathers."""
    input:
        data="results/{ds}/data/prepared.npz",
        model="results/{ds}/supervised/model.npz",
    output:
        shard="results/{ds}/supervised/shards/{split}_{i}of{n}.npz",
    params:
        **SUPERVISED_PREDICT_PARAMS,
    log:
        "results/logs/supervised_predict_shard/{ds}_{split}_{i}of{n}.log",
    benchmark:
        "results/benchmarks/rules/supervised_predict_shard/{ds}_{split}_{i}of{n}.tsv"
    threads: HEAVY_THREADS
    resources:
        **res("supervised_predict"),
    script:
        "../scripts/supervised_predict.py"
