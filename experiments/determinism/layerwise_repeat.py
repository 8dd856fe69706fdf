"""Are the layer-wise feature chains (the ``pretrained_svm`` route) bitwise repeatable?
Run twice (separate processes, same arguments) and compare the two .npy files.

The top-layer features of the first N training images under the pretrained layers, with
the default config's feature settings (5 + 5 sweeps, ridge start, random scan), seed 3.
Run after ``snakemake results/mnist/pretrained_svm/metrics.json``:

    python experiments/determinism/layerwise_repeat.py results/mnist 256 a.npy
    python experiments/determinism/layerwise_repeat.py results/mnist 256 b.npy
    python -c "import numpy as np; print((np.load('a.npy') != np.load('b.npy')).sum())"
"""
import sys

import numpy as np

from dgdm_tf.pretrain import features
from dgdm_tf.pretrain.ridge_start import RidgeStart

root, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
prep = np.load(f"{root}/data/prepared.npz")
layers = [np.load(f"{root}/pretrain/layer{l}.npz") for l in (1, 2)]
x = np.ascontiguousarray(prep["x_train"][:n], dtype=np.float32)
f = features.infer_features(
    x, [z["D"] for z in layers], [3, 1], gamma_ws=[float(z["gamma_w"]) for z in layers],
    gamma_e_inits=[float(np.mean(z["gamma_e"])) for z in layers], seed=3, burn_in=5,
    collect=5, batch_size=128, start=RidgeStart(iterations=20), progress=None)
np.save(out, f)
