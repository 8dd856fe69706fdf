"""Is explaining-away what separates the Gibbs features from the soft-threshold encoder?

Each block's conditional expectation E[pooled value | every other block off] under the
pretraining model (the block conditional of pretrain.resample_zw, evaluated against the
whole image instead of the residual of the other blocks): the same model and the same D,
but no block competes with another for the ink. Compared, through the same ridge probe,
with the reference encoder.

    python experiments/mixing/no_explaining_away.py PREPARED LAYER1 3000 1000 12 100 2000
The trailing numbers are noise precisions gamma_e to evaluate the blocks at.
"""
import sys

import numpy as np
import tensorflow as tf

from dgdm_tf.baselines import encoder

from dgdm_tf.mcmc import diagnostics as mixing
from _subsets import subsets

l1 = np.load(sys.argv[2])
ntr, nte = int(sys.argv[3]), int(sys.argv[4])
xtr, ytr, xte, yte = subsets(sys.argv[1], ntr, nte)
D = l1["D"].astype(np.float32)
gw = float(np.mean(l1["gamma_w"]))
p, off = 3, 0.9  # pooling; theta's off share at the chains' start
dn2 = np.sum(D.reshape(-1, D.shape[-1]) ** 2, 0)


def isolated(x, ge):
    c = tf.nn.conv2d(x, D, 1, "VALID").numpy()  # N, 21, 21, K: <x, D_k at each position>
    n, hs, ws, k = c.shape
    b = c.reshape(n, hs // p, p, ws // p, p, k).transpose(0, 1, 3, 5, 2, 4).reshape(n, hs // p, ws // p, k, p * p)
    prec = ge * dn2[:, None] + gw
    on = np.log((1 - off) / (p * p)) + 0.5 * np.log(gw / prec) + 0.5 * (ge * b) ** 2 / prec
    logits = np.concatenate([on, np.full(on.shape[:-1] + (1,), np.log(off))], -1)
    prob = np.exp(logits - logits.max(-1, keepdims=True))
    prob /= prob.sum(-1, keepdims=True)
    return np.sum(prob[..., :-1] * ge * b / prec, -1)


e = [encoder.encode(v, D, p) for v in (xtr, xte)]
print(f"reference encoder: probe {mixing.ridge_probe(e[0], ytr, e[1], yte):.2f}%", flush=True)
for ge in (float(a) for a in sys.argv[5:]):
    a, b = isolated(xtr, ge), isolated(xte, ge)
    print(f"blocks in isolation at gamma_e {ge:g}: activity-ink {mixing.activity_ink_correlation(a, xtr, 8, p):.3f}, "
          f"signed probe {mixing.ridge_probe(a, ytr, b, yte):.2f}%, split probe "
          f"{mixing.ridge_probe(mixing.polarity_split(a), ytr, mixing.polarity_split(b), yte):.2f}%", flush=True)
