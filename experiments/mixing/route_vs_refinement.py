"""What does the unsupervised row gain from refinement, and what from reading the top
layer through the whole model? On exactly the unsupervised row's images (its
``features.npz`` indices), the same Bayesian SVM (the run's resolved ``svm`` settings)
on the top-down features (the row's ``topdown_features`` settings) of the *pretrained*
layers, beside the row's own figures: the layer-wise pretrained features of the same
images (``pretrained_same_subset_test_error_pct``) and the refined model's top-down
features (``test_error_pct``). Run after ``snakemake results/tables.md``:

    python experiments/mixing/route_vs_refinement.py results/mnist
"""
import json
import sys
import time

import numpy as np
import yaml

from dgdm_tf.topdown import chain as deep_chain
from dgdm_tf.supervised.svm_classifier import BayesianSVM

root = sys.argv[1]
run = yaml.safe_load(open(f"{root}/unsupervised_svm/config.yaml"))["block"]
metrics = json.load(open(f"{root}/unsupervised_svm/metrics.json"))
feats = np.load(f"{root}/unsupervised_svm/features.npz")
prep = np.load(f"{root}/data/prepared.npz")
layers_npz = [np.load(f"{root}/pretrain/layer{l}.npz") for l in (1, 2)]
ds = [z["D"].astype(np.float32) for z in layers_npz]
layers = run["model"]["layers"]
cfg = run["topdown_features"]

t = time.time()
out = {}
for split, seed in (("train", 1), ("test", 2)):
    x = prep[f"x_{split}"][feats[f"idx_{split}"]].astype(np.float32)
    out[split] = deep_chain.infer_topdown(
        x, ds, layers, seed=seed, burn_in=int(cfg["burn_in"]), collect=int(cfg["collect"]),
        batch_size=int(cfg["batch_size"]), gamma_s=float(layers_npz[1]["gamma_w"]),
        gamma_e_init=float(np.mean(layers_npz[0]["gamma_e"])), scan=cfg["scan"],
        progress=None)["features"]
print(f"top-down features of the pretrained layers, {len(out['train'])} / {len(out['test'])} "
      f"images: {time.time() - t:.0f} s", flush=True)
t = time.time()
n_classes = int(feats["n_classes"])
svm = BayesianSVM(n_classes, seed=3, progress=None, **run["svm"]).fit(out["train"], feats["y_train"])
err = 100.0 * float(np.mean(np.asarray(svm.predict(out["test"])) != feats["y_test"]))
print(f"same SVM, test error: pretrained layers, layer-wise features "
      f"{metrics['pretrained_same_subset_test_error_pct']:.2f}% (the row's reference); "
      f"pretrained layers, top-down features {err:.2f}% ({time.time() - t:.0f} s); "
      f"refined model, top-down features {metrics['test_error_pct']:.2f}% (the row)", flush=True)
