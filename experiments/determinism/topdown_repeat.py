"""Are the top-down feature chains bitwise repeatable? Run this twice (separate
processes, same arguments) and compare the two .npy files entry by entry.

The top-down features of 512 of the unsupervised row's training images under the
refined model (3 + 3 sweeps, fixed scan, seed 5), saved to OUT. MODE ``det`` first calls
``tf.config.experimental.enable_op_determinism()``; set TF_ENABLE_ONEDNN_OPTS=0 in the
environment to turn oneDNN off. Run after ``snakemake results/tables.md``:

    python experiments/determinism/topdown_repeat.py results/mnist a.npy plain
    python experiments/determinism/topdown_repeat.py results/mnist b.npy plain
    python -c "import numpy as np; print((np.load('a.npy') != np.load('b.npy')).sum())"

Before 6950b0f the two files differed in a few entries (Grappler's arithmetic optimizer
rewrote each trace differently: retrace.py); since then they are identical.
"""
import sys

import numpy as np
import tensorflow as tf

if sys.argv[3] == "det":
    tf.config.experimental.enable_op_determinism()

from dgdm_tf.topdown import chain as deep_chain  # noqa: E402

root = sys.argv[1]
feats = np.load(f"{root}/unsupervised_svm/features.npz")
prep = np.load(f"{root}/data/prepared.npz")
m = np.load(f"{root}/refine/model.npz")
ds = [np.asarray(m[f"D{l + 1}"], np.float32) for l in range(int(m["n_layers"]))]
layers = [{"dict_size": d.shape[0], "n_dict": d.shape[-1], "pool": p} for d, p in zip(ds, (3, 1))]
x = prep["x_train"][feats["idx_train"][:512]].astype(np.float32)
f = deep_chain.infer_topdown(x, ds, layers, seed=5, burn_in=3, collect=3, batch_size=128,
                             gamma_s=float(m["gamma_s"]), gamma_e_init=float(np.mean(m["gamma_e"])),
                             scan="fixed", progress=None)["features"]
np.save(sys.argv[2], f)
