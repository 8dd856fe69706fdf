"""Is the top layer's sparsity prior what empties its features?

The top layer's spike-and-slab has pi_nk ~ Beta(a0, b0), the paper's a0 = 1/K,
b0 = 1 - 1/K (``layout.dirichlet_prior``): a priori a unit is on with probability 1/K,
so the chain keeps a few units per image, and which few is one of many near-equivalent
explanations (``layer_factorial.py``). Here the top layer's feature chains (5 + 5
sweeps, the default sampler, the default run's pretrained D fixed, on layer 1's Gibbs
features) run under other Beta(a0, b0) priors on pi: a different model at test time
only (D was learned under the paper's prior). Printed per prior: the fixed ridge
read-out (signed, as the SVM sees it, and split) and the fraction of top units above
1e-3. Run after ``snakemake results/mnist/pretrain/layer2.npz``:

    python experiments/mixing/top_prior.py results/mnist 1000 500 paper 1:1 0.1:0.9 0.5:0.5
"""
import sys
import time

import numpy as np

from dgdm_tf.pretrain import layer_model
from dgdm_tf.pretrain.features import infer_layer
from _subsets import read_out, subsets

root = sys.argv[1]
layers = [np.load(f"{root}/pretrain/layer{l}.npz") for l in (1, 2)]
ntr, nte = int(sys.argv[2]), int(sys.argv[3])
xtr, ytr, xte, yte = subsets(f"{root}/data/prepared.npz", ntr, nte)
paper_prior = layer_model.dirichlet_prior


def gibbs(x, l, seed):
    z = layers[l]
    return infer_layer(x, z["D"].astype(np.float32), (3, 1)[l], gamma_w=float(z["gamma_w"]),
                       gamma_e_init=float(np.mean(z["gamma_e"])), seed=seed, burn_in=5,
                       collect=5, batch_size=1000, layer_index=l, progress=None)


def probe(f, split):
    return read_out(f, ytr, yte, split)


t = time.time()
h1 = [gibbs(x, 0, 1 + i) for i, x in enumerate((xtr, xte))]
print(f"layer 1 (Gibbs): {time.time() - t:.0f} s", flush=True)
for arg in sys.argv[4:]:
    if arg == "paper":
        layer_model.dirichlet_prior = paper_prior
    else:
        a0, b0 = (float(v) for v in arg.split(":"))
        layer_model.dirichlet_prior = (lambda geom, top, a0=a0, b0=b0: np.array([a0, b0], np.float32)
                                       if top and geom.p == 1 else paper_prior(geom, top))
    t = time.time()
    h2 = [gibbs(h, 1, 11 + i) for i, h in enumerate(h1)]
    print(f"top-layer prior on pi {arg:>9s}: signed probe {probe(h2, False):.2f}%, split "
          f"{probe(h2, True):.2f}%, top units above 1e-3 {np.mean(np.abs(h2[0]) > 1e-3):.3f} "
          f"({time.time() - t:.0f} s)", flush=True)
