"""Would pruning the top layer to the paper's size help its read-out? The default run's
pretrained layers; layer 1 by the Gibbs feature chain (5 + 5 sweeps), then the top
layer's Gibbs chain (5 + 5 sweeps) with only its K most used maps kept (usage from
pretraining, ``layer2.npz['usage']``), for each K given. The paper ends MNIST's top layer
at 117 of 200 maps. Printed per K: the fixed ridge read-out of the top layer (signed, as
the SVM sees it, and split), the fraction of top units above 1e-3 and the usage cut.
Test time only: the kept maps are the ones learned beside all 200. Run after
``snakemake results/mnist/pretrain/layer2.npz``:

    python experiments/mixing/top_pruning.py results/mnist 1000 500 200 117 60 30

2026-11-25, the default run of 5eb4645 (layer-1 split probe 9.80 %): K = 200 / 117 / 60 / 30
-> signed probe 32.2 / 20.2 / 22.6 / 27.0 %, split 35.2 / 36.4 / 27.2 / 30.6 %, top units
above 1e-3 0.012 / 0.019 / 0.032 / 0.048 (500 test images: a standard error of about 2
points at 20 %).
"""
import sys
import time

import numpy as np

from dgdm_tf.pretrain.features import infer_layer
from _subsets import read_out, subsets

root = sys.argv[1]
l1, l2 = (np.load(f"{root}/pretrain/layer{l}.npz") for l in (1, 2))
ntr, nte = int(sys.argv[2]), int(sys.argv[3])
ks = [int(k) for k in sys.argv[4:]]
xtr, ytr, xte, yte = subsets(f"{root}/data/prepared.npz", ntr, nte)
t = time.time()
h1 = [infer_layer(x, l1["D"].astype(np.float32), 3, gamma_w=float(l1["gamma_w"]),
                  gamma_e_init=float(np.mean(l1["gamma_e"])), seed=1 + i, burn_in=5, collect=5,
                  batch_size=1000, layer_index=0, progress=None) for i, x in enumerate((xtr, xte))]
print(f"layer 1: split probe {read_out(h1, ytr, yte, True):.2f}% ({time.time() - t:.0f} s)", flush=True)
order = np.argsort(-l2["usage"])
for k in ks:
    keep = np.sort(order[:k])
    t = time.time()
    h2 = [infer_layer(h, l2["D"][..., keep].astype(np.float32), 1, gamma_w=float(l2["gamma_w"]),
                      gamma_e_init=float(np.mean(l2["gamma_e"])), seed=11 + i, burn_in=5,
                      collect=5, batch_size=1000, layer_index=1, progress=None)
          for i, h in enumerate(h1)]
    print(f"top layer K = {k:3d} (usage >= {l2['usage'][keep].min():.4f}): signed probe "
          f"{read_out(h2, ytr, yte, False):.2f}%, split {read_out(h2, ytr, yte, True):.2f}%, "
          f"units above 1e-3 {np.mean(np.abs(h2[0]) > 1e-3):.3f} ({time.time() - t:.0f} s)", flush=True)
