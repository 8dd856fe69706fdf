"""Which layer loses the read-out: layer 1's Gibbs features, or the top layer's Gibbs
chain on them? A 2 x 2 of each layer's inference on the default run's pretrained layers:
layer 1 by the Gibbs feature chain (5 + 5 sweeps, the default sampler) or by block
posteriors given its input alone (``block_posterior``, the ``pretrained_block_svm``
route), and the top layer likewise on each. Printed per cell: the fixed ridge read-out of
the top layer (signed, as the SVM sees it, and split) and the fraction of top units with
a value above 1e-3. Run after ``snakemake results/mnist/pretrain/layer2.npz``:

    python experiments/mixing/layer_factorial.py results/mnist 1000 500
"""
import sys
import time

import numpy as np

from dgdm_tf.pretrain import block_posterior
from dgdm_tf.pretrain.features import infer_layer
from _subsets import read_out, subsets

root = sys.argv[1]
layers = [np.load(f"{root}/pretrain/layer{l}.npz") for l in (1, 2)]
ntr, nte = int(sys.argv[2]), int(sys.argv[3])
xtr, ytr, xte, yte = subsets(f"{root}/data/prepared.npz", ntr, nte)
pools = [3, 1]
ds = [z["D"].astype(np.float32) for z in layers]
gws = [float(z["gamma_w"]) for z in layers]
ges = [float(np.mean(z["gamma_e"])) for z in layers]


def infer(x, l, how, seed):
    if how == "block":
        return block_posterior.block_posterior_layer(x, ds[l], pools[l], gamma_w=gws[l],
                                                     gamma_e=ges[l])
    return infer_layer(x, ds[l], pools[l], gamma_w=gws[l], gamma_e_init=ges[l], seed=seed,
                       burn_in=5, collect=5, batch_size=1000, layer_index=l, progress=None)


def probe(f, split):
    return read_out(f, ytr, yte, split)


for how1 in ("gibbs", "block"):
    t = time.time()
    h1 = [infer(x, 0, how1, 1 + i) for i, x in enumerate((xtr, xte))]
    print(f"layer 1 {how1}: split probe {probe(h1, True):.2f}% ({time.time() - t:.0f} s)", flush=True)
    for how2 in ("gibbs", "block"):
        t = time.time()
        h2 = [infer(h, 1, how2, 11 + i) for i, h in enumerate(h1)]
        print(f"layer 1 {how1:>5s}, top layer {how2:>5s}: signed probe {probe(h2, False):.2f}%, "
              f"split {probe(h2, True):.2f}%, top units above 1e-3 "
              f"{np.mean(np.abs(h2[0]) > 1e-3):.3f} ({time.time() - t:.0f} s)", flush=True)
