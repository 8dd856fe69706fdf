"""Labelled images from a tiny two-layer model (class c switches on top map c), for the
supervised model's tests."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from dgdm_tf.core.model import DeepModel, generate

LAYERS = [{"dict_size": 3, "n_dict": 4, "pool": 2}, {"dict_size": 3, "n_dict": 3, "pool": 1}]


def labelled_data(n, seed=0, noise=0.3):
    """Images from a tiny model whose class c switches on top map c (random weights,
    random unpooling), plus noise; and the dictionaries that drew them."""
    model = DeepModel((12, 12, 1), LAYERS)
    rng = np.random.default_rng(seed)
    d = [rng.normal(size=(g.dh, g.dw, g.c, g.k)).astype(np.float32) for g in model.geoms]
    gt, g0 = model.top, model.geoms[0]
    lab = rng.integers(0, gt.k, n)
    s = np.zeros((n, gt.hs, gt.ws, gt.k), np.float32)
    for i in range(n):
        s[i, :, :, lab[i]] = (rng.random((gt.hs, gt.ws)) < 0.5) * (1 + 0.3 * rng.normal(size=(gt.hs, gt.ws)))
    z = rng.integers(0, g0.n_states, size=(n, g0.nbh, g0.nbw, g0.k)).astype(np.int32)
    x = np.asarray(generate(tf.constant(s), model, [tf.constant(v) for v in d], [tf.constant(z)]))
    return model, d, (x + noise * rng.normal(size=x.shape)).astype(np.float32), lab
