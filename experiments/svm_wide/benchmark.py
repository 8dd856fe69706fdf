"""EM of the Bayesian SVM on the reference row's features (encoder_svm) at the default
config's size, dense or matrix-free CG solves (``dgdm_tf.supervised.svm_cg``, ``em_solver``).

The features are rule encoder_features' on the default config: the workflow's seeded
subsets of MNIST (10000 / 5000, seed 0, ``dgdm_tf.data.subsets.shared_subset``), pretraining's layer-1
dictionary, ``encoder.encode(x, D, 3, alpha=0.25)``; the SVM has the default `svm`
settings (Laplace prior, kappa 0.5, gamma 1, em_iters 50, em_tol 1e-9). Prints one line
per EM step and a JSON summary (seconds per step, fit time, test error, objective); run
under ``/usr/bin/time -v`` for the peak RSS. Figures: docs/findings/svm_em_cg.md.

    python experiments/svm_wide/benchmark.py results/mnist/data/prepared.npz \\
        results/mnist/pretrain/layer1.npz --solver cg --threads 1
    python experiments/svm_wide/benchmark.py ... --solver dense --em-iters 8
"""

import argparse
import json
import time

from _setup import encoder_features, start

parser = argparse.ArgumentParser()
parser.add_argument("prepared")
parser.add_argument("layer1")
parser.add_argument("--solver", choices=["dense", "cg", "auto"], default="auto")
parser.add_argument("--threads", type=int, default=1)
parser.add_argument("--em-iters", type=int, default=50)
parser.add_argument("--em-cg-tol", type=float, default=0.1)
parser.add_argument("--em-cg-start-tol", type=float, default=1e-3)
parser.add_argument("--n-train", type=int, default=10000)
parser.add_argument("--n-test", type=int, default=5000)
parser.add_argument("--save", help="write beta and the test predictions to this .npz")
parser.add_argument("--features", help="cache of the features (.npz): read if it exists, "
                    "else written; keeps the encoder out of a later run's peak RSS")
args = parser.parse_args()
start(args.threads)

import numpy as np  # noqa: E402

from dgdm_tf.supervised.svm_classifier import BayesianSVM  # noqa: E402

f_train, y_train, f_test, y_test = encoder_features(args.prepared, args.layer1, args.n_train,
                                                    args.n_test, args.features)
print(f"features: train {f_train.shape}, test {f_test.shape}", flush=True)

model = BayesianSVM(10, method="em", em_iters=args.em_iters, em_tol=1e-9,
                    em_solver=args.solver, em_cg_tol=args.em_cg_tol,
                    em_cg_start_tol=args.em_cg_start_tol,
                    progress=lambda msg: print(msg, flush=True))
t0 = time.perf_counter()
model.fit(f_train, y_train)
fit_seconds = time.perf_counter() - t0
pred = model.predict(f_test)
steps = [row["seconds"] for row in model.trace]
summary = {
    "solver": model.em_solver_, "threads": args.threads, "steps": len(steps),
    "fit_seconds": round(fit_seconds, 1), "seconds_per_step": round(float(np.mean(steps)), 2),
    "first_step_seconds": round(steps[0], 2),
    "test_error_pct": round(100.0 * float(np.mean(pred != y_test)), 2),
    "train_error_pct": round(100.0 * model.trace[-1]["train_error"], 2),
    "objective": round(model.trace[-1]["objective"], 2),
    "cg_iterations": sum(row.get("cg_iterations", 0) for row in model.trace),
    "em_cg_tol": args.em_cg_tol, "em_cg_start_tol": args.em_cg_start_tol,
}
print(json.dumps(summary), flush=True)
if args.save:
    np.savez(args.save, beta=model.betas[0], pred=pred, y_test=y_test,
             objective=np.array([row["objective"] for row in model.trace]))
