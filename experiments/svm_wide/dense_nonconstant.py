"""Dense EM steps on the non-constant columns alone: the dense step at the width the CG
path solves (``BayesianSVM`` drops all-zero columns of the design on its CG path only).

Reads the features cache of ``benchmark.py --features``; prints each step and a JSON
summary. Run under ``/usr/bin/time -v`` for the peak RSS. Figures: docs/findings/svm_em_cg.md.

    python experiments/svm_wide/dense_nonconstant.py features.npz --em-iters 3
"""

import argparse
import json
import time

from _setup import nonconstant, start

parser = argparse.ArgumentParser()
parser.add_argument("features", help="the .npz written by benchmark.py --features")
parser.add_argument("--em-iters", type=int, default=3)
parser.add_argument("--threads", type=int, default=1)
args = parser.parse_args()
start(args.threads)

import numpy as np  # noqa: E402

from dgdm_tf.supervised.svm_classifier import BayesianSVM  # noqa: E402

with np.load(args.features) as z:
    keep = nonconstant(z["f_train"])
    f_train, f_test = z["f_train"][:, keep], z["f_test"][:, keep]
    y_train, y_test = z["y_train"], z["y_test"]
model = BayesianSVM(10, method="em", em_iters=args.em_iters, em_tol=1e-9, em_solver="dense",
                    progress=lambda msg: print(msg, flush=True))
t0 = time.perf_counter()
model.fit(f_train, y_train)
fit_seconds = time.perf_counter() - t0
print(json.dumps({
    "features": int(keep.sum()), "steps": len(model.trace), "fit_seconds": round(fit_seconds, 1),
    "seconds_per_step": round(float(np.mean([r["seconds"] for r in model.trace])), 2),
    "test_error_pct": round(100.0 * float(np.mean(model.predict(f_test) != y_test)), 2),
    "objective": round(model.trace[-1]["objective"], 2)}), flush=True)
