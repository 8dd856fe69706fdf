"""The pretraining layer's Geweke test and recovery data: its hyperparameters, forward
draws of parameters and data, the statistics compared, dictionary matching by cosine."""

import numpy as np
import tensorflow as tf

from dgdm_tf.pretrain import blocks as PB
from dgdm_tf.core.layout import dirichlet_prior
from dgdm_tf.core.ops import full_conv

GEWEKE_HYPER = {"a_e": 4.0, "b_e": 2.0, "a_w": 3.0, "b_w": 3.0, "dict_prior_precision": 1.0}


def forward_params(rng, geom, model, n):
    """Draw every parameter from its prior, in the sampler's layout."""
    h = model.hyper
    alpha = dirichlet_prior(geom, model.top)
    d = rng.normal(size=(geom.dh, geom.dw, geom.c, geom.k)) / np.sqrt(h.dict_prior_precision)
    theta = rng.dirichlet(alpha, size=(n, geom.k))  # N, K, S
    gw = rng.gamma(h.a_w, 1 / h.b_w)
    ge = rng.gamma(h.a_e, 1 / h.b_e, size=n)
    valid = model.valid.numpy()
    real = model.block_valid.numpy()
    shape = (geom.gh, geom.gw, geom.k, n, geom.nch, geom.ncw)
    cum = np.cumsum(theta, axis=-1)[None, None, :, :, None, None, :].transpose(0, 1, 3, 2, 4, 5, 6)
    u = rng.random(shape)[..., None]
    z = np.minimum((u > cum).sum(-1), geom.n_states - 1).astype(np.int32)
    z = np.where(real[:, :, None, None], z, geom.off).astype(np.int32)
    onehot = np.eye(geom.n_states)[z][..., : geom.p * geom.p] * valid[:, :, None, None]
    s = onehot * rng.normal(size=onehot.shape) / np.sqrt(gw)
    return dict(s=s.astype(np.float32), z=z, d=d.astype(np.float32),
                log_theta=np.log(theta).astype(np.float32), gamma_w=np.float32(gw),
                gamma_e=ge.astype(np.float32))


def forward_data(rng, geom, params):
    rec = PB.reconstruction(tf.constant(params["s"]), tf.constant(params["d"]), geom).numpy()
    noise = rng.normal(size=rec.shape) / np.sqrt(params["gamma_e"])[:, None, None, None]
    return (rec + noise).astype(np.float32)


def layer_stats(params, x, geom, model, rec=None):
    s, d = params["s"], params["d"]
    if rec is None:
        rec = PB.reconstruction(tf.constant(s), tf.constant(d), geom).numpy()
    valid = model.valid.numpy()[:, :, None, None]
    oh = np.eye(geom.n_states)[params["z"]][..., : geom.p * geom.p]
    return np.array([
        d[0, 0, 0, 0], d[1, 0, 0, 1] ** 2, np.log(params["gamma_e"][0]),
        np.log(params["gamma_w"]), np.sum(oh * valid), np.sum(s ** 2),
        np.exp(params["log_theta"][0, 0, -1]),
        params["gamma_e"][0] * np.sum((x[0] - rec[0]) ** 2),
        np.sum(x[1] * rec[1]),
    ])


def shift_cosine(t, e, max_shift=2):
    """|cosine| of atom e with atom t shifted by up to max_shift pixels (border cut)."""
    best = 0.0
    for dy in range(-max_shift, max_shift + 1):
        for dx in range(-max_shift, max_shift + 1):
            a = np.zeros_like(t)
            src = t[max(0, -dy): t.shape[0] - max(0, dy), max(0, -dx): t.shape[1] - max(0, dx)]
            a[max(0, dy): max(0, dy) + src.shape[0], max(0, dx): max(0, dx) + src.shape[1]] = src
            if np.linalg.norm(a) > 0:
                best = max(best, abs(np.sum(a * e)) / np.linalg.norm(a) / np.linalg.norm(e))
    return best


def match_cosine(d_true, d_est):
    """Mean cosine after greedy matching of true to estimated atoms, up to permutation,
    sign and a small shift: a convolutional dictionary is identified only up to shifts
    (an atom moved by a pixel, with S moved back, explains the data almost as well),
    and a Gibbs chain can sit in such a shifted mode."""
    k_true, k_est = d_true.shape[-1], d_est.shape[-1]
    cos = np.array([[shift_cosine(d_true[..., i], d_est[..., j]) for j in range(k_est)]
                    for i in range(k_true)])
    used, out = set(), []
    for i in np.argsort(-cos.max(1)):
        j = max((j for j in range(k_est) if j not in used), key=lambda j: cos[i, j])
        used.add(j)
        out.append(cos[i, j])
    return float(np.mean(out))


def recovery_data():
    """500 images drawn from the pretraining model with 4 random 5x5 atoms (5% of the
    blocks on per map, noise sd 0.05): (X, the atoms, the noise's relative norm)."""
    rng = np.random.default_rng(7)
    k, d_side, p, side, n = 4, 5, 2, 16, 500
    d_true = rng.normal(size=(d_side, d_side, 1, k)).astype(np.float32)
    d_true *= d_side / np.linalg.norm(d_true.reshape(-1, k), axis=0)  # the prior's norm
    hs = side - d_side + 1
    s = np.zeros((n, hs, hs, k), np.float32)
    nb = -(-hs // p)
    for i in range(n):
        for bi in range(nb):
            for bj in range(nb):
                for kk in range(k):
                    if rng.random() < 0.05:
                        r = min(bi * p + rng.integers(0, p), hs - 1)
                        c = min(bj * p + rng.integers(0, p), hs - 1)
                        s[i, r, c, kk] = rng.normal() * 0.5
    clean = full_conv(s, d_true).numpy()
    x = (clean + 0.05 * rng.normal(size=clean.shape)).astype(np.float32)
    return x, d_true, 0.05 * np.sqrt(x.size) / np.linalg.norm(x)
