"""Does a fixed, elementwise transform of a row's features change what the Bayesian SVM
reads from them? On a run's ``features.npz`` of one row (METHOD: any of
``pretrained_svm``, ``unsupervised_svm``, ``pretrained_block_svm``), the run's own SVM
settings (its config's ``svm``), one fit per transform:

* ``signed``: the features as written (the paper's s_n);
* ``split``: max(f, 0) and max(-f, 0), 2F features;
* ``abs``: |f|;
* ``power``: sign(f) sqrt(|f|) (power normalisation, Perronnin et al. 2010).

Inputs: RESULTS/METHOD/features.npz (and the row's metrics.json, if there), made by
`snakemake --cores all results/mnist/pretrained_svm/metrics.json` (RESULTS = results/mnist).

    python experiments/svm_wide/feature_transform.py --results results/mnist --method pretrained_svm
"""
from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from dgdm_tf.io import artifacts  # noqa: E402
from dgdm_tf.io.run_inputs import read_run_config  # noqa: E402
from dgdm_tf.supervised.feature_view import svm_view  # noqa: E402
from dgdm_tf.supervised.options import SvmOptions  # noqa: E402
from dgdm_tf.supervised.svm_classifier import BayesianSVM  # noqa: E402

TRANSFORMS = {  # signed and split are the workflow's svm_view; the others probes only
    "signed": lambda f: svm_view(f, "signed"),
    "split": lambda f: svm_view(f, "split"),
    "abs": np.abs,
    "power": lambda f: np.sign(f) * np.sqrt(np.abs(f)),
}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--results", required=True, help="results/<dataset> of a run with the row's features")
    p.add_argument("--config", default=None, help="the run's config (default: <repo>/config/config.yaml)")
    p.add_argument("--method", default="pretrained_svm", help="the row whose features.npz to read")
    p.add_argument("--transforms", default=",".join(TRANSFORMS), help="comma-separated, of " + ", ".join(TRANSFORMS))
    p.add_argument("--smoke", action="store_true", help="a short SVM chain, to check the probe runs")
    a = p.parse_args(argv)
    run = read_run_config(a.results, a.config)
    svm_cfg = dict(run.block["svm"])
    if a.smoke:
        svm_cfg.update(method="gibbs", burn_in=2, collect=2)
    row = run.results / a.method
    feats = artifacts.read_features(row / "features.npz")
    metrics = row / "metrics.json"
    shown = (f"{json.loads(metrics.read_text())['test_error_pct']:.2f}%" if metrics.is_file()
             else "no metrics.json")
    print(f"{row}: {feats.train.f.shape} / {feats.test.f.shape}; the row: {shown}", flush=True)
    errors = {}
    for name in a.transforms.split(","):
        t = time.time()
        tr, te = TRANSFORMS[name](feats.train.f), TRANSFORMS[name](feats.test.f)
        svm = BayesianSVM(feats.n_classes, SvmOptions.from_config(svm_cfg), seed=3).fit(tr, feats.train.y)
        err = 100.0 * float(np.mean(np.asarray(svm.predict(te)) != feats.test.y))
        tr_err = 100.0 * float(np.mean(np.asarray(svm.predict(tr)) != feats.train.y))
        errors[name] = err
        print(f"{name:7s} {tr.shape[1]:5d} features: test {err:.2f}%  train {tr_err:.2f}%  "
              f"({time.time() - t:.0f} s)", flush=True)
    return errors


if __name__ == "__main__":
    main()
