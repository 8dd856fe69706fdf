"""Is the top layer's Gibbs chain poor on its own, or because layer 1 feeds it noise?

``layer_factorial.py`` ran the top layer's chain on layer-1 block posteriors with the D2
that pretraining learned on layer 1's *Gibbs* output (37.0 %): a mismatch. Here layer 2
is pretrained afresh (the default chain: 60 + 20 sweeps, ridge start, random scan) on
the block posteriors of the default run's layer 1 for its 1000 pretraining images, and
its top layer is then inferred on the probe images' layer-1 block posteriors, by the
default Gibbs feature chain (5 + 5) and by block posteriors. Printed: the fixed ridge
read-out of each (signed / split), the top units on, and the new layer 2's residual.

    python experiments/mixing/top_on_block_layer1.py results/mnist 1000 500
"""
import sys
import time

import numpy as np

from dgdm_tf.pretrain import block_posterior, chain
from dgdm_tf.pretrain.features import infer_layer
from _subsets import read_out, subsets

root = sys.argv[1]
ntr, nte = int(sys.argv[2]), int(sys.argv[3])
l1 = np.load(f"{root}/pretrain/layer1.npz")
prep = np.load(f"{root}/data/prepared.npz")
xtr, ytr, xte, yte = subsets(f"{root}/data/prepared.npz", ntr, nte)
d1, gw1, ge1 = l1["D"].astype(np.float32), float(l1["gamma_w"]), float(np.mean(l1["gamma_e"]))


def block1(x):
    return block_posterior.block_posterior_layer(x, d1, 3, gamma_w=gw1, gamma_e=ge1)


x_pre = prep["x_train"][l1["image_indices"]].astype(np.float32)
t = time.time()
out = chain.run_pretrain_layer(block1(x_pre), dict_size=6, n_dict=200, pool=1, seed=7,
                               burn_in=60, collect=20, prune_min_usage=0.002, progress=None)
d2, gw2, ge2 = out["D"], float(out["gamma_w"]), float(np.mean(out["gamma_e"]))
tr = out["trace"][-1]
print(f"layer 2 pretrained on layer-1 block posteriors: rel. residual {tr['rel_residual']:.3f}, "
      f"active {tr['active_frac']:.3f}, gamma_e {ge2:.3g}, gamma_w {gw2:.3g} "
      f"({time.time() - t:.0f} s)", flush=True)

h1 = [block1(x) for x in (xtr, xte)]
print(f"layer 1 block posteriors: split probe {read_out(h1, ytr, yte, True):.2f}%", flush=True)
for how in ("gibbs", "block"):
    t = time.time()
    if how == "gibbs":
        h2 = [infer_layer(h, d2, 1, gamma_w=gw2, gamma_e_init=ge2, seed=11 + i, burn_in=5,
                          collect=5, batch_size=1000, layer_index=1, progress=None)
              for i, h in enumerate(h1)]
    else:
        h2 = [block_posterior.block_posterior_layer(h, d2, 1, gamma_w=gw2, gamma_e=ge2)
              for h in h1]
    print(f"top layer by {how} (D2 learned on block posteriors): signed "
          f"{read_out(h2, ytr, yte, False):.2f}%, split {read_out(h2, ytr, yte, True):.2f}%, "
          f"units above 1e-3 {np.mean(np.abs(h2[0]) > 1e-3):.3f} ({time.time() - t:.0f} s)",
          flush=True)
