"""Peak memory and speed of batched pretraining as the data set grows: one
layer on random images of its shape, each size in its own process so that its peak RSS
is its own:  python -m dgdm_tf.bench.batched_pretrain '<json spec>'  prints one JSON line.

spec: {"name", "image_shape": [H, W, C], "layer": {dict_size, n_dict, pool},
"n_images", "batch_size" (null: every image in memory, the unbatched chain), "sweeps",
"seed", "hyper", "start" (the ``pretrain.start`` block), "workdir"}.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np


def state_bytes_per_image(geom) -> dict:
    """Bytes a chain keeps per image between sweeps: the unbatched chain's PretrainState
    (dense s, int32 z, padded residual, theta, gamma_e) and a batch file's
    (int8 z, one float32 weight per block, theta, gamma_e). Transients come on top."""
    g = geom
    blocks = g.gh * g.gw * g.k * g.nch * g.ncw
    theta = g.k * g.n_states * 4
    return {"in_memory": blocks * (g.p * g.p * 4 + 4) + g.hr * g.wr * g.c * 4 + theta + 4,
            "batched": blocks * (1 + 4) + theta + 4}


def measure(spec: dict) -> dict:
    """Run the spec's chain (``spec['sweeps']`` sweeps: all but one burn-in, one
    collected) and return its figures (``sweep_s``: the median sweep after the first,
    which also traces); the chain's state folder is removed after."""
    import tensorflow as tf

    from dgdm_tf.bench import exact_floor
    from dgdm_tf.pretrain import chain

    from dgdm_tf.core import memory as process_memory
    from dgdm_tf.core.compiled import compiled
    from dgdm_tf.core.layout import LayerGeometry
    from dgdm_tf.core.ops import full_conv, full_conv_adjoint
    from dgdm_tf.mcmc.checkpoint import CheckpointDir
    from dgdm_tf.pretrain.options import Layer, PretrainOptions
    from dgdm_tf.pretrain.ridge_start import RidgeStart

    def note(msg):  # progress on stderr: a run cut short still shows how far it got
        print(f"[{time.strftime('%H:%M:%S')}] {spec['name']}: {msg}", file=sys.stderr, flush=True)

    h, w, c = spec["image_shape"]
    lay = spec["layer"]
    n, bs, sweeps = int(spec["n_images"]), spec["batch_size"], int(spec["sweeps"])
    x = np.random.default_rng(spec["seed"]).random((n, h, w, c), dtype=np.float32)
    workdir = Path(spec["workdir"]) / spec["name"]
    shutil.rmtree(workdir, ignore_errors=True)
    t0 = time.perf_counter()
    out = chain.run_pretrain_layer(
        x, Layer(lay["dict_size"], lay["n_dict"], lay["pool"], hyper=spec.get("hyper")),
        PretrainOptions(burn_in=sweeps - 1, collect=1, prune_min_usage=0.0, jit_compile=False,
                        checkpoint_every=10 ** 9, batch_size=bs,
                        start=RidgeStart.from_config(spec.get("start"))),
        seed=spec["seed"], checkpoint=CheckpointDir(workdir, trace=None), progress=note)
    wall = time.perf_counter() - t0
    peak = process_memory.peak_rss_mb()
    disk = sum(p.stat().st_size for p in workdir.rglob("*") if p.is_file())
    shutil.rmtree(workdir, ignore_errors=True)
    sweep_s = [r["seconds"] for r in out["trace"]]
    # the first sweep also traces the compiled steps: timed apart
    steady = float(np.median(sweep_s[1:] if len(sweep_s) > 1 else sweep_s))
    # the floor of one sweep: one generative + one adjoint pass over the same images,
    # timed on one batch (or all) and scaled to n
    geom = LayerGeometry(hx=h, wx=w, c=c, dh=lay["dict_size"], dw=lay["dict_size"],
                         k=lay["n_dict"], p=lay["pool"])
    m = min(n, bs or n)
    s = tf.constant(np.random.default_rng(1).normal(size=(m, geom.hs, geom.ws, geom.k))
                    .astype(np.float32))
    d = tf.constant(out["D"])
    floor_fn = compiled(lambda s, d: full_conv_adjoint(full_conv(s, d), d))
    floor_fn(s, d)
    floor_s = min(_timed(lambda: floor_fn(s, d)) for _ in range(3)) * n / m
    per_image = state_bytes_per_image(geom)
    row = {"name": spec["name"], "n_images": n, "batch_size": bs,
           "start_and_setup_s": round(wall - sum(sweep_s), 1),
           "first_sweep_s": round(sweep_s[0], 2), "sweep_s": round(steady, 2),
           "images_per_s": round(n / steady, 1), "ratio_to_floor": round(steady / floor_s, 1),
           # the exact floor at the rate of the floor just timed (dgdm_tf.bench.exact_floor)
           "ratio_to_exact_floor": round(steady / floor_s * exact_floor.layer_floor_macs(geom, n)
                                         / exact_floor.pretrain_sweep_macs(geom, n), 1),
           "peak_rss_mb": round(peak), "state_on_disk_mb": round(disk / 2 ** 20, 4),
           "in_memory_state_mb": round(per_image["in_memory"] * n / 2 ** 20, 1),
           "wall_s": round(wall, 1)}
    note(str(row))
    return row


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def run_isolated(spec: dict, timeout: float = 7200) -> dict:
    """:func:`measure` in a fresh Python process (its own peak RSS)."""
    from dgdm_tf.bench.timing import run_module_isolated
    return run_module_isolated("dgdm_tf.bench.batched_pretrain", spec, timeout)


if __name__ == "__main__":
    print(json.dumps(measure(json.loads(sys.argv[1]))), flush=True)
