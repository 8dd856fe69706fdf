"""rule svm: one-vs-all Bayesian SVM on the features (pretrained_svm, unsupervised_svm,
or the reference row encoder_svm, and encoder_at/<row>: the same at a Gibbs row's
images); metrics.json, predictions.csv and the run's resolved config (config.yaml) in
the run directory."""

import json

from _common import elapsed, plain, progress, provenance, start, write_resolved_config

start(snakemake, tensorflow=True)

from dgdm_tf.core.random import seed_for  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from dgdm_tf.io import artifacts, atomic as atomic_io  # noqa: E402
from dgdm_tf.report.scores import class_mean_accuracy  # noqa: E402
from dgdm_tf.supervised.feature_view import svm_view  # noqa: E402
from dgdm_tf.supervised.svm_classifier import BayesianSVM  # noqa: E402

ds = snakemake.wildcards.ds
method = snakemake.params.method
run_cfg = plain(snakemake.params.run_config)
seed = int(run_cfg["seed"])
svm_kwargs = plain(snakemake.params.svm)
view = str(snakemake.params.view)
# the reference row, or the same at a Gibbs row's images (encoder_at/<row>)
reference = method == "encoder_svm" or method.startswith("encoder_at/")

feats = artifacts.read_features(snakemake.input.features)
f_train, y_train, f_test, y_test = feats.train.f, feats.train.y, feats.test.f, feats.test.y
f_train, f_test = svm_view(f_train, view), svm_view(f_test, view)
idx_test, n_classes, features_seconds = feats.test.idx, feats.n_classes, feats.wall_seconds
progress(f"{ds}: SVM on train {f_train.shape}, test {f_test.shape} ({view} features), "
         f"{n_classes} classes, {svm_kwargs}")


def em_last_rel_decrease(fitted):
    """EM: the relative decrease of the objective at the last step (None for Gibbs, or
    after one step), to show how far from converged the MAP is."""
    obj = [row["objective"] for row in fitted.trace]
    if fitted.method != "em" or len(obj) < 2:
        return None
    return float((obj[-2] - obj[-1]) / abs(obj[-2]))


model = BayesianSVM(n_classes, seed=seed_for(seed, ds, method, "svm"), progress=progress,
                    **svm_kwargs)
model.fit(f_train, y_train)
scores = np.asarray(model.decision_function(f_test))
pred_test = np.asarray(model.predict(f_test))
pred_train = np.asarray(model.predict(f_train))
test_err = 100.0 * float(np.mean(pred_test != y_test))
train_err = 100.0 * float(np.mean(pred_train != y_train))
progress(f"{ds}: test error {test_err:.2f}%, train error {train_err:.2f}%")

same_subset = None
if "pretrained_features" in snakemake.input.keys():
    # reference: the same SVM on the pretrained features of exactly these images
    pf = artifacts.read_features(snakemake.input.pretrained_features)
    tr, te = feats.train.idx, feats.test.idx
    if np.array_equal(pf.train.idx, tr) and np.array_equal(pf.test.idx, te):
        # the pretrained_svm row is that fit (same images in the same order, same SVM):
        # its test error, not a second fit of the same model
        same_subset = float(json.loads(open(snakemake.input.pretrained_metrics).read())
                            ["test_error_pct"])
    else:
        rows = {int(i): r for r, i in enumerate(pf.train.idx)}
        rows_t = {int(i): r for r, i in enumerate(pf.test.idx)}
        if all(int(i) in rows for i in tr) and all(int(i) in rows_t for i in te):
            pf_tr = svm_view(pf.train.f[[rows[int(i)] for i in tr]], view)
            pf_te = svm_view(pf.test.f[[rows_t[int(i)] for i in te]], view)
            ref = BayesianSVM(n_classes, seed=seed_for(seed, ds, method, "svm_ref"),
                              progress=progress, **svm_kwargs).fit(pf_tr, y_train)
            same_subset = 100.0 * float(np.mean(np.asarray(ref.predict(pf_te)) != y_test))
    if same_subset is not None:
        progress(f"{ds}: pretrained features, same images: test error {same_subset:.2f}%")

# wall time of the run: every rule that produced this number
summary = json.loads(open(snakemake.input.summary).read())
by_step = {"prepare": float(summary.get("seconds", 0.0))}
dict_sizes = []
n_pre = None
for i, path in enumerate(snakemake.input.layers, start=1):
    z = artifacts.read_pretrained_layer(path)
    # a resumed layer's script time covers only the last attempt; the chain's own
    # clock (if it carries over checkpoints) may cover all of them
    by_step[f"pretrain_layer{i}"] = z.seconds
    dict_sizes.append(int(np.shape(z.D)[-1]))
    if i == 1:
        n_pre = z.n_input
if "refine" in snakemake.input.keys():
    z = artifacts.read_refined_model(snakemake.input.refine)
    by_step["refine"] = z.seconds
    refine_n_images = int(len(z.image_indices))
    dict_sizes = [int(np.shape(d)[-1]) for d in z.D]
    by_step["topdown_features"] = features_seconds
else:
    refine_n_images = None
    by_step["encoder_features" if reference else "features"] = features_seconds
by_step["svm"] = elapsed()

pred = pd.DataFrame({"test_index": idx_test, "label": y_test, "predicted": pred_test})
for c in range(scores.shape[1]):
    pred[f"score_{c}"] = scores[:, c]
with atomic_io.atomic_path(snakemake.output.predictions) as tmp:
    pred.to_csv(tmp, index=False, float_format="%.6g")

write_resolved_config(snakemake.output.config, snakemake.params.config_files, method, run_cfg)
metrics = {
    "dataset": ds,
    "method": method,
    "test_error_pct": test_err,
    "test_accuracy_pct": 100.0 - test_err,
    "class_mean_accuracy_pct": class_mean_accuracy(y_test, pred_test, n_classes),
    "train_error_pct": train_err,
    "n_train": int(len(y_train)),
    "n_test": int(len(y_test)),
    "n_classes": n_classes,
    "n_features": int(f_train.shape[1]),  # as the SVM read them (svm_view)
    "svm_view": view,
    # how the SVM was fitted (encoder_svm: encoder.svm_method; the others: svm.method)
    "svm_method": model.method,
    "svm_iterations": len(model.trace),  # EM steps or Gibbs sweeps
    "svm_em_last_rel_decrease": em_last_rel_decrease(model),
    # EM's linear solves (svm.em_solver): "dense" or "cg", and CG's iterations in all
    "svm_em_solver": model.em_solver_,
    "svm_cg_iterations": (sum(row["cg_iterations"] for row in model.trace)
                          if model.em_solver_ == "cg" else None),
    "pretrain_n_images": n_pre,
    "refine_n_images": refine_n_images,
    "pretrained_same_subset_test_error_pct": same_subset,
    "same_images_as": method.split("/", 1)[1] if method.startswith("encoder_at/") else None,
    "dict_sizes": dict_sizes,
    "wall_seconds": float(sum(by_step.values())),
    "wall_seconds_by_step": by_step,
    **provenance(seed, snakemake.params.config_files, run_cfg),
}
atomic_io.write_json(snakemake.output.metrics, metrics)
progress(f"done in {elapsed():.1f} s")
