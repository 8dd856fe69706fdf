# The reference row encoder_svm (ours, not the paper's): pretraining's layer-1
# dictionary as a fixed filter bank, the soft-threshold encoder of Coates & Ng 2011
# (src/dgdm_tf/baselines/encoder.py), then the svm rule with the settings and images of
# pretrained_svm.


rule encoder_features:
    """Features of {ds} for the reference row encoder_svm (dgdm_tf.baselines.encoder): pretraining's
    layer-1 dictionary, a soft-threshold encoder, layer 1's max-pooling; no sampling.
    The images of pretrained_svm (n_train / n_test)."""
    input:
        data="results/{ds}/data/prepared.npz",
        layer="results/{ds}/pretrain/layer1.npz",
    output:
        "results/{ds}/encoder_svm/features.npz",
    params:
        pool=lambda wc: ds_cfg(wc.ds)["model"]["layers"][0]["pool"],
        encoder=lambda wc: ds_cfg(wc.ds)["encoder"],
        n_train=lambda wc: ds_cfg(wc.ds)["n_train"],
        n_test=lambda wc: ds_cfg(wc.ds)["n_test"],
        seed=config["seed"],
    log:
        "results/logs/encoder_features/{ds}.log",
    benchmark:
        "results/benchmarks/rules/encoder_features/{ds}.tsv"
    threads: HEAVY_THREADS
    resources:
        **res("encoder_features"),
    script:
        "../scripts/encoder_features.py"
