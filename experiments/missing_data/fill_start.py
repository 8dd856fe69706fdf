"""The masked chain (exact, rule inpaint's) started from the state of a chain run on the
image with its hidden half *filled* by a simple imputation from the training images
(_fills.py: mean image, conditional Gaussian, kNN): a start that has not seen the hidden
pixels. Printed: the fill's own hidden PSNR, the model's (workflow estimator, raw and
clipped to [0, 1]), the amplitude.

    python experiments/missing_data/fill_start.py PREPARED LAYER1 LAYER2 REFINED model n start_sweeps burn_in collect fill[,fill...]
"""
import sys

import numpy as np

import _chain as C
from _fills import fill
from _setup import DS, HYPER, LAYERS, SEED, hidden_stats, inpaint_inputs, models, psnr, seed_for

prep, l1, l2, ref, name = sys.argv[1:6]
n, s0, burn_in, collect = (int(v) for v in sys.argv[6:10])
kinds = sys.argv[10].split(",")
x, mask, xtr = inpaint_inputs(prep, n)
dicts, gs, ge = models(l1, l2, ref)[name]
seed = seed_for(SEED, DS, "inpaint", name)
print(f"model {name}, {n} images; start: {s0} sweeps on the filled image, then {burn_in} + {collect} masked")
for kind in kinds:
    xf = fill(kind, x, mask, xtr)
    _, st0, sec0, _ = C.run(xf, None, dicts, LAYERS, seed=seed + 17, burn_in=s0 - 1, collect=1,
                            gamma_s=gs, gamma_e=ge, hyper=HYPER, estimators={})
    recs, st, sec, _ = C.run(x, mask, dicts, LAYERS, seed=seed, burn_in=burn_in, collect=collect,
                             gamma_s=gs, gamma_e=ge, hyper=HYPER, estimators={"w": C.est_workflow},
                             start=lambda st, model, st0=st0: st0._replace(seed=st.seed))
    rec = np.where(mask > 0, x, recs["w"])
    print(f"fill {kind:5s}: fill alone {psnr(x, xf, mask):.2f} dB | model from it {hidden_stats(x, rec, mask)}, "
          f"clipped {psnr(x, np.clip(rec, 0, 1), mask):.2f} dB | {sec0 + sec:.0f} s", flush=True)
