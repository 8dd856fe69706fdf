"""Where a streamed pretraining sweep's time goes, per batch, against the floor (one
generative + one adjoint pass over the batch): the whole batch step, its (z, W) step, its
D statistics, the residual's rebuild, the batch file's write and read, and the global D
draw. Random inputs at a layer's shape; median of 5 after a warm-up.

    PYTHONPATH=src python experiments/scaling/stream_step_profile.py [batch] [H W C dict K pool]
"""

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import tensorflow as tf

from dgdm_tf.pretrain import blocks as PB, kernel as P, layer_model as PM
from dgdm_tf.pretrain import stream as S
from dgdm_tf.pretrain.stream_chain import BatchStore
from dgdm_tf.core.compiled import compiled
from dgdm_tf.core.layout import LayerGeometry
from dgdm_tf.core.ops import full_conv, full_conv_adjoint


def median_s(fn, reps=5):
    fn()
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        r = fn()
        if isinstance(r, (tuple, list)):
            [np.asarray(v) for v in tf.nest.flatten(r)]
        out.append(time.perf_counter() - t)
    return float(np.median(out))


def main(batch=1000, h=28, w=28, c=1, dsz=8, k=50, pool=3):
    g = LayerGeometry(hx=h, wx=w, c=c, dh=dsz, dw=dsz, k=k, p=pool)
    model = PM.LayerModel(g, PM.Hyper(), top=(pool == 1), n_images=batch)
    rng = np.random.default_rng(0)
    x = tf.constant(rng.random((batch, h, w, c), dtype=np.float32))
    st = PM.init_state(x, model, tf.constant([0, 1]))
    st = P.make_sweep_fn(model, return_expected_pool=True)(st, x)[0]
    local = {"z": tf.cast(st.z, tf.int8), "w": S.compact_blocks(st.s),
             "log_theta": st.log_theta, "gamma_e": st.gamma_e}
    seeds = S.sweep_seeds(tf.constant([3, 4]))
    cap = tf.fill([batch], np.float32(np.inf))
    batch_fn = S.make_batch_step(model)
    zw = compiled(lambda s_, x_, sd: P.resample_zw(s_, x_, model, sd, True))
    stats = compiled(lambda s, x, d, ge: S.d_statistics(s, x, d, ge, model))
    rebuild = compiled(lambda z, wt, d, x: PB.pad_input(
        x - PB.reconstruction(S.dense_blocks(z, wt, model), d, g), g))
    floor = compiled(lambda s, d: full_conv_adjoint(full_conv(s, d), d))
    s_dense = tf.constant(rng.normal(size=(batch, g.hs, g.ws, g.k)).astype(np.float32))
    global_fn = S.make_global_step(model)
    f_corr, f_gram = stats(st.s, x, st.d, st.gamma_e)
    rows = {
        "floor (generative + adjoint)": median_s(lambda: floor(s_dense, st.d)),
        "batch step (all of it)": median_s(lambda: batch_fn(local, x, st.d, st.gamma_w, seeds,
                                                            tf.constant(0), cap)),
        "  (z, W) step": median_s(lambda: zw(st, x, seeds[1])),
        "  D statistics (F, Q)": median_s(lambda: stats(st.s, x, st.d, st.gamma_e)),
        "  residual rebuilt from the blocks": median_s(lambda: rebuild(local["z"], local["w"],
                                                                       st.d, x)),
        "global D and gamma_w draw (once a sweep)": median_s(lambda: global_fn(
            st.d, f_corr, f_gram, tf.constant(1.0), tf.constant(1.0), seeds)),
    }
    arrays = {k_: v.numpy() for k_, v in local.items()}
    arrays["acc_x_next"] = rng.random((batch, g.nbh, g.nbw, g.k)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        store = BatchStore(Path(tmp))
        rows["batch file write"] = median_s(lambda: store.write(0, 0, arrays))
        rows["batch file read"] = median_s(lambda: store.read(0, 0))
    fl = rows["floor (generative + adjoint)"]
    print(f"layer {h}x{w}x{c}, dict {dsz}x{dsz}x{k}, pool {pool}, batch {batch}")
    print("| step | s | x floor |\n|---|---|---|")
    for name, sec in rows.items():
        print(f"| {name} | {sec:.3f} | {sec / fl:.1f} |")


if __name__ == "__main__":
    a = [int(v) for v in sys.argv[1:]]
    main(*a)
