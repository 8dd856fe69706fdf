"""The pretrained_svm row's features (every layer, dictionaries fixed) under variants of
the feature chains, through a fixed linear read-out (ridge; signed, as the SVM sees them,
and polarity-split), with layer 1's activity-ink correlation. Run after
``snakemake results/mnist/pretrain/layer2.npz``:

    python experiments/mixing/pretrained_probe.py results/mnist 3000 1000 "5,5,0" "25,5,20" "6,2,2,16"
Each variant: "burn_in,collect,anneal_sweeps[,chains]" (anneal from 0.05 / Var(x_n),
x3000; chains: independent chains per image, averaged, default 1). The first line is
the block-posterior row's features (pretrained_block_svm) on the same images.
"""
import sys
import time

import numpy as np

from dgdm_tf.pretrain import block_posterior

from dgdm_tf.mcmc import diagnostics as mixing
from dgdm_tf.pretrain.features import infer_features
from _subsets import subsets

root = sys.argv[1]
layers = [np.load(f"{root}/pretrain/layer{l}.npz") for l in (1, 2)]
ntr, nte = int(sys.argv[2]), int(sys.argv[3])
xtr, ytr, xte, yte = subsets(f"{root}/data/prepared.npz", ntr, nte)
ds = [z["D"].astype(np.float32) for z in layers]
kw0 = dict(gamma_ws=[float(z["gamma_w"]) for z in layers],
           gamma_e_inits=[float(np.mean(z["gamma_e"])) for z in layers],
           hyper=None, batch_size=1000, progress=None, anneal_ratio=3000.0, anneal_start=0.05)
bkw = dict(gamma_ws=kw0["gamma_ws"], gamma_es=kw0["gamma_e_inits"])
btr, bte = (block_posterior.block_posterior_features(v, ds, [3, 1], **bkw) for v in (xtr, xte))
print(f"block posteriors: top layer {btr.shape[1]} features: signed probe "
      f"{mixing.ridge_probe(btr, ytr, bte, yte):.2f}%", flush=True)
for arg in sys.argv[4:]:
    bi, co, an, *ch = (int(v) for v in arg.split(","))
    kw = dict(kw0, chains=ch[0] if ch else 1)
    t = time.time()
    per = []
    ftr = infer_features(xtr, ds, [3, 1], seed=1, burn_in=bi, collect=co, anneal_sweeps=an,
                         layer_outputs=per, **kw)
    fte = infer_features(xte, ds, [3, 1], seed=2, burn_in=bi, collect=co, anneal_sweeps=an, **kw)
    print(f"{arg}: layer-1 activity-ink {mixing.activity_ink_correlation(per[0], xtr, 8, 3):.3f}; "
          f"top layer {ftr.shape[1]} features: signed probe {mixing.ridge_probe(ftr, ytr, fte, yte):.2f}%, "
          f"split probe {mixing.ridge_probe(mixing.polarity_split(ftr), ytr, mixing.polarity_split(fte), yte):.2f}% "
          f"({time.time() - t:.0f} s)", flush=True)
