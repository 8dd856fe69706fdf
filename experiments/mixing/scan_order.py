"""Scan-order invariance of layer-1 feature inference on MNIST: the mean activity map of
the forward colour order against the reversed one, beside the same chain's seed-to-seed
spread (forward order, two seeds). A sampler that follows the image moves its map no
more with the order than with the seed.

    python experiments/mixing/scan_order.py PREPARED LAYER1 1000 "5,5,0,1,1" "25,5,25,6000,0.05"
Variants as in layer1_probe.py: "burn_in,collect,anneal_sweeps,anneal_ratio,anneal_start".
"""
import sys

import numpy as np

from dgdm_tf.mcmc import diagnostics as mixing
from dgdm_tf.pretrain.features import infer_layer
from dgdm_tf.core.layout import LayerGeometry

prep, l1 = np.load(sys.argv[1]), np.load(sys.argv[2])
n = int(sys.argv[3])
x = prep["x_train"][np.random.default_rng(0).choice(len(prep["x_train"]), n, replace=False)]
x = x.astype(np.float32)
D = l1["D"].astype(np.float32)
gw, ge = float(np.mean(l1["gamma_w"])), float(np.mean(l1["gamma_e"]))
g = LayerGeometry(hx=28, wx=28, c=1, dh=8, dw=8, k=D.shape[-1], p=3)
forward = [(a, b) for a in range(g.gh) for b in range(g.gw)]
for arg in sys.argv[4:]:
    bi, co, an, ratio, st = (float(v) for v in arg.split(","))
    kw = dict(gamma_w=gw, gamma_e_init=ge, burn_in=int(bi), collect=int(co), batch_size=500,
              anneal_sweeps=int(an), anneal_ratio=ratio, anneal_start=st, progress=None)
    f1 = infer_layer(x, D, 3, seed=1, **kw)
    f2 = infer_layer(x, D, 3, seed=2, **kw)
    fr = infer_layer(x, D, 3, seed=1, colour_order=forward[::-1], **kw)
    m1, m2, mr = (mixing.activity_map(f) for f in (f1, f2, fr))
    print(f"{arg}: seed-to-seed distance {mixing.map_distance(m1, m2):.3f}, forward vs reversed "
          f"{mixing.map_distance(m1, mr):.3f}; activity-ink forward "
          f"{mixing.activity_ink_correlation(f1, x, 8, 3):.3f}, reversed "
          f"{mixing.activity_ink_correlation(fr, x, 8, 3):.3f}", flush=True)
