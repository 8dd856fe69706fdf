"""Which factor of the posterior makes the later, sparser top-down states more probable?

``posterior_vs_readout.py`` found each image's state after 4 / 16 / 64 sweeps e^900 to
e^2400 more probable than the row's first-sweep state, with fewer top units on, and
reading out worse. This splits that gain into the factors of the collapsed probability
(``dgdm_tf.topdown.evidence.collapsed_log_prob_terms``):

- ``fit``: log p(x | Z, on, D, gamma_s), the Gaussian of the units that are on with their
  weights and gamma_e integrated out (the data fit, less an Occam factor per unit on);
- ``codes``: log p(Z) of layer 1's unpooling blocks (theta summed out);
- ``on``: log p(on) of the top units (pi ~ Beta(1/K, 1 - 1/K) summed out).

Then it rescores the same states with the top units' on/off under other Beta priors on
pi, and their fit with gamma_s (the slab's precision, held at pretraining's gamma_w)
scaled, to ask whether the preference would survive another prior: a model change
(the paper fixes both), not a sampler change. States are not rerun under those priors.

On a default run's pretrained layers and the first n training images of the
``pretrained_svm`` row, the row's start, D and gamma_s held:

    python experiments/mixing/posterior_terms.py results/mnist 200 [sweeps,...]
"""
import sys
import time

import numpy as np
import tensorflow as tf

from dgdm_tf.topdown.chain import chain_states
from dgdm_tf.topdown.evidence import collapsed_log_prob_terms
from _subsets import topdown_start

root, n = sys.argv[1], int(sys.argv[2])
later = [int(v) for v in (sys.argv[3] if len(sys.argv) > 3 else "4,16").split(",")]
resolved, z, ds, x, y, *_ = topdown_start(root, n)
layers = resolved["block"]["model"]["layers"]
ge, gs = float(np.mean(z[0]["gamma_e"])), float(z[-1]["gamma_w"])
xs = x["train"]
t0 = time.perf_counter()
model, states = chain_states(xs, ds, layers, seed=[0, 1], sweeps=[1] + later, gamma_s=gs, gamma_e_init=ge,
                             scan="fixed")
k = model.top.k
print(f"{n} training images of {root}'s pretrained_svm row; K_top {k}, gamma_s {gs:.4g}, gamma_e start "
      f"{ge:.0f}; chain {time.perf_counter() - t0:.0f} s", flush=True)

priors = {"paper Beta(1/K, 1-1/K)": None, "Beta(1, 1)": (1.0, 1.0), "Beta(1/2, 1/2)": (0.5, 0.5),
          "Beta(1, 1/K)": (1.0, 1.0 / k)}
scales = [0.1, 10.0]
terms = {}
for t, st in states.items():
    t1 = time.perf_counter()
    on = np.asarray(st.on) > 0
    maps_off = float(np.mean(~on.any((1, 2))))
    row = {"paper": collapsed_log_prob_terms(st, xs, model)}
    for label, pr in list(priors.items())[1:]:
        row[label] = collapsed_log_prob_terms(st, xs, model, pi_prior=pr)["on"]
    for c in scales:
        row[f"gamma_s x {c:g}"] = collapsed_log_prob_terms(st._replace(gamma_s=st.gamma_s * c),
                                                           xs, model)["fit"]
    resid = np.sqrt((np.asarray(st.resid) ** 2).sum((1, 2, 3)) / (xs ** 2).sum((1, 2, 3)))
    terms[t] = row
    print(f"after {t:3d} sweep(s): top units on {on.mean():.3f}, top maps off in the whole image "
          f"{maps_off:.3f}, relative residual {np.median(resid):.3f} ({time.perf_counter() - t1:.0f} s to score)",
          flush=True)

base = terms[1]


def med(v):
    return f"{np.median(v):+9.1f} ({np.sum(v > 0):3d} / {n})"


print("\nmedian gain per image against the first sweep's state (images where it is positive):")
print(f"{'after':>6s} | {'fit':>17s} | {'codes':>17s} | {'on':>17s} | {'total':>17s}")
for t in later:
    p, b = terms[t]["paper"], base["paper"]
    d = {f: p[f] - b[f] for f in ("fit", "codes", "on")}
    print(f"{t:6d} | {med(d['fit'])} | {med(d['codes'])} | {med(d['on'])} | "
          f"{med(d['fit'] + d['codes'] + d['on'])}")

print("\nthe same states rescored: total gain with the 'on' factor under another prior on pi, or the "
      "'fit' factor under another gamma_s:")
for t in later:
    p, b = terms[t]["paper"], base["paper"]
    rest = (p["fit"] - b["fit"]) + (p["codes"] - b["codes"])
    for label in list(priors)[1:]:
        print(f"{t:6d} sweeps, pi ~ {label:22s}: total {med(rest + terms[t][label] - base[label])}, "
              f"its 'on' factor {med(terms[t][label] - base[label])}")
    for c in scales:
        key = f"gamma_s x {c:g}"
        other = (p["codes"] - b["codes"]) + (p["on"] - b["on"])
        print(f"{t:6d} sweeps, {key:27s}: total {med(terms[t][key] - base[key] + other)}, "
              f"its 'fit' factor {med(terms[t][key] - base[key])}")
