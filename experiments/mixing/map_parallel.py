"""The supplement's map-parallel (z, W) schedule: an approximate, not an exact, Gibbs step.

Is the paper's own update the reason its features work where our exact sweep freezes?
Run on a prepared data set and a pretrained layer 1, it draws a few sweeps of the layer-1
feature chains (D fixed) with this schedule and with the exact one, and prints the share
of blocks on, the relative residual and the median gamma_e after each sweep:

    python experiments/mixing/map_parallel.py PREPARED LAYER1 [N_IMAGES] [SWEEPS]

Kept as an experiment, not an option: on MNIST it diverges in its first sweep
(docs/findings/map_parallel_schedule.md).

The supplement's conditionals for z and W ("Conditional Posterior Distribution for
Pretraining") are written for a whole map at once: every block of map k is drawn from
the residual X_{-k} that leaves out map k entirely,

    Y[i, j, m] = gamma_e ( ||D_k||^2 W^2 - 2 (X_{-k} (*) D_k) W ),

so the blocks of one map do not see each other. Overlapping blocks of one map are not
conditionally independent, so this is not a Gibbs step of the posterior (the exact
schedule is :func:`dgdm_tf.pretrain.kernel.resample_zw`); it has no scan order inside a map,
which is why it is offered, as an option whose effect is measured
(docs/findings/map_parallel_schedule.md). Per block the draw is the exact schedule's: W
integrated out gives the (p^2 + 1)-way categorical, then W given z; maps are drawn one after
the other, the residual kept current between maps.
"""

from __future__ import annotations

import sys

import numpy as np
import tensorflow as tf

from dgdm_tf.core.ops import full_conv, full_conv_adjoint
from dgdm_tf.pretrain.blocks import block_kernels, blocks_to_nhwc, nhwc_to_blocks
from dgdm_tf.pretrain.layer_model import LayerModel, PretrainState


def _to_block_grid(v: tf.Tensor, p: int, hb: int, wb: int) -> tf.Tensor:
    """(N, hs, ws) -> (N, hb, wb, p*p) on the padded block grid (position m row-major)."""
    n = tf.shape(v)[0]
    v = tf.pad(v, [[0, 0], [0, hb * p - tf.shape(v)[1]], [0, wb * p - tf.shape(v)[2]]])
    v = tf.reshape(v, [n, hb, p, wb, p])
    return tf.reshape(tf.transpose(v, [0, 1, 3, 2, 4]), [n, hb, wb, p * p])


def _from_block_grid(v: tf.Tensor, p: int, hs: int, ws: int) -> tf.Tensor:
    """Inverse of :func:`_to_block_grid`, cropped to (N, hs, ws)."""
    n, hb, wb = tf.shape(v)[0], tf.shape(v)[1], tf.shape(v)[2]
    v = tf.transpose(tf.reshape(v, [n, hb, wb, p, p]), [0, 1, 3, 2, 4])
    return tf.reshape(v, [n, hb * p, wb * p])[:, :hs, :ws]


def _colour_major_to_grid(v: np.ndarray | tf.Tensor, gh: int, gw: int) -> tf.Tensor:
    """(Gh, Gw, nch, ncw, ...) -> (nch * Gh, ncw * Gw, ...): block (u Gh + a, v Gw + b)."""
    v = tf.convert_to_tensor(v)
    rest = list(range(4, len(v.shape)))
    v = tf.transpose(v, [2, 0, 3, 1] + rest)
    s = tf.shape(v)
    return tf.reshape(v, tf.concat([[s[0] * s[1], s[2] * s[3]], s[4:]], 0))


def resample_zw_map_parallel(state: PretrainState, x: tf.Tensor, model: LayerModel, seed,
                             return_expected_pool: bool = False, exclude: str = "map"):
    """Draw (z, W) of every block of map k at once from X_{-k}, map after map.

    Same signature and outputs as :func:`dgdm_tf.pretrain.kernel.resample_zw`.
    """
    g = model.geom
    p2 = g.p * g.p
    hb, wb = g.nch * g.gh, g.ncw * g.gw  # padded block grid
    valid = _colour_major_to_grid(model.valid, g.gh, g.gw)[None]  # 1, hb, wb, P2
    real = _colour_major_to_grid(model.block_valid, g.gh, g.gw)[None, :, :, None]
    s_nhwc = blocks_to_nhwc(state.s, g)  # N, hs, ws, K
    n = tf.shape(s_nhwc)[0]
    resid = state.resid[:, : g.hx, : g.wx, :]
    d = state.d
    dnorm = tf.reduce_sum(tf.square(d), axis=[0, 1, 2])  # K
    kb = tf.reshape(block_kernels(d, g), [g.k, g.fh * g.fw * g.c, p2])
    gram = tf.einsum("kfm,kfq->kmq", kb, kb)  # K, P2, P2
    ge = state.gamma_e[:, None, None, None]  # N,1,1,1
    gw = state.gamma_w
    neg_inf = tf.constant(-np.inf, tf.float32)
    s_out = tf.TensorArray(tf.float32, size=g.k)
    z_out = tf.TensorArray(tf.int32, size=g.k)
    e_out = tf.TensorArray(tf.float32, size=g.k if return_expected_pool else 0)

    def body(k, resid, s_out, z_out, e_out):
        s1, s2 = tf.unstack(tf.random.experimental.stateless_split(
            tf.random.experimental.stateless_fold_in(seed, k), 2))
        d_k = d[..., k:k + 1]
        s_k = s_nhwc[..., k:k + 1]
        if exclude == "map":
            r_k = resid + full_conv(s_k, d_k)  # X_{-k}: the residual without map k
            corr = _to_block_grid(full_conv_adjoint(r_k, d_k)[..., 0], g.p, hb, wb)
        else:  # each block sees the residual without itself only
            r_k = resid + full_conv(s_k, d_k)
            own = _to_block_grid(s_k[..., 0], g.p, hb, wb) @ gram[k]
            corr = _to_block_grid(full_conv_adjoint(resid, d_k)[..., 0], g.p, hb, wb) + own
        prec = ge * dnorm[k] + gw
        lt = state.log_theta[:, k][:, None, None, :]  # N,1,1,S
        on = lt[..., :p2] + 0.5 * tf.math.log(gw / prec) + 0.5 * tf.square(ge * corr) / prec
        on = tf.where(valid, on, lt[..., :p2])
        on = tf.where(real, on, neg_inf)
        logits = tf.concat([on, tf.broadcast_to(lt[..., p2:], tf.concat(
            [tf.shape(on)[:-1], [1]], 0))], axis=-1)
        u = tf.random.stateless_uniform(tf.shape(logits), s1, minval=1e-20, maxval=1.0)
        zz = tf.argmax(logits - tf.math.log(-tf.math.log(u)), axis=-1, output_type=tf.int32)
        onehot = tf.one_hot(zz, p2 + 1)[..., :p2] * tf.cast(valid, tf.float32)
        c_sel = tf.reduce_sum(onehot * corr, axis=-1, keepdims=True)
        eps = tf.random.stateless_normal(tf.shape(c_sel), s2)
        vals = onehot * (ge * c_sel + eps * tf.sqrt(prec)) / prec  # N, hb, wb, P2
        s_new = _from_block_grid(vals, g.p, g.hs, g.ws)[..., None]
        resid = r_k - full_conv(s_new, d_k)
        if return_expected_pool:
            prob = tf.nn.softmax(logits, axis=-1)[..., :p2] * tf.cast(valid, tf.float32)
            e_out = e_out.write(k, tf.reduce_sum(prob * ge * corr / prec, axis=-1)[:, : g.nbh, : g.nbw])
        return k + 1, resid, s_out.write(k, s_new[..., 0]), z_out.write(k, zz), e_out

    _, resid, s_out, z_out, e_out = tf.while_loop(
        lambda k, *_: k < g.k, body, (tf.constant(0), resid, s_out, z_out, e_out),
        parallel_iterations=1)
    s_new = tf.transpose(s_out.stack(), [1, 2, 3, 0])  # N, hs, ws, K
    z = tf.reshape(z_out.stack(), [g.k, n, g.nch, g.gh, g.ncw, g.gw])
    z = tf.transpose(z, [3, 5, 0, 1, 2, 4])  # Gh, Gw, K, N, nch, ncw
    resid = tf.pad(resid, [[0, 0], [0, g.hr - g.hx], [0, g.wr - g.wx], [0, 0]])
    state = state._replace(s=nhwc_to_blocks(s_new, g), z=z, resid=resid)
    if return_expected_pool:
        return state, tf.transpose(e_out.stack(), [1, 2, 3, 0])
    return state


if __name__ == "__main__":
    from _subsets import subsets
    from dgdm_tf.core.layout import LayerGeometry
    from dgdm_tf.pretrain.kernel import make_sweep_fn
    from dgdm_tf.core.hyper import Hyper
    from dgdm_tf.pretrain.layer_model import init_state

    l1 = np.load(sys.argv[2])
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 300
    sweeps = int(sys.argv[4]) if len(sys.argv) > 4 else 4
    x = subsets(sys.argv[1], n, 1)[0]
    d = l1["D"].astype(np.float32)
    geom = LayerGeometry(hx=x.shape[1], wx=x.shape[2], c=x.shape[3], dh=d.shape[0],
                         dw=d.shape[1], k=d.shape[3], p=3)
    model = LayerModel(geom, Hyper(), top=False, n_images=n)
    steps = {"exact (pretrain.resample_zw)": None,
             "map-parallel, X_{-k} (the supplement's Y)": resample_zw_map_parallel,
             "map-parallel, each block without itself": lambda *a, **k: resample_zw_map_parallel(
                 *a, exclude="block", **k)}
    energy = float(np.sum(x ** 2))
    for name, step in steps.items():
        fn = make_sweep_fn(model, update_d=False, update_gamma_w=False, zw_step=step)
        st = init_state(x, model, [0, 1], gamma_e_init=float(np.mean(l1["gamma_e"])))
        st = st._replace(d=tf.constant(d), gamma_w=tf.constant(np.float32(np.mean(l1["gamma_w"]))))
        print(name, flush=True)
        for t_ in range(sweeps):
            st = fn(st, tf.constant(x))
            on = float(tf.reduce_mean(tf.cast(st.z != geom.off, tf.float32)))
            rr = float(tf.reduce_sum(tf.square(st.resid))) / energy
            print(f"  sweep {t_ + 1}: blocks on {on:.4f}, relative residual {rr:.4g}, "
                  f"median gamma_e {float(np.median(st.gamma_e)):.4g}", flush=True)
