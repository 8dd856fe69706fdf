"""Which layer's inference loses the top-layer features: layer 1's or layer 2's?

The pretrained_svm row's two layers, each inferred either by Gibbs feature chains
(``features.infer_layer``: burn-in, collected sweeps, chains per image) or by block
posteriors given the layer's input alone (``block_posterior.block_posterior_layer``);
the four combinations through the same ridge read-out of the top layer (signed, as the
SVM sees it). Run after ``snakemake results/mnist/pretrain/layer2.npz``:

    python experiments/mixing/layer_swap.py results/mnist 1000 500 2 3 4
(images train / test, burn-in, collected sweeps, chains)
"""
import sys
import time

import numpy as np

from dgdm_tf.pretrain import block_posterior

from dgdm_tf.mcmc import diagnostics as mixing
from dgdm_tf.pretrain.features import infer_layer
from _subsets import subsets

root = sys.argv[1]
layers = [np.load(f"{root}/pretrain/layer{l}.npz") for l in (1, 2)]
ntr, nte = int(sys.argv[2]), int(sys.argv[3])
burn_in, collect, chains = (int(v) for v in sys.argv[4:7])
xtr, ytr, xte, yte = subsets(f"{root}/data/prepared.npz", ntr, nte)
ds = [z["D"].astype(np.float32) for z in layers]
pools = [3, 1]
gws = [float(z["gamma_w"]) for z in layers]
ges = [float(np.mean(z["gamma_e"])) for z in layers]


def gibbs(x, l, seed):
    return infer_layer(x, ds[l], pools[l], gamma_w=gws[l], gamma_e_init=ges[l], seed=seed,
                       burn_in=burn_in, collect=collect, batch_size=1000, chains=chains,
                       layer_index=l, progress=None)


def block(x, l, seed):
    return block_posterior.block_posterior_layer(x, ds[l], pools[l], gamma_w=gws[l], gamma_e=ges[l])


routes = {"gibbs": gibbs, "block": block}
cache = {}
for r1 in routes:
    for r2 in routes:
        t = time.time()
        f = []
        for i, x in enumerate((xtr, xte)):
            if (r1, i) not in cache:
                cache[r1, i] = routes[r1](x, 0, 1 + i)
            f.append(routes[r2](cache[r1, i], 1, 11 + i).reshape(len(x), -1))
        print(f"layer 1 {r1:5s} -> layer 2 {r2:5s}: top-layer signed probe "
              f"{mixing.ridge_probe(f[0], ytr, f[1], yte):.2f}% ({time.time() - t:.0f} s)", flush=True)
