"""Does the Bayesian SVM's EM read out the same after fewer steps? On a run's
``features.npz`` of one EM row (the reference row, ``encoder_svm``), the run's SVM
settings with ``em_iters`` set to each of STEPS, fitted on the first n of the row's
training images (the learning curves' subsets, ``dgdm_tf.report.learning_curves.training_rows``)
and tested on all of its test images; each fit paired (McNemar) against the most steps'
on the same test images.

Inputs: RESULTS/METHOD/features.npz, made by `snakemake --cores all
results/<ds>/encoder_svm/metrics.json`; the SVM settings of the config's data set
DATASET (an ablation's: its base's, e.g. `--dataset mnist` for results/paper_size).

    python experiments/svm_wide/em_steps.py --results results/paper_size --dataset mnist \
        --sizes 10000 --steps 3,10,20,50
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import yaml  # noqa: E402

from dgdm_tf.core.random import seed_for  # noqa: E402
from dgdm_tf.data.subsets import subset_seeds  # noqa: E402
from dgdm_tf.io import artifacts  # noqa: E402
from dgdm_tf.report.learning_curves import training_rows  # noqa: E402
from dgdm_tf.report.scores import error_pct, paired_errors  # noqa: E402
from dgdm_tf.supervised.feature_view import svm_view  # noqa: E402
from dgdm_tf.supervised.options import SvmOptions  # noqa: E402
from dgdm_tf.supervised.svm_classifier import BayesianSVM  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--results", required=True, help="results/<ds> of a run with the row's features")
    p.add_argument("--config", default=None, help="the run's config (default: <repo>/config/config.yaml)")
    p.add_argument("--dataset", default=None, help="the config's data set (default: the results folder's name)")
    p.add_argument("--method", default="encoder_svm", help="the row whose features.npz to read")
    p.add_argument("--sizes", default="10000", help="training images of each fit, comma-separated")
    p.add_argument("--steps", default="3,10,20,50", help="EM steps of each fit, comma-separated")
    p.add_argument("--out", default=None, help="write the fits as JSON here")
    p.add_argument("--smoke", action="store_true", help="tiny sizes, to check the probe runs")
    a = p.parse_args(argv)
    results = Path(a.results)
    ds = a.dataset or results.name
    config = Path(a.config) if a.config else results.resolve().parents[1] / "config" / "config.yaml"
    full = yaml.safe_load(config.read_text())
    seed = int(full["seed"])
    svm_cfg = dict(full["datasets"][ds]["svm"], method="em")
    feats = artifacts.read_features(results / a.method / "features.npz")
    f_train, f_test = svm_view(feats.train.f, "signed"), svm_view(feats.test.f, "signed")
    y_train, y_test = feats.train.y, feats.test.y
    sizes = [int(n) for n in a.sizes.split(",")]
    steps = sorted(int(s) for s in a.steps.split(","))
    if a.smoke:
        sizes, steps = [min(20, len(y_train))], [1, 2]
    print(f"{results / a.method}: {f_train.shape} / {f_test.shape}; EM steps {steps} at {sizes} images",
          flush=True)
    rows = []
    for n in sizes:
        sel = training_rows(feats.train.idx, y_train, n, subset_seeds(seed, ds)["train"])
        fits = {}
        for k in steps:
            t0 = time.perf_counter()
            svm = BayesianSVM(feats.n_classes, SvmOptions.from_config({**svm_cfg, "em_iters": k}),
                              seed=seed_for(seed, ds, a.method, "svm"))
            svm.fit(f_train[sel], y_train[sel])
            pred = svm.predict(f_test)
            fits[k] = {"n_train": len(sel), "steps": k, "seconds": time.perf_counter() - t0,
                       "test_error_pct": error_pct(pred, y_test),
                       "train_error_pct": error_pct(svm.predict(f_train[sel]), y_train[sel]),
                       "predicted": pred}
        ref = fits[steps[-1]]
        for k in steps:
            r = fits[k]
            r["against_most_steps"] = paired_errors(ref["predicted"], r["predicted"], y_test)
            q = r["against_most_steps"]
            print(f"n {r['n_train']}, {k} EM steps: test {r['test_error_pct']:.2f}% (train "
                  f"{r['train_error_pct']:.2f}%), {r['seconds']:.0f} s; against {steps[-1]} steps "
                  f"{q['diff_pct_points']:+.2f} +- {q['se_pct_points']:.2f} points, McNemar p "
                  f"{q['mcnemar_exact_p']:.2g}", flush=True)
            rows.append({key: v for key, v in r.items() if key != "predicted"})
    if a.out:
        Path(a.out).write_text(json.dumps({"results": str(results), "method": a.method, "rows": rows}, indent=1))
    return rows


if __name__ == "__main__":
    main()
