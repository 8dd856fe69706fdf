"""Would moving single atoms across block boundaries unfreeze the layer-1 chains? No.

A Metropolis-Hastings-free exact move (a Gibbs step on a restricted set): in a region of
R x R blocks, pick one block that is on uniformly at random, take its atom out, and draw
where that one atom goes among every position of every block of the region that is off
(or back into its own block), each with its conditional weight given the rest (W
integrated out, as in ``pretrain.resample_zw``). The on-count of the region is the same
before and after, so the move is a Gibbs draw of "which block holds this atom" and
leaves the posterior invariant. Regions are placed with a random offset each sweep.

Measured (docs/findings/layerwise_scan_order.md): the old chain (fixed scan, every block off at the
start), D fixed, 500 / 250 images, 2 + 3 sweeps: activity-ink 0.201, split probe 22.8%;
with 10 relocations per 2 x 2-block region per sweep 0.208 and 21.6%; 3 x 3 regions 0.204
and 22.0%. At the precision the chains settle at, a stroke is explained by many small
atoms fitted together (~600 of 2450 blocks on per image, median |W| 0.04), so no single
atom has a better place to go.

    python experiments/mixing/relocation.py PREPARED LAYER1 500 250 2 10
(images train / test, region side R in blocks (0: no move), relocations per region and sweep)
"""
import sys
import time

import numpy as np
import tensorflow as tf

from dgdm_tf.mcmc import diagnostics as mixing
from dgdm_tf.core.layout import LayerGeometry
from dgdm_tf.core.ops import full_conv
from dgdm_tf.pretrain.blocks import blocks_to_nhwc, nhwc_to_blocks
from dgdm_tf.pretrain.kernel import make_sweep_fn
from dgdm_tf.core.hyper import Hyper
from dgdm_tf.pretrain.layer_model import LayerModel, init_state
from _subsets import subsets


def dense_z(z, g):
    """colour-major block states (Gh, Gw, K, N, nch, ncw) -> (N, nch Gh, ncw Gw, K)."""
    k, n = tf.shape(z)[2], tf.shape(z)[3]
    return tf.reshape(tf.transpose(z, [3, 4, 0, 5, 1, 2]), [n, g.nch * g.gh, g.ncw * g.gw, k])


def blocks_z(zd, g):
    n, k = tf.shape(zd)[0], tf.shape(zd)[3]
    return tf.transpose(tf.reshape(zd, [n, g.nch, g.gh, g.ncw, g.gw, k]), [2, 4, 5, 0, 1, 3])


def _to_blocks(t, n, r, p, k):  # (N, R p, R p, K) -> (N, R R K, p p)
    return tf.reshape(tf.transpose(tf.reshape(t, [n, r, p, r, p, k]), [0, 1, 3, 5, 2, 4]),
                      [n, r * r * k, p * p])


def _from_blocks(t, n, r, p, k):
    return tf.reshape(tf.transpose(tf.reshape(t, [n, r, r, k, p, p]), [0, 1, 4, 2, 5, 3]),
                      [n, r * p, r * p, k])


def _put(big, small, i0, j0):
    pad = [[0, 0], [i0, big.shape[1] - i0 - small.shape[1]], [j0, big.shape[2] - j0 - small.shape[2]],
           [0, 0]]
    inside = tf.pad(tf.ones_like(small), pad)
    return big * tf.cast(1 - inside, big.dtype) + tf.pad(small, pad)


def relocate_region(s, zd, resid, state, g, r0, c0, r, seed, valid):
    """One relocation in blocks [r0, r0 + r) x [c0, c0 + r) of every image."""
    p, k = g.p, g.k
    n = tf.shape(s)[0]
    s1, s2, s3 = tf.unstack(tf.random.experimental.stateless_split(seed, 3))
    on = zd[:, r0:r0 + r, c0:c0 + r, :] != g.off
    flat_on = tf.reshape(on, [n, -1])
    any_on = tf.reduce_any(flat_on, axis=1)
    u = tf.random.stateless_uniform(tf.shape(flat_on), s1, 1e-20, 1.0)
    pick = tf.argmax(tf.where(flat_on, -tf.math.log(-tf.math.log(u)), -np.inf), axis=1,
                     output_type=tf.int32)
    sel = tf.one_hot(pick, r * r * k) * tf.cast(any_on, tf.float32)[:, None]
    h0, w0 = r0 * p, c0 * p
    sw = s[:, h0:h0 + r * p, w0:w0 + r * p, :]
    s_a = _from_blocks(_to_blocks(sw, n, r, p, k) * sel[:, :, None], n, r, p, k)
    fh = r * p + g.dh - 1
    win = resid[:, h0:h0 + fh, w0:w0 + fh, :]
    r_out = win + full_conv(s_a, state.d)  # the residual without the picked atom
    corr = _to_blocks(tf.nn.conv2d(r_out, state.d, 1, "VALID"), n, r, p, k)
    corr = tf.reshape(corr, [n, r, r, k, p * p])
    dn = tf.reduce_sum(tf.square(state.d), axis=[0, 1, 2])
    ge = state.gamma_e[:, None, None, None, None]
    prec = ge * dn[None, None, None, :, None] + state.gamma_w
    lt = state.log_theta
    logit = (lt[:, None, None, :, : p * p] - lt[:, None, None, :, p * p:]
             + 0.5 * tf.math.log(state.gamma_w / prec) + 0.5 * tf.square(ge * corr) / prec)
    own = tf.reshape(sel > 0, [n, r, r, k])
    cand = tf.logical_and(tf.logical_or(tf.logical_not(on), own)[..., None],
                          valid[r0:r0 + r, c0:c0 + r][None, :, :, None, :])
    flat = tf.reshape(tf.where(cand, logit, -np.inf), [n, -1])
    u2 = tf.random.stateless_uniform(tf.shape(flat), s2, 1e-20, 1.0)
    j = tf.argmax(flat - tf.math.log(-tf.math.log(u2)), axis=1, output_type=tf.int32)
    cj = tf.gather(tf.reshape(corr, [n, -1]), j, batch_dims=1)
    pj = tf.gather(tf.reshape(tf.broadcast_to(prec, tf.shape(logit)), [n, -1]), j, batch_dims=1)
    wj = (state.gamma_e * cj + tf.random.stateless_normal([n], s3) * tf.sqrt(pj)) / pj
    s_b = _from_blocks(tf.reshape(tf.one_hot(j, r * r * k * p * p) * (wj * tf.cast(any_on, tf.float32))[:, None],
                                  [n, r * r * k, p * p]), n, r, p, k)
    keep = tf.cast(any_on, tf.float32)[:, None, None, None]
    new_win = keep * (r_out - full_conv(s_b, state.d)) + (1 - keep) * win
    z_flat = tf.where(tf.cast(sel, tf.bool), g.off, tf.reshape(zd[:, r0:r0 + r, c0:c0 + r, :], [n, -1]))
    z_flat = tf.where(tf.logical_and(tf.one_hot(j // (p * p), r * r * k) > 0, any_on[:, None]),
                      (j % (p * p))[:, None], z_flat)
    zd = _put(zd, tf.reshape(z_flat, [n, r, r, k]), r0, c0)
    return _put(s, sw - s_a + s_b, h0, w0), zd, _put(resid, new_win, h0, w0)


def relocation_sweep(state, model, r, seed, moves):
    g, p = model.geom, model.geom.p
    nbp, nbwp = g.nch * g.gh, g.ncw * g.gw
    s = blocks_to_nhwc(state.s, g)
    s = tf.pad(s, [[0, 0], [r * p, r * p + nbp * p - g.hs], [r * p, r * p + nbwp * p - g.ws], [0, 0]])
    zd = tf.pad(dense_z(state.z, g), [[0, 0], [r, r], [r, r], [0, 0]], constant_values=g.off)
    resid = tf.pad(state.resid, [[0, 0], [r * p, r * p], [r * p, r * p], [0, 0]])
    valid = np.zeros((nbp + 2 * r, nbwp + 2 * r, p * p), bool)
    for bi in range(g.nbh):
        for bj in range(g.nbw):
            for m in range(p * p):
                valid[r + bi, r + bj, m] = bi * p + m // p < g.hs and bj * p + m % p < g.ws
    valid = tf.constant(valid)
    off = np.random.default_rng(seed).integers(0, r, 2)
    step = 0
    for _ in range(moves):
        for r0 in range(off[0], r + g.nbh, r):
            for c0 in range(off[1], r + g.nbw, r):
                sd = tf.constant([seed, step], tf.int32)
                step += 1
                s, zd, resid = relocate_region(s, zd, resid, state, g, r0, c0, r, sd, valid)
    s = s[:, r * p: r * p + g.hs, r * p: r * p + g.ws, :]
    zd = zd[:, r: r + nbp, r: r + nbwp, :]
    resid = resid[:, r * p: -r * p, r * p: -r * p, :]
    return state._replace(s=nhwc_to_blocks(s, g), z=blocks_z(zd, g), resid=resid)


if __name__ == "__main__":
    l1 = np.load(sys.argv[2])
    ntr, nte, r, moves = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
    D = l1["D"].astype(np.float32)
    xtr, ytr, xte, yte = subsets(sys.argv[1], ntr, nte)
    geom = LayerGeometry(hx=28, wx=28, c=1, dh=D.shape[0], dw=D.shape[1], k=D.shape[3], p=3)

    def features(x, seed):  # the old chain (fixed scan, every block off), 2 + 3 sweeps
        model = LayerModel(geom, Hyper(), top=False, n_images=len(x), scan="fixed")
        fn = make_sweep_fn(model, update_d=False, update_gamma_w=False, return_expected_pool=True)
        st = init_state(x, model, tf.constant([seed, 0]), gamma_e_init=float(np.mean(l1["gamma_e"])))
        st = st._replace(d=tf.constant(D), gamma_w=tf.constant(np.float32(l1["gamma_w"])))
        acc = 0.0
        for t in range(5):
            if r > 0 and t > 0:
                st = relocation_sweep(st, model, r, 1000 * seed + t, moves)
            st, e = fn(st, tf.constant(x))
            acc = acc + (e.numpy() if t >= 2 else 0.0)
        return acc / 3

    t0 = time.time()
    f = [features(xtr, 1), features(xte, 2)]
    split = [mixing.polarity_split(v) for v in f]
    print(f"regions {r} x {r} blocks, {moves} relocations per region and sweep: activity-ink "
          f"{mixing.activity_ink_correlation(f[0], xtr, 8, 3):.3f}, split probe "
          f"{mixing.ridge_probe(split[0], ytr, split[1], yte):.2f}% ({time.time() - t0:.0f} s)")
