"""Seconds per image of the test-time top-down chain (`topdown.chain.infer_topdown`)
against its batch size, on a default run's pretrained layers and its first training
images (the `pretrained_svm` route's settings from the run's config, batch aside):

    python experiments/scaling/topdown_batch.py results/mnist 1024 128 256 512

Each batch size runs in this process after one warm-up call at that size (the compile
is not counted). Prints one line per batch size.
"""
import sys
import time

import numpy as np
import yaml

from dgdm_tf.topdown import chain as deep_chain

root, n = sys.argv[1], int(sys.argv[2])
sizes = [int(b) for b in sys.argv[3:]]
run = yaml.safe_load(open(f"{root}/pretrained_svm/config.yaml"))["block"]
layers = run["model"]["layers"]
cfg = run["topdown_features"]
z = [np.load(f"{root}/pretrain/layer{l + 1}.npz") for l in range(len(layers))]
ds = [a["D"].astype(np.float32) for a in z]
x = np.load(f"{root}/data/prepared.npz")["x_train"][:n].astype(np.float32)
for b in sizes:
    kw = dict(seed=0, burn_in=int(cfg["burn_in"]), collect=int(cfg["collect"]), batch_size=b,
              gamma_s=float(z[-1]["gamma_w"]), gamma_e_init=float(np.mean(z[0]["gamma_e"])),
              scan=cfg["scan"], chains=int(cfg.get("chains", 1)), progress=None)
    deep_chain.infer_topdown(x[:b], ds, layers, **kw)  # compile at this batch shape
    t = time.perf_counter()
    deep_chain.infer_topdown(x, ds, layers, **kw)
    s = time.perf_counter() - t
    print(f"batch {b}: {s:.1f} s for {n} images, {1e3 * s / n:.1f} ms an image "
          f"({int(cfg['burn_in'])} + {int(cfg['collect'])} sweeps x {int(cfg.get('chains', 1))} "
          f"chains)", flush=True)
