"""Does the top-down test-time chain's scan order decide the unsupervised row's features?

The refined model of a run (``results/<ds>/refine/model.npz``), the first images of the
unsupervised row's own train / test subsets (``unsupervised_svm/features.npz``'s
indices), top-down features (``deep_chain.infer_topdown``) with each scan order given,
each read out by the fixed ridge probe (signed, as the SVM sees it), beside the probe
on the row's own features of the same images.

    python experiments/mixing/topdown_scan.py results/mnist 500 250 fixed random

Measured (docs/design.md, "Mixing"), on a default run whose top-down features used the
random scan: the row's own features 78.0 %, fixed scan 28.4 %, random scan 80.0 %.
"""
import json
import sys
import time

import numpy as np

from dgdm_tf.topdown import chain as deep_chain

from dgdm_tf.mcmc import diagnostics as mixing

root = sys.argv[1]
ntr, nte = int(sys.argv[2]), int(sys.argv[3])
prep = np.load(f"{root}/data/prepared.npz")
own = np.load(f"{root}/unsupervised_svm/features.npz")
cfg = json.loads(str(own["features_config"]))
run = json.load(open(f"{root}/unsupervised_svm/metrics.json"))["config"]
layers = run["model"]["layers"]
with np.load(f"{root}/refine/model.npz") as z:
    dictionaries = [np.asarray(z[f"D{l + 1}"], np.float32) for l in range(int(z["n_layers"]))]
    gamma_s = float(z["gamma_s"])
    gamma_e0 = float(np.mean(z["gamma_e"]))
x = {s: prep[f"x_{s}"][own[f"idx_{s}"][:n]].astype(np.float32)
     for s, n in (("train", ntr), ("test", nte))}
y = {s: own[f"y_{s}"][:n] for s, n in (("train", ntr), ("test", nte))}
print(f"the row's own features: signed probe "
      f"{mixing.ridge_probe(own['f_train'][:ntr], y['train'], own['f_test'][:nte], y['test']):.2f}%",
      flush=True)
for scan in sys.argv[4:]:
    t = time.time()
    f = {s: deep_chain.infer_topdown(
        x[s], dictionaries, layers, seed=1 + i, burn_in=int(cfg["burn_in"]),
        collect=int(cfg["collect"]), batch_size=int(cfg["batch_size"]), gamma_s=gamma_s,
        gamma_e_init=gamma_e0, scan=scan, progress=None)["features"]
        for i, s in enumerate(("train", "test"))}
    print(f"scan {scan}: signed probe {mixing.ridge_probe(f['train'], y['train'], f['test'], y['test']):.2f}% "
          f"({time.time() - t:.0f} s)", flush=True)
