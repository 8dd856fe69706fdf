"""What the unpooling positions alone cost: the chain on the *fully observed* images
(so S_top and Z fit the whole digit), then the bottom half rebuilt with the layer-1
unpooling Z of some blocks replaced by its prior given the image's own theta (their
exact conditional if those pixels were hidden), the top layer and every other Z kept.
An upper bound on what a perfect top-layer inference could impute under the model.

    python experiments/missing_data/oracle.py PREPARED LAYER1 LAYER2 REFINED [model] [n] [burn_in] [collect]
"""
import sys

import numpy as np

import _chain as C
from _setup import DS, HYPER, LAYERS, SEED, hidden_stats, oracle_args, seed_for
from dgdm_tf.core.model import DeepModel

x, mask, name, n, burn_in, collect, (dicts, gs, ge) = oracle_args(sys.argv)
model = DeepModel(x.shape[1:], LAYERS, HYPER).with_ks([d.shape[-1] for d in dicts])
unseen, touched = C.unseen_blocks(mask, model), C.touched_blocks(mask, model)
print(f"model {name}, {n} images fully observed, {burn_in} + {collect} sweeps; layer-1 blocks per "
      f"image: {unseen[0].sum()} wholly hidden, {touched[0].sum()} reaching the hidden half, of {unseen[0].size}")
ests = {"full reconstruction": C.est_workflow,
        "Z of wholly hidden blocks -> E[Z | theta]": C.est_blocks_from_prior(unseen),
        "Z of wholly hidden blocks -> a draw from theta": C.est_blocks_from_prior(unseen, 11),
        "Z of blocks reaching the hidden half -> E[Z | theta]": C.est_blocks_from_prior(touched),
        "Z of every block -> E[Z | theta]": C.est_blocks_from_prior(np.ones_like(unseen))}
recs, st, sec, _ = C.run(x, None, dicts, LAYERS, seed=seed_for(SEED, DS, "inpaint", name),
                         burn_in=burn_in, collect=collect, gamma_s=gs, gamma_e=ge, hyper=HYPER,
                         estimators=ests)
print(f"chain {sec:.1f} s; scored on the bottom half:")
for k, rec in recs.items():
    print(f"  {k:55s} {hidden_stats(x, rec, mask)}  clipped {hidden_stats(x, np.clip(rec, 0, 1), mask)[:15]}")
