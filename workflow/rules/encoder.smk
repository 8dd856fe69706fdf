# The reference row encoder_svm (ours, not the paper's): pretraining's layer-1
# dictionary as a fixed filter bank, the soft-threshold encoder of Coates & Ng 2011
# (src/dgdm_tf/baselines/encoder.py), then the svm rule with the settings and images of
# pretrained_svm; and the same at the images of a Gibbs row that uses fewer
# (results/{ds}/encoder_at/{row}/: the tables' "Reference, same images" column).


rule encoder_features:
    """Features of {ds} for the reference row {run} (dgdm_tf.baselines.encoder): pretraining's
    layer-1 dictionary, a soft-threshold encoder, layer 1's max-pooling; no sampling.
    encoder_svm: the images of pretrained_svm (n_train / n_test); encoder_at/<row>: the
    images of Gibbs row <row> (the first of the same subsets)."""
    input:
        data="results/{ds}/data/prepared.npz",
        layer="results/{ds}/pretrain/layer1.npz",
    output:
        "results/{ds}/{run}/features.npz",
    wildcard_constraints:
        run="encoder_svm|encoder_at/(unsupervised_svm|supervised)",
    params:
        pool=lambda wc: ds_cfg(wc.ds)["model"]["layers"][0]["pool"],
        encoder=lambda wc: ds_cfg(wc.ds)["encoder"],
        subsets=encoder_subsets,
        seed=config["seed"],
        seed_name=seed_name,
    log:
        "results/logs/encoder_features/{ds}_{run}.log",
    benchmark:
        "results/benchmarks/rules/encoder_features/{ds}_{run}.tsv"
    threads: HEAVY_THREADS
    resources:
        **res("encoder_features"),
    script:
        "../scripts/encoder_features.py"
