"""Layer 1's posterior mean at a held noise precision, and what the top layer makes of it.

Under the paper's Gamma(1e-6, 1e-6) prior, layer 1's noise precision keeps rising (an
overcomplete dictionary fits MNIST's exactly-zero background exactly; the W-collapsed
sampler of ``layer1_collapsed.py`` took it from 4.6e4 to 9.8e5 in 15 sweeps). At that
precision a stroke's explanation cannot move between blocks, and x_next is one
decomposition per image. Here layer 1's feature chains (the default run's D and gamma_w,
ridge start, random scan, 5 + 5 sweeps) run with gamma_e held at a fixed value for every
sweep (``pretrain.sweep``'s ``gamma_e_cap``: a known-noise model, not the paper's); for
each value layer 2 is pretrained afresh (the default chain, 60 + 20, its own gamma_e
free) on the 1000 pretraining images' layer-1 output, and the top layer inferred on the
probe images by the default Gibbs feature chain. Printed per held value: x_next's
density and held-out PCA residual (800 components), layer 2's residual and activity, the
layer-1 split probe and the top layer's fixed ridge read-out (signed / split).

    python experiments/mixing/layer1_noise_held.py results/mnist 1000 500 none 1000 100
("none": gamma_e drawn as usual.)
"""
import sys
import time

import numpy as np
import tensorflow as tf

from dgdm_tf.pretrain import chain
from dgdm_tf.pretrain.features import infer_layer
from _subsets import layer1_feature_chain, read_out, subsets

root = sys.argv[1]
ntr, nte = int(sys.argv[2]), int(sys.argv[3])
l1 = np.load(f"{root}/pretrain/layer1.npz")
prep = np.load(f"{root}/data/prepared.npz")
xtr, ytr, xte, yte = subsets(f"{root}/data/prepared.npz", ntr, nte)
x_pre = prep["x_train"][l1["image_indices"]].astype(np.float32)
d1 = l1["D"].astype(np.float32)
gw1, ge1 = float(l1["gamma_w"]), float(np.mean(l1["gamma_e"]))


def layer1(x, seed, held, burn=5, coll=5):
    n = len(x)
    model, fn, xt, st = layer1_feature_chain(x, seed, d1, gw1, ge1)
    cap = None if held is None else tf.fill([n], np.float32(held))
    acc = np.zeros((n, 7, 7, d1.shape[3]))
    for t in range(burn + coll):
        st, e = fn(st, xt) if cap is None else fn(st, xt, cap)
        if t >= burn:
            acc += np.asarray(e)
    return (acc / coll).astype(np.float32)


def pca_residual(x, k=800):
    x = x.reshape(len(x), -1).astype(np.float64)
    cut = int(0.8 * len(x))
    mean = x[:cut].mean(0)
    _, _, vt = np.linalg.svd(x[:cut] - mean, full_matrices=False)
    te = x[cut:] - mean
    return np.linalg.norm(te - te @ vt[:k].T @ vt[:k]) / np.linalg.norm(te)


for arg in sys.argv[4:]:
    held = None if arg == "none" else float(arg)
    t = time.time()
    xn = layer1(x_pre, 3, held)
    h1 = [layer1(x, 4 + i, held) for i, x in enumerate((xtr, xte))]
    out = chain.run_pretrain_layer(xn, dict_size=6, n_dict=200, pool=1, seed=7, burn_in=60,
                                   collect=20, prune_min_usage=0.002, progress=None)
    d2, gw2, ge2 = out["D"], float(out["gamma_w"]), float(np.mean(out["gamma_e"]))
    tr = out["trace"][-1]
    h2 = [infer_layer(h, d2, 1, gamma_w=gw2, gamma_e_init=ge2, seed=11 + i, burn_in=5,
                      collect=5, batch_size=1000, layer_index=1, progress=None)
          for i, h in enumerate(h1)]
    print(f"layer-1 gamma_e {arg}: x_next |x| > 1e-3 {np.mean(np.abs(xn) > 1e-3):.3f}, PCA-800 "
          f"residual {pca_residual(xn):.3f}; layer 2 rel. residual {tr['rel_residual']:.3f}, "
          f"active {tr['active_frac']:.3f}; layer-1 split probe {read_out(h1, ytr, yte, True):.2f}%;"
          f" top layer signed {read_out(h2, ytr, yte, False):.2f}%, split "
          f"{read_out(h2, ytr, yte, True):.2f}%, units above 1e-3 "
          f"{np.mean(np.abs(h2[0]) > 1e-3):.3f} ({time.time() - t:.0f} s)", flush=True)
