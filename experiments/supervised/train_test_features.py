"""Does the supervised model lose its test error to the features of the test images?

The supervised chain fits beta to the top layer it samples *with the labels in the
conditional*; test images get theirs without labels (rule supervised_predict: the MCEM
MAP of Algorithm 2, or the posterior mean). This probe classifies the chain's own
*training* images by the test-time procedure (labels unused) and prints their error
beside the chain's training error and the row's test error. A large training error
under the test-time features says the kept betas read features the test procedure
does not produce (the row loses to that shift); a small one says the row loses to
generalisation (too few training images).

    python experiments/supervised/train_test_features.py RUN_DIR [N_IMAGES]

RUN_DIR holds results/mnist/supervised/{model.npz,metrics.json} and
results/mnist/data/prepared.npz, from `snakemake ... results/mnist/supervised/metrics.json`
with config/config.yaml (the settings are read from it).
"""
import json
import sys
from pathlib import Path

import numpy as np
import yaml

from dgdm_tf import data
from dgdm_tf.core.random import seed_for
from dgdm_tf.io import artifacts
from dgdm_tf.mcem.classify import classify_supervised

run = Path(sys.argv[1])
n = int(sys.argv[2]) if len(sys.argv) > 2 else 500
cfg = yaml.safe_load((run / "config/config.yaml").read_text())
ds = "mnist"
dcfg = cfg["datasets"][ds]
scfg = dcfg["supervised"]
pcfg = scfg["predict"]
seed = int(cfg["seed"])
res_dir = run / "results" / ds
sup = artifacts.read_supervised_model(res_dir / "supervised/model.npz")
d = data.load_prepared(res_dir / "data/prepared.npz")
idx = np.asarray(sup.image_indices)[:n]
x, labels = d["x_train"][idx], np.asarray(sup.labels)[:n]
assert np.array_equal(labels, d["y_train"][idx]), "the model's labels are not its images'"
n_models = len(sup.samples_beta)
out = classify_supervised(x, sup, pcfg, dcfg["model"]["layers"], hyper=cfg["hyper"], scan=scfg["scan"],
                          seeds=[seed_for(seed, ds, "supervised_predict", j) for j in range(n_models)])
err = 100.0 * float(np.mean(np.argmax(out.scores, 1) != labels))
alone = [100.0 * float(np.mean(np.argmax(dv, 1) != labels)) for dv in out.per_model]
metrics = json.loads((res_dir / "supervised/metrics.json").read_text())
print(f"supervised model, {n_models} kept models, {len(sup.labels)} training images")
print(f"training error, the chain's own (label-informed) features: {sup.train_error_pct:.2f} %")
print(f"training error, test-time features ({pcfg['features']}) of the first {n} training "
      f"images: {err:.2f} % (each model alone {', '.join(f'{a:.2f}' for a in alone)} %)")
print(f"test error (the row): {metrics['test_error_pct']:.2f} %")
