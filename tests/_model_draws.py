"""Images drawn from the layer model itself, shared by the sampler tests: smooth strokes
at k orientations, similar and overlapping atoms, so many decompositions nearly fit and a
sampler that does not mix shows it."""

import numpy as np

from dgdm_tf.core.ops import full_conv, pool


def strokes(n=300, seed=0, k=6, side=5, p=2, img=18, on=0.08, noise=0.02):
    """Images drawn from the layer model: smooth strokes at k orientations (similar
    atoms, so many decompositions nearly fit), blocks on with probability ``on``."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:side, :side] - (side - 1) / 2
    atoms = []
    for kk in range(k):
        t = np.pi * kk / k
        u, v = xx * np.cos(t) + yy * np.sin(t), -xx * np.sin(t) + yy * np.cos(t)
        atoms.append(np.exp(-v ** 2 - u ** 2 / 8.0))
    d = np.stack(atoms, -1)[:, :, None, :].astype(np.float32)
    d *= side / np.linalg.norm(d.reshape(-1, k), axis=0)
    hs = img - side + 1
    nb = -(-hs // p)
    s = np.zeros((n, nb * p, nb * p, k), np.float32)
    for i, bi, bj, kk in zip(*np.nonzero(rng.random((n, nb, nb, k)) < on)):
        m = rng.integers(0, p * p)
        s[i, bi * p + m // p, bj * p + m % p, kk] = abs(rng.normal(1.0, 0.3))
    s = s[:, :hs, :hs]
    x = full_conv(s, d).numpy() + noise * rng.normal(size=(n, img, img, 1))
    return x.astype(np.float32), d, pool(s, p).numpy(), p
