"""How many test-time top-down sweeps does the `pretrained_svm` row need? On a default
run's pretrained layers and the first n_train / n_test images of its subset, the run's
Bayesian SVM on the top-down features (`topdown.chain.infer_topdown`, the run's
`topdown_features` settings) for each burn-in + collect pair given:

    python experiments/mixing/topdown_sweeps.py results/mnist 2000 1000 3+3 2+2

Prints the test error and the features' seconds for each pair.
"""
import sys
import time

import numpy as np
import yaml

from dgdm_tf.supervised.svm_classifier import BayesianSVM
from dgdm_tf.topdown import chain as deep_chain

root, n_train, n_test = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
pairs = [tuple(int(v) for v in p.split("+")) for p in sys.argv[4:]]
run = yaml.safe_load(open(f"{root}/pretrained_svm/config.yaml"))["block"]
layers, cfg = run["model"]["layers"], run["topdown_features"]
z = [np.load(f"{root}/pretrain/layer{l + 1}.npz") for l in range(len(layers))]
ds = [a["D"].astype(np.float32) for a in z]
feats = np.load(f"{root}/pretrained_svm/features.npz")
prep = np.load(f"{root}/data/prepared.npz")
x = {s: prep[f"x_{s}"][feats[f"idx_{s}"][:n]].astype(np.float32)
     for s, n in (("train", n_train), ("test", n_test))}
y = {s: feats[f"y_{s}"][:n] for s, n in (("train", n_train), ("test", n_test))}
for burn_in, collect in pairs:
    t = time.perf_counter()
    f = {s: deep_chain.infer_topdown(
        x[s], ds, layers, seed=seed, burn_in=burn_in, collect=collect,
        batch_size=int(cfg["batch_size"]), gamma_s=float(z[-1]["gamma_w"]),
        gamma_e_init=float(np.mean(z[0]["gamma_e"])), scan=cfg["scan"], progress=None)["features"]
        for s, seed in (("train", 1), ("test", 2))}
    secs = time.perf_counter() - t
    svm = BayesianSVM(int(feats["n_classes"]), seed=3, progress=None, **run["svm"]).fit(
        f["train"], y["train"])
    err = 100.0 * float(np.mean(np.asarray(svm.predict(f["test"])) != y["test"]))
    print(f"{burn_in} + {collect} sweeps: test error {err:.2f}% on {n_train} / {n_test} images "
          f"(features {secs:.0f} s)", flush=True)
