"""Do the paper's priors carry the top-down chain away from the states that read out well?

``posterior_terms.py`` split the gain of the later, sparser top-down states (e^900 after 4
sweeps, e^2000 after 16, against the row's first sweep) by factor: almost all of it is
``codes``, log p(Z) of layer 1's unpooling blocks with each image's theta ~ Dir(alpha)
summed out, alpha = 1 / (p^2 + 1) per state as in the paper. A Dirichlet-multinomial with
alpha below one rewards every image-map whose blocks share one state (all off, say).
The rest of the gain is the top units' fit (fewer units, a closer fit) and their
Beta(1/K, 1 - 1/K) prior on pi. Here the same chains run under other priors at test time
only (the dictionaries were learned under the paper's): a model change, not a sampler
change. A setting is ``paper`` or ``key=value`` pairs joined by ``:``; settings are separated by ``/``: ``alpha=A`` (a
symmetric Dir(A) for every lower layer's unpooling), ``pi=A,B`` (pi ~ Beta(A, B)),
``gs=C`` (gamma_s at C times the row's, pretraining's gamma_w). Per setting, on the
first N_SCORE training images of the ``pretrained_svm`` row (the row's start, D and
gamma_s held, the fixed scan): layer 1's blocks on, the top units on, the relative
residual and each factor's gain against the first sweep, scored under that setting's
priors; then, with N_TRAIN N_TEST, what one chain's last sweep reads out after each
number of sweeps (the row's first N_TRAIN / N_TEST images, the run's Bayesian SVM, seed 3).

    python experiments/mixing/test_time_priors.py results/mnist N_SCORE paper/alpha=10/alpha=10:pi=1,1:gs=10 1,4,16 [N_TRAIN N_TEST]
"""
import sys
import time

import numpy as np
import tensorflow as tf

import dgdm_tf.core.model as core_model
from dgdm_tf.topdown.chain import chain_states
from dgdm_tf.topdown.evidence import collapsed_log_prob_terms
from _subsets import pretrained_row, read_chain_averages, row_chain_features, topdown_start

root, n = sys.argv[1], int(sys.argv[2])
settings = sys.argv[3].split("/")
sweeps = [int(v) for v in sys.argv[4].split(",")]
readout = (int(sys.argv[5]), int(sys.argv[6])) if len(sys.argv) > 6 else None

_init = core_model.DeepModel.__init__
PRIORS = {}


def _init_with_priors(self, *a, **k):
    """The paper's model, with the priors in PRIORS replaced (the compiled steps' cache
    key holds alpha and pi's prior, so each setting gets its own trace)."""
    _init(self, *a, **k)
    if "alpha" in PRIORS:
        self.alpha = [tf.constant(np.full(g.n_states, float(PRIORS["alpha"]), np.float32)) for g in self.geoms[:-1]]
    if "pi" in PRIORS:
        self.pi_prior = tf.constant([float(v) for v in PRIORS["pi"].split(",")], tf.float32)


core_model.DeepModel.__init__ = _init_with_priors

resolved, z, ds, x, y, *_ = topdown_start(root, n)
layers = resolved["block"]["model"]["layers"]
ge, gs0 = float(np.mean(z[0]["gamma_e"])), float(z[-1]["gamma_w"])
xs = x["train"]
if readout:
    r_resolved, r_z, r_ds, feats, rx, ry = pretrained_row(root, *readout)


def med(v):
    return f"{np.median(v):+8.1f} ({np.sum(v > 0):3d} / {len(v)})"


for setting in settings:
    PRIORS.clear()
    if setting != "paper":
        PRIORS.update(kv.split("=") for kv in setting.split(":"))
    unknown = set(PRIORS) - {"alpha", "pi", "gs"}
    if unknown:
        raise SystemExit(f"unknown prior keys {sorted(unknown)} in {setting!r}: use alpha, pi, gs")
    gs = gs0 * float(PRIORS.get("gs", 1.0))
    t0 = time.perf_counter()
    model, states = chain_states(xs, ds, layers, seed=[0, 1], sweeps=sweeps, gamma_s=gs, gamma_e_init=ge,
                                 scan="fixed")
    off = model.geoms[0].n_states - 1
    print(f"\n{setting}: Dir({float(np.asarray(model.alpha[0])[0]):.3g}) per unpooling state, pi ~ "
          f"Beta{tuple(round(float(v), 4) for v in np.asarray(model.pi_prior))}, gamma_s {gs:.4g}; chain on {n} "
          f"images {time.perf_counter() - t0:.0f} s", flush=True)
    terms = {}
    for t, st in states.items():
        terms[t] = collapsed_log_prob_terms(st, xs, model)
        resid = np.sqrt((np.asarray(st.resid) ** 2).sum((1, 2, 3)) / (xs ** 2).sum((1, 2, 3)))
        line = (f"  after {t:3d} sweep(s): layer-1 blocks on {float(np.mean(np.asarray(st.z[0]) != off)):.3f}, "
                f"top units on {float(np.mean(np.asarray(st.on))):.3f}, relative residual {np.median(resid):.3f}")
        if t != sweeps[0]:
            b = terms[sweeps[0]]
            d = {f: terms[t][f] - b[f] for f in ("fit", "codes", "on")}
            line += (f"; gain vs sweep {sweeps[0]}: fit {med(d['fit'])}, codes {med(d['codes'])}, "
                     f"on {med(d['on'])}, total {med(d['fit'] + d['codes'] + d['on'])}")
        print(line, flush=True)
    if readout:
        run_cfg = r_resolved["block"]
        for t in sweeps:
            cfg = dict(run_cfg, topdown_features=dict(run_cfg["topdown_features"], burn_in=t - 1, collect=1,
                                                      scan="fixed"))
            # row_chain_features reads gamma_s from the layers' files: scale it there
            zs = list(r_z[:-1]) + [dict(r_z[-1], gamma_w=float(r_z[-1]["gamma_w"]) * float(PRIORS.get("gs", 1.0)))]
            t1 = time.perf_counter()
            per = {s_: row_chain_features(rx[s_], zs, r_ds, cfg, seed, 1) for s_, seed in (("train", 1), ("test", 2))}
            print(f"  features after {t} sweep(s): {time.perf_counter() - t1:.0f} s", flush=True)
            read_chain_averages(f"  {setting}, {t} sweep(s)", per, ry, feats, run_cfg)
