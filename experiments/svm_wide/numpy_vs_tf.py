"""The two products of one CG iteration (``em_step_cg``'s ``apply_a``: ``(C, F1) @ S^T``,
then ``(C, N) @ S``), float64, in NumPy and in TF (``tf.function``), on the standardised
non-constant columns of the features cache of ``benchmark.py --features`` (10 classes'
worth of random vectors). Why the CG arithmetic is NumPy: docs/findings/svm_em_cg.md.

    python experiments/svm_wide/numpy_vs_tf.py features.npz --threads 1
"""

import argparse
import time

from _setup import nonconstant, start

parser = argparse.ArgumentParser()
parser.add_argument("features", help="the .npz written by benchmark.py --features")
parser.add_argument("--threads", type=int, default=1)
parser.add_argument("--repeats", type=int, default=20)
args = parser.parse_args()
start(args.threads)

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

with np.load(args.features) as z:
    f = z["f_train"].astype(np.float64)
f = f[:, nonconstant(f)]
s = np.c_[(f - f.mean(axis=0)) / f.std(axis=0), np.ones(len(f))]
rng = np.random.default_rng(0)
v, w = rng.standard_normal((10, s.shape[1])), rng.random((10, s.shape[0]))
s_t, v_t, w_t = tf.constant(s), tf.constant(v), tf.constant(w)


def numpy_products():
    return ((v @ s.T) * w) @ s


@tf.function
def tf_products():
    return tf.matmul(tf.matmul(v_t, s_t, transpose_b=True) * w_t, s_t)


for name, products in (("numpy", numpy_products), ("tf", tf_products)):
    products()
    t0 = time.perf_counter()
    for _ in range(args.repeats):
        products()
    ms = (time.perf_counter() - t0) / args.repeats * 1e3
    print(f"{name} {s.shape}: {ms:.1f} ms per product pair", flush=True)
print("max difference", float(np.max(np.abs(numpy_products() - tf_products().numpy()))))
