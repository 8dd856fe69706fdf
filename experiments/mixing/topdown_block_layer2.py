"""The top-down route (the paper's test-time inference: the image explained through
every layer) with a layer 2 pretrained on layer 1's block posteriors instead of on its
Gibbs x_next.

``top_on_block_layer1.py`` showed that a layer 2 learned on smooth layer-1 output fits
it (relative residual 0.03 against 0.83) and that its top layer's Gibbs chain then reads
out well on smooth input. Here both layer-2 dictionaries (the default run's, learned on
Gibbs x_next, and one learned on block posteriors) are used under the default run's
layer 1 in the top-down model (``deep_chain.infer_topdown``, the
``topdown_features`` settings of the default config: 3 + 3 sweeps, batches of 128, fixed
scan), on the probe images. Printed: the top layer's fixed ridge read-out (signed /
split), the top units on, seconds.

    python experiments/mixing/topdown_block_layer2.py results/mnist 1000 500
"""
import os
import sys
import time

import numpy as np

from dgdm_tf.pretrain import block_posterior, chain

from dgdm_tf.topdown import chain as deep_chain
from _subsets import read_out, subsets

root = sys.argv[1]
ntr, nte = int(sys.argv[2]), int(sys.argv[3])
l1 = np.load(f"{root}/pretrain/layer1.npz")
l2 = np.load(f"{root}/pretrain/layer2.npz")
prep = np.load(f"{root}/data/prepared.npz")
xtr, ytr, xte, yte = subsets(f"{root}/data/prepared.npz", ntr, nte)
d1, gw1, ge1 = l1["D"].astype(np.float32), float(l1["gamma_w"]), float(np.mean(l1["gamma_e"]))
layers = [{"dict_size": 8, "n_dict": d1.shape[3], "pool": 3},
          {"dict_size": 6, "n_dict": 200, "pool": 1}]

cache = "/tmp/topdown_block_layer2_d2.npz"
if not os.path.exists(cache):
    x_pre = prep["x_train"][l1["image_indices"]].astype(np.float32)
    xb = block_posterior.block_posterior_layer(x_pre, d1, 3, gamma_w=gw1, gamma_e=ge1)
    out = chain.run_pretrain_layer(xb, dict_size=6, n_dict=200, pool=1, seed=7, burn_in=60,
                                   collect=20, prune_min_usage=0.002, progress=None)
    np.savez(cache, D=out["D"], gamma_w=out["gamma_w"])
d2b = np.load(cache)

for name, d2, gs in (("layer 2 of the default run (learned on Gibbs x_next)", l2["D"],
                      float(l2["gamma_w"])),
                     ("layer 2 learned on block posteriors", d2b["D"], float(d2b["gamma_w"]))):
    t = time.time()
    f = [deep_chain.infer_topdown(x, [d1, d2.astype(np.float32)], layers, seed=1 + i,
                                  burn_in=3, collect=3, batch_size=128, gamma_s=gs,
                                  gamma_e_init=ge1, scan="fixed", progress=None)["features"]
         for i, x in enumerate((xtr, xte))]
    print(f"top-down, {name}: signed {read_out(f, ytr, yte, False):.2f}%, split "
          f"{read_out(f, ytr, yte, True):.2f}%, units above 1e-3 "
          f"{np.mean(np.abs(f[0]) > 1e-3):.3f} ({time.time() - t:.0f} s)", flush=True)
