"""Is the model's posterior given the top half good and the chain's start the problem?
The masked chain of rule inpaint (everything but the dictionaries sampled, exact) from
two starts: rule inpaint's (top units off, matched-filter Z), and the state of a chain
run on the *fully observed* image (an oracle start: it has seen the hidden half). Printed
per sweep: the log joint of the observed pixels and every variable (per image), gamma_e,
the top units' on-rate; at the end the hidden-half PSNR of each.

    python experiments/missing_data/oracle_start.py PREPARED LAYER1 LAYER2 REFINED [model] [n] [burn_in] [collect]
"""
import sys

import numpy as np
import tensorflow as tf

import _chain as C
from _setup import DS, HYPER, LAYERS, SEED, hidden_stats, oracle_args, psnr, seed_for
from dgdm_tf.topdown.sweep import log_joint

x, mask, name, n, burn_in, collect, (dicts, gs, ge) = oracle_args(sys.argv)
xm = tf.constant(x * mask)
mt = tf.constant(mask)
seed = seed_for(SEED, DS, "inpaint", name)
_, full, sec, _ = C.run(x, None, dicts, LAYERS, seed=seed, burn_in=burn_in, collect=1, gamma_s=gs,
                        gamma_e=ge, hyper=HYPER, estimators={})
print(f"model {name}, {n} images; fully observed chain {burn_in + 1} sweeps ({sec:.1f} s)")
out = {}
for label, start in (("rule inpaint's start", None),
                     ("oracle start", lambda st, model: full._replace(seed=st.seed))):
    rows = []

    def on_sweep(t, before, after, stats, model, rows=rows):
        rows.append((float(log_joint(after, xm, model, mt)) / n, float(np.mean(np.asarray(after.gamma_e))),
                     float(np.mean(np.asarray(after.on)))))
    recs, st, sec, _ = C.run(x, mask, dicts, LAYERS, seed=seed, burn_in=burn_in, collect=collect,
                             gamma_s=gs, gamma_e=ge, hyper=HYPER, estimators={"w": C.est_workflow},
                             start=start, on_sweep=on_sweep)
    out[label] = (recs["w"], rows, sec)
print("sweep  " + "  ".join(f"{k:>36s}" for k in out))
print("       " + "  ".join(f"{'log joint/img':>14s} {'gamma_e':>9s} {'top on':>7s}    " for _ in out))
for t in range(burn_in + collect):
    print(f"{t + 1:5d}  " + "  ".join(f"{v[1][t][0]:14.1f} {v[1][t][1]:9.1f} {v[1][t][2]:7.4f}    " for v in out.values()))
for k, (rec, rows, sec) in out.items():
    r = np.where(mask > 0, x, rec)
    print(f"{k:22s}: {hidden_stats(x, r, mask)}  clipped {psnr(x, np.clip(r, 0, 1), mask):.2f} dB; "
          f"observed-half PSNR {psnr(x, rec, 1 - mask):.2f} dB ({sec:.1f} s)")
