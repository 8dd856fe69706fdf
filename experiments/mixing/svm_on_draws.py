"""Does the SVM read the top-down features better when it is trained on each chain's
features (one training row per image and chain) than on their average? On a default
run's pretrained layers and the first n_train / n_test images of the `pretrained_svm`
subset, M top-down chains per image (``infer_topdown(chains=M, keep_chains=True)``, the
run's `topdown_features` sweeps); for m = 1 .. M (the first m chains), the run's
Bayesian SVM trained

* on the m chains' average (the rows' features today), and
* on the m chains' features stacked (m rows per training image, the same label),

each tested on the m chains' average (for a linear SVM the same as averaging the
decision values of the chains, as the paper does with its collected samples):

    python experiments/mixing/svm_on_draws.py results/mnist 4000 2000 4 [cache.npz] [--priors]

The chains' features are cached in ``cache.npz`` (default: none) so that the SVMs can be
rerun without them. Prints one line per (m, training rows). ``--priors``: then, on the
two chains' average, the SVM by EM under other priors (Laplace rate kappa 0.5 / 5 / 50,
Gaussian precision 10 / 100 / 1000), to see whether its regularisation limits the read-out.
"""
import os
import sys
import time

import numpy as np

from dgdm_tf.supervised.svm_classifier import BayesianSVM
from _subsets import pretrained_row, row_chain_features

args = [a for a in sys.argv[1:] if a != "--priors"]
root, n_train, n_test, m_max = args[0], int(args[1]), int(args[2]), int(args[3])
cache = args[4] if len(args) > 4 else None
resolved, z, ds, feats, x, y = pretrained_row(root, n_train, n_test)
run = resolved["block"]
made = np.array([n_train, n_test, m_max])  # what the cache was made for
if cache and os.path.exists(cache):
    per = dict(np.load(cache))
    if not np.array_equal(per.pop("made", None), made):
        sys.exit(f"{cache} holds features for other (n_train, n_test, chains) than {made.tolist()}: "
                 "delete it or name another cache")
    print(f"chains' features from {cache}", flush=True)
else:
    per = {}
    for s, n, seed in (("train", n_train, 1), ("test", n_test, 2)):
        t = time.perf_counter()
        per[s] = row_chain_features(x[s], z, ds, run, seed, m_max)
        print(f"{s}: {m_max} chains of {n} images in {time.perf_counter() - t:.0f} s", flush=True)
    if cache:
        np.savez(cache, made=made, **per)
for m in range(1, m_max + 1):
    test = per["test"][:m].mean(0)
    # one chain stacked is its average: fit it once
    for rows in ("average", "stacked") if m > 1 else ("average",):
        if rows == "average":
            f_train, y_train = per["train"][:m].mean(0), y["train"]
        else:
            f_train = per["train"][:m].reshape(-1, per["train"].shape[-1])
            y_train = np.tile(y["train"], m)
        t = time.perf_counter()
        svm = BayesianSVM(int(feats["n_classes"]), seed=3, progress=None, **run["svm"]).fit(
            f_train, y_train)
        err = 100.0 * float(np.mean(np.asarray(svm.predict(test)) != y["test"]))
        tr = 100.0 * float(np.mean(np.asarray(svm.predict(per["train"][:m].mean(0))) != y["train"]))
        print(f"{m} chain(s), SVM on the {rows} ({len(y_train)} rows): test error {err:.2f} % "
              f"(train, on the average, {tr:.2f} %) on {n_train} / {n_test} images "
              f"(SVM {time.perf_counter() - t:.0f} s)", flush=True)
if "--priors" in sys.argv and m_max >= 2:
    train, test = per["train"][:2].mean(0), per["test"][:2].mean(0)
    for prior in [dict(kappa=0.5), dict(kappa=5.0), dict(kappa=50.0), dict(prior="gaussian", ridge=10.0),
                  dict(prior="gaussian", ridge=100.0), dict(prior="gaussian", ridge=1000.0)]:
        svm = BayesianSVM(int(feats["n_classes"]), method="em", seed=3, progress=None, **prior).fit(
            train, y["train"])
        err = 100.0 * float(np.mean(np.asarray(svm.predict(test)) != y["test"]))
        tr = 100.0 * float(np.mean(np.asarray(svm.predict(train)) != y["train"]))
        print(f"2 chains' average, SVM by EM with {prior}: test error {err:.2f} % (train {tr:.2f} %)",
              flush=True)
