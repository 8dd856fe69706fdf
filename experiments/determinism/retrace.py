"""Does a fresh trace of the same step compute the same numbers? The two-layer top-down
sweep under a run's pretrained layers, on 128 of its MNIST training images, two sweeps
in, traced anew REPS times and run on one state; prints, per retrace, how many entries of
its Rao-Blackwellised top-unit means and of its new state differ from the first
trace's. MODE ``on`` leaves Grappler's arithmetic optimizer on (TensorFlow's default),
``off`` turns it off as every dgdm step now does
(:func:`dgdm_tf.core.compiled.reproducible_graphs`). After ``snakemake
results/mnist/pretrained_svm/metrics.json``:

    python experiments/determinism/retrace.py results/mnist on 6
    python experiments/determinism/retrace.py results/mnist off 6

2026-11-25 (2 cores, TensorFlow 2.21): ``on`` -> 283-1 683 of the 102 400 means differ
(two probes of five retraces; the drawn states agree: the logits are an ulp apart); ``off`` -> 0. The test
``tests/test_core_compiled.py`` checks the same on random dictionaries.
"""
import sys

import numpy as np
import tensorflow as tf

from dgdm_tf.core import compiled

from dgdm_tf.topdown.state import init_state
from dgdm_tf.topdown.sweep import make_sweep_fn
from dgdm_tf.core.model import DeepModel

root, mode, reps = sys.argv[1], sys.argv[2], int(sys.argv[3])
if mode == "on":  # undo what every compiled step turns off
    compiled.reproducible_graphs = lambda: None
layers_npz = [np.load(f"{root}/pretrain/layer{l}.npz") for l in (1, 2)]
ds = [np.asarray(z["D"], np.float32) for z in layers_npz]
x = np.ascontiguousarray(np.load(f"{root}/data/prepared.npz")["x_train"][:128], np.float32)
layers = [{"dict_size": d.shape[0], "n_dict": d.shape[-1], "pool": p} for d, p in zip(ds, (3, 1))]
model = DeepModel(x.shape[1:], layers, None, scan="fixed").with_ks([d.shape[-1] for d in ds])
st = init_state(x, model, ds, tf.constant([5, 1]),
                gamma_e_init=float(np.mean(layers_npz[0]["gamma_e"])),
                gamma_s_init=float(layers_npz[1]["gamma_w"]))
xt = tf.constant(x)
first = make_sweep_fn.__wrapped__(model, mask_given=False, update_globals=False)
for _ in range(2):
    st, _ = first(st, xt)
ref = None
for rep in range(reps):
    fn = make_sweep_fn.__wrapped__(model, mask_given=False, update_globals=False)  # a fresh trace (no cache)
    new, stats = fn(st, xt)
    out = [np.asarray(stats["expected_top"]), np.asarray(new.s_top), np.asarray(new.resid)]
    if ref is None:
        ref = out
        continue
    print(f"retrace {rep}: means differ in {int((out[0] != ref[0]).sum())} of {out[0].size}, "
          f"top units in {int((out[1] != ref[1]).sum())}, residual in {int((out[2] != ref[2]).sum())}")
