"""The top layer's spike-slab units of the top-down sampler: ``resample_top`` --
S[L-1] = W . Z[L-1] (eq. SampleS; with the supervised model, the SVM's terms too): each
unit's (z, w) drawn jointly, w integrated out of z's Bernoulli (precision
gamma_e ||F||^2 + gamma_s, F the unit's image in the data plane). Units of one colour
of one map have disjoint footprints (conditionally independent) and are drawn together.
w of an off unit is not drawn here: nothing but gamma_s sees it, and
:func:`dgdm_tf.topdown.conjugate.resample_gamma_s` draws it from its prior when gamma_s
is per image and map (or integrates it out when gamma_s is global).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from dgdm_tf.core import random
from dgdm_tf.core import windows as mw
from dgdm_tf.core.model import DeepModel, down_from
from dgdm_tf.core.ops import full_conv
from dgdm_tf.topdown.scan import over_colours, per_colour, scan_orders
from dgdm_tf.topdown.state import DeepState, dense_z, fold_seed, masked
from dgdm_tf.topdown.window_passes import maps_per_pass, push_windows, tiled_crops, window_starts


def _top_images_generic(state: DeepState, model: DeepModel, zd):
    """f(ci, k) -> (N, H, W, C): the data-plane image of colour ci's units of map k,
    one pass down through every layer per call."""
    gt, col = model.top, model.colourings[-1]
    units = np.stack([col.member_mask(a, b).astype(np.float32) for a, b in col.colours()])

    def f(ci, k):
        n = tf.shape(state.resid)[0]
        unit = tf.broadcast_to(per_colour(units, ci)[None, :, :, None], [n, gt.hs, gt.ws, 1])
        return down_from(full_conv(unit, tf.gather(state.d[-1], [k], axis=3)),
                         model.n_layers - 1, model, state.d, zd)
    return f


def _placement_index(out_h, out_w, dh, dw, offsets) -> np.ndarray:
    """(len(offsets), out_h, out_w) indices into a flattened (dh*dw + 1) atom whose last
    entry is 0: the atom placed with its corner at each offset (outside -> the 0)."""
    idx = np.full((len(offsets), out_h, out_w), dh * dw, np.int32)
    for i, (r, c) in enumerate(offsets):
        if r is None:
            continue
        for a in range(dh):
            for b in range(dw):
                if 0 <= r + a < out_h and 0 <= c + b < out_w:
                    idx[i, r + a, c + b] = a * dw + b
    return idx


def _place(d, idx):
    """Atoms d (dh, dw, C, K) placed by :func:`_placement_index`: (M, out_h, out_w, C, K)."""
    dh, dw, c, k = d.shape
    flat = tf.concat([tf.reshape(d, [dh * dw, c, k]), tf.zeros([1, c, k])], axis=0)
    return tf.gather(flat, idx)


def _frame_segments(model: DeepModel, fh: int, fw: int) -> np.ndarray:
    """(nbh * nbw * fh * fw,) the pixel (row-major in H x W; -1 outside the image) of each
    pixel of each layer-1 block's fh x fw frame, blocks and frame pixels row-major."""
    g0 = model.geoms[0]
    h, w, _ = model.image_shape
    a, b, r, c = np.meshgrid(np.arange(g0.nbh), np.arange(g0.nbw), np.arange(fh), np.arange(fw),
                             indexing="ij")
    pr, pc = a * g0.p + r, b * g0.p + c
    return np.where((pr < h) & (pc < w), pr * w + pc, -1).reshape(-1).astype(np.int32)


def _top_images_two_layer(state: DeepState, model: DeepModel, mask):
    """All unit images of a two-layer model at once, (n_colours * K, N, H, W, C).

    F_n = P_n X: P_n (H W C0 x nbh nbw K0) places D[0]_k0 at the position each block's
    state selects (image-dependent), X (nbh nbw K0 x colours K) holds D[1]_k placed at
    each colour's units. P_n is sparse: block v's atom covers only its frame, the
    (p - 1 + dh) x (p - 1 + dw) pixels its p x p offsets can reach. So each image takes
    one batched product over the blocks, (frame pixels x K0) @ (K0 x units), and one
    segment sum adds the overlapping frames into the image, instead of a dense
    (units x nbh nbw K0) @ (nbh nbw K0 x pixels) product (about 8x the arithmetic at
    MNIST's shapes).
    The images are built one image at a time (two at once: the machine's cores share
    the small products better than one product does); the sum is the same either way.
    """
    g0, gt, col = model.geoms[0], model.top, model.colourings[-1]
    p, p2 = g0.p, g0.p * g0.p
    h, w, c0 = model.image_shape
    fh, fw = p - 1 + g0.dh, p - 1 + g0.dw  # a block's frame: every offset's atom inside
    # frames[m, (fh, fw, C0), k0]: D[0]_k0 at offset m of a block
    frames = _place(state.d[0], _placement_index(fh, fw, g0.dh, g0.dw,
                                                 [(m // p, m % p) for m in range(p2)]))
    frames = tf.reshape(frames, [p2, fh * fw * c0, g0.k])
    segments = _frame_segments(model, fh, fw)
    valid = model.position_valid(0).astype(np.float32)  # edge offsets outside S[0] place nothing
    x_cols = []  # X[v, k0, (ci, k)]: D[1]_k placed at colour ci's units, in the X[1] grid
    for ai, bi in col.colours():
        units = np.argwhere(col.member_mask(ai, bi))
        pl = _place(state.d[1], _placement_index(g0.nbh, g0.nbw, gt.dh, gt.dw,
                                                 [tuple(u) for u in units]))
        x_cols.append(tf.reduce_sum(pl, axis=0))  # nbh, nbw, K0, K
    n_units = len(x_cols) * gt.k
    xt = tf.reshape(tf.stack(x_cols, axis=3), [g0.nbh * g0.nbw, g0.k, n_units])
    onehot = tf.one_hot(state.z[0], p2 + 1)[..., :p2] * valid[:, :, None, :]  # N,nbh,nbw,K0,P2
    onehot = tf.reshape(onehot, [-1, g0.nbh * g0.nbw, g0.k, p2])

    def one(oh):
        placed = tf.einsum("vkm,mqk->vqk", oh, frames)  # V, frame, K0: this image's atoms
        y = tf.reshape(tf.matmul(placed, xt), [-1, c0 * n_units])  # (V, frame pixel), (C0, U)
        out = tf.math.unsorted_segment_sum(y, segments, h * w)  # pixel, (C0, U)
        return tf.transpose(tf.reshape(out, [h * w * c0, n_units]))

    f = tf.map_fn(one, onehot, fn_output_signature=tf.TensorSpec([n_units, h * w * c0]),
                  parallel_iterations=2)  # N, U, H W C
    f = tf.reshape(tf.transpose(f, [1, 0, 2]), [n_units, -1, h, w, c0])
    return masked(f, mask)


def top_unit_images(state: DeepState, model: DeepModel, mask=None, fast: bool = True):
    """f(ci, k) -> (N, H, W, C): the masked data-plane image of colour ci's units of map k
    under the current Z and D. A two-layer model computes them all first in one batched
    product (``fast``); otherwise one pass down per call."""
    if fast and model.n_layers == 2:
        f_all = _top_images_two_layer(state, model, mask)
        return lambda ci, k: f_all[ci * model.top.k + k]
    gen = _top_images_generic(state, model, dense_z(state, model))
    return lambda ci, k: masked(gen(ci, k), mask)


def top_unit_terms(state: DeepState, model: DeepModel, mask=None, fast: bool = True):
    """What a top unit's conditional needs from the data plane, per colour:
    ``colour(slot, ci, maps)`` -> (cache0, ``terms(i, k, resid, cur, cache)`` -> (b, a,
    finish, cache)) for the units of colour ci (an int, or a scalar tensor holding a
    colour of the scan class of colour ``slot``: :func:`scan_orders`) of map k, the i-th
    map the colour visits (``maps``: its visiting order; None: index order), each
    (N, n_h, n_w): b = <F, R0> and a = ||F||^2 (F a unit's image, R0 the residual
    without it, ``cur`` the units' current values), ``finish(val)`` the residual with the
    units at ``val``; ``cache`` carries images across the loop over maps. With ``fast``
    a model of three or more layers pushes each unit down inside its footprint only
    (:mod:`dgdm_tf.core.windows`), the next few maps of the visiting order in one
    batched pass; a two-layer model takes every image from one batched product;
    otherwise one pass down through the whole plane per map."""
    col = model.colourings[-1]
    gt = model.top
    hx, wx, c0 = model.image_shape
    if fast and model.windowed(model.n_layers - 1):
        zd = dense_z(state, model)
        atoms = tf.transpose(state.d[-1], [3, 0, 1, 2])  # K, dh, dw, C: a unit's X[L-1]
        l = model.n_layers - 1
        grids = [model.member_grids(l, a, b) for a, b in col.colours()]

        def colour(slot, ci, maps):
            s_grids, data = grids[slot]  # the shapes of slot's class; ci's offsets below
            idx = np.flatnonzero(col.real(*col.colours()[slot]).ravel())
            s_starts, d_start = window_starts(grids, ci)
            kc = maps_per_pass(model, s_grids, data, 1, len(idx), gt.k)
            # Z below: fixed here
            zw, mwin = tiled_crops(zd, mask, s_grids, data, idx, kc, s_starts, d_start)
            n_img = tf.shape(state.resid)[0]

            def images(i0):  # (kc, N*M, window): the units of the maps visited i0 .. i0 + kc - 1
                ks = tf.minimum(i0 + tf.range(kc), gt.k - 1)
                ks = ks if maps is None else tf.gather(maps, ks)
                x_win = tf.repeat(tf.gather(atoms, ks), n_img * len(idx), axis=0)
                y = push_windows(x_win, zw, model, state.d, l, mwin)
                return tf.reshape(y, [kc, -1, data.size_h, data.size_w, c0])

            def terms(i, k, resid, cur, cache):
                cache = tf.cond(tf.equal(i % kc, 0),
                                lambda: tf.ensure_shape(images(i), cache.shape), lambda: cache)
                f = cache[i % kc]
                r_win = mw.crop(resid, data, idx, d_start)
                r0 = r_win + f * mw.per_member(cur, idx)[:, None, None, None]

                def finish(val):
                    new = r0 - f * mw.per_member(val, idx)[:, None, None, None]
                    return resid + mw.place(new - r_win, data, idx, hx, wx, d_start)
                return (mw.to_grid(tf.reduce_sum(f * r0, axis=[1, 2, 3]), idx, col.n_h, col.n_w),
                        mw.to_grid(tf.reduce_sum(f * f, axis=[1, 2, 3]), idx, col.n_h, col.n_w),
                        finish, cache)
            return tf.zeros([kc, n_img * len(idx), data.size_h, data.size_w, c0]), terms
        return colour

    images = top_unit_images(state, model, mask, fast)

    def colour(slot, ci, maps):
        a, b = ci // col.g_w, ci % col.g_w

        def terms(i, k, resid, cur, cache):
            f = images(ci, k)
            r0 = resid + f * col.tile_broadcast(cur, a, b)
            return (col.tile_sum(f * r0, a, b), col.tile_sum(f * f, a, b),
                    lambda val: r0 - f * col.tile_broadcast(val, a, b), cache)
        return tf.zeros([0]), terms
    return colour


def resample_top(state: DeepState, x, model: DeepModel, seed, mask=None,
                 return_expected: bool = False, fast: bool = True, svm_terms=None):
    """(z, w) of every top unit; w integrated out of z (eq. SampleS, no SVM term).

    For unit u with data-plane image F (through the current Z and D) and residual R0 that
    excludes the unit, b = <F, R0>, P = gamma_e ||F||^2 + gamma_s (the unit's image and map's):
        logit p(z = 1) = log(pi / (1 - pi)) + 1/2 log(gamma_s / P) + (gamma_e b)^2 / (2 P)
        w | z = 1 ~ N(gamma_e b / P, 1 / P)
    With ``return_expected`` also E[s_u | rest] = p(z = 1) E[w | z = 1] per unit, taken
    when the unit is drawn (Rao-Blackwellised features; the chain is unchanged).
    The units' images do not depend on the top layer, so a two-layer model computes them
    all first in one batched product (``fast``); otherwise one pass down per step.
    Colours and maps in the model's scan order (:func:`scan_orders`); the draws of
    (colour, map) are seeded by both, whatever the order.

    ``svm_terms`` (:func:`dgdm_tf.supervised.joint_svm.unit_terms`; supervised model) adds the SVM's
    augmented likelihood (eq. SampleS with the SVM terms): with margin a without the unit
    and coefficient c_l of the unit in class l's margin,
        P += sum_l gamma c_l^2 / lambda_l,   P mu += sum_l gamma c_l (y_l (1 + lambda_l) - a_l) / lambda_l.
    The margins couple all units of an image, so this needs one unit per colour.
    """
    gt, col = model.top, model.colourings[-1]
    if model.scan == "matched":
        return _resample_top_matched(state, x, model, seed, mask, return_expected, fast,
                                     svm_terms)
    colour_terms = top_unit_terms(state, model, mask, fast)
    ge = state.gamma_e[:, None, None]
    gs = state.gamma_s
    s_k = tf.transpose(state.s_top, [3, 0, 1, 2])  # K, N, hs, ws
    on_k = tf.transpose(state.on, [3, 0, 1, 2])
    e_k = tf.zeros_like(s_k)
    log_odds = state.log_pi[..., 0] - state.log_pi[..., 1]  # N, K
    resid = state.resid
    supervised = svm_terms is not None
    if supervised:
        if col.n_h * col.n_w != 1:
            raise ValueError("the SVM couples every top unit of an image: build the model "
                             "with DeepModel(..., supervised=True) (one unit per colour)")
        coef = svm_terms["coef"]  # C, hs, ws, K
        marg = svm_terms["offset"][None] + tf.einsum("nhwk,chwk->nc", state.s_top, coef)
        tgt, wgt = svm_terms["target"], svm_terms["weight"]  # N, C
    else:
        marg = tf.zeros([tf.shape(resid)[0], 1])
    colour_ids, map_orders = scan_orders(model, model.n_layers - 1, fold_seed(seed, random.SALTS["scan_order"]))
    members = np.stack([col.member_mask(a, b) for a, b in col.colours()])
    reals = np.stack([col.real(a, b) for a, b in col.colours()])

    def one_colour(slot, ci, maps, carry):
        resid, s_k, on_k, e_k, marg = carry
        a, b = ci // col.g_w, ci % col.g_w
        member = per_colour(members, ci)[None]
        real = per_colour(reals, ci)[None]
        cache0, terms = colour_terms(slot, ci, maps)

        def body(i, resid, s_k, on_k, e_k, marg, cache):
            k = i if maps is None else maps[i]
            cur = col.take(s_k[k], a, b)
            bsum, asum, finish, cache = terms(i, k, resid, cur, cache)
            gs_k = tf.gather(gs, k, axis=1)[:, None, None]
            prec = ge * asum + gs_k
            lin = ge * bsum
            if supervised:  # one unit per image: (N, 1, 1)
                cu = coef[:, a, b, k][None]  # 1, C
                rest = marg - cur[:, :, 0] * cu  # N, C: margins without the unit
                prec = prec + tf.reduce_sum(wgt * cu * cu, axis=1)[:, None, None]
                lin = lin + tf.reduce_sum(wgt * cu * (tgt - rest), axis=1)[:, None, None]
            mu = lin / prec
            logit = log_odds[:, k][:, None, None] + 0.5 * tf.math.log(gs_k / prec) + 0.5 * prec * mu * mu
            s1, s2 = tf.unstack(tf.random.experimental.stateless_split(fold_seed(seed, ci, k), 2))
            u = tf.random.stateless_uniform(tf.shape(logit), s1)
            on_new = tf.cast((u < tf.sigmoid(logit)) & real, tf.float32)
            w = mu + tf.random.stateless_normal(tf.shape(mu), s2) / tf.sqrt(prec)
            val = on_new * w
            resid = finish(val)
            s_new = tf.where(member, col.put(val, a, b), s_k[k])
            o_new = tf.where(member, col.put(on_new, a, b), on_k[k])
            ex = tf.where(real, tf.sigmoid(logit) * mu, 0.0)
            e_new = tf.where(member, col.put(ex, a, b), e_k[k])
            if supervised:
                marg = rest + val[:, :, 0] * cu
            idx = [[k]]
            return (i + 1, resid, tf.tensor_scatter_nd_update(s_k, idx, s_new[None]),
                    tf.tensor_scatter_nd_update(on_k, idx, o_new[None]),
                    tf.tensor_scatter_nd_update(e_k, idx, e_new[None]), marg, cache)

        _, resid, s_k, on_k, e_k, marg, _ = tf.while_loop(
            lambda i, *_: i < gt.k, body, (tf.constant(0), resid, s_k, on_k, e_k, marg, cache0),
            parallel_iterations=1)
        return resid, s_k, on_k, e_k, marg

    resid, s_k, on_k, e_k, marg = over_colours(
        colour_ids, map_orders, one_colour, (resid, s_k, on_k, e_k, marg),
        loop=not (fast and model.windowed(model.n_layers - 1)))
    state = state._replace(s_top=tf.transpose(s_k, [1, 2, 3, 0]),
                           on=tf.transpose(on_k, [1, 2, 3, 0]), resid=resid)
    if return_expected:
        return state, tf.transpose(e_k, [1, 2, 3, 0])
    return state


def matched_order(f_units, x, mask=None):
    """(U, N) int: each image's top units by decreasing matched-filter response
    |<F_u, X>| / ||F_u|| (F_u the unit's masked data-plane image under the current Z and
    D, ``f_units`` (U, N, H, W, C)). A function of the data and of variables the top
    units' step does not update, so visiting the units in this order is an exact scan."""
    xm = masked(x, mask)
    score = tf.abs(tf.einsum("unhwc,nhwc->un", f_units, xm)) / tf.sqrt(
        tf.reduce_sum(tf.square(f_units), axis=[2, 3, 4]) + 1e-30)
    return tf.argsort(score, axis=0, direction="DESCENDING", stable=True)


def _resample_top_matched(state: DeepState, x, model: DeepModel, seed, mask=None,
                          return_expected: bool = False, fast: bool = True, svm_terms=None):
    """:func:`resample_top` with ``model.scan == "matched"``: every image visits its top
    units one at a time in its own order, the :func:`matched_order` of its image. The
    conditional of each unit is eq. SampleS as in :func:`resample_top`; only the order
    differs, and it depends on X, Z and D, none of which this step updates, so the step
    leaves the posterior invariant. The t-th unit an image visits takes the t-th of the
    step's uniforms and normals (fresh draws whatever the unit), so relabelling the maps
    relabels the draws and nothing else: the features of maps listed in another order
    are the same features, relabelled (``tests/test_topdown_matched_scan.py``). Needs one
    unit per colour and image (every top unit overlaps every other, as at MNIST's 2 x 2
    top layer)."""
    gt, col = model.top, model.colourings[-1]
    if col.n_h * col.n_w != 1:
        raise ValueError("scan 'matched' visits each image's top units one at a time: it needs "
                         f"a top layer whose units all overlap (one per colour), not {col.n_h} x "
                         f"{col.n_w} per colour; use scan 'fixed' or 'random'")
    if svm_terms is not None:
        raise ValueError("scan 'matched' is not implemented for the supervised model's "
                         "training chain; use scan 'fixed' or 'random'")
    n_col = col.g_h * col.g_w
    n_units = n_col * gt.k
    if fast and model.n_layers == 2:
        f_all = _top_images_two_layer(state, model, mask)
    else:
        images = top_unit_images(state, model, mask, fast)
        f_all = tf.stack([images(ci, k) for ci in range(n_col) for k in range(gt.k)])
    n = tf.shape(state.resid)[0]
    f_flat = tf.reshape(f_all, [n_units, n, -1])  # unit ci K + k: colour ci's unit of map k
    order = matched_order(f_all, x, mask)
    # s_top (N, hs, ws, K) row-major is unit order: colour ci = a g_w + b holds position (a, b)
    s_u = tf.reshape(state.s_top, [n, n_units])
    on_u = tf.reshape(state.on, [n, n_units])
    e_u = tf.zeros_like(s_u)
    ge = state.gamma_e
    gs_u = tf.tile(state.gamma_s, [1, n_col])  # N, U
    log_odds = tf.tile(state.log_pi[..., 0] - state.log_pi[..., 1], [1, n_col])  # N, U
    s1, s2 = tf.unstack(tf.random.experimental.stateless_split(fold_seed(seed, "matched"), 2))
    u_all = tf.random.stateless_uniform([n_units, n], s1)  # step t's draws: row t
    g_all = tf.random.stateless_normal([n_units, n], s2)
    rows = tf.range(n)
    resid = tf.reshape(state.resid, [n, -1])

    def body(t, resid, s_u, on_u, e_u):
        u = order[t]  # N: each image's unit at this step
        at = tf.stack([rows, u], axis=1)
        f = tf.gather_nd(f_flat, tf.stack([u, rows], axis=1))  # N, pixels
        cur = tf.gather_nd(s_u, at)
        r0 = resid + f * cur[:, None]
        gs = tf.gather_nd(gs_u, at)
        prec = ge * tf.reduce_sum(f * f, axis=1) + gs
        mu = ge * tf.reduce_sum(f * r0, axis=1) / prec
        logit = tf.gather_nd(log_odds, at) + 0.5 * tf.math.log(gs / prec) + 0.5 * prec * mu * mu
        on_new = tf.cast(u_all[t] < tf.sigmoid(logit), tf.float32)
        val = on_new * (mu + g_all[t] / tf.sqrt(prec))
        return (t + 1, r0 - f * val[:, None], tf.tensor_scatter_nd_update(s_u, at, val),
                tf.tensor_scatter_nd_update(on_u, at, on_new),
                tf.tensor_scatter_nd_update(e_u, at, tf.sigmoid(logit) * mu))

    _, resid, s_u, on_u, e_u = tf.while_loop(
        lambda t, *_: t < n_units, body, (tf.constant(0), resid, s_u, on_u, e_u),
        parallel_iterations=1)
    shape = tf.shape(state.s_top)
    state = state._replace(s_top=tf.reshape(s_u, shape), on=tf.reshape(on_u, shape),
                           resid=tf.reshape(resid, tf.shape(state.resid)))
    if return_expected:
        return state, tf.reshape(e_u, shape)
    return state
