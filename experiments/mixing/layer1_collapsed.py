"""Does layer 1 mix once W is integrated out of every block's draw, and what is its
posterior mean then?

Given the blocks' states, layer 1 is linear-Gaussian in W: X = Phi_A w + E, w ~ N(0, 1 /
gamma_w), E ~ N(0, 1 / gamma_e), so X ~ N(0, C / gamma_w) with C = Phi_A Phi_A^T + lam I,
lam = gamma_w / gamma_e. With P = C^-1 (pixel space, H W C square), adding an atom a (one
block at one position) to the active set changes the log marginal likelihood by

    -1/2 log(1 + a^T P a) + 1/2 gamma_w (a^T P x)^2 / (1 + a^T P a),

and E[w_a | X, A + a] = a^T P x / (1 + a^T P a). A block's (p^2 + 1)-way draw with W
integrated out of the whole layer (not just the block) is then exact and cheap at the
block's footprint, and moving a stroke's explanation from one block to others no longer
passes through a state that leaves it unexplained: the others' weights follow
analytically. P follows each change by rank-one updates (kept lazily as P_base + H diag
H^T, flushed every few dozen blocks). After each sweep theta is drawn, then W jointly
(perturb-and-solve with the exact P), then gamma_e, and P is rebuilt for the new lam.

This probe (float64 NumPy, a few dozen images: each image holds a 784 x 784 P) runs two
such chains per image from different starts (the ridge start and every block off) and
two of today's chains (``features.infer_layer``, two seeds), and prints how far each
pair's posterior means are apart (``mixing.map_distance``, per image then averaged: 0
when the chains agree), their correlation with the block posteriors given the image
alone (``block_posterior``), the blocks on and gamma_e.

    python experiments/mixing/layer1_collapsed.py results/mnist 40 5:10
"""
import sys
import time

import numpy as np
import tensorflow as tf

from dgdm_tf.pretrain import block_posterior

from dgdm_tf.mcmc import diagnostics as mixing

from dgdm_tf.core import ops
from dgdm_tf.pretrain.features import infer_layer
from dgdm_tf.pretrain.ridge_start import support
from _subsets import subsets

root = sys.argv[1]
n_img = int(sys.argv[2])
burn, coll = (int(v) for v in sys.argv[3].split(":"))
l1 = np.load(f"{root}/pretrain/layer1.npz")
x, _, _, _ = subsets(f"{root}/data/prepared.npz", n_img, 1)
d1 = l1["D"].astype(np.float64)  # 8, 8, 1, K
gw = float(l1["gamma_w"])
ge0 = float(np.mean(l1["gamma_e"]))
dh, K, p = d1.shape[0], d1.shape[3], 3
H = x.shape[1]
hs = H - dh + 1
nb = -(-hs // p)
fp = p + dh - 1  # footprint side
npix = H * H
a_e = b_e = 1e-6
alpha = 1.0 / (p * p + 1)

# atoms of map k at block position m, inside the block's footprint (fp x fp)
atoms = np.zeros((K, p * p, fp * fp))
for m in range(p * p):
    r, c = divmod(m, p)
    a = np.zeros((fp, fp, K))
    a[r: r + dh, c: c + dh] = d1[:, :, 0, :]
    atoms[:, m] = a.reshape(fp * fp, K).T
foot = np.zeros((nb, nb, fp * fp), int)
for i in range(nb):
    for j in range(nb):
        rr, cc = np.meshgrid(np.arange(fp) + p * i, np.arange(fp) + p * j, indexing="ij")
        foot[i, j] = (rr * H + cc).ravel()
valid = np.ones((nb, nb, p * p), bool)
for i in range(nb):
    for j in range(nb):
        for m in range(p * p):
            valid[i, j, m] = p * i + m // p < hs and p * j + m % p < hs


class Lazy:
    """P = base + H diag(sig) H^T, per image."""

    def __init__(self, base, rmax=64):
        self.base = base
        n = len(base)
        self.h = np.zeros((n, npix, rmax))
        self.sig = np.zeros((n, rmax))
        self.r = 0

    def flush(self):
        if self.r:
            hh = self.h[:, :, : self.r]
            self.base += np.einsum("nir,nr,njr->nij", hh, self.sig[:, : self.r], hh, optimize=True)
            self.h[:] = 0.0
            self.sig[:] = 0.0
            self.r = 0

    def cols(self, f, a):
        """P[:, f] @ a (N, npix) for a (N, |f|)."""
        out = np.einsum("nif,nf->ni", self.base[:, :, f], a)
        if self.r:
            hf = self.h[:, f, : self.r]
            out += np.einsum("nir,nr->ni", self.h[:, :, : self.r],
                             self.sig[:, : self.r] * np.einsum("nfr,nf->nr", hf, a))
        return out

    def block(self, f):
        out = self.base[:, f][:, :, f]
        if self.r:
            hf = self.h[:, f, : self.r]
            out = out + np.einsum("nir,nr,njr->nij", hf, self.sig[:, : self.r], hf)
        return out

    def append(self, h, sig):
        if self.r == self.h.shape[2]:
            self.flush()
        self.h[:, :, self.r] = h
        self.sig[:, self.r] = sig
        self.r += 1


def gram_of(z):
    """C - lam I = Phi_A Phi_A^T from the block states z (N, nb, nb, K)."""
    n = len(z)
    c = np.zeros((n, npix, npix))
    for i in range(nb):
        for j in range(nb):
            f = foot[i, j]
            for k in range(K):
                on = z[:, i, j, k] < p * p
                if not on.any():
                    continue
                a = atoms[k, z[on, i, j, k]]  # n_on, fp^2
                idx = np.flatnonzero(on)
                c[np.ix_(idx, f, f)] += a[:, :, None] * a[:, None, :]
    return c


def s_map(z, w):
    """S (N, hs, hs, K) from block states and per-block weights."""
    n = len(z)
    s = np.zeros((n, nb * p, nb * p, K))
    ii, jj, kk = np.meshgrid(np.arange(nb), np.arange(nb), np.arange(K), indexing="ij")
    for t in range(n):
        on = z[t] < p * p
        m = z[t][on]
        s[t, p * ii[on] + m // p, p * jj[on] + m % p, kk[on]] = w[t][on]
    return s[:, :hs, :hs]


def conv(s):
    return ops.full_conv(tf.constant(s), tf.constant(d1)).numpy()


def run(x, z, ge, seed):
    rng = np.random.default_rng(seed)
    n = len(x)
    xf = x.reshape(n, npix).astype(np.float64)
    log_theta = np.log(np.full((n, K, p * p + 1), 1.0 / (p * p + 1)))
    c = gram_of(z)
    eye = np.eye(npix)
    lazy = Lazy(np.linalg.inv(c + (gw / ge)[:, None, None] * eye))
    v = np.einsum("nij,nj->ni", lazy.base, xf)
    acc = np.zeros((n, nb, nb, K))
    rows = np.arange(n)
    for t in range(burn + coll):
        order = [(i, j, k) for i in range(nb) for j in range(nb) for k in range(K)]
        for o in rng.permutation(len(order)):
            i, j, k = order[o]
            f = foot[i, j]
            old = z[:, i, j, k]
            on0 = old < p * p
            a0 = np.where(on0[:, None], atoms[k, np.minimum(old, p * p - 1)], 0.0)
            g = lazy.cols(f, a0)
            gf = g[:, f]
            s0 = np.sum(a0 * gf, 1)
            vf = v[:, f]
            ax = np.sum(a0 * vf, 1)
            den = 1.0 - s0
            pff = lazy.block(f) + gf[:, :, None] * gf[:, None, :] / den[:, None, None]
            vf_ = vf + gf * (ax / den)[:, None]
            am = atoms[k]  # 9, fp^2
            q = np.einsum("mf,nfg,mg->nm", am, pff, am)
            u = vf_ @ am.T
            lt = log_theta[:, k]
            on = lt[:, : p * p] - 0.5 * np.log1p(q) + 0.5 * gw * u * u / (1.0 + q)
            on = np.where(valid[i, j][None], on, -np.inf)
            logits = np.concatenate([on, lt[:, p * p:]], 1)
            logits -= logits.max(1, keepdims=True)
            pr = np.exp(logits)
            pr /= pr.sum(1, keepdims=True)
            if t >= burn:
                acc[:, i, j, k] += np.sum(pr[:, : p * p] * u / (1.0 + q), 1)
            new = (pr.cumsum(1) > rng.random(n)[:, None]).argmax(1)
            changed = new != old
            if not changed.any():
                continue
            # remove the old atom (images that change and had it on)
            rem = changed & on0
            lazy.append(np.where(rem[:, None], g, 0.0), np.where(rem, 1.0 / den, 0.0))
            v = v + np.where(rem[:, None], g * (ax / den)[:, None], 0.0)
            on1 = new < p * p
            addm = changed & on1
            a1 = np.where(addm[:, None], atoms[k, np.minimum(new, p * p - 1)], 0.0)
            h = lazy.cols(f, a1)
            s1 = np.sum(a1 * h[:, f], 1)
            hx = np.sum(a1 * v[:, f], 1)
            lazy.append(h, np.where(addm, -1.0 / (1.0 + s1), 0.0))
            v = v - h * (hx / (1.0 + s1))[:, None]
            z[rows[changed], i, j, k] = new[changed]
        # theta, then W jointly (perturb-and-solve with the exact P), then gamma_e
        counts = np.stack([(z == m).sum(axis=(1, 2)) for m in range(p * p + 1)], -1)
        th = rng.gamma(alpha + counts)
        log_theta = np.log(np.maximum(th / th.sum(-1, keepdims=True), 1e-300))
        lazy.flush()
        on = z < p * p
        eps2 = rng.standard_normal(z.shape) / np.sqrt(gw) * on
        e1 = rng.standard_normal((n, npix)) / np.sqrt(ge)[:, None]
        phi_e2 = conv(s_map(z, eps2)).reshape(n, npix)
        y = np.einsum("nij,nj->ni", lazy.base, xf + e1 - phi_e2)
        corr = ops.full_conv_adjoint(tf.constant(y.reshape(n, H, H, 1)), tf.constant(d1)).numpy()
        corr = np.pad(corr, [[0, 0], [0, nb * p - hs], [0, nb * p - hs], [0, 0]])
        cb = corr.reshape(n, nb, p, nb, p, K).transpose(0, 1, 3, 5, 2, 4).reshape(n, nb, nb, K, p * p)
        w = eps2 + np.take_along_axis(cb, np.minimum(z, p * p - 1)[..., None], -1)[..., 0] * on
        resid = xf - conv(s_map(z, w)).reshape(n, npix)
        ge = rng.gamma(a_e + 0.5 * npix, 1.0 / (b_e + 0.5 * np.sum(resid ** 2, 1)))
        c = gram_of(z)
        lazy.base = np.linalg.inv(c + (gw / ge)[:, None, None] * eye)
        v = np.einsum("nij,nj->ni", lazy.base, xf)
        print(f"    sweep {t + 1}: blocks on {on.mean():.3f}, gamma_e {np.median(ge):.4g}, "
              f"rel. residual {np.median(np.linalg.norm(resid, axis=1) / np.linalg.norm(xf, axis=1)):.4f}",
              flush=True)
    return acc / coll


def ridge_states(x):
    mask = support(tf.constant(x), tf.constant(d1.astype(np.float32)), p, 0.5).numpy()
    mask = np.pad(mask, [[0, 0], [0, nb * p - hs], [0, nb * p - hs], [0, 0]])
    mb = mask.reshape(len(x), nb, p, nb, p, K).transpose(0, 1, 3, 5, 2, 4).reshape(
        len(x), nb, nb, K, p * p)
    return np.where(mb.any(-1), mb.argmax(-1), p * p)


def per_image_distance(a, b):
    return float(np.mean([mixing.map_distance(u, v) for u, v in zip(a, b)]))


def corr_with(a, b):
    return float(np.mean([np.corrcoef(u.ravel(), v.ravel())[0, 1] for u, v in zip(a, b)]))


bp = block_posterior.block_posterior_layer(x, d1.astype(np.float32), p, gamma_w=gw, gamma_e=ge0)
t = time.time()
g = [infer_layer(x, d1.astype(np.float32), p, gamma_w=gw, gamma_e_init=ge0, seed=s,
                 burn_in=burn, collect=coll, batch_size=len(x), progress=None) for s in (1, 2)]
print(f"today's chains (ridge start, {burn} + {coll}): chain-to-chain distance "
      f"{per_image_distance(*g):.3f}, correlation with block posteriors {corr_with(g[0], bp):.3f},"
      f" |f| > 1e-3 {np.mean(np.abs(g[0]) > 1e-3):.3f} ({time.time() - t:.0f} s)", flush=True)
col = []
for seed in (5, 6):
    t = time.time()
    print(f"  collapsed chain from the ridge start, seed {seed}:", flush=True)
    col.append(run(x, ridge_states(x), np.full(len(x), ge0), seed))
    print(f"  ({time.time() - t:.0f} s) correlation with block posteriors "
          f"{corr_with(col[-1], bp):.3f}, with today's chain {corr_with(col[-1], g[0]):.3f}, "
          f"|f| > 1e-3 {np.mean(np.abs(col[-1]) > 1e-3):.3f}", flush=True)
    np.savez("/tmp/layer1_collapsed.npz", bp=bp, g0=g[0], g1=g[1], x=x,
             **{f"c{i}": c for i, c in enumerate(col)})
print(f"collapsed chains ({burn} + {coll}): chain-to-chain distance "
      f"{per_image_distance(*col):.3f}", flush=True)
