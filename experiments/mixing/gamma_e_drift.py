"""Does a layer-1 chain with D fixed ever settle? gamma_e and the fit over a long chain.

A chain of the layer model with the pretrained D held fixed, on a seeded subset of MNIST
training images, for many sweeps: printed every few sweeps, the mean noise precision
gamma_e, the relative residual, the fraction of blocks on, and the activity-ink
correlation of the window's Rao-Blackwellised pooled features. With MNIST's exactly-zero
background and an overcomplete dictionary the likelihood keeps rising as the fit
improves, so gamma_e keeps climbing for as long as the chain runs (the chains are in a
transient, not at a stationary regime; docs/findings/layerwise_scan_order.md).

    python experiments/mixing/gamma_e_drift.py PREPARED LAYER1 200 400 random:ridge fixed:off
"""
import sys
import time

import numpy as np
import tensorflow as tf

from dgdm_tf.mcmc import diagnostics as mixing
from dgdm_tf.core.layout import LayerGeometry
from dgdm_tf.pretrain.kernel import make_sweep_fn
from dgdm_tf.core.hyper import Hyper
from dgdm_tf.pretrain.layer_model import LayerModel, init_state
from dgdm_tf.pretrain.ridge_start import RidgeStart, ridge_start
from _subsets import subsets

l1 = np.load(sys.argv[2])
n, sweeps = int(sys.argv[3]), int(sys.argv[4])
x, _, _, _ = subsets(sys.argv[1], n, 1)
D = l1["D"].astype(np.float32)
geom = LayerGeometry(hx=28, wx=28, c=1, dh=D.shape[0], dw=D.shape[1], k=D.shape[3], p=3)
report = {1, 2, 5, 10, 20, 50} | set(range(100, sweeps + 1, 100))
for variant in sys.argv[5:]:
    scan, start = variant.split(":")
    model = LayerModel(geom, Hyper(), top=False, n_images=n, scan=scan)
    fn = make_sweep_fn(model, update_d=False, update_gamma_w=False, return_expected_pool=True)
    st = init_state(x, model, tf.constant([7, 0], tf.int32), gamma_e_init=float(np.mean(l1["gamma_e"])))
    st = st._replace(d=tf.constant(D), gamma_w=tf.constant(np.float32(l1["gamma_w"])))
    xt = tf.constant(x)
    if start == "ridge":
        st = ridge_start(st, xt, model, RidgeStart(), tf.constant([7, 1]), fixed_gamma_w=True)
    win, count, t0 = 0.0, 0, time.time()
    for t in range(1, sweeps + 1):
        st, e = fn(st, xt)
        win, count = win + e.numpy(), count + 1
        if t in report:
            print(f"[{variant}] sweep {t}: gamma_e {np.mean(st.gamma_e.numpy()):.0f}, rel. residual "
                  f"{np.linalg.norm(st.resid.numpy()) / np.linalg.norm(x):.4f}, blocks on "
                  f"{np.mean(np.asarray(st.z) != geom.off) / np.mean(model.block_valid):.3f}, activity-ink of "
                  f"sweeps {t - count + 1}-{t} {mixing.activity_ink_correlation(win / count, x, 8, 3):.3f} "
                  f"({time.time() - t0:.0f} s)", flush=True)
            win, count = 0.0, 0
