"""Does the supervised row's test error drop if its SVM is refitted on label-free features?

The supervised chain draws its training images' top layer with the SVM's augmented
likelihood (labels in); the test images' top layer comes from the test route (supplement
Algorithm 2, no labels). For each of the first MODELS kept models of a finished
`supervised` row, on the first N_TRAIN training and N_TEST test images of the row's own
shared subsets (`dgdm_tf.data.subsets.shared_subset`, as supervised_predict's `images_of`):

  a. the test-route features of both sets, by `dgdm_tf.mcem.classify.top_features` with
     the row's settings (`dgdm_tf.mcem.classify.supervised_route`, as the row's
     `classify_supervised` takes them), seeded as supervised_predict seeds
     kept model j: test images `seed_for(seed, ds, "supervised_predict", j)`, training
     images `seed_for(seed, ds, "supervised_mismatch", j)` (its mismatch check);
  b. the jointly trained SVM (that model's beta, `dgdm_tf.supervised.joint_svm.decision_values`
     with the chain's standardisation, as `classify` scores) on both sets;
  c. a new Bayesian SVM (`dgdm_tf.supervised.svm_classifier.BayesianSVM` with the row's
     `svm` block on its `svm_view`, as workflow/scripts/svm.py fits the other rows; seed
     `seed_for(seed, ds, "supervised_refit", "svm", j)`) fitted on the training images'
     test-route features, read on the same test features;
  d. errors with sqrt(p (1 - p) / n), and b vs c paired on the same test images: the
     difference, its paired standard error and McNemar's exact test on the discordant images.
With MODELS > 1 the decision values are also averaged over the models (the row's rule).
With every kept model, the averaged joint decision values are checked against the row's
predictions.csv.

    nice -n 10 python experiments/estimators/supervised_refit.py --results results/mnist \
        --n-train 2000 --n-test 2000 --models 1 --out <runs>/refit.json
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import yaml  # noqa: E402

from dgdm_tf.core.compiled import reproducible_graphs  # noqa: E402
from dgdm_tf.core.random import seed_for  # noqa: E402
from dgdm_tf.data.arrays import load_prepared  # noqa: E402
from dgdm_tf.data.subsets import shared_subset  # noqa: E402
from dgdm_tf.io import atomic  # noqa: E402
from dgdm_tf.io.artifacts import read_supervised_model  # noqa: E402
from dgdm_tf.mcem.classify import KeptModels, top_features  # noqa: E402
from dgdm_tf.mcem.options import PredictOptions  # noqa: E402
from dgdm_tf.report.scores import error_pct, paired_errors, standard_error_pct  # noqa: E402
from dgdm_tf.supervised.feature_view import svm_view  # noqa: E402
from dgdm_tf.supervised.joint_svm import decision_values  # noqa: E402
from dgdm_tf.supervised.options import SvmOptions  # noqa: E402
from dgdm_tf.supervised.svm_classifier import BayesianSVM  # noqa: E402

T0 = time.perf_counter()


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')} +{time.perf_counter() - T0:7.1f} s] {msg}", flush=True)


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--results", default="results/mnist", help="results/<dataset> of a finished supervised row")
    p.add_argument("--config", default=None, help="the row's resolved config (default RESULTS/supervised/config.yaml), "
                   "or a config with `datasets`")
    p.add_argument("--n-train", type=int, default=2000)
    p.add_argument("--n-test", type=int, default=2000)
    p.add_argument("--models", type=int, default=1, help="the first MODELS kept models")
    p.add_argument("--out", default=None, help="write the results as JSON here")
    p.add_argument("--smoke", action="store_true", help="tiny sizes and SVM chain, to check the probe runs")
    a = p.parse_args(argv)
    if a.smoke:
        a.n_train, a.n_test = 20, 10
    return a


def err(pred, y) -> dict:
    e = error_pct(pred, y)
    return {"error_pct": e, "se_pct": standard_error_pct(e, len(y))}


def paired(pred_a, pred_b, y) -> dict:
    """refit (b) minus joint (a) on the same images (dgdm_tf.report.scores.paired_errors)."""
    p = paired_errors(pred_a, pred_b, y)
    return {"diff_pct_points": p["diff_pct_points"], "se_pct_points": p["se_pct_points"],
            "wrong_only_joint": p["wrong_only_a"], "wrong_only_refit": p["wrong_only_b"],
            "wrong_both": p["wrong_both"], "mcnemar_exact_p": p["mcnemar_exact_p"]}


def main(argv=None):
    a = parse(argv)
    reproducible_graphs()  # as the rule scripts (workflow/scripts/_common.start)
    root = Path(a.results)
    rc = yaml.safe_load(Path(a.config or root / "supervised" / "config.yaml").read_text())
    if "datasets" in rc:  # a config file, not a run's resolved one
        rc = {**rc, "dataset": root.name, "block": rc["datasets"][root.name]}
    ds, seed, block, hyper = rc["dataset"], int(rc["seed"]), rc["block"], rc["hyper"]
    if a.smoke:
        block = {**block, "svm": {**block["svm"], "burn_in": 5, "collect": 5}}
    scfg, pcfg, layers = block["supervised"], block["supervised"]["predict"], block["model"]["layers"]
    sup = read_supervised_model(root / "supervised" / "model.npz")
    d = load_prepared(root / "data" / "prepared.npz")
    n_classes, n_kept = int(sup.n_classes), len(sup.samples_beta)
    if not 1 <= a.models <= n_kept:
        raise SystemExit(f"--models must be 1..{n_kept}")
    n_test = min(a.n_test, int(scfg["n_test"] or block["n_test"]))
    x = {"train": shared_subset(d, "train", block["n_train"], a.n_train, seed, ds),
         "test": shared_subset(d, "test", block["n_test"], n_test, seed, ds)}
    y = {s: x[s][1] for s in x}
    salt = {"train": "supervised_mismatch", "test": "supervised_predict"}
    route = PredictOptions.from_supervised(scfg).route
    kept = KeptModels.of_supervised(sup, layers, hyper)
    say(f"{root}: {len(y['train'])} train / {len(y['test'])} test images, kept models 1..{a.models} of "
        f"{n_kept}; route {route}; svm {block['svm']} on the {block['svm_view']} view")
    out = {"results": str(root), "n_train": len(y["train"]), "n_test": len(y["test"]), "models": a.models,
           "route": {"features": pcfg["features"], **dataclasses.asdict(route)}, "svm": block["svm"],
           "svm_view": block["svm_view"], "chain_train_error_pct_all": sup.train_error_pct, "per_model": []}
    dv_joint = {"train": [], "test": []}
    dv_refit = {"train": [], "test": []}
    for j in range(a.models):
        feats, secs = {}, {}
        for split in ("train", "test"):
            s = seed_for(seed, ds, salt[split], j)
            say(f"model {j + 1}: test-route features of {len(y[split])} {split} images (seed {s})")
            r = top_features(x[split][0], kept.start(j), route, seed=s)
            feats[split], secs[split] = r["features"], float(r["seconds"])
            say(f"model {j + 1}: {split} features in {secs[split]:.0f} s "
                f"({1000 * secs[split] / len(y[split]):.0f} ms an image)")
        row = {"model": j + 1, "feature_seconds": secs}
        for split in ("train", "test"):
            dv = decision_values([sup.samples_beta[j]], sup.svm_mean, sup.svm_std, feats[split])
            dv_joint[split].append(dv)
            row[f"joint_{split}"] = err(np.argmax(dv, 1), y[split])
        t = time.perf_counter()
        svm_seed = seed_for(seed, ds, "supervised_refit", "svm", j)
        svm = BayesianSVM(n_classes, SvmOptions.from_config(block["svm"]), seed=svm_seed)
        svm.fit(svm_view(feats["train"], block["svm_view"]), y["train"])
        for split in ("train", "test"):
            dv = np.asarray(svm.decision_function(svm_view(feats[split], block["svm_view"])))
            dv_refit[split].append(dv)
            row[f"refit_{split}"] = err(np.argmax(dv, 1), y[split])
        row.update(svm_seed=svm_seed, svm_seconds=time.perf_counter() - t,
                   paired_test=paired(np.argmax(dv_joint["test"][-1], 1), np.argmax(dv_refit["test"][-1], 1),
                                      y["test"]))
        out["per_model"].append(row)
        say(f"model {j + 1}: joint SVM test {row['joint_test']['error_pct']:.2f} % train "
            f"{row['joint_train']['error_pct']:.2f} %; refit SVM test {row['refit_test']['error_pct']:.2f} % "
            f"train {row['refit_train']['error_pct']:.2f} % (SVM {row['svm_seconds']:.0f} s); paired "
            f"{json.dumps(row['paired_test'])}")
    if a.models > 1:
        avg = {k: {s: np.mean(v[s], axis=0) for s in v} for k, v in (("joint", dv_joint), ("refit", dv_refit))}
        out["averaged"] = {f"{k}_{s}": err(np.argmax(avg[k][s], 1), y[s]) for k in avg for s in ("train", "test")}
        out["averaged"]["paired_test"] = paired(np.argmax(avg["joint"]["test"], 1),
                                                np.argmax(avg["refit"]["test"], 1), y["test"])
        say(f"averaged over {a.models} models: {json.dumps(out['averaged'])}")
    # the row's own predictions (every kept model averaged) on the same test images
    pred = pd.read_csv(root / "supervised" / "predictions.csv").iloc[: len(y["test"])]
    if not np.array_equal(pred["test_index"].to_numpy(), x["test"][2]):
        raise SystemExit("predictions.csv is not in the order of the row's test subset")
    out["row_predictions_test"] = err(pred["predicted"].to_numpy(), y["test"])
    if a.models == n_kept:  # the same route and seeds as the row: the same decision values?
        scores = pred[[f"score_{c}" for c in range(n_classes)]].to_numpy()
        mine = np.mean(dv_joint["test"], axis=0)
        out["row_check"] = {"max_abs_diff": float(np.max(np.abs(mine - scores))),
                            "same_labels": bool(np.array_equal(np.argmax(mine, 1), pred["predicted"].to_numpy()))}
        say(f"check against the row's predictions.csv: {out['row_check']}")
    out["wall_seconds"] = time.perf_counter() - T0
    say(f"done: {json.dumps(out['per_model'])}")
    if a.out:
        atomic.write_json(a.out, out)
    return out


if __name__ == "__main__":
    main()
