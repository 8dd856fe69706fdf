# The top-down model (Sec. 2.2): joint refinement from the pretrained dictionaries, its
# features (method unsupervised_svm), generation and missing-data interpolation.
#
# Crash safety as pretraining: the chain checkpoints into results/{ds}/refine/ckpt/,
# which is not an output, so `--rerun-incomplete` resumes from it. With refine.workers > 1
# the chain runs data-parallel, one worker per Slurm task (or local process).


rule refine:
    """Refine every layer of {ds}'s model jointly (Gibbs; HMC for D above layer 1)."""
    input:
        data="results/{ds}/data/prepared.npz",
        layers=all_layer_files,
    output:
        model="results/{ds}/refine/model.npz",
        trace="results/{ds}/refine/trace.csv",
        trace_png=report(
            "results/{ds}/figures/refine_trace.png",
            caption="../report/refine_trace.rst",
            category=CATEGORY["topdown"],
            subcategory="{ds}",
            labels={"figure": "chain trace (joint refinement)"},
        ),
        top_refined_png=report(
            "results/{ds}/figures/top_dictionary_refined.png",
            caption="../report/top_dictionary_refined.rst",
            category=CATEGORY["topdown"],
            subcategory="{ds}",
            labels={"figure": "top-layer elements, refined (Fig. 2)"},
        ),
        top_pretrained_png=report(
            "results/{ds}/figures/top_dictionary_pretrained.png",
            caption="../report/top_dictionary_pretrained.rst",
            category=CATEGORY["topdown"],
            subcategory="{ds}",
            labels={"figure": "top-layer elements, pretrained (Fig. 2)"},
        ),
    params:
        refine=lambda wc: ds_cfg(wc.ds)["refine"],
        layers=lambda wc: ds_cfg(wc.ds)["model"]["layers"],
        hyper=lambda wc: hyper_of(wc.ds),
        seed=config["seed"],
        seed_name=seed_name,
        checkpoint_dir=lambda wc: f"results/{wc.ds}/refine/ckpt",
    log:
        "results/logs/refine/{ds}.log",
    benchmark:
        "results/benchmarks/rules/refine/{ds}.tsv"
    threads: HEAVY_THREADS
    resources:
        **res("refine"),
        # Slurm: one task per worker of the chain (the script starts them with srun)
        tasks=lambda wc: ds_cfg(wc.ds)["refine"]["workers"],
    script:
        "../scripts/refine.py"


# the settings of rule topdown_features and of its shards
TOPDOWN_FEATURES_PARAMS = dict(
    cfg=lambda wc: ds_cfg(wc.ds)["topdown_features"],
    layers=lambda wc: ds_cfg(wc.ds)["model"]["layers"],
    n_train=lambda wc: ds_cfg(wc.ds)["n_train"],
    n_test=lambda wc: ds_cfg(wc.ds)["n_test"],
    hyper=lambda wc: hyper_of(wc.ds),
    seed=config["seed"],
    seed_name=seed_name,
)


rule topdown_features:
    """Top-layer features of {ds} under the refined model (method unsupervised_svm). With
    `shards` > 1 it gathers the per-image work of rule topdown_features_shard."""
    input:
        data="results/{ds}/data/prepared.npz",
        model="results/{ds}/refine/model.npz",
        shards=shard_inputs("topdown_features"),
    output:
        features="results/{ds}/unsupervised_svm/features.npz",
        mixing="results/{ds}/unsupervised_svm/mixing.json",
        activity_png=report(
            "results/{ds}/figures/topdown_features_layer1_activity.png",
            caption="../report/topdown_features_activity.rst",
            category=CATEGORY["topdown"],
            subcategory="{ds}",
            labels={"figure": "activity vs ink: unsupervised_svm features", "layer": "1"},
        ),
    params:
        **TOPDOWN_FEATURES_PARAMS,
    log:
        "results/logs/topdown_features/{ds}.log",
    benchmark:
        "results/benchmarks/rules/topdown_features/{ds}.tsv"
    threads: HEAVY_THREADS
    resources:
        **res("topdown_features"),
    script:
        "../scripts/topdown_features.py"


rule topdown_features_shard:
    """Shard {i} of {n} of {ds}'s {split} images (config `shards`, whole batches): the
    per-image part of rule topdown_features, which gathers the shards."""
    input:
        data="results/{ds}/data/prepared.npz",
        model="results/{ds}/refine/model.npz",
    output:
        shard="results/{ds}/unsupervised_svm/shards/{split}_{i}of{n}.npz",
    params:
        **TOPDOWN_FEATURES_PARAMS,
    log:
        "results/logs/topdown_features_shard/{ds}_{split}_{i}of{n}.log",
    benchmark:
        "results/benchmarks/rules/topdown_features_shard/{ds}_{split}_{i}of{n}.tsv"
    threads: HEAVY_THREADS
    resources:
        **res("topdown_features"),
    script:
        "../scripts/topdown_features.py"


rule inpaint:
    """Missing-data interpolation on {ds}'s test images: refined vs pretrained vs mean."""
    input:
        data="results/{ds}/data/prepared.npz",
        model="results/{ds}/refine/model.npz",
        layers=all_layer_files,
    output:
        metrics="results/{ds}/inpainting/metrics.json",
        png=report(
            "results/{ds}/figures/inpainting.png",
            caption="../report/inpainting.rst",
            category=CATEGORY["topdown"],
            subcategory="{ds}",
            labels={"figure": "missing-data interpolation"},
        ),
    params:
        cfg=lambda wc: ds_cfg(wc.ds)["inpaint"],
        layers=lambda wc: ds_cfg(wc.ds)["model"]["layers"],
        hyper=lambda wc: hyper_of(wc.ds),
        seed=config["seed"],
        seed_name=seed_name,
        config_files=CONFIG_FILES,
    log:
        "results/logs/inpaint/{ds}.log",
    benchmark:
        "results/benchmarks/rules/inpaint/{ds}.tsv"
    threads: HEAVY_THREADS
    resources:
        **res("inpaint"),
    script:
        "../scripts/inpaint.py"


rule generate:
    """Images drawn top-down from random top-layer weights with {ds}'s refined model."""
    input:
        model="results/{ds}/refine/model.npz",
        summary="results/{ds}/data/summary.json",
    output:
        png=report(
            "results/{ds}/figures/generated.png",
            caption="../report/generated.rst",
            category=CATEGORY["topdown"],
            subcategory="{ds}",
            labels={"figure": "generated images (Fig. 3)"},
        ),
    params:
        cfg=lambda wc: ds_cfg(wc.ds)["generate"],
        layers=lambda wc: ds_cfg(wc.ds)["model"]["layers"],
        hyper=lambda wc: hyper_of(wc.ds),
        seed=config["seed"],
        seed_name=seed_name,
    log:
        "results/logs/generate/{ds}.log",
    benchmark:
        "results/benchmarks/rules/generate/{ds}.tsv"
    threads: 1
    resources:
        **res("generate"),
    script:
        "../scripts/generate.py"
