"""Rule inpaint's measurement with the library as changed (dgdm_tf.topdown.chain.infer_topdown:
the wholly hidden blocks' unpooling Rao-Blackwellised; ``chains`` independent chains,
chain c >= 1 in its own map order): the same images, mask, seeds, sweeps and batch as
the workflow. Printed: PSNR on the hidden pixels of the reconstruction as the workflow
takes it (observed pixels kept), also clipped to the data range [0, 1]; amplitude; time.

    python experiments/missing_data/library.py PREPARED LAYER1 LAYER2 REFINED model chains [n [start [scan]]]

``start``: ``off`` (default: every top unit off) or ``ridge`` / ``ridge@T`` (the top layer's
order-free start, dgdm_tf.topdown.ridge_start, threshold T, default 0.5, 20 CG steps);
``scan``: the sweeps' order (default ``random``, rule inpaint's; ``fixed``, ``matched``).
"""
import sys

import numpy as np

from _setup import BATCH, BURN_IN, COLLECT, DS, HYPER, LAYERS, SEED, hidden_stats, inpaint_inputs, models, psnr, seed_for
from dgdm_tf.pretrain.ridge_start import RidgeStart
from dgdm_tf.topdown import chain as deep_chain

prep, l1, l2, ref, name = sys.argv[1:6]
chains = int(sys.argv[6])
n = int(sys.argv[7]) if len(sys.argv) > 7 else 100
start = sys.argv[8] if len(sys.argv) > 8 else "off"
scan = sys.argv[9] if len(sys.argv) > 9 else "random"
top_start = (RidgeStart(float(start.partition("@")[2] or 0.5), 0.01, 20)
             if start.startswith("ridge") else None)
x, mask, xtr = inpaint_inputs(prep, n)
dicts, gs, ge = models(l1, l2, ref)[name]
res = deep_chain.infer_topdown(x, dicts, LAYERS, seed=seed_for(SEED, DS, "inpaint", name), burn_in=BURN_IN,
                               collect=COLLECT, batch_size=BATCH, gamma_s=gs, gamma_e_init=ge,
                               hyper=HYPER, mask=mask, chains=chains, start=top_start, scan=scan, progress=None)
rec = np.where(mask > 0, x, res["reconstruction"])
print(f"{name}, start {start}, scan {scan}, {n} images, {chains} chain(s) of {BURN_IN} + {COLLECT} sweeps: {hidden_stats(x, rec, mask)}; "
      f"clipped to [0, 1] {psnr(x, np.clip(rec, 0, 1), mask):.2f} dB; {res['seconds']:.0f} s "
      f"(mean fill {psnr(x, np.broadcast_to(xtr.mean(0), x.shape), mask):.2f} dB)")
