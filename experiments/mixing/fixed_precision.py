"""Layer-1 features collected at a fixed noise precision (gamma_e capped throughout, not
only in burn-in: a different model, Gamma prior on gamma_e replaced by a point mass):
how do the features' linear read-out and their activity-ink correlation depend on the
noise level the decomposition is made at?

    python experiments/mixing/fixed_precision.py PREPARED LAYER1 2000 1000 0.2 1 5 25 1000000
Each argument is the cap as a multiple of 1 / Var(x_n) (1e6: effectively uncapped),
optionally :N, the number of sweeps averaged (default 5) after 10 at the cap.
"""
import sys
import time

import numpy as np
import tensorflow as tf

from dgdm_tf.mcmc import anneal, diagnostics as mixing
from dgdm_tf.core.layout import LayerGeometry
from dgdm_tf.pretrain.kernel import make_sweep_fn
from dgdm_tf.core.hyper import Hyper
from dgdm_tf.pretrain.layer_model import LayerModel, init_state
from _subsets import subsets

l1 = np.load(sys.argv[2])
ntr, nte = int(sys.argv[3]), int(sys.argv[4])
xtr, ytr, xte, yte = subsets(sys.argv[1], ntr, nte)
D = l1["D"].astype(np.float32)
gw = float(np.mean(l1["gamma_w"]))


def feats(x, mult, seed, sweeps=10, collect=5):
    out = []
    for b0 in range(0, len(x), 500):
        xb = x[b0:b0 + 500]
        g = LayerGeometry(hx=28, wx=28, c=1, dh=8, dw=8, k=D.shape[-1], p=3)
        model = LayerModel(g, Hyper(), top=False, n_images=len(xb))
        fn = make_sweep_fn(model, update_d=False, update_gamma_w=False, return_expected_pool=True)
        st = init_state(xb, model, tf.constant([seed, b0]))
        st = st._replace(d=tf.constant(D), gamma_w=tf.constant(np.float32(gw)))
        cap = tf.constant(mult * anneal.start_precision(xb))
        acc = 0
        for t in range(sweeps + collect):
            st, e = fn(st, tf.constant(xb), cap)
            if t >= sweeps:
                acc = acc + np.asarray(e)
        out.append(acc / collect)
    return np.concatenate(out), float(np.mean(np.minimum(st.gamma_e, cap)))


for arg in sys.argv[5:]:
    mult, collect = (float(arg.split(":")[0]), int(arg.split(":")[1]) if ":" in arg else 5)
    t = time.time()
    ftr, ge = feats(xtr, mult, 1, collect=collect)
    fte, _ = feats(xte, mult, 2, collect=collect)
    print(f"gamma_e <= {mult:g}/Var(x), {collect} sweeps averaged (mean gamma_e in use {ge:.3g}): activity-ink "
          f"{mixing.activity_ink_correlation(ftr, xtr, 8, 3):.3f}, nonzero "
          f"{np.mean(np.abs(ftr) > 1e-3):.3f}, signed probe {mixing.ridge_probe(ftr, ytr, fte, yte):.2f}%, "
          f"split probe {mixing.ridge_probe(mixing.polarity_split(ftr), ytr, mixing.polarity_split(fte), yte):.2f}% "
          f"({time.time() - t:.0f} s)", flush=True)
