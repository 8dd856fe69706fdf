"""Where does the top-down chain's memory grow with the images? On a default run's
pretrained layers and the first N training images of its `pretrained_svm` subset, two
chunked sweeps (chunks of 250, as `refine` and `supervised` run) with the global steps
(every D, gamma_s) on or off; each setting in its own process, which prints its peak RSS:

    python experiments/scaling/chain_memory.py results/mnist 500 1500

If the peak grows with N only when the globals are on, the memory is in the D steps,
which see every image in one compiled call; the per-image state is small.
"""
import os
import resource
import subprocess
import sys
import time

root = sys.argv[1]
if len(sys.argv) > 2 and sys.argv[2] == "--one":
    n, globals_on = int(sys.argv[3]), sys.argv[4] == "on"
    import numpy as np
    import tensorflow as tf

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "mixing"))
    from _subsets import pretrained_row
    from dgdm_tf.core.model import DeepModel
    from dgdm_tf.topdown.state import init_state
    from dgdm_tf.topdown.sweep import make_sweep_fn

    resolved, z, ds, feats, x, y = pretrained_row(root, n, 1)
    layers = resolved["block"]["model"]["layers"]
    model = DeepModel(x["train"].shape[1:], layers, None, scan="random").with_ks(
        [int(d.shape[-1]) for d in ds])
    fn = make_sweep_fn(model, chunk=250, update_globals=globals_on, adapt=False)
    xt = tf.constant(x["train"])
    st = init_state(x["train"], model, ds, [0, 1], gamma_e_init=float(np.mean(z[0]["gamma_e"])),
                    gamma_s_init=float(z[-1]["gamma_w"]))
    t = time.perf_counter()
    for _ in range(2):
        st, _ = fn(st, xt)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{n} images, globals {'on' if globals_on else 'off'}: peak RSS {rss:.0f} MB "
          f"({time.perf_counter() - t:.0f} s for 2 sweeps)", flush=True)
    sys.exit(0)
for n in sys.argv[2:]:
    for g in ("off", "on"):
        out = subprocess.run([sys.executable, __file__, root, "--one", n, g],
                             capture_output=True, text=True)
        print(out.stdout.strip() or out.stderr[-2000:], flush=True)
