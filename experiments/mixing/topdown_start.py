"""Does an order-free start of the top layer let the top-down test-time chains use a
random scan, and what does it do to the features?

The refined model of a run (``results/<ds>/refine/model.npz``), the first images of the
unsupervised row's own train / test subsets, top-down features
(``topdown.chain.infer_topdown``) for each (scan, start) given as ``scan:start``, where
start is ``off`` (every top unit off: today's start) or ``ridge`` (the order-free start of
``topdown.ridge_start`` at the feature chains' settings, threshold 0.5, 20 CG
iterations; ``ridge@0.1``: threshold 0.1); each read out by the fixed ridge probe (signed, as the SVM sees it, and
split), with layer 1's activity-ink and the chains' time.

    python experiments/mixing/topdown_start.py results/mnist 500 250 fixed:off random:off fixed:ridge random:ridge
"""
import json
import sys
import time

import numpy as np

from dgdm_tf.io import artifacts
from dgdm_tf.mcmc import diagnostics as mixing
from dgdm_tf.pretrain.ridge_start import RidgeStart
from dgdm_tf.topdown import chain as deep_chain

root = sys.argv[1]
ntr, nte = int(sys.argv[2]), int(sys.argv[3])
prep = np.load(f"{root}/data/prepared.npz")
own = np.load(f"{root}/unsupervised_svm/features.npz")
cfg = json.loads(str(own["features_config"]))
run = json.load(open(f"{root}/unsupervised_svm/metrics.json"))["config"]
layers = run["model"]["layers"]
refined = artifacts.read_refined_model(f"{root}/refine/model.npz")
x = {s: prep[f"x_{s}"][own[f"idx_{s}"][:n]].astype(np.float32)
     for s, n in (("train", ntr), ("test", nte))}
y = {s: own[f"y_{s}"][:n] for s, n in (("train", ntr), ("test", nte))}
print(f"the row's own features: signed probe "
      f"{mixing.ridge_probe(own['f_train'][:ntr], y['train'], own['f_test'][:nte], y['test']):.2f}%",
      flush=True)
for spec in sys.argv[4:]:
    scan, start = spec.split(":")
    t = time.time()
    res = {s: deep_chain.infer_topdown(
        x[s], refined.D, layers, seed=1 + i, burn_in=int(cfg["burn_in"]),
        collect=int(cfg["collect"]), batch_size=int(cfg["batch_size"]), gamma_s=refined.gamma_s,
        gamma_e_init=refined.gamma_e_mean, scan=scan,
        start=(RidgeStart(float(start.partition("@")[2] or 0.5), 0.01, 20)
               if start.startswith("ridge") else None), progress=None)
        for i, s in enumerate(("train", "test"))}
    f = {s: r["features"] for s, r in res.items()}
    signed = mixing.ridge_probe(f["train"], y["train"], f["test"], y["test"])
    split = mixing.ridge_probe(mixing.polarity_split(f["train"]), y["train"],
                               mixing.polarity_split(f["test"]), y["test"])
    diag = mixing.layer1_diagnostics(res["train"]["layer1_pooled"], x["train"],
                                     int(layers[0]["dict_size"]), int(layers[0]["pool"]))
    on = float(np.mean(np.abs(f["train"]) > 1e-3))
    print(f"scan {scan}, start {start}: signed probe {signed:.2f}%, split {split:.2f}%, "
          f"top units > 1e-3 {on:.3f}, layer-1 activity-ink {diag['activity_ink_layer1']:.3f} "
          f"({time.time() - t:.0f} s)", flush=True)
