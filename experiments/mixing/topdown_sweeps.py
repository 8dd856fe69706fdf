"""How many test-time top-down sweeps does the `pretrained_svm` row need? On a default
run's pretrained layers and the first n_train / n_test images of its subset, the run's
Bayesian SVM on the top-down features (`topdown.chain.infer_topdown`, the run's
`topdown_features` settings) for each burn-in + collect pair given, optionally with
``xM``: M independent chains per image, averaged (``infer_topdown(chains=M)``: chain c
runs on the model with its maps in the c-th fixed order):

    python experiments/mixing/topdown_sweeps.py results/mnist 2000 1000 3+3 2+2 2+2x2

Prints the test error, the fraction of top units above 1e-3, layer 1's activity-ink
and the features' seconds for each setting.
"""
import sys
import time

import numpy as np

from dgdm_tf.mcmc import diagnostics as mixing
from dgdm_tf.supervised.svm_classifier import BayesianSVM
from dgdm_tf.topdown import chain as deep_chain
from _subsets import pretrained_row

root, n_train, n_test = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
settings = []
for p in sys.argv[4:]:
    sweeps, _, m = p.partition("x")
    settings.append((*(int(v) for v in sweeps.split("+")), int(m or 1)))
resolved, z, ds, feats, x, y = pretrained_row(root, n_train, n_test)
run = resolved["block"]
layers, cfg = run["model"]["layers"], run["topdown_features"]
for burn_in, collect, chains in settings:
    t = time.perf_counter()
    res = {s: deep_chain.infer_topdown(
        x[s], ds, layers, seed=seed, burn_in=burn_in, collect=collect,
        batch_size=int(cfg["batch_size"]), gamma_s=float(z[-1]["gamma_w"]),
        gamma_e_init=float(np.mean(z[0]["gamma_e"])), scan=cfg["scan"], chains=chains,
        progress=None) for s, seed in (("train", 1), ("test", 2))}
    secs = time.perf_counter() - t
    f = {s: r["features"] for s, r in res.items()}
    ink = mixing.layer1_diagnostics(res["train"]["layer1_pooled"], x["train"],
                                    int(layers[0]["dict_size"]), int(layers[0]["pool"]))
    on = float(np.mean(np.abs(f["train"]) > 1e-3))
    svm = BayesianSVM(int(feats["n_classes"]), seed=3, progress=None, **run["svm"]).fit(
        f["train"], y["train"])
    err = 100.0 * float(np.mean(np.asarray(svm.predict(f["test"])) != y["test"]))
    print(f"{burn_in} + {collect} sweeps, {chains} chain(s): test error {err:.2f}% on {n_train} / "
          f"{n_test} images, top units > 1e-3 {on:.3f}, layer-1 activity-ink "
          f"{ink['activity_ink_layer1']:.3f} (features {secs:.0f} s)", flush=True)
