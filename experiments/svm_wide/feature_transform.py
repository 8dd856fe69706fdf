"""Does a fixed, elementwise transform of a row's features change what the Bayesian SVM
reads from them? On a run's ``features.npz`` (any of ``pretrained_svm``,
``unsupervised_svm``, ``pretrained_block_svm``), the run's own SVM settings, one fit per
transform:

* ``signed``: the features as written (the paper's s_n);
* ``split``: max(f, 0) and max(-f, 0), 2F features;
* ``abs``: |f|;
* ``power``: sign(f) sqrt(|f|) (power normalisation, Perronnin et al. 2010).

    python experiments/svm_wide/feature_transform.py results/mnist/pretrained_svm [names...]
"""
import json
import sys
import time

import numpy as np
import yaml

from dgdm_tf.supervised.feature_view import svm_view
from dgdm_tf.supervised.svm_classifier import BayesianSVM

TRANSFORMS = {  # signed and split are the workflow's svm_view; the others probes only
    "signed": lambda f: svm_view(f, "signed"),
    "split": lambda f: svm_view(f, "split"),
    "abs": np.abs,
    "power": lambda f: np.sign(f) * np.sqrt(np.abs(f)),
}

run_dir = sys.argv[1]
names = sys.argv[2:] or list(TRANSFORMS)
svm_cfg = yaml.safe_load(open(f"{run_dir}/config.yaml"))["block"]["svm"]
feats = np.load(f"{run_dir}/features.npz")
n_classes = int(feats["n_classes"])
print(f"{run_dir}: {feats['f_train'].shape} / {feats['f_test'].shape}; the row: "
      f"{json.load(open(f'{run_dir}/metrics.json'))['test_error_pct']:.2f}%", flush=True)
for name in names:
    t = time.time()
    tr, te = TRANSFORMS[name](feats["f_train"]), TRANSFORMS[name](feats["f_test"])
    svm = BayesianSVM(n_classes, seed=3, progress=None, **svm_cfg).fit(tr, feats["y_train"])
    err = 100.0 * float(np.mean(np.asarray(svm.predict(te)) != feats["y_test"]))
    tr_err = 100.0 * float(np.mean(np.asarray(svm.predict(tr)) != feats["y_train"]))
    print(f"{name:7s} {tr.shape[1]:5d} features: test {err:.2f}%  train {tr_err:.2f}%  "
          f"({time.time() - t:.0f} s)", flush=True)
