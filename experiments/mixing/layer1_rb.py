"""Does layer 1's posterior mean read out once W is averaged given the support?

Given the blocks' states z, layer 1 is linear-Gaussian in W, and E[W | z, X] is the ridge
fit of X on z's support with penalty gamma_w / gamma_e[n] (the exact conditional mean).
The Gibbs chain instead averages single-site conditional means E[w_b | rest], each taken
with every other block's W at its current draw, so x_next keeps the draws' spread along
the many directions in which overlapping blocks trade ink (the posterior's own spread
of W given z, which single-site moves explore only at a rate gamma_w / (gamma_e ||D||^2)
a sweep). Averaging E[W | z, X] over the collected z instead is Rao-Blackwellised over W
as a whole.

The same layer-1 feature chains (default: ridge start, 5 + 5 sweeps, random scan, the
default run's D), read out two ways: (a) the chain's single-site averages (today's
x_next) and (b) E[W | z, X] (CG, ``iterations``) averaged over the collected z. For each,
layer 2 is pretrained afresh (the default chain, 60 + 20) on the 1000 pretraining
images' layer-1 output, and the top layer inferred on the probe images by the default
Gibbs feature chain. Printed: layer-2 residual and activity, the top layer's fixed ridge
read-out (signed / split), and x_next's held-out PCA residual with 800 components.

    python experiments/mixing/layer1_rb.py results/mnist 1000 500 20
"""
import sys
import time

import numpy as np
import tensorflow as tf

from dgdm_tf.pretrain import chain

from dgdm_tf.core import ops
from dgdm_tf.pretrain.features import infer_layer
from dgdm_tf.pretrain.blocks import blocks_to_nhwc
from dgdm_tf.core.compiled import compiled
from dgdm_tf.pretrain.ridge_start import ridge_fit
from _subsets import layer1_feature_chain, read_out, subsets

root = sys.argv[1]
ntr, nte = int(sys.argv[2]), int(sys.argv[3])
iters = int(sys.argv[4])
l1 = np.load(f"{root}/pretrain/layer1.npz")
prep = np.load(f"{root}/data/prepared.npz")
xtr, ytr, xte, yte = subsets(f"{root}/data/prepared.npz", ntr, nte)
x_pre = prep["x_train"][l1["image_indices"]].astype(np.float32)
d1 = l1["D"].astype(np.float32)
gw1, ge1 = float(l1["gamma_w"]), float(np.mean(l1["gamma_e"]))


# its own trace: ridge_fit's relaxed retrace (a per-image penalty) loses the static shapes
rb_fit = compiled(ridge_fit.python_function)


def layer1(x, seed, burn=5, coll=5):
    """(single-site RB x_next, E[W | z] RB x_next) of one feature chain per image."""
    n = len(x)
    model, fn, xt, st = layer1_feature_chain(x, seed, d1, gw1, ge1)
    geom = model.geom
    valid = tf.cast(model.valid, tf.float32)[:, :, None, None]
    acc_a = np.zeros((n, 7, 7, d1.shape[3]))
    acc_b = np.zeros_like(acc_a)
    for t in range(burn + coll):
        st, e = fn(st, xt)
        if t < burn:
            continue
        acc_a += np.asarray(e)
        mask = tf.reshape(blocks_to_nhwc(tf.one_hot(st.z, geom.p * geom.p + 1)[..., :-1] * valid,
                                         geom), [n, geom.hs, geom.ws, geom.k])
        lam = tf.constant(np.asarray(gw1 / st.gamma_e, np.float32).reshape(-1, 1, 1, 1))
        s = rb_fit(xt, tf.constant(d1), tf.constant(np.asarray(mask)), lam, tf.constant(iters))
        acc_b += np.asarray(ops.pool(s, 3))
    return acc_a / coll, acc_b / coll


def pca_residual(x, k=800):
    x = x.reshape(len(x), -1).astype(np.float64)
    cut = int(0.8 * len(x))
    mean = x[:cut].mean(0)
    _, _, vt = np.linalg.svd(x[:cut] - mean, full_matrices=False)
    te = x[cut:] - mean
    return np.linalg.norm(te - te @ vt[:k].T @ vt[:k]) / np.linalg.norm(te)


t = time.time()
pre = layer1(x_pre, 3)
probe = [layer1(x, 4 + i) for i, x in enumerate((xtr, xte))]
print(f"layer-1 chains: {time.time() - t:.0f} s", flush=True)
for v, name in enumerate(("single-site averages (today)", f"E[W | z, X], CG {iters}")):
    t = time.time()
    xn = pre[v]
    out = chain.run_pretrain_layer(xn.astype(np.float32), dict_size=6, n_dict=200, pool=1,
                                   seed=7, burn_in=60, collect=20, prune_min_usage=0.002,
                                   progress=None)
    d2, gw2, ge2 = out["D"], float(out["gamma_w"]), float(np.mean(out["gamma_e"]))
    tr = out["trace"][-1]
    h1 = [p[v].astype(np.float32) for p in probe]
    h2 = [infer_layer(h, d2, 1, gamma_w=gw2, gamma_e_init=ge2, seed=11 + i, burn_in=5,
                      collect=5, batch_size=1000, layer_index=1, progress=None)
          for i, h in enumerate(h1)]
    print(f"{name}: x_next |x| > 1e-3 {np.mean(np.abs(xn) > 1e-3):.3f}, PCA-800 residual "
          f"{pca_residual(xn):.3f}; layer 2 rel. residual {tr['rel_residual']:.3f}, active "
          f"{tr['active_frac']:.3f}; layer-1 split probe {read_out(h1, ytr, yte, True):.2f}%; "
          f"top layer signed {read_out(h2, ytr, yte, False):.2f}%, split "
          f"{read_out(h2, ytr, yte, True):.2f}%, units above 1e-3 "
          f"{np.mean(np.abs(h2[0]) > 1e-3):.3f} ({time.time() - t:.0f} s)", flush=True)
