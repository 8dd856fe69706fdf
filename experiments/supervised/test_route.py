"""The supervised row's test-time features: the MCEM MAP (Algorithm 2) or the posterior mean?

Rule supervised_predict gives each test image's top layer under each kept model by
`predict.features`: `mcem` (the paper's MAP: burn-in sweeps, then MCEM iterations) or
`gibbs` (the Rao-Blackwellised posterior mean, as the two unsupervised rows' features).
This probe classifies the row's own first N test images (the rule's seeded subset, the
rule's seeds) under each setting given, with the run's kept models, and prints each
setting's test error, each model's, the seconds, and the paired disagreement with the
row's own predictions (`predictions.csv`).

    python experiments/supervised/test_route.py RUN_DIR N_TEST SETTING [SETTING ...]

SETTING: `mcem` (the run's predict block as configured), or `gibbs:B+C`, `gibbs:B+CxM`
(B burn-in and C collected sweeps per chain, M chains per image and model).
RUN_DIR holds a finished default run (results/mnist/supervised/, results/mnist/data/).
"""
import re
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from dgdm_tf import data
from dgdm_tf.core.random import seed_for
from dgdm_tf.data.subsets import shared_subset
from dgdm_tf.io import artifacts
from dgdm_tf.mcem.classify import classify_supervised

run = Path(sys.argv[1])
n = int(sys.argv[2])
settings = sys.argv[3:] or ["mcem"]
cfg = yaml.safe_load((run / "config/config.yaml").read_text())
ds = "mnist"
dcfg = cfg["datasets"][ds]
scfg = dcfg["supervised"]
seed = int(cfg["seed"])
res_dir = run / "results" / ds
sup = artifacts.read_supervised_model(res_dir / "supervised/model.npz")
d = data.load_prepared(res_dir / "data/prepared.npz")
x, labels, idx = shared_subset(d, "test", dcfg["n_test"], scfg["n_test"], seed, ds)
x, labels, idx = x[:n], labels[:n], idx[:n]
row = pd.read_csv(res_dir / "supervised/predictions.csv").set_index("test_index").loc[idx]
row_pred = row["predicted"].to_numpy()
row_err = 100.0 * float(np.mean(row_pred != labels))
n_models = len(sup.samples_beta)
print(f"supervised model: {n_models} kept models, {len(sup.labels)} training images; "
      f"the row on these {n} test images: {row_err:.2f} % ({scfg['predict']['features']})",
      flush=True)
for setting in settings:
    pcfg = dict(scfg["predict"])
    if setting == "mcem":
        pcfg["features"] = "mcem"
    else:
        m = re.fullmatch(r"gibbs:(\d+)\+(\d+)(?:x(\d+))?", setting)
        if not m:
            sys.exit(f"setting {setting!r}: write mcem or gibbs:B+C[xM]")
        pcfg.update(features="gibbs", burn_in=int(m[1]), collect=int(m[2]), chains=int(m[3] or 1))
    pcfg.setdefault("chains", 1)
    t0 = time.time()
    out = classify_supervised(x, sup, pcfg, dcfg["model"]["layers"], hyper=cfg["hyper"],
                              scan=scfg["scan"], progress=None,
                              seeds=[seed_for(seed, ds, "supervised_predict", j) for j in range(n_models)])
    pred = np.argmax(out.scores, 1)
    err = 100.0 * float(np.mean(pred != labels))
    alone = [100.0 * float(np.mean(np.argmax(dv, 1) != labels)) for dv in out.per_model]
    print(f"{setting}: test error {err:.2f} % (models {', '.join(f'{a:.2f}' for a in alone)} %); "
          f"disagrees with the row on {100.0 * float(np.mean(pred != row_pred)):.2f} %; "
          f"{time.time() - t0:.0f} s", flush=True)
