"""Layer-1 pretraining on MNIST with and without tempered burn-in: the activity-ink
correlation of its pooled features (x_next), its final relative residual and noise
precision, and the quality of the learned dictionary seen through the reference
soft-threshold encoder (dgdm_tf.baselines.encoder) and a ridge probe.

    python experiments/mixing/pretrain_anneal.py results/mnist/data/prepared.npz 1000 60 20 0 20 40
Arguments: prepared data, images, burn-in, collect, then anneal_sweeps values to compare.
"""
import sys
import time

import numpy as np

from dgdm_tf.baselines import encoder

from dgdm_tf.mcmc import diagnostics as mixing
from dgdm_tf.pretrain.chain import run_pretrain_layer

prep = np.load(sys.argv[1])
n, bi, co = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = np.random.default_rng(0)
x = prep["x_train"][rng.choice(len(prep["x_train"]), n, replace=False)].astype(np.float32)
itr = rng.choice(len(prep["x_train"]), 5000, replace=False)
ite = rng.choice(len(prep["x_test"]), 2000, replace=False)
for an in (int(a) for a in sys.argv[5:]):
    t = time.time()
    out = run_pretrain_layer(x, dict_size=8, n_dict=50, pool=3, seed=0, burn_in=bi, collect=co,
                             prune_min_usage=0.002, anneal_sweeps=an, anneal_ratio=3000.0,
                             anneal_start=0.05, progress=None)
    last = out["trace"][-1]
    enc = [encoder.encode(prep[f"x_{s}"][i], out["D"], 3)
           for s, i in (("train", itr), ("test", ite))]
    print(f"anneal {an}: x_next activity-ink {mixing.activity_ink_correlation(out['x_next'], x, 8, 3):.3f}, "
          f"K kept {len(out['kept'])}, rel.residual {last['rel_residual']:.4f}, gamma_e {last['gamma_e_mean']:.4g}, "
          f"active {last['active_frac']:.3f}; encoder probe with this D (5000/2000): "
          f"{mixing.ridge_probe(enc[0], prep['y_train'][itr], enc[1], prep['y_test'][ite]):.2f}% "
          f"({time.time() - t:.0f} s)", flush=True)
