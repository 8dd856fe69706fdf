# Layer-wise Gibbs pretraining (supplement, last section), one job per layer.
#
# Crash safety: the chain checkpoints into results/{ds}/pretrain/layer{l}_ckpt/ every
# `pretrain.checkpoint_every` sweeps. That folder is deliberately NOT an output, so
# Snakemake does not delete it when it reruns an incomplete job
# (`snakemake --rerun-incomplete`): the rerun resumes from the newest checkpoint. It is
# removed after layer{l}.npz has been written, unless `pretrain.keep_checkpoints: true`.
# With `pretrain.batch_size` set, the chain's per-image state lives in that folder's
# stream/ (one batch in memory at a time) and is checkpointed after every sweep.


rule pretrain_layer:
    """Pretrain layer {l} of {ds}: layer 1 on a seeded subset of the training images,
    layer l > 1 on layer l-1's pooled posterior-mean features (x_next)."""
    input:
        unpack(pretrain_layer_input),
    output:
        layer="results/{ds}/pretrain/layer{l}.npz",
        trace="results/{ds}/pretrain/layer{l}_trace.tsv",
        dictionary_png=report(
            "results/{ds}/figures/pretrain_layer{l}_dictionary.png",
            caption="../report/pretrain_dictionary.rst",
            category=CATEGORY["pretraining"],
            subcategory="{ds}",
            labels={"figure": "dictionary", "layer": "{l}"},
        ),
        trace_png=report(
            "results/{ds}/figures/pretrain_layer{l}_trace.png",
            caption="../report/pretrain_trace.rst",
            category=CATEGORY["pretraining"],
            subcategory="{ds}",
            labels={"figure": "chain trace", "layer": "{l}"},
        ),
        activity_png=report(
            "results/{ds}/figures/pretrain_layer{l}_activity.png",
            caption="../report/pretrain_activity.rst",
            category=CATEGORY["pretraining"],
            subcategory="{ds}",
            labels={"figure": "activity vs ink: pooled features (x_next)", "layer": "{l}"},
        ),
    params:
        layer=lambda wc: ds_cfg(wc.ds)["model"]["layers"][int(wc.l) - 1],
        pretrain=lambda wc: ds_cfg(wc.ds)["pretrain"],
        n_layers=lambda wc: n_layers(wc.ds),
        hyper=lambda wc: hyper_of(wc.ds),
        seed=config["seed"],
        seed_name=seed_name,
        checkpoint_dir=lambda wc: f"results/{wc.ds}/pretrain/layer{wc.l}_ckpt",
    log:
        "results/logs/pretrain_layer/{ds}/layer{l}.log",
    benchmark:
        "results/benchmarks/rules/pretrain_layer/{ds}/layer{l}.tsv"
    threads: HEAVY_THREADS
    resources:
        **res("pretrain_layer"),
    script:
        "../scripts/pretrain_layer.py"
