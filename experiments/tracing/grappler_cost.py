"""What Grappler (TensorFlow's graph optimizer) costs and gives a top-down sweep and an
Algorithm 2 iteration: CPU seconds of the first call (trace and graph optimisation
included) and wall seconds of the calls after it, with Grappler's meta optimizer on or
off, each in a fresh process. docs/findings/grappler_off.md.

    python experiments/tracing/grappler_cost.py            # both settings, both models
    python experiments/tracing/grappler_cost.py --one on tiny sweep   # one process (internal)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

# (layers, K per layer, images): the default tier's tiny model; the default config's MNIST model
MODELS = {"tiny": ([{"dict_size": 8, "n_dict": 6, "pool": 3}, {"dict_size": 6, "n_dict": 8, "pool": 1}], 20),
          "mnist": ([{"dict_size": 8, "n_dict": 50, "pool": 3}, {"dict_size": 6, "n_dict": 200, "pool": 1}], 100)}


def one(grappler: str, name: str, step: str, repeats: int = 3) -> str:
    import numpy as np
    import tensorflow as tf
    from dgdm_tf.core import compiled
    from dgdm_tf.core.model import DeepModel
    from dgdm_tf.mcem.test_time import make_iteration_fn
    from dgdm_tf.topdown.state import init_state
    from dgdm_tf.topdown.sweep import make_sweep_fn

    # after the library's own setting, so "on" measures Grappler as it was before
    compiled.reproducible_graphs()
    opts = {"disable_meta_optimizer": grappler == "off", "arithmetic_optimization": False}
    if grappler not in ("on", "off"):  # a comma list of the passes to turn off
        opts.update({k: False for k in grappler.split(",")})
    tf.config.optimizer.set_experimental_options(opts)
    layers, n = MODELS[name]
    ks = [b["n_dict"] for b in layers]
    rng = np.random.default_rng(0)
    x = tf.constant(rng.random((n, 28, 28, 1)).astype(np.float32))
    model = DeepModel(x.shape[1:], layers, None).with_ks(ks)
    ds = [0.1 * rng.standard_normal((8, 8, 1, ks[0])).astype(np.float32),
          0.05 * rng.standard_normal((6, 6, ks[0], ks[1])).astype(np.float32)]
    st = init_state(x, model, ds, tf.constant([1, 2], tf.int32))
    if step == "sweep":
        f = make_sweep_fn(model)
        call = lambda s: f(s[0], x)
        s = (st,)
    else:
        f = make_iteration_fn(model, lr=1e-3, decay=0.95, steps=1)
        call = lambda s: f(s[0], s[1], s[2], x)
        s = (st, st.s_top, tf.zeros_like(st.s_top))
    c0 = time.process_time()
    s = call(s)
    first = time.process_time() - c0
    walls = []
    for _ in range(repeats):
        t0 = time.time()
        s = call(s)
        float(tf.reduce_sum(s[0].s_top))
        walls.append(time.time() - t0)
    check = float(tf.reduce_sum(s[0].s_top))
    return f"{name}\t{step}\t{grappler}\t{first:.1f}\t{min(walls):.3f}\t{check!r}"


def main(argv=None) -> list[str]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--one", nargs=3, metavar=("GRAPPLER", "MODEL", "STEP"),
                    help="GRAPPLER: on, off, or a comma list of the passes to turn off")
    a = ap.parse_args(argv)
    if a.one:
        row = one(*a.one)
        print(row)
        return [row]
    print("model\tstep\tgrappler\tfirst call CPU s\tlater call wall s (best of 3)\tsum of S[L] after")
    rows = []
    for name in MODELS:
        for step in ("sweep", "alg2"):
            for g in ("on", "off"):
                r = subprocess.run([sys.executable, __file__, "--one", g, name, step],
                                   capture_output=True, text=True, check=True)
                rows.append(r.stdout.strip().splitlines()[-1])
                print(rows[-1], flush=True)
    return rows


if __name__ == "__main__":
    main()
