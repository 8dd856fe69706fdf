"""Does averaging independent chains (the current sampler) bring the features nearer the
posterior mean, and how far does it carry to the top layer?

A chain of the default sampler (random scan, ridge start) keeps the decomposition it
reaches; the posterior mean the features are meant to be averages over the
decompositions. Here M independent chains per image (each with its own seeds, hence its
own scan orders) are averaged at layer 1 and at the top layer, with the default run's
pretrained layers fixed. Printed per M: layer 1's activity-ink, the spread between the
even and the odd chains' averages (``features.infer_layer`` ``half_distance``: ~0 when
the chains agree, ~1.4 when unrelated), its split probe, and the top layer's probe
(signed, as the SVM sees it, and split), beside the seconds it took. Run after
``snakemake results/mnist/pretrain/layer2.npz``:

    python experiments/mixing/chains_top.py results/mnist 1000 500 1 4 8
"""
import sys
import time

import numpy as np

from dgdm_tf.mcmc import diagnostics as mixing
from dgdm_tf.pretrain.features import infer_layer
from _subsets import read_out, subsets

root = sys.argv[1]
layers = [np.load(f"{root}/pretrain/layer{l}.npz") for l in (1, 2)]
ntr, nte = int(sys.argv[2]), int(sys.argv[3])
xtr, ytr, xte, yte = subsets(f"{root}/data/prepared.npz", ntr, nte)
pools = [3, 1]


def gibbs(x, l, seed, chains, stats=None):
    z = layers[l]
    return infer_layer(x, z["D"].astype(np.float32), pools[l], gamma_w=float(z["gamma_w"]),
                       gamma_e_init=float(np.mean(z["gamma_e"])), seed=seed, burn_in=5,
                       collect=5, batch_size=1000, layer_index=l, chains=chains, stats=stats,
                       progress=None)


def probe(f, split):
    return read_out(f, ytr, yte, split)


for arg in sys.argv[4:]:
    m, t = int(arg), time.time()
    stats = {}
    h1 = [gibbs(xtr, 0, 1, m, stats), gibbs(xte, 0, 2, m)]
    spread = f", chain halves apart {stats['half_distance']:.3f}" if m > 1 else ""
    print(f"[{m} chains] layer 1: activity-ink {mixing.activity_ink_correlation(h1[0], xtr, 8, 3):.3f}"
          f"{spread}, split probe {probe(h1, True):.2f}% ({time.time() - t:.0f} s)", flush=True)
    stats = {}
    h2 = [gibbs(h1[0], 1, 11, m, stats), gibbs(h1[1], 1, 12, m)]
    spread = f", chain halves apart {stats['half_distance']:.3f}" if m > 1 else ""
    print(f"[{m} chains] top layer: units above 1e-3 {np.mean(np.abs(h2[0]) > 1e-3):.3f}{spread}, "
          f"signed probe {probe(h2, False):.2f}%, split {probe(h2, True):.2f}% "
          f"({time.time() - t:.0f} s)", flush=True)
