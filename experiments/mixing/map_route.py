"""The paper's test-time route for the SVM's features, on the pretrained layers: the MCEM
MAP of the top layer (supplement Algorithm 2, ``deep_mcem.infer_map``) against the
top-down chain's posterior mean (``deep_chain.infer_topdown``) and the layer-wise
``pretrained_svm`` route (``features.infer_layer``, layer by layer), each read out by
the fixed ridge probe (signed, as the SVM sees it, and split), with the fraction of top
units above 1e-3 and the seconds. The default run's dictionaries, gamma_s = layer 2's
gamma_w, the default config's test-time settings (2 sweeps, then 4 MCEM iterations;
3 + 3 sweeps for the posterior mean; the fixed scan). Run after
``snakemake results/mnist/pretrain/layer2.npz``:

    python experiments/mixing/map_route.py results/mnist 1000 500
"""
import sys
import time

import numpy as np

from dgdm_tf.topdown import chain as deep_chain

from dgdm_tf.mcem import test_time as deep_mcem

from dgdm_tf.mcmc import diagnostics as mixing
from dgdm_tf.pretrain.features import infer_layer
from _subsets import subsets

root = sys.argv[1]
layers_npz = [np.load(f"{root}/pretrain/layer{l}.npz") for l in (1, 2)]
ntr, nte = int(sys.argv[2]), int(sys.argv[3])
xtr, ytr, xte, yte = subsets(f"{root}/data/prepared.npz", ntr, nte)
ds = [z["D"].astype(np.float32) for z in layers_npz]
layers = [{"dict_size": 8, "n_dict": ds[0].shape[-1], "pool": 3},
          {"dict_size": 6, "n_dict": ds[1].shape[-1], "pool": 1}]
gamma_s = float(layers_npz[1]["gamma_w"])
ge0 = float(np.mean(layers_npz[0]["gamma_e"]))


def report(name, f, t):
    f = [np.asarray(v).reshape(len(v), -1) for v in f]
    signed = mixing.ridge_probe(f[0], ytr, f[1], yte)
    split = mixing.ridge_probe(mixing.polarity_split(f[0]), ytr, mixing.polarity_split(f[1]), yte)
    print(f"{name:>34s}: signed {signed:.2f}%, split {split:.2f}%, top units above 1e-3 "
          f"{np.mean(np.abs(f[0]) > 1e-3):.3f} ({time.time() - t:.0f} s)", flush=True)


common = dict(burn_in=2, batch_size=128, gamma_s=gamma_s, gamma_e_init=ge0, scan="fixed",
              progress=None)
t = time.time()
report("MCEM MAP (Algorithm 2)", [deep_mcem.infer_map(x, ds, layers, seed=s, iterations=4, **common)
                                  ["features"] for x, s in ((xtr, 1), (xte, 2))], t)
t = time.time()
report("top-down posterior mean", [deep_chain.infer_topdown(
    x, ds, layers, seed=s, **{**common, "burn_in": 3}, collect=3)["features"]
    for x, s in ((xtr, 1), (xte, 2))], t)
t = time.time()
h = [infer_layer(x, ds[0], 3, gamma_w=float(layers_npz[0]["gamma_w"]), gamma_e_init=ge0, seed=s,
                 burn_in=5, collect=5, batch_size=1000, progress=None) for x, s in ((xtr, 1), (xte, 2))]
report("layer-wise (pretrained_svm route)", [infer_layer(
    v, ds[1], 1, gamma_w=gamma_s, gamma_e_init=float(np.mean(layers_npz[1]["gamma_e"])), seed=s,
    burn_in=5, collect=5, batch_size=1000, layer_index=1, progress=None)
    for v, s in ((h[0], 11), (h[1], 12))], t)
