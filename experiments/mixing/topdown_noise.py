"""How much of the top-down features' read-out is set by the noise precision gamma_e the
test-time chain runs at? On a default run's pretrained layers and the first n_train /
n_test images of the `pretrained_svm` subset, the run's `topdown_features` chain
(``infer_topdown``: sweeps, chains, scan) and the run's Bayesian SVM, for each setting:

* ``run``: as the row runs it: gamma_e starts at layer 1's pretraining mean, then is drawn
  from its conditional (the paper's flat Gamma(1e-6, 1e-6) prior);
* ``var``: starts at 1 / Var(x_n) instead, then drawn as above;
* ``hold=G``: held near G in every sweep (Gamma(a_e, b_e) with a_e = 1e7, b_e = a_e / G:
  a known-noise model, not the paper's), and started there;

each optionally with ``:B+C``, B burn-in and C collected sweeps per chain instead of the
run's (``run:3+3``).

    python experiments/mixing/topdown_noise.py results/mnist 2000 1000 run var hold=100

Prints the test error, the fraction of top units above 1e-3, layer 1's activity-ink and
the features' seconds for each setting.
"""
import sys
import time

import numpy as np

from dgdm_tf.mcmc import diagnostics as mixing
from dgdm_tf.supervised.svm_classifier import BayesianSVM
from dgdm_tf.topdown import chain as deep_chain
from _subsets import pretrained_row

root, n_train, n_test = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
resolved, z, ds, feats, x, y = pretrained_row(root, n_train, n_test)
run, hyper = resolved["block"], resolved["hyper"]
layers, cfg = run["model"]["layers"], run["topdown_features"]
for arg in sys.argv[4:]:
    setting, _, sweeps = arg.partition(":")
    burn_in, collect = ((int(v) for v in sweeps.split("+")) if sweeps
                        else (int(cfg["burn_in"]), int(cfg["collect"])))
    h, ge0 = dict(hyper), float(np.mean(z[0]["gamma_e"]))
    if setting == "var":
        ge0 = None
    elif setting.startswith("hold="):
        ge0 = float(setting.split("=", 1)[1])
        h.update(a_e=1e7, b_e=1e7 / ge0)
    elif setting != "run":
        raise SystemExit(f"unknown setting {setting!r}: run, var or hold=G")
    t = time.perf_counter()
    res = {s: deep_chain.infer_topdown(
        x[s], ds, layers, seed=seed, burn_in=burn_in, collect=collect,
        batch_size=int(cfg["batch_size"]), gamma_s=float(z[-1]["gamma_w"]), gamma_e_init=ge0,
        hyper=h, scan=cfg["scan"], chains=int(cfg["chains"]), progress=None)
        for s, seed in (("train", 1), ("test", 2))}
    secs = time.perf_counter() - t
    f = {s: r["features"] for s, r in res.items()}
    ink = mixing.layer1_diagnostics(res["train"]["layer1_pooled"], x["train"],
                                    int(layers[0]["dict_size"]), int(layers[0]["pool"]))
    on = float(np.mean(np.abs(f["train"]) > 1e-3 * np.abs(f["train"]).max()))
    svm = BayesianSVM(int(feats["n_classes"]), seed=3, progress=None, **run["svm"]).fit(
        f["train"], y["train"])
    err = 100.0 * float(np.mean(np.asarray(svm.predict(f["test"])) != y["test"]))
    rel = float(np.mean(np.linalg.norm((res["train"]["reconstruction"] - x["train"]).reshape(n_train, -1), axis=1)
                        / np.linalg.norm(x["train"].reshape(n_train, -1), axis=1)))
    print(f"{arg}: test error {err:.2f} % on {n_train} / {n_test} images, top units above "
          f"1e-3 of the largest {on:.3f}, reconstruction's relative residual {rel:.3f}, "
          f"layer-1 activity-ink {ink['activity_ink_layer1']:.3f} (features {secs:.0f} s)", flush=True)
