"""Layer-1 feature inference on MNIST: does it follow the image or the scan order?

For each variant of the feature chain (``features.infer_layer`` with the pretrained D
fixed) it prints the activity-ink correlation (``dgdm_tf.mcmc.diagnostics``), the distance of the
mean activity map from the reference encoder's, and the test error of a fixed linear
read-out (ridge, polarity split) on the same images; the reference is the deterministic
soft-threshold encoder with the same D. Run after ``snakemake results/mnist/pretrain/layer1.npz``:

    python experiments/mixing/layer1_probe.py results/mnist/data/prepared.npz \\
        results/mnist/pretrain/layer1.npz 2000 1000 "5,5,0,1,1" "15,5,10,300,1"

Each variant is "burn_in,collect,anneal_sweeps,anneal_ratio,anneal_start".
Figures: docs/findings/tempered_burn_in.md.
"""

import sys
import time

import numpy as np
import tensorflow as tf

from dgdm_tf.mcmc import diagnostics as mixing
from dgdm_tf.pretrain.features import infer_layer
from _subsets import subsets

l1 = np.load(sys.argv[2])
ntr, nte = int(sys.argv[3]), int(sys.argv[4])
variants = [tuple(float(v) for v in a.split(",")) for a in sys.argv[5:]]
xtr, ytr, xte, yte = subsets(sys.argv[1], ntr, nte)
D = l1["D"].astype(np.float32)
gw, ge = float(np.mean(l1["gamma_w"])), float(np.mean(l1["gamma_e"]))
dh, pool = D.shape[0], 3


def soft_threshold(x, alpha=0.25):
    dn = D / np.linalg.norm(D.reshape(-1, D.shape[-1]), axis=0)
    c = tf.nn.conv2d(x, dn, 1, "VALID").numpy()
    f = np.concatenate([np.maximum(c - alpha, 0), np.maximum(-c - alpha, 0)], -1)
    return tf.nn.max_pool2d(f, pool, pool, "SAME").numpy()


ref_tr, ref_te = soft_threshold(xtr), soft_threshold(xte)
ref_map = mixing.activity_map(ref_tr)
print(f"reference soft-threshold encoder: activity-ink r="
      f"{mixing.activity_ink_correlation(ref_tr, xtr, dh, pool):.3f}, probe "
      f"{mixing.ridge_probe(ref_tr, ytr, ref_te, yte):.2f}%", flush=True)
for bi, co, an, ratio, st in variants:
    t = time.time()
    kw = dict(gamma_w=gw, gamma_e_init=ge, burn_in=int(bi), collect=int(co), batch_size=500,
              anneal_sweeps=int(an), anneal_ratio=ratio, anneal_start=st, progress=None)
    ftr = infer_layer(xtr, D, pool, seed=1, **kw)
    fte = infer_layer(xte, D, pool, seed=2, **kw)
    r = mixing.activity_ink_correlation(ftr, xtr, dh, pool)
    a = np.abs(ftr).mean((0, 3))
    print(f"burn_in {int(bi)} collect {int(co)} anneal {int(an)} from {st:g}/Var x{ratio:g}: activity-ink r={r:.3f}, "
          f"on-frac {np.mean(ftr != 0):.3f}, "
          f"signed probe {mixing.ridge_probe(ftr, ytr, fte, yte):.2f}%, "
          f"split probe {mixing.ridge_probe(mixing.polarity_split(ftr), ytr, mixing.polarity_split(fte), yte):.2f}% "
          f"({time.time() - t:.0f} s)", flush=True)
    print("  mean activity map (rows of the 7x7 grid, x1000):")
    for row in a:
        print("   " + " ".join(f"{1000 * v:5.0f}" for v in row))
