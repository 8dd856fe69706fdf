"""rule svm: one-vs-all Bayesian SVM on the features (pretrained_svm, unsupervised_svm,
or the reference row encoder_svm, and encoder_at/<row>: the same at a Gibbs row's
images); metrics.json, predictions.csv and the run's resolved config (config.yaml) in
the run directory."""

import json

from _common import elapsed, plain, progress, provenance, start, write_resolved_config

start(snakemake, tensorflow=True)

from dgdm_tf.core.random import seed_for  # noqa: E402

import numpy as np  # noqa: E402

from dgdm_tf.io import artifacts  # noqa: E402
from dgdm_tf.report import rows  # noqa: E402
from dgdm_tf.report.scores import error_pct  # noqa: E402
from dgdm_tf.supervised.feature_view import svm_view  # noqa: E402
from dgdm_tf.supervised.options import SvmOptions  # noqa: E402
from dgdm_tf.supervised.same_images import same_images_error  # noqa: E402
from dgdm_tf.supervised.svm_classifier import BayesianSVM  # noqa: E402

ds = snakemake.wildcards.ds
seed_ds = snakemake.params.seed_name  # an ablation draws as its base does: paired runs
method = snakemake.params.method
run_cfg = plain(snakemake.params.run_config)
seed = int(run_cfg["seed"])
svm_block = plain(snakemake.params.svm)
svm_options = SvmOptions.from_config(svm_block)
view = str(snakemake.params.view)
# the reference row, or the same at a Gibbs row's images (encoder_at/<row>)
reference = bool(snakemake.params.reference)

feats = artifacts.read_features(snakemake.input.features)
f_train, y_train, f_test, y_test = feats.train.f, feats.train.y, feats.test.f, feats.test.y
f_train, f_test = svm_view(f_train, view), svm_view(f_test, view)
idx_test, n_classes, features_seconds = feats.test.idx, feats.n_classes, feats.wall_seconds
progress(f"{ds}: SVM on train {f_train.shape}, test {f_test.shape} ({view} features), "
         f"{n_classes} classes, {svm_block}")

model = BayesianSVM(n_classes, svm_options, seed=seed_for(seed, seed_ds, method, "svm"),
                    progress=progress)
model.fit(f_train, y_train)
scores = np.asarray(model.decision_function(f_test))
pred_test = np.asarray(model.predict(f_test))
test_err = error_pct(pred_test, y_test)
train_err = error_pct(model.predict(f_train), y_train)
progress(f"{ds}: test error {test_err:.2f}%, train error {train_err:.2f}%")

same_subset = None
if "pretrained_features" in snakemake.input.keys():
    # reference: the same SVM on the pretrained features of exactly these images
    with open(snakemake.input.pretrained_metrics) as f:
        pretrained_error = json.load(f)["test_error_pct"]
    same_subset = same_images_error(
        feats, artifacts.read_features(snakemake.input.pretrained_features), pretrained_error,
        view=view, n_classes=n_classes, svm=svm_options,
        seed=seed_for(seed, seed_ds, method, "svm_ref"), progress=progress)
    if same_subset is not None:
        progress(f"{ds}: pretrained features, same images: test error {same_subset:.2f}%")

# wall time of the run: every rule that produced this number
layers = [artifacts.read_pretrained_layer(p) for p in snakemake.input.layers]
refine = (artifacts.read_refined_model(snakemake.input.refine)
          if "refine" in snakemake.input.keys() else None)
by_step = artifacts.upstream_seconds(snakemake.input.summary, layers, refine)
n_pre = layers[0].n_input if layers else None
if refine is not None:
    refine_n_images = int(len(refine.image_indices))
    dict_sizes = [int(np.shape(d)[-1]) for d in refine.D]
    by_step["topdown_features"] = features_seconds
else:
    refine_n_images = None
    dict_sizes = [int(np.shape(z.D)[-1]) for z in layers]
    by_step["encoder_features" if reference else "features"] = features_seconds
by_step["svm"] = elapsed()

write_resolved_config(snakemake.output.config, snakemake.params.config_files, method, run_cfg)
rows.write_row(rows.RowResult(
    ds, method, y_test, pred_test, n_classes, n_train=len(y_train), by_step=by_step,
    provenance=provenance(seed, snakemake.params.config_files, run_cfg),
    train_error_pct=train_err, scores=scores, test_index=idx_test, fields={
        "n_features": int(f_train.shape[1]),  # as the SVM read them (svm_view)
        "svm_view": view,
        # how the SVM was fitted (encoder_svm: encoder.svm_method; the others: svm.method)
        "svm_method": model.options.method,
        "svm_iterations": len(model.trace),  # EM steps or Gibbs sweeps
        "svm_em_last_rel_decrease": model.em_last_rel_decrease(),
        # EM's linear solves (svm.em_solver): "dense" or "cg", and CG's iterations in all
        "svm_em_solver": model.em_solver_,
        "svm_cg_iterations": model.cg_iterations(),
        "pretrain_n_images": n_pre,
        "refine_n_images": refine_n_images,
        # has the refinement settled (rule refine; the row's label says when not)
        "chain": None if refine is None else refine.settlement,
        "pretrained_same_subset_test_error_pct": same_subset,
        "same_images_as": method.split("/", 1)[1] if method.startswith("encoder_at/") else None,
        "dict_sizes": dict_sizes,
    }), metrics=snakemake.output.metrics, predictions=snakemake.output.predictions)
progress(f"done in {elapsed():.1f} s")
