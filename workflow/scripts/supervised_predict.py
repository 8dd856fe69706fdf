"""rule supervised_predict: classify test images with the supervised model. For each kept
model (D, beta), every test image's top layer S[L] given the image alone, by
`predict.features`:
  gibbs: the Rao-Blackwellised posterior mean E[S[L] | x, D] (dgdm_tf.topdown.chain.infer_topdown);
         beta_l^T E[s | x] is the decision value averaged over the posterior of s, the
         paper's averaging carried down to the local variables;
  mcem:  the MAP of supplement Algorithm 2 (dgdm_tf.mcem.test_time.infer_map), the paper's
         test-time procedure.
Decision values are averaged over the models, the label is argmax_l. Writes
metrics.json, predictions.csv (all C decision values), the run's resolved config and the
confusion matrix.

Rule supervised_predict_shard (config `shards` > 1) classifies one shard of the test
images (or of the mismatch check's training images); this rule then gathers the shards
(the same bits)."""

from _common import (elapsed, gathered, plain, progress, provenance, shard_job, start,
                     write_resolved_config)

start(snakemake, tensorflow=True)

from dgdm_tf.core.random import seed_for  # noqa: E402
from dgdm_tf.data.subsets import shared_subset  # noqa: E402

import numpy as np  # noqa: E402

from dgdm_tf.io import artifacts  # noqa: E402
from dgdm_tf.report import rows  # noqa: E402

from dgdm_tf import data

from dgdm_tf.mcem.classify import Classified, classify_supervised, gather_classified  # noqa: E402
from dgdm_tf.mcem.options import PredictOptions  # noqa: E402
from dgdm_tf.mcmc import diagnostics as mixing  # noqa: E402
from dgdm_tf.report import model_plots as deep_plots  # noqa: E402
from dgdm_tf.report.scores import error_pct  # noqa: E402
from dgdm_tf.core.model import DeepModel  # noqa: E402

ds = snakemake.wildcards.ds
seed_ds = snakemake.params.seed_name  # an ablation draws as its base does: paired runs
cfg = plain(snakemake.params.cfg)
pcfg = cfg["predict"]
layers = plain(snakemake.params.layers)
hyper = plain(snakemake.params.hyper)
run_cfg = plain(snakemake.params.run_config)
seed = int(snakemake.params.seed)

sup = artifacts.read_supervised_model(snakemake.input.model)
samples_d, n_models, n_classes = sup.samples_D, len(sup.samples_beta), sup.n_classes
n_train, train_err, train_seconds = int(len(sup.labels)), sup.train_error_pct, sup.seconds
d = data.load_prepared(snakemake.input.data)
n_mm = int(pcfg["mismatch_images"])


def images_of(split):
    """(x, labels, indices) of the test images, or of the training images re-inferred for
    the mismatch check (the first `mismatch_images`)."""
    if split == "test":
        return shared_subset(d, "test", snakemake.params.n_test, cfg["n_test"], seed, seed_ds)
    return shared_subset(d, "train", snakemake.params.n_train, min(n_mm, n_train), seed, seed_ds)


options = PredictOptions.from_supervised(cfg)


def classified(x, split, images):
    """The kept models' decision values of ``images`` (a shard, or None: all) of ``split``."""
    salt = {"test": "supervised_predict", "mismatch": "supervised_mismatch"}[split]
    return classify_supervised(x, sup, options, layers, hyper=hyper,
                               seeds=[seed_for(seed, seed_ds, salt, j) for j in range(n_models)],
                               images=images, progress=progress)


def gather_split(x, split):
    """:func:`classified` on all of ``split``, or its shards gathered."""
    return gathered(snakemake, split, len(x), lambda images: classified(x, split, images),
                    lambda parts: gather_classified([Classified.from_arrays(p) for p in parts]),
                    "supervised_predict_shard")


if snakemake.rule == "supervised_predict_shard":  # one shard of the test or mismatch images
    x = images_of(snakemake.wildcards.split)[0]
    shard_job(snakemake, len(x), int(pcfg["batch_size"]),
              lambda images: classified(x, snakemake.wildcards.split, images), lambda r: r.arrays())
    progress(f"done in {elapsed():.1f} s")
    raise SystemExit(0)
x, labels, idx = images_of("test")
model = DeepModel(x.shape[1:], layers, hyper).with_ks([v.shape[-1] for v in samples_d])
top_shape = (model.top.hs, model.top.ws, model.top.k)
progress(f"{ds}: classifying {len(x)} test images with {n_models} collected model(s), {pcfg}")

kind = pcfg["features"]
res = gather_split(x, "test")
q_traces, infer_seconds = res.q_traces, res.seconds
per_model = [error_pct(np.argmax(dv, 1), labels) for dv in res.per_model]
progress(f"{ds}: test error of each model alone {per_model}% "
         f"({n_models * len(x) / infer_seconds:.2f} image-models/s)")
mixing_diag = None  # the MCEM MAP route keeps no layer-1 maps
if res.layer1_pooled is not None:  # does layer 1's activity follow the ink, or the scan order?
    mixing_diag = mixing.layer1_diagnostics(
        res.layer1_pooled, x, int(layers[0]["dict_size"]), int(layers[0]["pool"]))
    progress(f"{ds}: layer-1 activity-ink correlation "
             f"{mixing_diag['activity_ink_layer1']:.3f} ({len(x)} test images, model 1)")
scores = res.scores
pred = np.argmax(scores, 1)
test_err = error_pct(pred, labels)
progress(f"{ds}: supervised model, decision values averaged over {n_models} model(s): "
         f"test error {test_err:.2f}%")

# Train / test feature mismatch: the chain drew its training images' top layer with the
# SVM's augmented likelihood (labels in), the test images' without. The first
# `mismatch_images` training images re-inferred by the test route (no labels), read by
# the same kept models: an error far above the chain's own train error says the
# classifier was fitted to features the test route does not give.
mismatch = None
if n_mm > 0:
    xt, yt, _ = images_of("mismatch")
    progress(f"{ds}: re-inferring {len(xt)} training images by the test route, without labels")
    res_t = gather_split(xt, "mismatch")
    mismatch = {"images": int(len(xt)), "train_error_chain_pct": train_err,
                "train_error_test_route_pct": error_pct(np.argmax(res_t.scores, 1), yt),
                "seconds": float(res_t.seconds)}
    progress(f"{ds}: training images by the test route: error {mismatch['train_error_test_route_pct']:.2f} % "
             f"(the chain's own features: {train_err:.2f} %)")

names = [str(v) for v in d["class_names"]] if "class_names" in d else None
deep_plots.plot_confusion(labels, pred, n_classes, snakemake.output.confusion_png,
                          f"{ds}: supervised model ({'MCEM MAP' if kind == 'mcem' else 'posterior-mean'} "
                          f"features, {n_models} model(s) averaged)",
                          class_names=names)
write_resolved_config(snakemake.output.config, snakemake.params.config_files, "supervised", run_cfg)

pretrained_layers = [artifacts.read_pretrained_layer(p) for p in snakemake.input.layers]
by_step = artifacts.upstream_seconds(
    snakemake.input.summary, pretrained_layers,
    artifacts.read_refined_model(snakemake.input.refine[0]) if cfg["start_from"] == "refined" else None)
by_step["supervised"] = train_seconds
by_step["supervised_predict"] = elapsed()
rows.write_row(rows.RowResult(
    ds, "supervised", labels, pred, n_classes, n_train=n_train, by_step=by_step,
    provenance=provenance(seed, snakemake.params.config_files, run_cfg),
    train_error_pct=train_err, scores=scores, test_index=idx, fields={
        "per_model_test_error_pct": per_model,
        "n_models_averaged": n_models,
        "test_features": kind,
        "train_test_mismatch": mismatch,
        "chain": sup.settlement,  # has the training chain settled (the row's label says when not)
        "mcem_q_trace": q_traces,
        "activity_ink_layer1": None if mixing_diag is None else mixing_diag["activity_ink_layer1"],
        "test_images_per_second": float(n_models * len(x) / max(infer_seconds, 1e-9)),  # per model pass
        "n_features": int(np.prod(top_shape)),
        "pretrain_n_images": pretrained_layers[0].n_input,
        "dict_sizes": [int(v.shape[-1]) for v in samples_d],
    }), metrics=snakemake.output.metrics, predictions=snakemake.output.predictions)
progress(f"done in {elapsed():.1f} s")
