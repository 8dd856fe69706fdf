"""Does the posterior prefer the top-down states whose features read out better?

The `pretrained_svm` row's features are the first sweep of top-down chains in the fixed
scan from an all-off top layer. Other exact routes read out worse: the matched scan, and
longer chains (docs/findings/matched_scan.md,
docs/findings/first_sweep.md). This scores each image's state after those routes by its probability
given the image, log p(x, Z, on | D, gamma_s) with theta, pi, the top weights and gamma_e
integrated out (``dgdm_tf.topdown.evidence.collapsed_log_prob``). If the states that read
out worse are the more probable ones, a sampler that found the posterior's mass better
would read out worse still: the read-out is then the model's, not the sampler's.

On a default run's pretrained layers and the first n training images of the row, the
row's start (gamma_e at layer 1's pretraining mean, every top unit off), D and gamma_s
held:

    python experiments/mixing/posterior_vs_readout.py results/mnist 200 [sweeps,... [N_TRAIN N_TEST]]

Prints per route: the relative residual, the top units on, the mean collapsed
log-probability, and per image against the row's route (fixed scan, one sweep) how many
images are more probable and the median difference. With N_TRAIN N_TEST, also what the
fixed-scan chain's features read out after 1 and each of ``sweeps`` sweeps (one chain,
the last sweep collected, on the row's first N_TRAIN / N_TEST images, the run's
Bayesian SVM, seed 3).
"""
import sys
import time

import numpy as np

from dgdm_tf.topdown.chain import chain_permutations, chain_states, permute_maps
from dgdm_tf.topdown.evidence import collapsed_log_prob
from _subsets import pretrained_row, read_chain_averages, row_chain_features, topdown_start

root, n = sys.argv[1], int(sys.argv[2])
longer = [int(v) for v in (sys.argv[3] if len(sys.argv) > 3 else "4,16").split(",")]
resolved, z, ds, x, y, *_ = topdown_start(root, n)
layers = resolved["block"]["model"]["layers"]
ks = [int(d.shape[-1]) for d in ds]
ge, gs = float(np.mean(z[0]["gamma_e"])), float(z[-1]["gamma_w"])


def run(scan: str, dicts, sweeps: list[int]):
    """(model, {sweeps: state}) of one chain from the row's start."""
    return chain_states(x["train"], dicts, layers, seed=[0, 1], sweeps=sweeps, gamma_s=gs, gamma_e_init=ge,
                        scan=scan)


routes = {}
model, states = run("fixed", ds, [1] + longer)
for t, st in states.items():
    routes[f"fixed scan, {t} sweep(s)" + (" (the row's chain 0)" if t == 1 else "")] = (model, st)
model, states = run("fixed", permute_maps(ds, chain_permutations(ks, 1)), [1])
routes["fixed scan, maps permuted (the row's chain 1), 1 sweep"] = (model, states[1])
model, states = run("matched", ds, [1])
routes["matched scan, 1 sweep"] = (model, states[1])

scores = {}
print(f"{n} training images of {root}'s pretrained_svm row, its pretrained layers", flush=True)
for label, (model, st) in routes.items():
    t0 = time.perf_counter()
    scores[label] = collapsed_log_prob(st, x["train"], model)
    resid = np.sqrt((np.asarray(st.resid) ** 2).sum((1, 2, 3)) / (x["train"] ** 2).sum((1, 2, 3)))
    print(f"{label:55s}: relative residual {np.median(resid):.3f}, top units on "
          f"{float(np.mean(np.asarray(st.on))):.3f}, collapsed log p {np.mean(scores[label]):9.1f} "
          f"({time.perf_counter() - t0:.0f} s)", flush=True)
base = scores[next(iter(routes))]
print("\nagainst the row's route (fixed scan, 1 sweep):")
for label, s in list(scores.items())[1:]:
    d = s - base
    print(f"{label:55s}: more probable in {np.sum(d > 0):4d} / {n}, median difference {np.median(d):8.1f}")

if len(sys.argv) > 5:
    n_train, n_test = int(sys.argv[4]), int(sys.argv[5])
    resolved, z, ds, feats, xs, ys = pretrained_row(root, n_train, n_test)
    run_cfg = resolved["block"]
    print(f"\nread-out, fixed scan, one chain, {n_train} / {n_test} images:", flush=True)
    for t in [1] + longer:
        cfg = dict(run_cfg, topdown_features=dict(run_cfg["topdown_features"], burn_in=t - 1, collect=1,
                                                  scan="fixed"))
        t0 = time.perf_counter()
        per = {s_: row_chain_features(xs[s_], z, ds, cfg, seed, 1) for s_, seed in (("train", 1), ("test", 2))}
        print(f"features after {t} sweep(s): {time.perf_counter() - t0:.0f} s", flush=True)
        read_chain_averages(f"{t} sweep(s)", per, ys, feats, run_cfg)
