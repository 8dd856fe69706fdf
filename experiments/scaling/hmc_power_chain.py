"""The refinement chain with fewer power iterations in D[2]'s HMC setting.

`hmc_tuning.py` measured single D[2] draws; this runs the chain as the `refine` rule does
(`run_refine`, chunks of 250, the random scan, burn-in adapting the step up to its cap)
on a default run's pretrained layers and the first N training images of its
`pretrained_svm` subset, once per power-iteration count (each in its own process), and
prints each sweep's seconds and D[2]'s acceptance from the chain's trace:

    python experiments/scaling/hmc_power_chain.py results/mnist 1000 4 2 6 3

(N images, burn-in sweeps, collected sweeps, then the counts.) Every draw differs
between the counts from the first D[2] step on, so the chains' other figures are two
chains, not a paired comparison.
"""
import os
import subprocess
import sys

root, n, burn_in, collect = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
if len(sys.argv) > 5 and sys.argv[5] == "--one":
    import functools

    import numpy as np

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "mixing"))
    from _subsets import pretrained_row
    from dgdm_tf.topdown import dictionaries, sweep
    from dgdm_tf.topdown.refine import run_refine

    its = int(sys.argv[6])
    # the sweep calls resample_d by this name: the count reaches every D step's HMC
    sweep.resample_d = functools.partial(dictionaries.resample_d, power_iterations=its)
    resolved, z, ds, _, x, _ = pretrained_row(root, n, 1)  # run_refine builds its own start
    out = run_refine(x["train"], ds, resolved["block"]["model"]["layers"], seed=0,
                     burn_in=burn_in, collect=collect, chunk=250,
                     gamma_e_init=float(np.mean(z[0]["gamma_e"])),
                     gamma_s_init=float(z[-1]["gamma_w"]), scan="random", progress=None)
    rows = out["trace"]
    print(f"{its} power iterations, {n} images: seconds a sweep "
          + " / ".join(f"{r['seconds']:.1f}" for r in rows)
          + "; D[2] acceptance " + " / ".join(f"{r['accept_d2']:.2f}" for r in rows)
          + f"; rel. residual at the end {rows[-1]['rel_residual']:.4f}", flush=True)
    sys.exit(0)
for its in sys.argv[5:]:
    res = subprocess.run([sys.executable, __file__, root, str(n), str(burn_in), str(collect),
                          "--one", its], capture_output=True, text=True)
    print(res.stdout.strip() or res.stderr[-2000:], flush=True)
