"""Does a top-layer sampler that mixes give features that read out?

The layer-wise top layer (pool 1, spike-and-slab, 2 x 2 x K2 units on MNIST) is a linear
Gaussian model given its indicators: X = Phi_A w_A + E, Phi's columns the K2 elements at
each of the 2 x 2 positions. Its Gibbs chain draws each unit's (z, w) with every other
unit's w held, so moving an explanation from unit k to a near-copy j passes through
"both on, w_j ~ 0" and then "k off with its share unexplained": at the chain's noise
precision that never happens, and the chain keeps its start's units. Here the same
posterior is sampled with w integrated out of every indicator draw (the marginal
likelihood of the active set, kept as the inverse of its s x s Gram by rank-one
updates), pi_nk integrated out too (Beta-Bernoulli over a map's positions), plus
relocation moves: an active unit's identity drawn from its conditional over every
inactive unit (a Gibbs draw in the slot parametrisation). gamma_e[n] is drawn given a
joint draw of w_A. The features are Rao-Blackwellised: at each unit's visit,
P(z_k = 1 | rest) E[w_k | z_k = 1, rest], averaged over the collected sweeps.

Float64 NumPy, batched over images; a probe, not the product. Prints, per sampler, the
fixed ridge read-out of the top layer (signed / split), units on, the chain's gamma_e,
and seconds. Run after ``snakemake results/mnist/pretrain/layer2.npz``:

    python experiments/mixing/top_collapsed.py results/mnist 1000 500 20:40 4
"""
import os
import sys
import time

import numpy as np

from dgdm_tf.pretrain.features import infer_layer
from _subsets import read_out, subsets

root = sys.argv[1]
ntr, nte = int(sys.argv[2]), int(sys.argv[3])
burn, coll = (int(v) for v in sys.argv[4].split(":"))
n_reloc = int(sys.argv[5])
layers = [np.load(f"{root}/pretrain/layer{l}.npz") for l in (1, 2)]
xtr, ytr, xte, yte = subsets(f"{root}/data/prepared.npz", ntr, nte)


def gibbs(x, l, seed, b=5, c=5):
    z = layers[l]
    return infer_layer(x, z["D"].astype(np.float32), (3, 1)[l], gamma_w=float(z["gamma_w"]),
                       gamma_e_init=float(np.mean(z["gamma_e"])), seed=seed, burn_in=b,
                       collect=c, batch_size=1000, layer_index=l, progress=None)


cache = f"/tmp/top_collapsed_l1_{ntr}_{nte}.npz"
if os.path.exists(cache):
    h1 = [np.load(cache)["tr"], np.load(cache)["te"]]
else:
    t = time.time()
    h1 = [gibbs(x, 0, 1 + i) for i, x in enumerate((xtr, xte))]
    np.savez(cache, tr=h1[0], te=h1[1])
    print(f"layer 1 (Gibbs, 5 + 5): {time.time() - t:.0f} s", flush=True)

d2 = layers[1]["D"].astype(np.float64)  # dh, dw, C, K
gw = float(layers[1]["gamma_w"])
dh, dw, ch, kk = d2.shape
hx, wx = h1[0].shape[1:3]
hs, ws = hx - dh + 1, wx - dw + 1
npos = hs * ws
units = npos * kk
phi = np.zeros((hx, wx, ch, npos, kk))
for i in range(hs):
    for j in range(ws):
        phi[i: i + dh, j: j + dw, :, i * ws + j, :] = d2
phi = phi.reshape(hx * wx * ch, units)  # unit u = pos * K + k (the pooled layout)
gram = phi.T @ phi
gdiag = np.diag(gram).copy()
a0, b0 = 1.0 / kk, 1.0 - 1.0 / kk
npix = hx * wx * ch
a_e = b_e = 1e-6


g_pad = np.zeros((units + 1, units + 1))  # index U: an empty slot (zero row and column)
g_pad[:units, :units] = gram


def run(x, seed, smax=int(os.environ.get("SMAX", 128)), chunk=200):
    """Collapsed sampler on images x (N, hx, wx, C); returns the RB feature means."""
    rng = np.random.default_rng(seed)
    n = len(x)
    xf = x.reshape(n, -1).astype(np.float64)
    c = xf @ phi  # N, U
    xx = np.sum(xf * xf, 1)
    c_pad = np.hstack([c, np.zeros((n, 1))])
    slot_unit = np.full((n, smax), units)  # U = empty
    where = np.full((n, units), -1)  # unit -> slot
    on_map = np.zeros((n, kk))  # positions on per (image, map)
    bmat = np.zeros((n, smax, smax))
    ge = np.full(n, float(np.mean(layers[1]["gamma_e"])))
    acc = np.zeros((n, units))
    rows = np.arange(n)

    def beta_of():
        cs = np.take_along_axis(c_pad, slot_unit, 1)
        return np.einsum("nij,nj->ni", bmat, cs), cs

    def remove(idx, slot):
        """Remove the unit at ``slot`` of images ``idx`` from B (rank-one downdate)."""
        bi = bmat[idx, :, slot]
        bii = bi[np.arange(len(idx)), slot] if np.ndim(slot) else bi[:, slot]
        bmat[idx] -= bi[:, :, None] * bi[:, None, :] / bii[:, None, None]
        bmat[idx, slot, :] = 0.0
        bmat[idx, :, slot] = 0.0

    def add(idx, slot, k, delta):
        g = g_pad[slot_unit[idx], k[:, None]]
        b = np.einsum("nij,nj->ni", bmat[idx], g)
        bm = bmat[idx] + b[:, :, None] * b[:, None, :] / delta[:, None, None]
        ar = np.arange(len(idx))
        bm[ar, slot, :] = -b / delta[:, None]
        bm[ar, :, slot] = -b / delta[:, None]
        bm[ar, slot, slot] = 1.0 / delta
        bmat[idx] = bm

    def refresh():
        """B = (G_AA + lam I)^-1 afresh (after gamma_e moves)."""
        lam = gw / ge
        ga = g_pad[slot_unit[:, :, None], slot_unit[:, None, :]]
        empty = slot_unit == units
        m = ga + lam[:, None, None] * np.eye(smax)
        m[empty] = np.eye(smax)[None].repeat(n, 0)[empty]
        binv = np.linalg.inv(m)
        binv[empty] = 0.0
        binv.transpose(0, 2, 1)[empty] = 0.0
        bmat[:] = binv

    for t in range(burn + coll):
        lam = gw / ge
        for u in rng.permutation(units):
            k_map = u % kk
            beta, cs = beta_of()
            sl = where[:, u]
            act = sl >= 0
            # the state without u
            if act.any():
                ia = rows[act]
                remove(ia, sl[act])
                slot_unit[ia, sl[act]] = units
                where[ia, u] = -1
                on_map[ia, k_map] -= 1
                beta, cs = beta_of()
            g = g_pad[slot_unit, u]  # N, smax
            b = np.einsum("nij,nj->ni", bmat, g)
            delta = gdiag[u] + lam - np.sum(g * b, 1)
            tt = c[:, u] - np.sum(g * beta, 1)
            m = on_map[:, k_map]
            logit = (0.5 * np.log(lam / delta) + 0.5 * ge * tt * tt / delta
                     + np.log((a0 + m) / (b0 + npos - 1 - m)))
            p_on = 1.0 / (1.0 + np.exp(-logit))
            if t >= burn:
                acc[:, u] += p_on * tt / delta
            z = rng.random(n) < p_on
            if z.any():
                iz = rows[z]
                free = np.argmax(slot_unit[iz] == units, axis=1)
                if np.any(slot_unit[iz, free] != units):
                    raise RuntimeError("smax too small")
                add(iz, free, np.full(len(iz), u), delta[z])
                slot_unit[iz, free] = u
                where[iz, u] = free
                on_map[iz, k_map] += 1
        # relocation: a random active slot's unit drawn anew over the inactive units
        for _ in range(n_reloc):
            occ_all = slot_unit < units
            for c0 in range(0, n, chunk):
                ia = rows[c0: c0 + chunk][occ_all[c0: c0 + chunk].any(1)]
                if len(ia) == 0:
                    continue
                pick = np.array([rng.choice(np.flatnonzero(o)) for o in occ_all[ia]])
                k_old = slot_unit[ia, pick]
                remove(ia, pick)
                slot_unit[ia, pick] = units
                where[ia, k_old] = -1
                on_map[ia, k_old % kk] -= 1
                cs = np.take_along_axis(c_pad[ia], slot_unit[ia], 1)
                beta = np.einsum("nij,nj->ni", bmat[ia], cs)
                q = g_pad[slot_unit[ia], :units]  # na, smax, U
                bq = np.einsum("nij,nju->niu", bmat[ia], q)
                delta = gdiag[None] + lam[ia, None] - np.sum(q * bq, 1)
                tt = c[ia] - np.einsum("nju,nj->nu", q, beta)
                mm = on_map[ia][:, np.arange(units) % kk]
                lw = (0.5 * np.log(lam[ia, None] / delta) + 0.5 * ge[ia, None] * tt * tt / delta
                      + np.log((a0 + mm) / (b0 + npos - 1 - mm)))
                lw[where[ia] >= 0] = -np.inf
                lw -= lw.max(1, keepdims=True)
                pr = np.exp(lw)
                pr /= pr.sum(1, keepdims=True)
                k_new = (pr.cumsum(1) > rng.random(len(ia))[:, None]).argmax(1)
                add(ia, pick, k_new, delta[np.arange(len(ia)), k_new])
                slot_unit[ia, pick] = k_new
                where[ia, k_new] = pick
                on_map[ia, k_new % kk] += 1
        # gamma_e given a joint draw of w_A
        beta, cs = beta_of()
        w = np.zeros((n, smax))
        for i in range(n):
            occ = slot_unit[i] < units
            if occ.any():
                cov = bmat[i][np.ix_(occ, occ)] / ge[i]
                w[i, occ] = rng.multivariate_normal(beta[i, occ], (cov + cov.T) / 2)
        ga = g_pad[slot_unit[:, :, None], slot_unit[:, None, :]]
        r2 = xx - 2 * np.sum(w * cs, 1) + np.einsum("ni,nij,nj->n", w, ga, w)
        ge = rng.gamma(a_e + 0.5 * npix, 1.0 / (b_e + 0.5 * np.maximum(r2, 1e-12)))
        refresh()
        s_on = np.sum(slot_unit < units, 1)
        print(f"  sweep {t + 1}: units on {s_on.mean():.1f} (max {s_on.max()}), "
              f"gamma_e {np.median(ge):.3g}, rel. residual {np.median(np.sqrt(r2 / xx)):.3f}",
              flush=True)
    return (acc / coll).reshape(n, hs, ws, kk)


def probe(f, split):
    return read_out(f, ytr, yte, split)


t = time.time()
h2 = [gibbs(h, 1, 11 + i) for i, h in enumerate(h1)]
print(f"top layer, Gibbs 5 + 5 (the pretrained_svm route): signed {probe(h2, False):.2f}%, "
      f"split {probe(h2, True):.2f}%, units above 1e-3 {np.mean(np.abs(h2[0]) > 1e-3):.3f} "
      f"({time.time() - t:.0f} s)", flush=True)
t = time.time()
h2 = [run(h, 21 + i) for i, h in enumerate(h1)]
print(f"top layer, collapsed + {n_reloc} relocations, {burn} + {coll}: signed "
      f"{probe(h2, False):.2f}%, split {probe(h2, True):.2f}%, units above 1e-3 "
      f"{np.mean(np.abs(h2[0]) > 1e-3):.3f} ({time.time() - t:.0f} s)", flush=True)
