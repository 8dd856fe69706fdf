"""Peak memory of the chunked top-down sweep (the refinement and supervised chains' sweep
at any size) against the images it holds.

Builds the default config's MNIST model with random dictionaries (K = 50 / 200), a state on ``--images`` random 28 x 28 images, and runs ``--sweeps`` chunked
refinement sweeps (``dgdm_tf.topdown.sweep.make_sweep_fn(model, chunk=--chunk)``, every
conditional, D included) in this process, printing the process's peak RSS before the
first sweep (the state and its inputs held; the peak mark is then reset, so the start's
own peak does not hide the sweeps') and after each sweep, and the size of the state's
per-image fields. Run it on two commits (``git worktree``) to compare what a
change to the sweep holds at its peak; the cost does not depend on the values. The start
frees more than a sweep needs (3.1 GB at 5,000 images) and the sweep reuses it, so a
saving smaller than that may not show here.

    python experiments/scaling/sweep_peak_memory.py --images 10000 --out <file.json>
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from dgdm_tf.core.memory import peak_rss_mb, reset_peak_rss  # noqa: E402
from dgdm_tf.core.model import DeepModel  # noqa: E402
from dgdm_tf.topdown import state as deep_state  # noqa: E402
from dgdm_tf.topdown.sweep import make_sweep_fn  # noqa: E402

#: config/config.yaml's MNIST model
LAYERS = [{"dict_size": 8, "n_dict": 50, "pool": 3}, {"dict_size": 6, "n_dict": 200, "pool": 1}]
SMOKE_LAYERS = [{"dict_size": 3, "n_dict": 4, "pool": 2}, {"dict_size": 2, "n_dict": 3, "pool": 1}]


def state_mb(st) -> float:
    """MB of the state's per-image fields."""
    return sum(t.numpy().nbytes for f in deep_state.PER_IMAGE_FIELDS
               for t in tf.nest.flatten(getattr(st, f))) / 2**20


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--images", type=int, default=10000)
    p.add_argument("--chunk", type=int, default=250, help="images a chunk (supervised.chunk)")
    p.add_argument("--sweeps", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="write the figures as JSON here")
    p.add_argument("--smoke", action="store_true", help="a tiny model, to check the probe runs")
    a = p.parse_args(argv)
    shape, layers = ((8, 8, 1), SMOKE_LAYERS) if a.smoke else ((28, 28, 1), LAYERS)
    model = DeepModel(shape, layers)
    rng = np.random.default_rng(a.seed)
    x = tf.constant(rng.random((a.images, *shape), dtype=np.float32))
    ds = [(rng.normal(size=(g.dh, g.dw, g.c, g.k)) / np.sqrt(g.dh * g.dw * g.c)).astype(np.float32)
          for g in model.geoms]
    st = deep_state.init_state(x, model, ds, tf.constant([a.seed, 1], tf.int32), gamma_e_init=100.0)
    fn = make_sweep_fn(model, chunk=a.chunk)
    got = {"images": a.images, "chunk": a.chunk, "state_mb": state_mb(st),
           "peak_rss_mb_start": peak_rss_mb(), "sweeps": []}
    # the start's own peak (its ridge solve) is not the sweep's: measure from here
    got["peak_reset"] = reset_peak_rss()
    got["rss_mb_before_sweeps"] = peak_rss_mb()
    print(f"{a.images} images, per-image state {got['state_mb']:.0f} MB; peak RSS of the "
          f"start {got['peak_rss_mb_start']:.0f} MB, before the sweeps "
          f"{got['rss_mb_before_sweeps']:.0f} MB (peak reset: {got['peak_reset']})", flush=True)
    for i in range(a.sweeps):
        t0 = time.perf_counter()
        st, _ = fn(st, x)
        st.resid.numpy()
        row = {"sweep": i + 1, "seconds": time.perf_counter() - t0, "peak_rss_mb": peak_rss_mb()}
        got["sweeps"].append(row)
        print(f"sweep {i + 1}: {row['seconds']:.0f} s, peak RSS {row['peak_rss_mb']:.0f} MB", flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps(got, indent=1))
    return got


if __name__ == "__main__":
    main()
