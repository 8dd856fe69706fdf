"""CG iterations of one late EM step under different preconditioners (``dgdm_tf.supervised.svm_cg``).

Runs ``--steps`` EM steps by CG (the defaults of ``BayesianSVM``) on the reference row's
MNIST features (as ``benchmark.py``: the workflow's subsets, 10000 training images),
then solves the next step's systems from the same warm start with
``cg_preconditioner(rows=...)`` for each ``--rows`` (0: Jacobi) to relative residuals
0.1 and 0.01, at most ``--max-iter`` iterations. Figures: docs/findings/svm_em_cg.md.

    python experiments/svm_wide/preconditioner.py results/mnist/data/prepared.npz \\
        results/mnist/pretrain/layer1.npz --steps 8 --rows 0,128,512,1024
"""

import argparse
import time

from _setup import encoder_features, start

parser = argparse.ArgumentParser()
parser.add_argument("prepared")
parser.add_argument("layer1")
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--rows", default="0,128,512,1024")
parser.add_argument("--max-iter", type=int, default=1500)
parser.add_argument("--threads", type=int, default=1)
parser.add_argument("--features", help="the features cache of benchmark.py --features")
args = parser.parse_args()
start(args.threads)

import numpy as np  # noqa: E402

from dgdm_tf.supervised.svm_cg import em_step_cg  # noqa: E402
from dgdm_tf.supervised.svm_classifier import BayesianSVM  # noqa: E402
from dgdm_tf.supervised.svm_linalg import one_vs_all_targets  # noqa: E402

feats, lab, _, _ = encoder_features(args.prepared, args.layer1, cache=args.features)
model = BayesianSVM(10, method="em", em_iters=args.steps, em_tol=0.0, em_solver="cg")
model.fit(feats, lab)
s = np.c_[(feats - model.mean_) / model.std_, np.ones(len(feats))]
cols = np.flatnonzero(np.any(s != 0.0, axis=0))
s = np.ascontiguousarray(s[:, cols])
y = one_vs_all_targets(lab, 10)
l1, l2 = model._penalties(feats.shape[1], np.full(10, model.kappa))
beta = model.betas[0][:, cols]
inv_c = 1.0 / np.maximum(np.abs(1.0 - y * (beta @ s.T)), 1e-7)
print(f"after {args.steps} steps: objective {model.trace[-1]['objective']:.2f}; weights 1/|c| "
      f"quantiles 50/99/99.9/100%: {np.quantile(inv_c, [0.5, 0.99, 0.999, 1.0]).round(1)}",
      flush=True)
for rows in (int(r) for r in args.rows.split(",")):
    for tol in (0.1, 0.01):
        t0 = time.perf_counter()
        _, info = em_step_cg(beta, s, y, 1.0, l1[:, cols], l2[:, cols], tol=tol, rows=rows,
                                 max_iter=args.max_iter)
        print(f"rows {rows} tol {tol}: {info['cg_iterations']} iterations, relative residual "
              f"{info['cg_residual']:.3g}, {time.perf_counter() - t0:.1f} s", flush=True)
