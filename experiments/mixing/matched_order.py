"""Does visiting each image's top units in the order of their matched-filter response
(``scan="matched"``) read out better than the fixed map order?

A top-down chain freezes within its first sweep into a decomposition that its scan order
decides (docs/findings/map_order.md): with the fixed order the
maps of low index take each image first, whatever fits it. The matched scan visits every
image's units best-fitting first (|<F_u, X>| / ||F_u||, F_u the unit's image through the
current unpooling), an order that follows the image. Both are exact scans.

On a default run's pretrained layers and the first n_train / n_test images of the
`pretrained_svm` subset, the row's `topdown_features` sweeps, M chains per image
(``infer_topdown(scan=..., chains=M, keep_chains=True)``), the run's Bayesian SVM (seed 3)
on the average of the first m chains:

    python experiments/mixing/matched_order.py results/mnist 4000 2000 2 [fixed matched ...]

Prints per scan: the features' seconds, chain 1's distance from chain 0, then per m the
test and training error, units above 1e-3 of the largest and layer 1's activity-ink.
"""
import sys
import time

import numpy as np

from dgdm_tf.mcmc import diagnostics as mixing
from dgdm_tf.topdown import chain as deep_chain
from _subsets import pretrained_row, read_chain_averages

root, n_train, n_test, m_max = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
scans = sys.argv[5:] or ["fixed", "matched"]
resolved, z, ds, feats, x, y = pretrained_row(root, n_train, n_test)
run = resolved["block"]
cfg = run["topdown_features"]
def global_order(name):
    """The top maps' visiting order of a fixed scan: "usage" / "usage-rev" (pretraining's
    layer-2 usage, most / least used first), "norm" (largest atom first), "seed:S" (a
    random permutation)."""
    k = ds[-1].shape[-1]
    if name == "usage":
        return np.argsort(-z[-1]["usage"], kind="stable")
    if name == "usage-rev":
        return np.argsort(z[-1]["usage"], kind="stable")
    if name == "norm":
        return np.argsort(-np.sqrt((ds[-1] ** 2).sum(axis=(0, 1, 2))), kind="stable")
    return np.random.default_rng(int(name.split(":")[1])).permutation(k)


for scan in scans:
    per, l1, secs = {}, {}, 0.0
    dicts, back = ds, None
    if ":" in scan or scan.startswith("fixed-"):  # fixed scan, top maps in a global order
        order = global_order(scan.split("-", 1)[1] if scan.startswith("fixed-") else scan)
        dicts = list(ds[:-1]) + [np.ascontiguousarray(ds[-1][..., order])]
        back = np.argsort(order)
    for s, seed in (("train", 1), ("test", 2)):
        t = time.perf_counter()
        out = deep_chain.infer_topdown(
            x[s], dicts, run["model"]["layers"], seed=seed, burn_in=int(cfg["burn_in"]),
            collect=int(cfg["collect"]), batch_size=int(cfg["batch_size"]),
            gamma_s=float(z[-1]["gamma_w"]), gamma_e_init=float(np.mean(z[0]["gamma_e"])),
            scan=scan if back is None else "fixed", chains=m_max, keep_chains=True, progress=None)
        secs += time.perf_counter() - t
        cf = out["chain_features"]
        if back is not None:  # the given map order again (the SVM reads the same columns)
            cf = cf.reshape(cf.shape[:2] + (-1, len(back)))[..., back].reshape(cf.shape)
        per[s], l1[s] = cf, out["layer1_pooled"]
    lay0 = run["model"]["layers"][0]
    ink = mixing.activity_ink_correlation(l1["test"], x["test"], int(lay0["dict_size"]), int(lay0["pool"]))
    a, b = per["test"][0], per["test"][min(1, m_max - 1)]
    apart = float(np.linalg.norm(a - b) / max(np.linalg.norm(a), 1e-30))
    print(f"scan {scan}: {m_max} chain(s) of {n_train} + {n_test} images in {secs:.0f} s; "
          f"chain 1 lies {apart:.3f} (relative) from chain 0; layer-1 activity-ink of the "
          f"{m_max}-chain average {ink:.3f}", flush=True)
    read_chain_averages(f"scan {scan}", per, y, feats, run)
