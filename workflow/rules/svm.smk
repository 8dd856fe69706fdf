# The Bayesian SVM on the features: metrics.json, predictions.csv and the run's config.


def svm_inputs(wc):
    """The features of method {method}, plus what produced them (for the wall time)."""
    out = {"features": f"results/{wc.ds}/{wc.method}/features.npz",
           "summary": f"results/{wc.ds}/data/summary.json",
           "layers": all_layer_files(wc)}
    if wc.method == "encoder_svm":  # the reference row encodes with layer 1 alone
        out["layers"] = out["layers"][:1]
    if wc.method == "unsupervised_svm":
        out["refine"] = f"results/{wc.ds}/refine/model.npz"
        # the same SVM on the pretrained features of the same images: what refinement adds
        out["pretrained_features"] = f"results/{wc.ds}/pretrained_svm/features.npz"
    return out


def svm_settings(wc):
    """The Bayesian SVM's keyword arguments: the dataset's `svm` block, except that the
    reference row encoder_svm is fitted by `encoder.svm_method` (the same model and
    prior / hinge settings; default em, the MAP: Gibbs at its 4900 features would take
    hours, see the schema)."""
    kw = dict(ds_cfg(wc.ds)["svm"])
    if wc.method == "encoder_svm":
        kw["method"] = (ds_cfg(wc.ds).get("encoder") or {}).get("svm_method", "em")
    return kw


rule svm:
    """One-vs-all Bayesian SVM (Polson & Scott 2011) on {ds}'s features of {method}:
    pretrained (pretrained_svm: Gibbs posterior means; pretrained_block_svm: block
    posteriors given the image alone), refined top-down (unsupervised_svm) or the reference
    row's soft-threshold encoder on the layer-1 dictionary (encoder_svm)."""
    input:
        unpack(svm_inputs),
    output:
        metrics="results/{ds}/{method}/metrics.json",
        predictions="results/{ds}/{method}/predictions.csv",
        config="results/{ds}/{method}/config.yaml",
    wildcard_constraints:
        method="pretrained_svm|pretrained_block_svm|unsupervised_svm|encoder_svm",
    params:
        svm=svm_settings,
        run_config=lambda wc: run_config(wc.ds),
        config_files=CONFIG_FILES,
        method=lambda wc: wc.method,
    log:
        "results/logs/svm/{ds}_{method}.log",
    benchmark:
        "results/benchmarks/rules/svm/{ds}_{method}.tsv"
    threads: HEAVY_THREADS
    resources:
        **res("svm"),
    script:
        "../scripts/svm.py"
