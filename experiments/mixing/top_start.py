"""Does the top layer's feature chain lose its input to a sparse start?

Layer 1 by the default Gibbs feature chain (random scan, ridge start); the top layer
(pool 1) by Gibbs with ridge starts of several thresholds, from every block off, and by
block posteriors given its input alone; each through the fixed ridge read-out of the
top layer (signed, as the SVM sees it, and polarity-split). Also the fraction of top
units with a pooled |value| above 1e-3. Run after
``snakemake results/mnist/pretrain/layer2.npz``:

    python experiments/mixing/top_start.py results/mnist 1000 500 0.5 0.25 0.1 0 off
(images train / test, then the top layer's starts: ridge thresholds, or ``off``)
"""
import sys
import time

import numpy as np

from dgdm_tf.pretrain import block_posterior

from dgdm_tf.mcmc import diagnostics as mixing
from dgdm_tf.pretrain.features import infer_layer
from dgdm_tf.pretrain.ridge_start import RidgeStart
from _subsets import subsets

root = sys.argv[1]
layers = [np.load(f"{root}/pretrain/layer{l}.npz") for l in (1, 2)]
ntr, nte = int(sys.argv[2]), int(sys.argv[3])
xtr, ytr, xte, yte = subsets(f"{root}/data/prepared.npz", ntr, nte)
ds = [z["D"].astype(np.float32) for z in layers]
pools = [3, 1]
gws = [float(z["gamma_w"]) for z in layers]
ges = [float(np.mean(z["gamma_e"])) for z in layers]


def gibbs(x, l, seed, start):
    return infer_layer(x, ds[l], pools[l], gamma_w=gws[l], gamma_e_init=ges[l], seed=seed,
                       burn_in=5, collect=5, batch_size=1000, layer_index=l, start=start,
                       progress=None)


t = time.time()
h1 = [gibbs(x, 0, 1 + i, RidgeStart()) for i, x in enumerate((xtr, xte))]
print(f"layer 1 (Gibbs, ridge start 0.5): {time.time() - t:.0f} s", flush=True)


def report(name, f):
    f = [v.reshape(len(v), -1) for v in f]
    signed = mixing.ridge_probe(f[0], ytr, f[1], yte)
    split = mixing.ridge_probe(mixing.polarity_split(f[0]), ytr, mixing.polarity_split(f[1]), yte)
    print(f"top layer {name:>22s}: signed {signed:.2f}%, split {split:.2f}%, "
          f"units above 1e-3 {np.mean(np.abs(f[0]) > 1e-3):.3f} ({time.time() - t:.0f} s)",
          flush=True)


for arg in sys.argv[4:]:
    t = time.time()
    start = None if arg == "off" else RidgeStart(threshold=float(arg))
    report(f"Gibbs, start {arg}", [gibbs(h, 1, 11 + i, start) for i, h in enumerate(h1)])
t = time.time()
report("block posteriors", [block_posterior.block_posterior_layer(
    h, ds[1], 1, gamma_w=gws[1], gamma_e=ges[1]) for h in h1])
