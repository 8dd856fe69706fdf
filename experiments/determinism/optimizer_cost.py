"""What does turning off Grappler's arithmetic optimizer cost (or save)? Times the
layer-wise feature chains (the ``pretrained_svm`` route: both layers, 5 + 5 sweeps) and
the top-down feature chains (3 + 3 sweeps under the pretrained layers) on the first N
training images of a run, in one process per call. MODE ``on`` leaves the optimizer on
(TensorFlow's default), ``off`` is what every dgdm step does now. After
``snakemake results/mnist/pretrained_svm/metrics.json``:

    for m in on off on off; do python experiments/determinism/optimizer_cost.py results/mnist 1000 $m; done
"""
import sys
import time

import numpy as np

from dgdm_tf.core import compiled

root, n, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if mode == "on":  # undo what every compiled step turns off
    compiled.reproducible_graphs = lambda: None

from dgdm_tf.topdown import chain as deep_chain  # noqa: E402

from dgdm_tf.pretrain import features
from dgdm_tf.pretrain.ridge_start import RidgeStart  # noqa: E402

layers = [np.load(f"{root}/pretrain/layer{l}.npz") for l in (1, 2)]
ds = [np.asarray(z["D"], np.float32) for z in layers]
x = np.ascontiguousarray(np.load(f"{root}/data/prepared.npz")["x_train"][:n], np.float32)
t = time.time()
features.infer_features(x, ds, [3, 1], gamma_ws=[float(z["gamma_w"]) for z in layers],
                        gamma_e_inits=[float(np.mean(z["gamma_e"])) for z in layers], seed=3,
                        burn_in=5, collect=5, batch_size=1000, start=RidgeStart(iterations=20),
                        progress=None)
layerwise = time.time() - t
t = time.time()
deep_chain.infer_topdown(x[:512], ds, [{"dict_size": d.shape[0], "n_dict": d.shape[-1], "pool": p}
                                       for d, p in zip(ds, (3, 1))],
                         seed=5, burn_in=3, collect=3, batch_size=128,
                         gamma_s=float(layers[1]["gamma_w"]),
                         gamma_e_init=float(np.mean(layers[0]["gamma_e"])), scan="fixed", progress=None)
print(f"optimizer {mode}: layer-wise features of {n} images {layerwise:.1f} s, "
      f"top-down features of {min(n, 512)} images {time.time() - t:.1f} s", flush=True)
