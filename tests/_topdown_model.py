"""A known two-layer top-down model and images drawn from it (16x16x1, D[0] 5x5x1x4,
D[1] 3x3x4x3), shared by the refinement tests."""

import numpy as np
import tensorflow as tf

from dgdm_tf.core.model import DeepModel, generate

LAYERS = [{"dict_size": 5, "n_dict": 4, "pool": 2}, {"dict_size": 3, "n_dict": 3, "pool": 1}]


def draw(n, seed=0, noise=0.05, with_state=False):
    """Images from a known two-layer model: 16x16x1, D[0] 5x5x1x4, D[1] 3x3x4x3."""
    rng = np.random.default_rng(seed)
    model = DeepModel((16, 16, 1), LAYERS)
    g0, gt = model.geoms
    d0 = rng.normal(size=(g0.dh, g0.dw, 1, g0.k)).astype(np.float32)
    d0 /= np.linalg.norm(d0.reshape(-1, g0.k), axis=0)
    d1 = rng.normal(size=(gt.dh, gt.dw, gt.c, gt.k)).astype(np.float32)
    d1 /= np.linalg.norm(d1.reshape(-1, gt.k), axis=0)
    z0 = rng.choice(g0.n_states, size=(n, g0.nbh, g0.nbw, g0.k),
                    p=[0.7 / 4] * 4 + [0.3]).astype(np.int32)
    on = rng.random((n, gt.hs, gt.ws, gt.k)) < 0.25
    s = (on * rng.normal(size=on.shape) * 2.0).astype(np.float32)
    x = generate(tf.constant(s), model, [tf.constant(d0), tf.constant(d1)], [tf.constant(z0)]).numpy()
    x = (x + noise * rng.normal(size=x.shape)).astype(np.float32)
    if with_state:
        return model, [d0, d1], x, {"z0": z0, "s": s, "on": on.astype(np.float32)}
    return model, [d0, d1], x
