"""Peak memory of the top-down chain's start (`topdown.state.init_state`) on N images,
whole or in chunks: the `refine` and `supervised` rules start their chains on every
training image, before the chunked sweeps. On a default run's pretrained layers and the
first N training images of its `pretrained_svm` subset; each setting in its own process,
which prints its peak RSS and the RSS of the process before the start:

    python experiments/scaling/start_memory.py results/mnist 10000 none 250

(`none`: every image at once, as the rules did before `init_state(chunk=)`.)
"""
import os
import resource
import subprocess
import sys
import time

root = sys.argv[1]
if len(sys.argv) > 2 and sys.argv[2] == "--one":
    n, chunk = int(sys.argv[3]), sys.argv[4]
    import numpy as np

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "mixing"))
    from _subsets import pretrained_row
    from dgdm_tf.core.model import DeepModel
    from dgdm_tf.topdown.state import init_state

    resolved, z, ds, _, x, _ = pretrained_row(root, n, 1)
    model = DeepModel(x["train"].shape[1:], resolved["block"]["model"]["layers"]).with_ks(
        [v.shape[-1] for v in ds])
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t = time.perf_counter()
    st = init_state(x["train"], model, ds, [0, 1], gamma_e_init=float(np.mean(z[0]["gamma_e"])),
                    gamma_s_init=float(z[-1]["gamma_w"]), chunk=None if chunk == "none" else int(chunk))
    float(np.sum(st.resid))  # the state is computed
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{n} images, chunk {chunk}: peak RSS {rss:.0f} MB (before the start {before:.0f} MB; "
          f"{time.perf_counter() - t:.1f} s)", flush=True)
    sys.exit(0)
n = sys.argv[2]
for chunk in sys.argv[3:] or ["none", "250"]:
    out = subprocess.run([sys.executable, __file__, root, "--one", n, chunk],
                         capture_output=True, text=True)
    print(out.stdout.strip() or out.stderr[-2000:], flush=True)
