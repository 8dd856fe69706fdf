"""Would a chain that mixes across decompositions give features as good as the reference?

A frozen chain reports one decomposition of each image (the one its scan order and seed
found). The posterior mean the features are meant to be averages over all of them. Here
M independent chains per image, each with its own seed, its own random colour order and
a tempered burn-in (so each lands in its own decomposition), are averaged: as M grows the
average tends to the posterior mean a mixing chain would report. Layer 1 of MNIST, the
pretrained D fixed; printed per M: activity-ink, the fixed ridge read-out (polarity
split and signed) against the soft-threshold reference encoder, and the spread of the
feature estimate between two disjoint halves of the chains.

    python experiments/mixing/chain_ensemble.py PREPARED LAYER1 2000 1000 16 25 5 [same-order]
(images train / test, chains M, burn-in sweeps, collected sweeps; a third of burn-in
tempered, ratio 3000 from 0.05 / Var(x_n), as features.anneal_* would; ``same-order``:
every chain visits the colours in the default order, only its seed differs).
"""
import sys
import time

import numpy as np

from dgdm_tf.baselines import encoder

from dgdm_tf.mcmc import diagnostics as mixing
from dgdm_tf.pretrain.features import infer_layer
from dgdm_tf.core.layout import LayerGeometry
from _subsets import subsets

l1 = np.load(sys.argv[2])
ntr, nte, m_chains = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
burn_in, collect = int(sys.argv[6]), int(sys.argv[7])
xtr, ytr, xte, yte = subsets(sys.argv[1], ntr, nte)
D = l1["D"].astype(np.float32)
gw, ge = float(np.mean(l1["gamma_w"])), float(np.mean(l1["gamma_e"]))
dh, pool = D.shape[0], 3
geom = LayerGeometry(hx=28, wx=28, c=1, dh=dh, dw=dh, k=D.shape[-1], p=pool)
colours = [(a, b) for a in range(geom.gh) for b in range(geom.gw)]

ref = [encoder.encode(v, D, pool) for v in (xtr, xte)]
print(f"reference encoder (soft threshold, same D): probe {mixing.ridge_probe(ref[0], ytr, ref[1], yte):.2f}%",
      flush=True)


same_order = len(sys.argv) > 8 and sys.argv[8] == "same-order"
print(f"colour order: {'the default, every chain' if same_order else 'random, per chain'}", flush=True)


def chain(x, seed, m):
    # chain m's colour order is the same for the train and the test images, so both sets'
    # features are built alike (an order drawn per set makes them differ by the order)
    order = None if same_order else [colours[i] for i in np.random.default_rng(m).permutation(len(colours))]
    return infer_layer(x, D, pool, gamma_w=gw, gamma_e_init=ge, seed=seed, burn_in=burn_in,
                       collect=collect, batch_size=500, anneal_sweeps=burn_in // 3,
                       anneal_ratio=3000.0, anneal_start=0.05, colour_order=order,
                       progress=None)


sums = [np.zeros((len(v),) + (geom.nbh, geom.nbw, geom.k), np.float64) for v in (xtr, xte)]
halves = [np.zeros_like(sums[0]), np.zeros_like(sums[0])]
t0 = time.time()
for m in range(1, m_chains + 1):
    for i, x in enumerate((xtr, xte)):
        f = chain(x, 1000 * m + i, m)
        sums[i] += f
        if i == 0:
            halves[m % 2] += f
    if m & (m - 1) == 0 or m == m_chains:  # M = 1, 2, 4, 8, ...
        ftr, fte = sums[0] / m, sums[1] / m
        spread = (mixing.map_distance(halves[0].ravel(), halves[1].ravel()) if m >= 2 else float("nan"))
        print(f"M={m:3d} chains: activity-ink {mixing.activity_ink_correlation(ftr, xtr, dh, pool):.3f}, "
              f"split probe {mixing.ridge_probe(mixing.polarity_split(ftr), ytr, mixing.polarity_split(fte), yte):.2f}%, "
              f"signed probe {mixing.ridge_probe(ftr, ytr, fte, yte):.2f}%, "
              f"half-vs-half feature distance {spread:.3f} ({time.time() - t0:.0f} s)", flush=True)
