"""What the top layer's extrapolation costs: the unpooling positions Z of every layer-1
block taken from a chain on the *fully observed* image (oracle positions) and held; the
top layer then sampled from the observed (top-half) pixels only, from two starts: top
units off (as rule inpaint), or the fully observed chain's own S_top (the truth's
explanation). gamma_e sampled. Printed with the final log joint per image and its parts
(Z and theta are the same in both runs, so the comparison is of the top-layer
explanations): the likelihood of the observed pixels, the top units' prior (slab and
spike), the rest.

    python experiments/missing_data/oracle_z.py PREPARED LAYER1 LAYER2 REFINED [model] [n] [burn_in] [collect]
"""
import sys

import numpy as np
import tensorflow as tf

import _chain as C
from dgdm_tf.topdown.sweep import log_joint
from _setup import DS, HYPER, LAYERS, SEED, hidden_stats, oracle_args, seed_for

x, mask, name, n, burn_in, collect, (dicts, gs, ge) = oracle_args(sys.argv)
seed = seed_for(SEED, DS, "inpaint", name)
_, full, sec, _ = C.run(x, None, dicts, LAYERS, seed=seed, burn_in=burn_in, collect=1, gamma_s=gs,
                        gamma_e=ge, hyper=HYPER, estimators={})
print(f"model {name}, {n} images: fully observed chain {burn_in + 1} sweeps, {sec:.1f} s")
for start_top in ("off", "full chain's"):
    def start(st, model, start_top=start_top):
        st = st._replace(z=full.z, log_theta=full.log_theta)
        if start_top != "off":
            st = st._replace(s_top=full.s_top, on=full.on, log_pi=full.log_pi, gamma_e=full.gamma_e)
        return st
    recs, st, sec, model = C.run(x, mask, dicts, LAYERS, seed=seed + 1, burn_in=burn_in, collect=collect,
                             gamma_s=gs, gamma_e=ge, hyper=HYPER, estimators={"w": C.est_workflow},
                             start=start, fix_z=True)
    rec = np.where(mask > 0, x, recs["w"])
    print(f"  oracle Z held, S_top from the top half, start {start_top:12s}: {hidden_stats(x, rec, mask)}"
          f"  clipped {hidden_stats(x, np.clip(rec, 0, 1), mask)[:15]}  ({sec:.1f} s)")
    xm, mt = tf.constant(x * mask), tf.constant(mask)
    lj = float(log_joint(st, xm, model, mt)) / n
    ge_n = np.asarray(st.gamma_e)
    sq = np.sum(np.square(np.asarray(st.resid)), axis=(1, 2, 3))
    n_obs = mask.sum(axis=(1, 2, 3))
    lik = float(np.mean(0.5 * n_obs * np.log(ge_n / (2 * np.pi)) - 0.5 * ge_n * sq))
    gsv, on = float(st.gamma_s), np.asarray(st.on)
    slab = float((0.5 * on.sum() * np.log(gsv / (2 * np.pi)) - 0.5 * gsv * np.sum(np.asarray(st.s_top) ** 2)) / n)
    lp = np.asarray(st.log_pi)
    spike = float(np.sum(on * lp[:, None, None, :, 0] + (1 - on) * lp[:, None, None, :, 1]) / n)
    print(f"      log joint/image {lj:.1f}: likelihood {lik:.1f} (gamma_e {ge_n.mean():.0f}, observed "
          f"RMS residual {np.sqrt(np.mean(sq / n_obs)):.4f}), slab {slab:.1f}, spike {spike:.1f}, "
          f"rest {lj - lik - slab - spike:.1f}; top units on {on.mean():.4f}")
