"""Features from each block's posterior given the image alone (no explaining-away).

For block b of map k, with every other block off, the pretraining model's block
conditional (``pretrain.resample_zw``; supplement, z and W conditionals) is

    c_m = <X, D_k at offset m>,   P = gamma_e ||D_k||^2 + gamma_w,
    log p(z = m) = log theta_m + 1/2 log(gamma_w / P) + (gamma_e c_m)^2 / (2 P),
    log p(z = off) = log theta_off,   E[W | z = m] = gamma_e c_m / P,

and the feature is E[pooled value] = sum_m p(z = m) gamma_e c_m / P, layer after layer
(pooled maps are the next layer's input). theta is the chains' start
(``pretrain.init_state``: ``off`` on the off state, the rest spread evenly); D, gamma_w
and gamma_e are the pretrained ones.

Why: the joint posterior mean that ``dgdm_tf.pretrain.features`` estimates by Gibbs sampling is
averaged over chains whose configuration of the *other* blocks is frozen at the
precision the layer settles at, so each block's conditional mean is ~0 wherever a
neighbour already explains the ink, and which neighbour does is decided by the scan
order (or, with tempered burn-in, by near-ties). Evaluated against the image alone the
same conditional is a smooth, shift-equivariant function of the image.
docs/findings/explaining_away_readout.md measures both through the same linear read-out.

Layout as :mod:`dgdm_tf.core.layout`: X (N, H, W, C), D (dh, dw, C, K), out (N, nbh, nbw, K).
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import tensorflow as tf

from dgdm_tf.pretrain.chain_parts import check_finite
from dgdm_tf.core.compiled import compiled
from dgdm_tf.core.shards import image_range


@compiled
def _layer_batch(x, d, gamma_w, gamma_e, log_on, log_off, p):
    c = tf.nn.conv2d(x, d, strides=1, padding="VALID")  # N, Hs, Ws, K
    n, hs, ws, k = tf.unstack(tf.shape(c))
    c = tf.pad(c, [[0, 0], [0, (-hs) % p], [0, (-ws) % p], [0, 0]])
    nbh, nbw = (hs + p - 1) // p, (ws + p - 1) // p
    c = tf.reshape(c, [n, nbh, p, nbw, p, k])
    c = tf.reshape(tf.transpose(c, [0, 1, 3, 5, 2, 4]), [n, nbh, nbw, k, p * p])
    # positions of a partial edge block that lie outside S carry no data: they keep the
    # prior (the same treatment as the sampler's)
    valid_h = tf.range(nbh * p) < hs
    valid_w = tf.range(nbw * p) < ws
    valid = tf.logical_and(tf.reshape(valid_h, [nbh, p, 1, 1]), tf.reshape(valid_w, [1, 1, nbw, p]))
    valid = tf.reshape(tf.transpose(valid, [0, 2, 1, 3]), [1, nbh, nbw, 1, p * p])
    prec = gamma_e * tf.reduce_sum(tf.square(tf.reshape(d, [-1, k])), axis=0)[:, None] + gamma_w
    on = log_on + 0.5 * tf.math.log(gamma_w / prec) + 0.5 * tf.square(gamma_e * c) / prec
    on = tf.where(valid, on, log_on)
    logits = tf.concat([on, tf.fill(tf.concat([tf.shape(on)[:-1], [1]], 0), log_off)], -1)
    prob = tf.nn.softmax(logits, axis=-1)[..., :-1] * tf.cast(valid, tf.float32)
    return tf.reduce_sum(prob * gamma_e * c / prec, axis=-1)


def block_posterior_layer(x: np.ndarray, d: np.ndarray, pool: int, *, gamma_w: float,
                          gamma_e: float, off: float = 0.9, batch_size: int = 2000) -> np.ndarray:
    """(N, ceil(Hs/p), ceil(Ws/p), K): each block's E[pooled value | X, other blocks off]."""
    x = np.asarray(x, np.float32)
    d = np.asarray(d, np.float32)
    if d.shape[2] != x.shape[-1]:
        raise ValueError(f"dictionary expects {d.shape[2]} input channels, the input has "
                         f"{x.shape[-1]}")
    if not 0.0 < off < 1.0:
        raise ValueError(f"off (theta's start on the off state) must be in (0, 1), got {off}")
    p = int(pool)
    args = (tf.constant(d), tf.constant(np.float32(gamma_w)), tf.constant(np.float32(gamma_e)),
            tf.constant(np.float32(np.log((1.0 - off) / (p * p)))),
            tf.constant(np.float32(np.log(off))), tf.constant(p))
    out = [_layer_batch(tf.constant(x[i: i + batch_size]), *args).numpy()
           for i in range(0, len(x), batch_size)]
    return np.concatenate(out)


def block_posterior_features(x: np.ndarray, dictionaries: Sequence[np.ndarray],
                             pools: Sequence[int], *, gamma_ws: Sequence[float],
                             gamma_es: Sequence[float], off: float = 0.9,
                             batch_size: int = 2000, layer_outputs: list | None = None,
                             images: Sequence[int] | None = None,
                             progress: Callable[[str], None] | None = None) -> np.ndarray:
    """(N, F) top-layer features, every layer's blocks evaluated in isolation;
    ``layer_outputs``, a list, receives each layer's pooled maps (N, h, w, K). ``images``
    (start, stop): only those images, whole batches of ``batch_size``
    (:func:`dgdm_tf.core.shards.shard_bounds`), which the call on all of ``x`` computes
    in the same batches, so their outputs are its bits."""
    if not len(dictionaries) == len(pools) == len(gamma_ws) == len(gamma_es):
        raise ValueError("one pooling size, gamma_w and gamma_e per dictionary are needed")
    lo, hi = image_range(images, len(x), int(batch_size))
    h = np.asarray(x[lo:hi], np.float32)
    for l, (d, p, gw, ge) in enumerate(zip(dictionaries, pools, gamma_ws, gamma_es)):
        h = block_posterior_layer(h, d, p, gamma_w=gw, gamma_e=ge, off=off, batch_size=batch_size)
        check_finite(f"layer {l + 1} block-posterior features", h)
        if layer_outputs is not None:
            layer_outputs.append(h)
        if progress:
            progress(f"layer {l + 1}: block-posterior features {h.shape}")
    return h.reshape(len(h), -1)
