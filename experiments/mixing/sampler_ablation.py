"""What each change of the layer-wise sampler buys, end to end on MNIST (issue 17).

For each (scan, start) variant: pretrain layer 1 (the default config's 1000 pretraining
images, 60 + 20 sweeps) and layer 2 on its x_next, then infer both layers' features of
seeded train / test subsets (5 + 5 sweeps) and read them out with the fixed ridge probe
(``mixing.ridge_probe``); the soft-threshold encoder on each variant's layer-1 D is the
reference. Printed per variant: pretraining's x_next activity-ink, gamma_e, relative
residual; layer-1 features' activity-ink and split probe; the map distance between the
features of a forward-order and a reversed-order fixed scan vs the seed-to-seed spread
(only for the fixed scan); the top layer's probe.

    python experiments/mixing/sampler_ablation.py PREPARED LAYER1 1000 500 fixed:off random:ridge ...

(LAYER1: any pretrained layer-1 npz of the same data; only its image_indices are used.)
"""
import sys
import time

import numpy as np

from dgdm_tf.pretrain import chain

from dgdm_tf.baselines import encoder

from dgdm_tf.mcmc import diagnostics as mixing
from dgdm_tf.pretrain.features import infer_layer
from dgdm_tf.pretrain.ridge_start import RidgeStart
from _subsets import subsets

prep = np.load(sys.argv[1])
idx = np.load(sys.argv[2])["image_indices"]
xpre = prep["x_train"][idx].astype(np.float32)
ntr, nte = int(sys.argv[3]), int(sys.argv[4])
xtr, ytr, xte, yte = subsets(sys.argv[1], ntr, nte)


def probe(f_tr, f_te, split):
    if split:
        f_tr, f_te = mixing.polarity_split(f_tr), mixing.polarity_split(f_te)
    return mixing.ridge_probe(f_tr, ytr, f_te, yte)


for variant in sys.argv[5:]:
    scan, start_name = variant.split(":")
    start = RidgeStart() if start_name == "ridge" else None
    t0 = time.time()
    pre = dict(burn_in=60, collect=20, prune_min_usage=0.002, progress=None, scan=scan, start=start)
    l1 = chain.run_pretrain_layer(xpre, dict_size=8, n_dict=50, pool=3, seed=1, **pre)
    relres1 = l1["trace"][-1]["rel_residual"]
    l2 = chain.run_pretrain_layer(l1["x_next"], dict_size=6, n_dict=200, pool=1, seed=2, **pre)
    relres2 = l2["trace"][-1]["rel_residual"]
    print(f"[{variant}] pretraining: layer 1 x_next activity-ink "
          f"{mixing.activity_ink_correlation(l1['x_next'], xpre, 8, 3):.3f}, gamma_e "
          f"{np.mean(l1['gamma_e']):.0f}, rel. residual {relres1:.3f}, K {l1['D'].shape[-1]}; "
          f"layer 2 gamma_e {np.mean(l2['gamma_e']):.0f}, rel. residual {relres2:.3f}, "
          f"blocks on {l2['trace'][-1]['active_frac']:.3f}, K {l2['D'].shape[-1]} "
          f"({time.time() - t0:.0f} s)", flush=True)
    kw = dict(burn_in=5, collect=5, batch_size=500, progress=None, scan=scan, start=start)

    def layer1(x, seed, **extra):
        return infer_layer(x, l1["D"], 3, gamma_w=float(l1["gamma_w"]),
                           gamma_e_init=float(np.mean(l1["gamma_e"])), seed=seed, **{**kw, **extra})

    f1 = [layer1(xtr, 11), layer1(xte, 12)]
    ref = [encoder.encode(x, l1["D"], 3) for x in (xtr, xte)]
    line = (f"[{variant}] layer 1 features: activity-ink "
            f"{mixing.activity_ink_correlation(f1[0], xtr, 8, 3):.3f}, split probe "
            f"{probe(*f1, True):.2f}% (soft-threshold encoder, same D: {probe(*ref, False):.2f}%)")
    if scan == "fixed":
        colours = [(a, b) for a in range(4) for b in range(4)]
        again = layer1(xtr, 13)
        reverse = layer1(xtr, 11, colour_order=colours[::-1])
        maps = [mixing.activity_map(f) for f in (f1[0], again, reverse)]
        line += (f"; reversed order moves the activity map by {mixing.map_distance(maps[0], maps[2]):.3f} "
                 f"(another seed: {mixing.map_distance(maps[0], maps[1]):.3f})")
    print(line + f" ({time.time() - t0:.0f} s)", flush=True)
    f2 = [infer_layer(f, l2["D"], 1, gamma_w=float(l2["gamma_w"]),
                      gamma_e_init=float(np.mean(l2["gamma_e"])), seed=s, layer_index=1, **kw)
          for f, s in zip(f1, (21, 22))]
    print(f"[{variant}] top layer: signed probe {probe(*f2, False):.2f}%, split {probe(*f2, True):.2f}% "
          f"({time.time() - t0:.0f} s)", flush=True)
