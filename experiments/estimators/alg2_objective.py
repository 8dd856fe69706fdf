"""Does Algorithm 2's objective settle? Per image, the sampled Q and the M-step's point
over MCEM iterations.

The `pretrained_svm` row's model (pretrained layers, its scan, gamma_e and gamma_s
starts, `hyper.gamma_s` of the run's config or --gamma-s) on the first N test images of the
row's subset: one Gibbs sweep, then ITERATIONS MCEM iterations of supplement Algorithm 2
(dgdm_tf.mcem.test_time.make_iteration_fn: E-step one sample, M-step each unit's (z, w) to
its maximum, one RMSprop step). Prints, by iteration, the median over images of Q, of
|Q_t - Q_(t-1)| / |Q_(t-1)|, of the same for means over windows of 5 and 10 iterations, of
the features' relative change, and the fraction of top units on; then, per tolerance, the
mean iteration at which an image first meets the stopping rule of `infer_map` and the
fraction that never does. Inputs: `snakemake --cores all results/mnist/pretrain/layer2.npz`.

    python experiments/estimators/alg2_objective.py --results results/mnist --images 64 --iterations 40
"""
from __future__ import annotations

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from dgdm_tf.core.model import DeepModel  # noqa: E402
from dgdm_tf.data.arrays import load_prepared  # noqa: E402
from dgdm_tf.data.subsets import shared_subset  # noqa: E402
from dgdm_tf.io.run_inputs import read_pretrained_model, read_run_config  # noqa: E402
from dgdm_tf.mcem.test_time import make_iteration_fn  # noqa: E402
from dgdm_tf.topdown.state import init_state  # noqa: E402
from dgdm_tf.topdown.sweep import make_sweep_fn  # noqa: E402

TOLS = (1e-2, 3e-3, 1e-3, 3e-4)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--results", required=True)
    p.add_argument("--config", default=None)
    p.add_argument("--images", type=int, default=64)
    p.add_argument("--iterations", type=int, default=40)
    p.add_argument("--gamma-s", default=None, help="hyper.gamma_s (default: the config's)")
    p.add_argument("--smoke", action="store_true")
    a = p.parse_args(argv)
    if a.smoke:
        a.images, a.iterations = 8, 12
    run = read_run_config(a.results, a.config)
    root, block = run.results, run.block
    layers, tcfg = run.layers, block["topdown_features"]
    hyper = {**(run.config.get("hyper") or {}), **({"gamma_s": a.gamma_s} if a.gamma_s else {})}
    pretrained = read_pretrained_model(root, len(layers))
    ds, gs0, ge0 = pretrained.dictionaries, pretrained.gamma_s, pretrained.gamma_e
    x, _, _ = shared_subset(load_prepared(root / "data" / "prepared.npz"), "test", block["n_test"], a.images,
                            run.seed, run.dataset)
    n = len(x)
    model = DeepModel(x.shape[1:], layers, hyper, scan=tcfg["scan"]).with_ks([d.shape[-1] for d in ds])
    xt = tf.constant(x)
    st = init_state(x, model, ds, tf.constant([1, 2]), gamma_e_init=ge0, gamma_s_init=gs0)
    st, _ = make_sweep_fn(model, update_globals=False)(st, xt)
    it = make_iteration_fn(model, lr=1e-3, decay=0.95, steps=1)
    w, v = st.s_top, tf.zeros_like(st.s_top)
    qs, fs, on = [], [], []
    for _ in range(a.iterations):
        st, w, v, _, q = it(st, w, v, xt)
        qs.append(np.asarray(q, np.float64))
        fs.append(np.asarray(st.s_top).reshape(n, -1))
        on.append(float(np.mean(np.asarray(st.on))))
    qs, fs = np.array(qs), np.array(fs)
    rel = np.abs(np.diff(qs, axis=0)) / np.abs(qs[:-1])
    feat = np.linalg.norm(np.diff(fs, axis=0), axis=2) / np.maximum(np.linalg.norm(fs[1:], axis=2), 1e-30)
    print(f"{root}: {n} test images, gamma_s {hyper.get('gamma_s', 'image_map')}, {a.iterations} iterations")
    print("iteration | median Q | median rel. change of Q | median rel. change of the features | top units on")
    for t in sorted({1, 2, 3, 5, 10, 20, 30, a.iterations} & set(range(2, a.iterations + 1))):
        print(f"{t} | {np.median(qs[t - 1]):.1f} | {np.median(rel[t - 2]):.4f} | {np.median(feat[t - 2]):.4f} | {on[t - 1]:.3f}")
    for win in (5, 10):
        if a.iterations >= 2 * win:
            m = np.array([qs[t - win + 1: t + 1].mean(0) for t in range(win - 1, a.iterations)])
            r = np.abs(m[win:] - m[:-win]) / np.abs(m[:-win])
            print(f"means over windows of {win}: median rel. change {np.median(r):.4f} "
                  f"(first {np.median(r[0]):.4f}, last {np.median(r[-1]):.4f})")
    for tol in TOLS:
        hit = rel <= tol
        first = np.where(hit.any(0), hit.argmax(0) + 2, a.iterations + 1)
        print(f"tol {tol:g}: an image first meets it at iteration {first.mean():.1f} on average; "
              f"{100 * np.mean(~hit.any(0)):.0f} % never within {a.iterations}")


if __name__ == "__main__":
    main()
