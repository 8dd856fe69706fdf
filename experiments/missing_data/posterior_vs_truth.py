"""Does the posterior given the observed half prefer the states that extrapolate well?

Rule inpaint's masked chain (exact, everything but the dictionaries sampled, the random
scan) run from several starts on the same images:

- ``off``: every top unit off (the rule before 2026-11-26);
- ``ridge``: the top layer's order-free ridge start at threshold 0.1 (the rule's default);
- ``knn``: the state of a chain run on the image with its hidden half filled by the mean
  of its 20 nearest training images (a start that has not seen the hidden pixels);
- ``oracle``: the state of a chain run on the fully observed image (it has seen them).

For each image and start it prints, after the same sweeps, the log density of the
state given the observed pixels up to a constant shared by all starts,
log p(x_obs, state) = fit + codes (``dgdm_tf.topdown.sweep.log_joint_terms``; the
dictionaries and gamma_s are the same in every start), averaged over the collected
sweeps, and the hidden-half PSNR of the workflow's estimator.

Densities over theta and pi (Dirichlet and Beta priors with parameters below one, whose
densities are unbounded at the simplex's edges) and over a varying number of slab
weights do not compare states fairly. ``collapsed`` does
(``dgdm_tf.topdown.evidence.collapsed_log_prob``): log p(x_obs, Z of the blocks that see
an observed pixel, the top units' on/off | D, gamma_s), with theta, pi, the top units'
weights and gamma_e integrated out, scored at each chain's last state. If the starts that
extrapolate better also sit where the posterior is higher, a sampler that finds the
higher states would impute better (a mixing problem); if they sit lower, the
posterior itself prefers the worse extrapolation (a model problem).

    python experiments/missing_data/posterior_vs_truth.py PREPARED LAYER1 LAYER2 REFINED [model] [n] [burn_in] [collect] [start_sweeps]
"""
import sys

import numpy as np

import _chain as C
from _fills import fill
from _setup import DS, HYPER, LAYERS, SEED, inpaint_inputs, models, seed_for
from dgdm_tf.pretrain.ridge_start import RidgeStart
from dgdm_tf.topdown.evidence import collapsed_log_prob
from dgdm_tf.topdown.state import init_state
from dgdm_tf.topdown.sweep import log_joint_terms

prep, l1, l2, ref = sys.argv[1:5]
name = sys.argv[5] if len(sys.argv) > 5 else "refined"
n, burn_in, collect, s0 = (int(v) for v in (sys.argv[6:10] + ["100", "8", "8", "40"][len(sys.argv[6:10]):]))
x, mask, xtr = inpaint_inputs(prep, n)
dicts, gs, ge = models(l1, l2, ref)[name]
seed = seed_for(SEED, DS, "inpaint", name)
hid = mask == 0


def per_image_psnr(rec):
    err = np.where(hid, x - rec, 0.0)
    mse = (err ** 2).sum((1, 2, 3)) / hid.sum((1, 2, 3))
    return 10 * np.log10(1.0 / mse)


def state_after(xs, sweeps, seed_offset):
    """The state of the unmasked chain on images ``xs`` after ``sweeps`` sweeps."""
    _, st, sec, _ = C.run(xs, None, dicts, LAYERS, seed=seed + seed_offset, burn_in=sweeps - 1,
                          collect=1, gamma_s=gs, gamma_e=ge, hyper=HYPER, estimators={})
    return st, sec


xm = np.where(mask > 0, x, 0.0).astype(np.float32)
oracle, sec_o = state_after(x, s0, 0)
knn, sec_k = state_after(fill("knn", x, mask, xtr), s0, 17)
starts = {
    "off": None,
    "ridge": lambda st, model: init_state(xm, model, dicts, st.seed, gamma_e_init=ge, gamma_s_init=gs,
                                          mask=mask, start=RidgeStart(0.1, 0.01, 20)),
    "knn": lambda st, model: knn._replace(seed=st.seed),
    "oracle": lambda st, model: oracle._replace(seed=st.seed),
}
print(f"model {name}, {n} images, {burn_in} + {collect} masked sweeps per start; the knn / oracle "
      f"starts: {s0} sweeps on the filled / whole image ({sec_k:.0f} / {sec_o:.0f} s)", flush=True)
out = {}
for label, start in starts.items():
    acc = {"fit": 0.0, "codes": 0.0}

    def on_sweep(t, before, after, stats, model, acc=acc):
        if t >= burn_in:
            terms = {k: np.asarray(v) for k, v in log_joint_terms(after, xm, model, mask).items()}
            for k in acc:
                acc[k] = acc[k] + terms[k] / collect
    recs, st, sec, model = C.run(x, mask, dicts, LAYERS, seed=seed, burn_in=burn_in, collect=collect,
                             gamma_s=gs, gamma_e=ge, hyper=HYPER, estimators={"w": C.est_workflow},
                             start=start, on_sweep=on_sweep)
    rec = np.where(mask > 0, x, recs["w"])
    out[label] = dict(acc, collapsed=collapsed_log_prob(st, x, model, mask), psnr=per_image_psnr(rec), on=float(np.mean(np.asarray(st.on))),
                      gamma_e=float(np.median(np.asarray(st.gamma_e))), sec=sec,
                      pooled=10 * np.log10(1.0 / np.mean((x - rec)[hid] ** 2)))
    o = out[label]
    print(f"{label:7s}: hidden PSNR {o['pooled']:6.2f} dB | log p(x_obs, state) per image: mean "
          f"{np.mean(o['fit'] + o['codes']):9.1f} (fit {np.mean(o['fit']):9.1f}, codes "
          f"{np.mean(o['codes']):9.1f}) | gamma_e median {o['gamma_e']:8.0f} | top units on "
          f"{o['on']:.3f} | collapsed (last state) "
          f"{np.mean(o['collapsed']):9.1f} | {sec:.0f} s", flush=True)

base = out["ridge"]
for what in ("joint", "collapsed"):
    print(f"\nper image, each start against the rule's (ridge); log p = the {what}:")
    print("start    images where log p is higher   median difference in log p   images where PSNR is higher"
          "   median PSNR difference   corr(diff log p, diff PSNR)")
    for label, o in out.items():
        if label == "ridge":
            continue
        lp = (lambda v: v["fit"] + v["codes"]) if what == "joint" else (lambda v: v[what])
        dl = lp(o) - lp(base)
        dp = o["psnr"] - base["psnr"]
        print(f"{label:7s}  {np.sum(dl > 0):4d} / {n:<4d}                    {np.median(dl):10.1f}"
              f"                  {np.sum(dp > 0):4d} / {n:<4d}               {np.median(dp):6.2f} dB"
              f"               {np.corrcoef(dl, dp)[0, 1]:6.3f}")
