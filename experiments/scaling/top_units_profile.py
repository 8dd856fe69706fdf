"""Where the top units' step (`topdown.top_units.resample_top`) spends its time, on a
default run's pretrained layers and its first training images, at the test-time
features' settings (dictionaries fixed, the run's scan):

    python experiments/scaling/top_units_profile.py results/mnist 256

Times (median of 5 calls after a warm-up) the unit images alone, the layer-1 blocks'
step, the top units' step in graph mode and compiled by XLA, and the test-time sweep
both ways; where XLA compiles, checks that it draws the same units as the graph step.
Prints one line per measurement.
"""
import sys
import time

import numpy as np
import tensorflow as tf
import yaml

from dgdm_tf.bench.timing import median_seconds
from dgdm_tf.core.compiled import compiled
from dgdm_tf.core.model import DeepModel
from dgdm_tf.topdown import state as deep_state
from dgdm_tf.topdown import sweep as deep_sweep
from dgdm_tf.topdown import top_units, unpooling

root, n = sys.argv[1], int(sys.argv[2])
run = yaml.safe_load(open(f"{root}/pretrained_svm/config.yaml"))["block"]
layers = run["model"]["layers"]
scan = run["topdown_features"]["scan"]
z = [np.load(f"{root}/pretrain/layer{l + 1}.npz") for l in range(len(layers))]
ds = [a["D"].astype(np.float32) for a in z]
x = np.load(f"{root}/data/prepared.npz")["x_train"][:n].astype(np.float32)
model = DeepModel(x.shape[1:], layers, None, scan=scan).with_ks([d.shape[-1] for d in ds])
st = deep_state.init_state(x, model, ds, tf.constant([0, 1], tf.int32),
                           gamma_e_init=float(np.mean(z[0]["gamma_e"])),
                           gamma_s_init=float(z[-1]["gamma_w"]))
xt = tf.constant(x)
# a state with units on: one test-time sweep from the all-off start
st = deep_sweep.make_sweep_fn(model, update_globals=False)(st, xt)[0]


def median_s(fn, reps=5):
    """(median seconds of ``reps`` calls after a warm-up call, the warm-up's result)."""
    out = fn()
    return median_seconds(fn, reps), out


print(f"{n} images, K = {[d.shape[-1] for d in ds]}, scan {scan}", flush=True)
images = compiled(lambda s: top_units._top_images_two_layer(s, model, None))
sec, _ = median_s(lambda: images(st))
print(f"unit images alone (graph): {sec:.3f} s", flush=True)
blocks = compiled(lambda s, x: unpooling.resample_z(s, x, model, 0, s.seed))
sec, _ = median_s(lambda: blocks(st, xt))
print(f"blocks of layer 1 (graph): {sec:.3f} s", flush=True)
out = {}
for jit in (False, True):
    fn = compiled(lambda s, x: top_units.resample_top(s, x, model, s.seed), jit_compile=jit)
    try:
        sec, out[jit] = median_s(lambda: fn(st, xt))
        print(f"top units (jit_compile={jit}): {sec:.3f} s", flush=True)
    except Exception as e:  # noqa: BLE001 -- report and go on
        print(f"top units (jit_compile={jit}): failed: {type(e).__name__}: {str(e)[:200]}")
if len(out) == 2:
    same = np.array_equal(out[False].on.numpy(), out[True].on.numpy())
    dif = np.max(np.abs(out[False].s_top.numpy() - out[True].s_top.numpy()))
    print(f"XLA against graph: same on/off {same}, max |s_top difference| {dif:.2e}", flush=True)
for jit in (False, True):
    fn = compiled(lambda s, x: deep_sweep.sweep(s, x, model, update_globals=False), jit_compile=jit)
    try:
        sec, _ = median_s(lambda: fn(st, xt))
        print(f"test-time sweep (jit_compile={jit}): {sec:.3f} s", flush=True)
    except Exception as e:  # noqa: BLE001 -- report and go on
        print(f"test-time sweep (jit_compile={jit}): failed: {type(e).__name__}: {str(e)[:300]}")
