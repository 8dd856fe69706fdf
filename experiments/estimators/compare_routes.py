"""Which test-time estimator of the top layer reads out best, under which gamma_s?

The `pretrained_svm` row's model (its pretrained layers, D held, its scan, start, gamma_e
and gamma_s starts) on the first N_TRAIN / N_TEST images of the row's shared subsets,
read out with the row's Bayesian SVM (its `svm` settings, fitted on the training images'
features of the same estimator), for each kind of gamma_s (`hyper.gamma_s`) asked:

  first  - the first sweep's Rao-Blackwellised top layer (the rows' current features):
           one chain, `collect` 1, no burn-in;
  mean   - the posterior mean after burn-in: CHAINS chains of BURN_IN + COLLECT sweeps,
           the mean of the COLLECT sweeps' Rao-Blackwellised top layers over every chain,
           with R-hat and bulk ESS across the chains (per image and feature, over the
           features that are not constant);
  alg2   - supplement Algorithm 2: ALG2_BURN_IN Gibbs sweeps (default 1), then MCEM
           iterations until each image's Q changes by less than TOL (at most MAX_IT), its
           M-step point.

Test errors carry their binomial standard error sqrt(p (1 - p) / N_TEST).
Inputs: RESULTS/pretrain/layer*.npz and RESULTS/data/prepared.npz, made by
`snakemake --cores all results/mnist/pretrain/layer2.npz` (RESULTS = results/mnist).

    python experiments/estimators/compare_routes.py --results results/mnist \
        --n-train 500 --n-test 500 --out docs/findings/test_time_estimators.json
"""
from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from dgdm_tf.data.arrays import load_prepared  # noqa: E402
from dgdm_tf.data.subsets import shared_subset  # noqa: E402
from dgdm_tf.io import atomic  # noqa: E402
from dgdm_tf.io.run_inputs import read_pretrained_model, read_run_config  # noqa: E402
from dgdm_tf.mcem.options import MapOptions  # noqa: E402
from dgdm_tf.mcem.test_time import infer_map  # noqa: E402
from dgdm_tf.mcmc.diagnostics import feature_draws_summary  # noqa: E402
from dgdm_tf.report.scores import standard_error_pct  # noqa: E402
from dgdm_tf.pretrain.ridge_start import RidgeStart  # noqa: E402
from dgdm_tf.supervised.options import SvmOptions  # noqa: E402
from dgdm_tf.supervised.svm_classifier import BayesianSVM  # noqa: E402
from dgdm_tf.topdown.chain import infer_topdown  # noqa: E402
from dgdm_tf.topdown.options import Start, TopdownOptions  # noqa: E402


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--results", required=True, help="results/<dataset> of a run that pretrained its layers")
    p.add_argument("--config", default=None, help="the run's config (default: <repo>/config/config.yaml)")
    p.add_argument("--n-train", type=int, default=500)
    p.add_argument("--n-test", type=int, default=500)
    p.add_argument("--burn-in", type=int, default=16)
    p.add_argument("--collect", type=int, default=32)
    p.add_argument("--chains", type=int, default=2)
    p.add_argument("--tol", type=float, default=1e-4)
    p.add_argument("--max-it", type=int, default=40)
    p.add_argument("--alg2-burn-in", type=int, default=1, help="alg2: Gibbs sweeps before the first MCEM iteration")
    p.add_argument("--kinds", default="image_map,global", help="hyper.gamma_s kinds, comma-separated")
    p.add_argument("--routes", default="first,mean,alg2")
    p.add_argument("--out", default=None, help="write the results as JSON here")
    p.add_argument("--smoke", action="store_true", help="tiny sizes, to check the probe runs")
    a = p.parse_args(argv)
    if a.smoke:
        a.n_train, a.n_test, a.burn_in, a.collect, a.max_it = 40, 20, 2, 4, 3
    return a


def main(argv=None):
    a = parse(argv)
    run = read_run_config(a.results, a.config)
    root, ds_name, full, block, seed0 = run.results, run.dataset, run.config, run.block, run.seed
    layers, tcfg = run.layers, block["topdown_features"]
    pretrained = read_pretrained_model(root, len(layers))
    ds, gamma_s0, gamma_e0 = pretrained.dictionaries, pretrained.gamma_s, pretrained.gamma_e
    prep = load_prepared(root / "data" / "prepared.npz")
    n_classes = len(prep["class_names"])
    x, y = {}, {}
    for split, n in (("train", a.n_train), ("test", a.n_test)):
        x[split], y[split], _ = shared_subset(prep, split, block[f"n_{split}"], n, seed0, ds_name)
    start = RidgeStart.from_config(tcfg["start"])
    print(f"{root}: {a.n_train} / {a.n_test} images; gamma_s start {gamma_s0:.4g}, gamma_e start "
          f"{gamma_e0:.4g}; scan {tcfg['scan']}, start {tcfg['start']['kind']}", flush=True)
    out = {"n_train": a.n_train, "n_test": a.n_test, "burn_in": a.burn_in, "collect": a.collect,
           "chains": a.chains, "tol": a.tol, "max_iterations": a.max_it, "rows": []}
    for kind in a.kinds.split(","):
        hyper = {**(full.get("hyper") or {}), "gamma_s": kind}
        model = Start(ds, layers, hyper, gamma_e_init=gamma_e0, gamma_s_init=gamma_s0)
        common = dict(batch_size=int(tcfg["batch_size"]), scan=tcfg["scan"])
        for route in a.routes.split(","):
            feats, extra, t0 = {}, {}, time.perf_counter()
            for split, seed in (("train", 1), ("test", 2)):
                if route == "alg2":
                    r = infer_map(x[split], model, MapOptions(burn_in=a.alg2_burn_in, iterations=a.max_it,
                                                              tol=a.tol, **common), seed=seed, progress=None)
                    extra[f"iterations_{split}_mean"] = float(np.mean(r["iterations"]))
                    extra[f"converged_{split}"] = float(np.mean(r["converged"]))
                else:
                    first = route == "first"
                    chain = TopdownOptions(burn_in=0 if first else a.burn_in, collect=1 if first else a.collect,
                                           chains=1 if first else a.chains, start=start,
                                           keep_draws=not first, **common)
                    r = infer_topdown(x[split], model, chain, seed=seed, progress=None)
                    if not first:
                        c = feature_draws_summary(r["draws"])
                        extra[f"rhat_{split}_median"] = c["rhat_median"]
                        extra[f"rhat_{split}_above_1.1"] = c["rhat_above_1.1"]
                        extra[f"ess_bulk_{split}_median"] = c["ess_bulk_median"]
                feats[split] = r["features"]
            secs = time.perf_counter() - t0
            svm = BayesianSVM(n_classes, SvmOptions.from_config(block["svm"]), seed=3)
            svm.fit(feats["train"], y["train"])
            err = float(np.mean(np.asarray(svm.predict(feats["test"])) != y["test"]))
            tr = float(np.mean(np.asarray(svm.predict(feats["train"])) != y["train"]))
            row = {"gamma_s": kind, "route": route, "test_error_pct": 100 * err,
                   "se_pct": standard_error_pct(100 * err, a.n_test), "train_error_pct": 100 * tr,
                   "top_units_nonzero": float(np.mean(np.abs(feats["test"]) > 0)), "seconds": secs, **extra}
            out["rows"].append(row)
            print(json.dumps(row), flush=True)
    if a.out:
        atomic.write_json(a.out, out)
    return out


if __name__ == "__main__":
    main()
