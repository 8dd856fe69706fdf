"""Does joint training add anything over the two-step pipeline on the same images?

The supervised row trains its model and SVM jointly on `supervised.n_train` labelled
images and tests on `supervised.n_test`. This probe fits the same Bayesian SVM (the
run's `svm` settings and view) on the `unsupervised_svm` row's top-down features of
exactly those images (the first of the same seeded subsets: the unsupervised row's
features cover them when it runs on at least as many) and prints its test error beside
the supervised row's and the same-images reference and CNN, where the run has them.

    python experiments/supervised/same_images_pipeline.py RUN_DIR [SVM_SEED]

RUN_DIR: a default run (`snakemake --cores all results/tables.md`), config/config.yaml.
"""
import json
import sys
import time
from pathlib import Path

import numpy as np
import yaml

from dgdm_tf.core.random import seed_for
from dgdm_tf.io import artifacts
from dgdm_tf.supervised.feature_view import svm_view
from dgdm_tf.supervised.svm_classifier import BayesianSVM

run = Path(sys.argv[1])
cfg = yaml.safe_load((run / "config/config.yaml").read_text())
ds = "mnist"
block = cfg["datasets"][ds]
res = run / "results" / ds
sup = json.loads((res / "supervised/metrics.json").read_text())
n_train, n_test = int(sup["n_train"]), int(sup["n_test"])
feats = artifacts.read_features(res / "unsupervised_svm/features.npz")
sup_model = artifacts.read_supervised_model(res / "supervised/model.npz")
train_idx = np.asarray(sup_model.image_indices)
if not np.array_equal(feats.train.idx[:n_train], train_idx):
    raise SystemExit("the unsupervised row's training images do not begin with the supervised row's")
pred = np.genfromtxt(res / "supervised/predictions.csv", delimiter=",", names=True)
if not np.array_equal(feats.test.idx[:n_test], pred["test_index"].astype(np.int64)):
    raise SystemExit("the unsupervised row's test images do not begin with the supervised row's")
view = block["svm_view"]
f_tr, f_te = svm_view(feats.train.f[:n_train], view), svm_view(feats.test.f[:n_test], view)
y_tr, y_te = feats.train.y[:n_train], feats.test.y[:n_test]
seed = int(sys.argv[2]) if len(sys.argv) > 2 else seed_for(cfg["seed"], ds, "unsupervised_svm", "svm")
t0 = time.time()
svm = BayesianSVM(feats.n_classes, seed=seed, progress=None, **block["svm"]).fit(f_tr, y_tr)
err = 100.0 * float(np.mean(np.asarray(svm.predict(f_te)) != y_te))
print(f"images: {n_train} / {n_test} (the supervised row's)")
print(f"supervised row (joint model and SVM): {sup['test_error_pct']:.2f} %")
print(f"unsupervised row's features + the same SVM, fitted on these images: {err:.2f} % "
      f"(SVM seed {seed}, {time.time() - t0:.0f} s)")
for name, where in (("reference row", "encoder_at/supervised"), ("CNN", "cnn_at/supervised")):
    p = res / where / "metrics.json"
    if p.exists():
        print(f"{name} on the same images: {json.loads(p.read_text())['test_error_pct']:.2f} %")
