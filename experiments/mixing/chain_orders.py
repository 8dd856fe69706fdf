"""Do the top-down features read out better when the averaged chains visit the maps in
the same order (different seeds only) than in permuted orders (the default)?

Chains in other map orders freeze into other decompositions of each image; chains in
one order differ by their random draws only. Averaging the first kind mixes
decompositions, the second averages out the draws' noise within one decomposition.
Both are averages of exact chains' Rao-Blackwellised estimates of the same posterior
mean; the read-out says which estimate the SVM uses better.

On a default run's pretrained layers and the first n_train / n_test images of the
`pretrained_svm` subset: M top-down chains per image in each kind of order
(``infer_topdown(chains=M, chain_orders=..., keep_chains=True)``, the run's
`topdown_features` sweeps); for m = 1 .. M, the run's Bayesian SVM (seed 3) trained on
the first m chains' average and tested on the test images' average of the same m:

    python experiments/mixing/chain_orders.py results/mnist 4000 2000 4 [same|permuted ...]

Prints one line per (orders, m): test error, training error, the features' seconds.
"""
import sys
import time

import numpy as np

from _subsets import pretrained_row, read_chain_averages, row_chain_features

root, n_train, n_test, m_max = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
kinds = sys.argv[5:] or ["same", "permuted"]
resolved, z, ds, feats, x, y = pretrained_row(root, n_train, n_test)
run = resolved["block"]
for kind in kinds:
    per, secs = {}, 0.0
    for s, n, seed in (("train", n_train, 1), ("test", n_test, 2)):
        t = time.perf_counter()
        per[s] = row_chain_features(x[s], z, ds, run, seed, m_max, chain_orders=kind)
        secs += time.perf_counter() - t
    # how far apart the chains are: relative distance of chain 1 from chain 0, test images
    a, b = per["test"][0], per["test"][1] if m_max > 1 else per["test"][0]
    apart = float(np.linalg.norm(a - b) / max(np.linalg.norm(a), 1e-30))
    print(f"{kind}: {m_max} chains of {n_train} + {n_test} images in {secs:.0f} s; "
          f"chain 1 lies {apart:.3f} (relative) from chain 0", flush=True)
    read_chain_averages(kind, per, y, feats, run)
