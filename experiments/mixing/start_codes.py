"""Which start for the layer-1 chains? Candidate states read out directly (no sampling).

The old chain starts with every block off and its first sweep builds a decomposition
colour by colour. Candidates for a start that no scan order decides, each a deterministic
function of the image and the pretrained D, read out with the fixed ridge probe (split
and signed) beside their activity-ink correlation:

* lasso: the convex sparse code argmin 1/2 ||X - D*S||^2 + lam |S|_1 (FISTA, 200
  iterations), pooled by block sums, and projected to the model's one-position-per-block
  form;
* ridge start (``dgdm_tf.pretrain.ridge_start``): each block at its best-matching position where
  it beats ``threshold`` x the image's best, weights a ridge fit on that support.

Measured (docs/findings/layerwise_scan_order.md): one sparse decomposition, however it is found, reads
out worse than the soft-threshold encoder; the ridge code on the best-matching support
reads out like it. The ridge start is the one kept.

    python experiments/mixing/start_codes.py PREPARED LAYER1 1000 500
"""
import sys
import time

import numpy as np
import tensorflow as tf

from dgdm_tf.baselines import encoder

from dgdm_tf.mcmc import diagnostics as mixing
from dgdm_tf.core.ops import full_conv, full_conv_adjoint
from dgdm_tf.pretrain.ridge_start import ridge_fit, support
from _subsets import subsets


def fista(x, d, lam, iterations=200):
    v = tf.random.stateless_normal([1, x.shape[1] - d.shape[0] + 1, x.shape[2] - d.shape[1] + 1,
                                    d.shape[3]], [1, 2])
    for _ in range(30):  # power iterations: the step 1 / ||D||_op^2
        v = full_conv_adjoint(full_conv(v, d), d)
        lip = tf.norm(v)
        v = v / lip
    s = y = tf.zeros_like(full_conv_adjoint(x, d))
    t = 1.0
    for _ in range(iterations):
        g = y + full_conv_adjoint(x - full_conv(y, d), d) / lip
        s_new = tf.sign(g) * tf.nn.relu(tf.abs(g) - lam / lip)
        t_new = (1 + np.sqrt(1 + 4 * t * t)) / 2
        y, s, t = s_new + (t - 1) / t_new * (s_new - s), s_new, t_new
    return s.numpy()


def pooled(s, p):
    n, hs, ws, k = s.shape
    nbh, nbw = -(-hs // p), -(-ws // p)
    out = np.zeros((n, nbh * p, nbw * p, k), s.dtype)
    out[:, :hs, :ws] = s
    return out.reshape(n, nbh, p, nbw, p, k).sum((2, 4))


def project(s, p):  # keep each block's largest |value| (the model's one position per block)
    n, hs, ws, k = s.shape
    nbh, nbw = -(-hs // p), -(-ws // p)
    out = np.zeros((n, nbh * p, nbw * p, k), s.dtype)
    out[:, :hs, :ws] = s
    b = out.reshape(n, nbh, p, nbw, p, k).transpose(0, 1, 3, 5, 2, 4).reshape(n, nbh, nbw, k, p * p)
    keep = np.zeros_like(b)
    m = np.argmax(np.abs(b), -1)[..., None]
    np.put_along_axis(keep, m, np.take_along_axis(b, m, -1), -1)
    keep = keep.reshape(n, nbh, nbw, k, p, p).transpose(0, 1, 4, 2, 5, 3).reshape(out.shape)
    return keep[:, :hs, :ws]


l1 = np.load(sys.argv[2])
D = tf.constant(l1["D"].astype(np.float32))
ntr, nte = int(sys.argv[3]), int(sys.argv[4])
xtr, ytr, xte, yte = subsets(sys.argv[1], ntr, nte)
x = np.concatenate([xtr, xte])


def report(name, s, seconds):
    f = pooled(s, 3)
    rel = np.linalg.norm(x - full_conv(tf.constant(s), D).numpy()) / np.linalg.norm(x)
    a, b = f[:ntr], f[ntr:]
    print(f"{name}: activity-ink {mixing.activity_ink_correlation(a, xtr, 8, 3):.3f}, blocks on "
          f"{np.mean(f != 0):.3f}, rel. residual {rel:.3f}, split probe "
          f"{mixing.ridge_probe(mixing.polarity_split(a), ytr, mixing.polarity_split(b), yte):.2f}%, "
          f"signed {mixing.ridge_probe(a, ytr, b, yte):.2f}% ({seconds:.0f} s)", flush=True)


ref = [encoder.encode(v, l1["D"], 3) for v in (xtr, xte)]
print(f"soft-threshold encoder, same D: probe {mixing.ridge_probe(ref[0], ytr, ref[1], yte):.2f}%")
for lam in (0.3, 1.0, 3.0):
    t0 = time.time()
    s = np.concatenate([fista(tf.constant(x[i:i + 500]), D, lam) for i in range(0, len(x), 500)])
    report(f"lasso lam={lam}, block sums", s, time.time() - t0)
    report(f"lasso lam={lam}, one position per block", project(s, 3), time.time() - t0)
for thr in (0.0, 0.25, 0.5):
    t0 = time.time()
    xt = tf.constant(x)
    mask = support(xt, D, 3, thr)
    lam = 0.01 * tf.reduce_mean(tf.reduce_sum(tf.square(D), axis=[0, 1, 2]))
    report(f"ridge start, threshold {thr}", ridge_fit(xt, D, mask, lam, tf.constant(40)).numpy(),
           time.time() - t0)
