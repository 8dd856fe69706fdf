"""rule transfer: ImageNet -> Caltech (Sec. 4.3-4.4). The layers learned on the source
dataset (its MCEM estimate) are held fixed; the Caltech images, at `transfer.image_size`
and scaled as the source's inputs, get their top-layer features by test-time MCEM
(Algorithm 2), and a new Bayesian SVM is trained on them. Accuracy averaged over classes.
"""

import dataclasses

from _common import elapsed, plain, progress, provenance, start, write_resolved_config

start(snakemake, tensorflow=True)

from dgdm_tf.core.random import seed_for  # noqa: E402

import numpy as np  # noqa: E402

from dgdm_tf.io import artifacts  # noqa: E402
from dgdm_tf.report import rows  # noqa: E402

from dgdm_tf import data

from dgdm_tf.mcem import test_time as deep_mcem
from dgdm_tf.mcem.options import TransferOptions  # noqa: E402
from dgdm_tf.topdown.options import Start  # noqa: E402
from dgdm_tf.report.scores import class_mean_accuracy, error_pct  # noqa: E402
from dgdm_tf.supervised.options import SvmOptions  # noqa: E402
from dgdm_tf.supervised.svm_classifier import BayesianSVM  # noqa: E402

ds = snakemake.wildcards.ds
seed_ds = snakemake.params.seed_name  # an ablation draws as its base does: paired runs
tcfg = plain(snakemake.params.cfg)
spec = plain(snakemake.params.spec)
run_cfg = plain(snakemake.params.run_config)
seed = int(run_cfg["seed"])
layers = plain(snakemake.params.source_layers)
size = int(tcfg["image_size"])

# the same per-class split as the dataset's other rows (same seed), at the transfer size
spec_t = {**spec, "image_size": [size, size], "image_shape": None, "normalise": "imagenet"}
summary = data.prepare_dataset(ds, spec_t, snakemake.params.raw_dir, snakemake.output.data,
                               seed=int(snakemake.params.data_seed))
d = data.load_prepared(snakemake.output.data)
source = artifacts.read_mcem_model(snakemake.input.model)
dictionaries, source_seconds = source.D, source.wall_seconds
n_classes = int(summary["n_classes"])
progress(f"{ds}: transfer from {snakemake.params.source}: {summary['n_train']} training / "
         f"{summary['n_test']} test images at {size}x{size}, {n_classes} classes")

options = dataclasses.replace(TransferOptions.from_config(tcfg), scan=snakemake.params.scan).map
feats = {}
for split in ("train", "test"):
    x = d[f"x_{split}"]
    if tcfg[f"n_{split}"] is not None:
        x = x[: int(tcfg[f"n_{split}"])]
    res = deep_mcem.infer_map(
        x, Start(dictionaries, layers, gamma_s_init=float(snakemake.params.gamma_s)), options,
        seed=seed_for(seed, seed_ds, "transfer", split), progress=progress)
    feats[split] = res["features"]
y_train = d["y_train"][: len(feats["train"])]
y_test = d["y_test"][: len(feats["test"])]
artifacts.write_transfer_features(snakemake.output.features,
                                  artifacts.FeatureSplit(feats["train"], y_train),
                                  artifacts.FeatureSplit(feats["test"], y_test))

svm = BayesianSVM(n_classes, SvmOptions.from_config(plain(snakemake.params.svm)),
                  seed=seed_for(seed, seed_ds, "transfer", "svm"), progress=progress)
svm.fit(feats["train"], y_train)
scores = np.asarray(svm.decision_function(feats["test"]))
pred = np.argmax(scores, 1)
acc = class_mean_accuracy(y_test, pred, n_classes)
err = error_pct(pred, y_test)
progress(f"{ds}: transfer: accuracy averaged over classes {acc:.2f}%, test error {err:.2f}%")

write_resolved_config(snakemake.output.config, snakemake.params.config_files, "imagenet_transfer",
                      run_cfg)
rows.write_row(rows.RowResult(
    ds, "imagenet_transfer", y_test, pred, n_classes, n_train=len(y_train),
    by_step={"source_mcem_train": source_seconds, "transfer": elapsed()},
    provenance=provenance(seed, snakemake.params.config_files, run_cfg),
    train_error_pct=error_pct(svm.predict(feats["train"]), y_train), scores=scores,
    fields={"source": snakemake.params.source, "n_features": int(feats["train"].shape[1]),
            "image_size": size}),
    metrics=snakemake.output.metrics, predictions=snakemake.output.predictions)
progress(f"done in {elapsed():.1f} s")
