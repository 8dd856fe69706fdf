"""How many CG iterations does the ridge start need? (issues 17 and 18: its 40 iterations
of a generative pass and its adjoint cost about as much as layer 1's 5 + 5 sweeps.)

For each iteration count, on the default run's pretrained layers: the start alone on
the train images (seconds, and the relative residual it leaves), then the layer-1
feature chains (5 + 5 sweeps, the default sampler) of train / test images from that
start (seconds, activity-ink, split probe) and the top layer's chains on them (signed
probe, as the SVM sees it). Run after ``snakemake results/mnist/pretrain/layer2.npz``:

    python experiments/mixing/ridge_iterations.py results/mnist 1000 500 40 20 10 5
"""
import sys
import time

import numpy as np
import tensorflow as tf

from dgdm_tf.mcmc import diagnostics as mixing
from dgdm_tf.pretrain.features import infer_layer
from dgdm_tf.core.ops import full_conv
from dgdm_tf.pretrain.ridge_start import RidgeStart, ridge_fit, support
from _subsets import read_out, subsets

root = sys.argv[1]
layers = [np.load(f"{root}/pretrain/layer{l}.npz") for l in (1, 2)]
ntr, nte = int(sys.argv[2]), int(sys.argv[3])
xtr, ytr, xte, yte = subsets(f"{root}/data/prepared.npz", ntr, nte)
pools = [3, 1]
d1 = tf.constant(layers[0]["D"].astype(np.float32))


def gibbs(x, l, seed, start):
    z = layers[l]
    return infer_layer(x, z["D"].astype(np.float32), pools[l], gamma_w=float(z["gamma_w"]),
                       gamma_e_init=float(np.mean(z["gamma_e"])), seed=seed, burn_in=5,
                       collect=5, batch_size=1000, layer_index=l, start=start, progress=None)


def probe(f, split):
    return read_out(f, ytr, yte, split)


xt = tf.constant(xtr)
lam = RidgeStart().ridge * tf.reduce_mean(tf.reduce_sum(tf.square(d1), axis=[0, 1, 2]))
# trace once at the timed shape (the iteration count is a tensor: no retrace per count)
ridge_fit(xt, d1, support(xt, d1, 3, RidgeStart().threshold), lam, tf.constant(1))
for arg in sys.argv[4:]:
    settings = RidgeStart(iterations=int(arg))
    t = time.time()
    mask = support(xt, d1, 3, settings.threshold)
    s = ridge_fit(xt, d1, mask, lam, tf.constant(settings.iterations))
    rel = float(tf.norm(xt - full_conv(s, d1)) / tf.norm(xt))
    t_start = time.time() - t
    t = time.time()
    h1 = [gibbs(x, 0, 1 + i, settings) for i, x in enumerate((xtr, xte))]
    t_l1 = time.time() - t
    h2 = [gibbs(h, 1, 11 + i, RidgeStart()) for i, h in enumerate(h1)]
    print(f"[{arg} iterations] start on {ntr} images: {t_start:.1f} s, rel. residual {rel:.3f}; "
          f"layer-1 chains ({ntr + nte} images, start included) {t_l1:.0f} s, activity-ink "
          f"{mixing.activity_ink_correlation(h1[0], xtr, 8, 3):.3f}, split probe "
          f"{probe(h1, True):.2f}%; top layer signed probe {probe(h2, False):.2f}%", flush=True)
