"""The unpooling blocks of layers l < L-1 of the top-down sampler: ``resample_z``
(eq. SampleZ). A block's value is fixed by the layers above; its p*p + 1 states are
scored by the data fit of that value placed at each position, pushed down to the data
plane. Colour by colour, map after map. Layer 0 has a fast path (correlations on
footprint tiles, as pretraining, masked pixels included); the layers above push each
candidate down inside its block's footprint window only, several maps' candidates in
one batched pass (:mod:`dgdm_tf.topdown.window_passes`); the generic path
(``fast=False``) pushes one candidate position of a whole colour through the whole
plane per pass. All give the same draws from the same seed (tested).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from dgdm_tf.pretrain.blocks import block_kernels, colour_tiles, pad_input, tiles_to_residual
from dgdm_tf.core import random
from dgdm_tf.core import windows as mw
from dgdm_tf.core.model import (DeepModel, down_from, layer_inputs, state_index, stored_states,
                                unpool_blocks)
from dgdm_tf.core.ops import full_conv
from dgdm_tf.topdown.scan import over_colours, per_colour, scan_orders
from dgdm_tf.topdown.state import DeepState, dense_z, fold_seed, masked
from dgdm_tf.topdown.window_passes import maps_per_pass, push_windows, tiled_crops, window_starts


def _gumbel_argmax(logits, seed):
    u = tf.random.stateless_uniform(tf.shape(logits), seed, minval=1e-20, maxval=1.0)
    return tf.argmax(logits - tf.math.log(-tf.math.log(u)), axis=-1, output_type=tf.int32)


def _block_logits(log_theta_k, ge, energy):
    """(N, nh, nw, P2) data-fit energies -> logits over the P2 + 1 states (last = off)."""
    lt = log_theta_k[:, None, None, :]  # N,1,1,S
    on = lt[..., :-1] - 0.5 * ge * energy
    return tf.concat([on, tf.broadcast_to(lt[..., -1:], tf.shape(on[..., :1]))], axis=-1)


def resample_z(state: DeepState, x, model: DeepModel, l: int, seed, mask=None,
               fast: bool = True) -> DeepState:
    """Unpooling states of layer ``l`` (eq. SampleZ), colour after colour, map after map,
    in the model's scan order (:func:`scan_orders`; the draws of (colour, map) are seeded
    by both, whatever the order).

    A block's value v = X[l+1] at the block (fixed by the layers above); state m places v
    at position m, whose data-plane image is v F_m. With R0 the residual without the
    block: log p(z = m) = log theta_m - gamma_e/2 (||v F_m||^2 - 2 <R0, v F_m>),
    log p(z = off) = log theta_off.
    """
    if fast and l == 0:
        return _resample_z_bottom(state, model, seed, mask)
    if fast:
        return _resample_z_windowed(state, model, l, seed, mask)
    g, col = model.geoms[l], model.colourings[l]
    p2 = g.p * g.p
    zd = dense_z(state, model)
    xs = layer_inputs(state.s_top, model, state.d, zd)
    v_all = tf.transpose(xs[l + 1], [3, 0, 1, 2])  # K, N, nbh, nbw
    z_k = tf.transpose(state_index(state.z[l]), [3, 0, 1, 2])
    lt_all = state.log_theta[l]  # N, K, S
    ge = state.gamma_e[:, None, None, None]
    resid = state.resid
    colour_ids, map_orders = scan_orders(model, l, fold_seed(seed, random.SALTS["scan_order"]))
    offsets = np.stack([[model.offset_mask(l, a, b, m) for m in range(p2)] for a, b in col.colours()])
    members = np.stack([col.member_mask(a, b) for a, b in col.colours()])

    def one_colour(slot, ci, maps, carry):
        resid, z_k = carry
        a, b = ci // col.g_w, ci % col.g_w
        offs_c = per_colour(offsets, ci)
        offs = [offs_c[m][None, :, :, None] for m in range(p2)]
        member = per_colour(members, ci)[None]

        def body(i, resid, z_k):
            k = i if maps is None else maps[i]
            dk = tf.gather(state.d[l], [k], axis=3)
            up = unpool_blocks(v_all[k][..., None], tf.ones_like(offs[0]), g.p)  # N, hs, ws, 1
            ys = [masked(down_from(full_conv(up * o, dk), l, model, state.d, zd), mask) for o in offs]
            zc = col.take(z_k[k], a, b)
            cur = tf.add_n([y * col.tile_broadcast(tf.cast(tf.equal(zc, m), tf.float32), a, b)
                            for m, y in enumerate(ys)])
            r0 = resid + cur
            energy = tf.stack([col.tile_sum(y * y - 2.0 * r0 * y, a, b) for y in ys], axis=-1)
            logits = _block_logits(tf.gather(lt_all, k, axis=1), ge, energy)
            znew = _gumbel_argmax(logits, fold_seed(seed, ci, k))
            new = tf.add_n([y * col.tile_broadcast(tf.cast(tf.equal(znew, m), tf.float32), a, b)
                            for m, y in enumerate(ys)])
            z_out = tf.where(member, col.put(znew, a, b), z_k[k])
            return i + 1, r0 - new, tf.tensor_scatter_nd_update(z_k, [[k]], z_out[None])

        _, resid, z_k = tf.while_loop(lambda i, *_: i < g.k, body,
                                      (tf.constant(0), resid, z_k), parallel_iterations=1)
        return resid, z_k

    resid, z_k = over_colours(colour_ids, map_orders, one_colour, (resid, z_k), loop=True)
    z = list(state.z)
    z[l] = stored_states(tf.transpose(z_k, [1, 2, 3, 0]))
    return state._replace(z=tuple(z), resid=resid)


def _placed_atoms(d, p: int) -> tf.Tensor:
    """(p*p, K, p + dh - 1, p + dw - 1, C): atom k of ``d`` placed at each offset of a
    p x p block -- a candidate's image in X[l] (the full convolution of a one-hot)."""
    out = [tf.pad(d, [[m // p, p - 1 - m // p], [m % p, p - 1 - m % p], [0, 0], [0, 0]])
           for m in range(p * p)]
    return tf.transpose(tf.stack(out), [0, 4, 1, 2, 3])


def _resample_z_windowed(state: DeepState, model: DeepModel, l: int, seed, mask=None) -> DeepState:
    """Blocks of layer l >= 1 as in the generic path (the same energies, the same draws),
    with each candidate pushed down inside its member's window only
    (:mod:`dgdm_tf.core.windows`), and the candidates of the next few maps of the
    visiting order in one batched pass: they do not depend on the residual (only on
    X[l+1], Z below and D), so only the energies and the draw run map after map.

    A window batch holds a colour's real members only, so its shapes depend on how many
    real member rows and columns the colour has: each slot of the scan is traced for
    the shapes of one class of colours and runs the colour the scan puts there, picked
    at run time (:meth:`DeepModel.scan_classes`). Any colour in any slot would need a
    trace per colour in every slot, or batches padded to the whole member grid (up to
    2.6x the candidates at the CIFAR shapes' layer 2)."""
    g, col = model.geoms[l], model.colourings[l]
    p2 = g.p * g.p
    hx, wx, c0 = model.image_shape
    zd = dense_z(state, model)
    xs = layer_inputs(state.s_top, model, state.d, zd)
    v_all = tf.transpose(xs[l + 1], [3, 0, 1, 2])  # K, N, nbh, nbw
    z_k = tf.transpose(state_index(state.z[l]), [3, 0, 1, 2])
    lt_all = state.log_theta[l]
    ge = state.gamma_e[:, None, None, None]
    valid_np = np.zeros((col.n_h * col.g_h, col.n_w * col.g_w, p2), np.float32)
    valid_np[: g.nbh, : g.nbw] = model.position_valid(l)
    placed = _placed_atoms(state.d[l], g.p)  # p2, K, wh, ww, C
    resid = state.resid
    colour_ids, map_orders = scan_orders(model, l, fold_seed(seed, random.SALTS["scan_order"]))
    grids = [model.member_grids(l, a, b) for a, b in col.colours()]
    members = np.stack([col.member_mask(a, b) for a, b in col.colours()])
    valid_grid = valid_np.reshape(col.n_h, col.g_h, col.n_w, col.g_w, p2)
    valids = np.stack([valid_grid[:, a, :, b].reshape(-1, p2) for a, b in col.colours()])
    for slot, ci in enumerate(colour_ids):
        a, b = ci // col.g_w, ci % col.g_w
        s_grids, data = grids[slot]  # the shapes of slot's class; ci's offsets below
        s_starts, d_start = window_starts(grids, ci)
        real = np.flatnonzero(col.real(*col.colours()[slot]).ravel())
        m_count = len(real)
        kc = maps_per_pass(model, s_grids, data, p2, m_count, g.k)
        member = per_colour(members, ci)[None]
        valid = tf.transpose(tf.gather(per_colour(valids, ci), real))
        valid = valid[None, :, None, :, None, None, None]
        maps = None if map_orders is None else map_orders[slot]
        # Z below layer l does not change while layer l is drawn: crop it once per colour
        zw, mwin = tiled_crops(zd, mask, s_grids, data, real, kc * p2, s_starts, d_start)

        def images(i0, a=a, b=b, real=real, m_count=m_count, kc=kc, valid=valid, zw=zw,
                   mwin=mwin, data=data, maps=maps):
            """(kc, p2, N*M, window) candidate images of the maps visited i0 .. i0 + kc - 1
            (the last pass repeats the last map where it runs past K; those are never
            read)."""
            ks = tf.minimum(i0 + tf.range(kc), g.k - 1)
            ks = ks if maps is None else tf.gather(maps, ks)
            v = tf.gather(v_all, ks)  # kc, N, nbh, nbw
            v = col.take(tf.reshape(v, [-1, g.nbh, g.nbw]), a, b)
            v = tf.reshape(mw.per_member(v, real), [kc, 1, -1, m_count, 1, 1, 1])
            atoms = tf.transpose(tf.gather(placed, ks, axis=1), [1, 0, 2, 3, 4])[:, :, None, None]
            x_win = atoms * v * valid  # kc, p2, N, M, wh, ww, C
            wh, ww, cl = x_win.shape[-3:]
            y = push_windows(tf.reshape(x_win, [-1, wh, ww, cl]), zw, model, state.d, l, mwin)
            return tf.reshape(y, [kc, p2, -1, data.size_h, data.size_w, c0])

        def body(i, resid, z_k, cache, a=a, b=b, ci=ci, member=member, real=real, kc=kc,
                 images=images, data=data, d_start=d_start, maps=maps):
            k = i if maps is None else maps[i]
            cache = tf.cond(tf.equal(i % kc, 0),
                            lambda: tf.ensure_shape(images(i), cache.shape), lambda: cache)
            y = cache[i % kc]  # p2, N*M, window
            r_win = mw.crop(resid, data, real, d_start)
            zc = mw.per_member(col.take(z_k[k], a, b), real)
            r0 = r_win + tf.einsum("mbhwc,bm->bhwc", y, tf.one_hot(zc, p2 + 1)[:, :p2])
            energy = tf.reduce_sum(y * y - 2.0 * r0[None] * y, axis=[2, 3, 4])  # p2, N*M
            energy = mw.to_grid(tf.transpose(energy), real, col.n_h, col.n_w)  # N, nh, nw, p2
            logits = _block_logits(tf.gather(lt_all, k, axis=1), ge, energy)
            znew = _gumbel_argmax(logits, fold_seed(seed, ci, k))
            zn = mw.per_member(znew, real)
            new = tf.einsum("mbhwc,bm->bhwc", y, tf.one_hot(zn, p2 + 1)[:, :p2])
            resid = resid + mw.place(r0 - new - r_win, data, real, hx, wx, d_start)
            z_out = tf.where(member, col.put(znew, a, b), z_k[k])
            return i + 1, resid, tf.tensor_scatter_nd_update(z_k, [[k]], z_out[None]), cache

        cache0 = tf.zeros([kc, p2, tf.shape(resid)[0] * m_count, data.size_h, data.size_w, c0])
        _, resid, z_k, _ = tf.while_loop(lambda i, *_: i < g.k, body,
                                         (tf.constant(0), resid, z_k, cache0),
                                         parallel_iterations=1)
    z = list(state.z)
    z[l] = stored_states(tf.transpose(z_k, [1, 2, 3, 0]))
    return state._replace(z=tuple(z), resid=resid)


def _resample_z_bottom(state: DeepState, model: DeepModel, seed, mask=None) -> DeepState:
    """Layer-0 blocks by correlations on footprint tiles (the pretraining kernel with the
    block's value fixed): energy_m = v^2 ||D_k||^2 - 2 v <R0, D_k at m>. With a mask the
    norms and correlations are taken over the observed pixels of each tile."""
    g, col = model.geoms[0], model.colourings[0]
    assert (g.gh, g.gw, g.nch, g.ncw) == (col.g_h, col.g_w, col.n_h, col.n_w)
    p2 = g.p * g.p
    d0 = state.d[0]
    kb = tf.reshape(block_kernels(d0, g), [g.k, g.fh * g.fw * g.c, p2])
    gram = tf.einsum("kfm,kfq->kmq", kb, kb)
    dnorm = tf.linalg.diag_part(gram)[:, 0]
    zd = dense_z(state, model)
    xs = layer_inputs(state.s_top, model, state.d, zd)
    v_all = tf.transpose(xs[1], [3, 0, 1, 2])  # K, N, nbh, nbw
    z_k = tf.transpose(state_index(state.z[0]), [3, 0, 1, 2])
    lt_all = state.log_theta[0]
    ge = state.gamma_e[:, None, None, None]
    n = tf.shape(state.resid)[0]
    resid = pad_input(state.resid, g)
    colour_ids, map_orders = scan_orders(model, 0, fold_seed(seed, random.SALTS["scan_order"]))
    members = np.stack([col.member_mask(a, b) for a, b in col.colours()])
    vmask = np.zeros((col.n_h * col.g_h, col.n_w * col.g_w, p2), np.float32)
    vmask[: g.nbh, : g.nbw] = model.position_valid(0)
    vmask = vmask.reshape(col.n_h, col.g_h, col.n_w, col.g_w, p2)
    valids = np.stack([vmask[:, a, :, b] for a, b in col.colours()])

    def one_colour(slot, ci, maps, carry):
        resid, z_k = carry
        a, b = ci // col.g_w, ci % col.g_w
        member = per_colour(members, ci)[None]
        valid = per_colour(valids, ci)[None]
        tiles0 = colour_tiles(resid, g, a, b)
        mtiles = None if mask is None else colour_tiles(pad_input(mask, g), g, a, b)

        def body(i, tiles, z_k):
            k = i if maps is None else maps[i]
            v = col.take(v_all[k], a, b)[..., None]  # N, nh, nw, 1
            zc = col.take(z_k[k], a, b)
            s_old = tf.one_hot(zc, p2 + 1)[..., :p2] * valid * v
            if mtiles is None:
                corr = tiles @ kb[k] + tf.reshape(s_old, [-1, p2]) @ gram[k]
                norms = dnorm[k]
            else:  # R0 = R + mask (the block's current image), norms over observed pixels
                y_old = tf.matmul(tf.reshape(s_old, [-1, p2]), kb[k], transpose_b=True)
                corr = (tiles + mtiles * y_old) @ kb[k]
                norms = tf.reshape(mtiles @ tf.square(kb[k]), [n, col.n_h, col.n_w, p2])
            corr = tf.reshape(corr, [n, col.n_h, col.n_w, p2])
            energy = (v * v * norms - 2.0 * v * corr) * valid
            logits = _block_logits(tf.gather(lt_all, k, axis=1), ge, energy)
            znew = _gumbel_argmax(logits, fold_seed(seed, ci, k))
            s_new = tf.one_hot(znew, p2 + 1)[..., :p2] * valid * v
            step = tf.matmul(tf.reshape(s_new - s_old, [-1, p2]), kb[k], transpose_b=True)
            tiles = tiles - (step if mtiles is None else mtiles * step)
            z_out = tf.where(member, col.put(znew, a, b), z_k[k])
            return i + 1, tiles, tf.tensor_scatter_nd_update(z_k, [[k]], z_out[None])

        _, tiles, z_k = tf.while_loop(lambda i, *_: i < g.k, body,
                                      (tf.constant(0), tiles0, z_k), parallel_iterations=1)
        return resid + tiles_to_residual(tiles - tiles0, g, a, b, n), z_k

    resid, z_k = over_colours(colour_ids, map_orders, one_colour, (resid, z_k), loop=True)
    z = list(state.z)
    z[0] = stored_states(tf.transpose(z_k, [1, 2, 3, 0]))
    return state._replace(z=tuple(z), resid=resid[:, : g.hx, : g.wx, :])
