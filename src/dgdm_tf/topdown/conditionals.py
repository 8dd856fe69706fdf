"""Gibbs conditionals of the L-layer top-down model (supplement, "Full Conditional
Posterior Distribution"), one pure ``resample_<var>(state, x, model, ..., seed)`` each.

The model is :mod:`dgdm_tf.core.model`. Every step leaves the joint posterior invariant
(exact by default):

* ``resample_top`` -- S[L-1] = W . Z[L-1] (eq. SampleS without the SVM term): each
  unit's (z, w) drawn jointly, w integrated out of z's Bernoulli (precision
  gamma_e ||F||^2 + gamma_s, F the unit's image in the data plane). Units of one colour
  of one map have disjoint footprints (conditionally independent) and are drawn together.
* ``resample_z`` -- the unpooling blocks of layer l < L-1 (eq. SampleZ): a block's value
  is fixed by the layers above; its p*p + 1 states are scored by the data fit of that
  value placed at each position, pushed down to the data plane. Colour by colour, map
  after map. Layer 0 has a fast path (correlations on footprint tiles, as pretraining,
  masked pixels included); the layers above push each candidate down inside its
  block's footprint window only, several maps' candidates in one batched pass
  (:mod:`dgdm_tf.core.windows`); the generic path (``fast=False``) pushes one
  candidate position of a whole colour through the whole plane per pass. All give the
  same draws from the same seed (tested).
* ``resample_d`` -- D[0]: jointly per map from its exact Gaussian (reuses
  :func:`dgdm_tf.pretrain.kernel.resample_d`, Fourier domain). D[l], l >= 1: its conditional is
  Gaussian too but its precision couples every entry through the per-image unpooling
  below, so a joint draw would need an N-image Gram of dh*dw*K_{l-1} columns per map.
  It is updated by Hamiltonian Monte Carlo with a Metropolis correction (exact: the
  conditional is left invariant), with a diagonal mass matrix estimated from the
  conditional's own Hessian (Hutchinson probes; it does not depend on D[l], so the
  kernel stays valid at every sweep). The step size adapts during burn-in only.
* ``resample_theta`` (Dir), ``resample_pi`` (Beta(1/K, 1-1/K) spike probability per
  image and top map), ``resample_gamma_s``, ``resample_gamma_e`` (Gamma).

Scan order (``DeepModel.scan``, :func:`scan_orders`): by default each sweep visits a
layer's colours, and within each colour its maps, in an order drawn from the sweep's
seed (fixed orders: colours row-major, maps in index order). At the noise precision the
models settle at, the block visited first takes whatever residual it sees and no later
single-block update moves that explanation to a neighbour, so with a fixed order the
features follow the scan, not the image (docs/design.md, "Mixing"). An order drawn
independently of the state makes the sweep a mixture of exact sweeps; the draws of a
(colour, map) step keep their seeds whatever the order, so ``scan="fixed"`` repeats the
sampler's earlier draws bit for bit. The windowed paths permute a layer's colours
within classes of equal window shapes only (:meth:`DeepModel.scan_classes`).

Choices where the paper is loose (as in pretraining): gamma_s is one precision for the
top layer (a per-(n, k) precision is unidentified under Gamma(1e-6, 1e-6) once a map is
off in an image); w of an off unit is integrated out (partially collapsed Gibbs), so
gamma_s counts active units only. Missing data: ``mask`` (N, H, W, C) 1 = observed; the
likelihood, and so every conditional, sees the observed pixels only.
"""

from __future__ import annotations

import collections
from typing import Sequence

import numpy as np
import tensorflow as tf

from dgdm_tf.supervised import joint_svm as deep_svm

from dgdm_tf.pretrain import kernel as pretrain
from dgdm_tf.core import windows as mw
from dgdm_tf.core.compiled import compiled
from dgdm_tf.core.model import (
    DeepModel,
    dense_indicators,
    down_from,
    layer_inputs,
    unpool_blocks,
)
from dgdm_tf.core.ops import full_conv, full_conv_adjoint

DeepState = collections.namedtuple(
    "DeepState", ["d", "z", "log_theta", "s_top", "on", "log_pi", "gamma_s", "gamma_e",
                  "resid", "hmc_log_step", "seed"])


def fold_seed(seed, *salts):
    """``seed`` folded with each salt in turn (stateless: the same salts, the same seed)."""
    for s in salts:
        seed = tf.random.experimental.stateless_fold_in(seed, s)
    return seed


def _gumbel_argmax(logits, seed):
    u = tf.random.stateless_uniform(tf.shape(logits), seed, minval=1e-20, maxval=1.0)
    return tf.argmax(logits - tf.math.log(-tf.math.log(u)), axis=-1, output_type=tf.int32)


def masked(y, mask):
    """``y`` on the observed pixels only (``mask`` 1 = observed; ``None``: all observed)."""
    return y if mask is None else y * mask


def dense_z(state: DeepState, model: DeepModel):
    """Every lower layer's unpooling indicators as dense one-hot maps."""
    return [dense_indicators(z, g) for z, g in zip(state.z, model.geoms[:-1])]


# ---------------------------------------------------------------------------------------
# Scan order
# ---------------------------------------------------------------------------------------

_SCAN_SALT = 0x5CA9  # the scan order's stream, apart from the draws' (fold-in salt)


def scan_orders(model: DeepModel, l: int, seed):
    """One sweep's visiting order of layer l's colours (the top units' when l = L-1):
    (colour id per slot, map order per slot or None); colour (a, b) has id a G_w + b.

    ``model.scan == "fixed"``: ids 0, 1, ... (row-major, Python ints) and None (maps in
    index order). "random": the ids as scalar tensors, a permutation of the colours
    within each of :meth:`DeepModel.scan_classes` (slot s holds a colour of colour s's
    class; one class, so a uniform permutation, on every path but the windowed ones),
    and an (n_colours, K) tensor, slot s's maps in a uniformly drawn order. Stateless: the
    same seed gives the same order. Every path of a layer draws the same order."""
    col = model.colourings[l]
    n_col = col.g_h * col.g_w
    if model.scan == "fixed":
        return list(range(n_col)), None
    classes = model.scan_classes(l)
    s_col, s_map = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    perm = tf.argsort(tf.random.stateless_uniform([n_col], s_col))
    # the colours grouped by class, each class in its random order, then into its slots
    grouped = tf.gather(perm, tf.argsort(tf.gather(tf.constant(classes), perm), stable=True))
    ids = tf.gather(grouped, np.argsort(np.argsort(classes, kind="stable")))
    maps = tf.argsort(tf.random.stateless_uniform([n_col, model.geoms[l].k], s_map), axis=-1)
    return tf.unstack(ids), maps


def _per_colour(values: np.ndarray, ci):
    """values[ci] (values: one row per colour) as a tensor; ci an int or a scalar tensor."""
    if isinstance(ci, int):
        return tf.constant(values[ci])
    return tf.gather(tf.constant(values), ci)


def _window_starts(grids: list, ci):
    """Where colour ci's member windows start on each plane below ({j: (row, col)} on
    S[j], (row, col) on the data plane), picked at run time; None for an int ci (the
    static grids are its own). ``grids``: :meth:`DeepModel.member_grids` per colour. A
    colour's first member is a real block, so its windows start inside every plane (as
    :func:`dgdm_tf.core.windows.crop` needs of a run-time start)."""
    if isinstance(ci, int):
        return None, None

    def pick(gs):
        return tf.unstack(_per_colour(np.array([[g.start_h, g.start_w] for g in gs], np.int32), ci))
    return ({j: pick([sg[j] for sg, _ in grids]) for j in grids[0][0]},
            pick([data for _, data in grids]))


def reconstruct(state: DeepState, model: DeepModel) -> tf.Tensor:
    """g(S[L-1]): the noiseless image of the current state (N, H, W, C)."""
    return layer_inputs(state.s_top, model, state.d, dense_z(state, model))[0]


def residual(state: DeepState, x, model: DeepModel, mask=None) -> tf.Tensor:
    return masked(x - reconstruct(state, model), mask)


# ---------------------------------------------------------------------------------------
# Initialisation
# ---------------------------------------------------------------------------------------

def init_state(x, model: DeepModel, dictionaries: Sequence, seed, *, gamma_e_init=None,
               gamma_s_init: float = 1.0, mask=None) -> DeepState:
    """Start of a chain from given dictionaries (pretrained, or drawn from the prior).

    The paper leaves the start open; this sets where the chain starts, not its target:
    each block of layer l < L-1 takes the position of its largest |correlation| with the
    layer input, bottom up (X[l+1] = the correlations there over ||D_k||^2, a matched
    filter); the top layer starts off, theta and pi at their prior means, gamma_s at
    ``gamma_s_init`` and gamma_e at ``gamma_e_init`` (or 1 / Var(X_n)). Missing pixels
    (``mask``) enter the start as zeros. The first sweep draws the top layer first, so
    it sees these positions.
    """
    x = tf.convert_to_tensor(x, tf.float32)
    n = x.shape[0]
    d = tuple(tf.cast(tf.convert_to_tensor(v), tf.float32) for v in dictionaries)
    for l, (dl, g) in enumerate(zip(d, model.geoms)):
        if tuple(dl.shape) != (g.dh, g.dw, g.c, g.k):
            raise ValueError(f"dictionary of layer {l + 1} has shape {tuple(dl.shape)}, the "
                             f"model expects {(g.dh, g.dw, g.c, g.k)}")
    h = masked(x, mask)
    z, log_theta = [], []
    for l, g in enumerate(model.geoms[:-1]):
        c = full_conv_adjoint(h, d[l])  # N, hs, ws, K
        c = tf.pad(c, [[0, 0], [0, g.nbh * g.p - g.hs], [0, g.nbw * g.p - g.ws], [0, 0]])
        c = tf.reshape(c, [n, g.nbh, g.p, g.nbw, g.p, g.k])
        c = tf.reshape(tf.transpose(c, [0, 1, 3, 5, 2, 4]), [n, g.nbh, g.nbw, g.k, g.p * g.p])
        c = tf.where(tf.constant(model.position_valid(l))[:, :, None, :], c, 0.0)
        pos = tf.argmax(tf.abs(c), axis=-1, output_type=tf.int32)
        z.append(pos)
        norm = tf.reduce_sum(tf.square(d[l]), axis=[0, 1, 2])
        h = tf.gather(c, pos, axis=-1, batch_dims=4) / norm
        log_theta.append(tf.broadcast_to(tf.math.log(model.alpha[l] / tf.reduce_sum(model.alpha[l])),
                                         [n, g.k, g.n_states]))
    gt = model.top
    s_top = tf.zeros([n, gt.hs, gt.ws, gt.k])
    on = tf.zeros_like(s_top)
    log_pi = tf.broadcast_to(tf.math.log(model.pi_prior), [n, gt.k, 2])
    if gamma_e_init is None:
        var = tf.math.reduce_variance(tf.reshape(x, [n, -1]), axis=1)
        gamma_e = 1.0 / tf.maximum(var, 1e-6)
    else:
        gamma_e = tf.fill([n], tf.constant(float(gamma_e_init), tf.float32))
    st = DeepState(d=d, z=tuple(z), log_theta=tuple(log_theta), s_top=s_top, on=on,
                   log_pi=log_pi, gamma_s=tf.constant(float(gamma_s_init), tf.float32),
                   gamma_e=gamma_e, resid=tf.zeros_like(x),
                   hmc_log_step=tf.zeros([model.n_layers]),
                   seed=tf.convert_to_tensor(seed, tf.int32))
    return st._replace(resid=residual(st, x, model, mask))


# ---------------------------------------------------------------------------------------
# Top layer: spike-slab units
# ---------------------------------------------------------------------------------------

def _top_images_generic(state: DeepState, model: DeepModel, zd):
    """f(ci, k) -> (N, H, W, C): the data-plane image of colour ci's units of map k,
    one pass down through every layer per call."""
    gt, col = model.top, model.colourings[-1]
    units = np.stack([col.member_mask(a, b).astype(np.float32) for a, b in col.colours()])

    def f(ci, k):
        n = tf.shape(state.resid)[0]
        unit = tf.broadcast_to(_per_colour(units, ci)[None, :, :, None], [n, gt.hs, gt.ws, 1])
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


def _top_images_two_layer(state: DeepState, model: DeepModel, mask):
    """All unit images of a two-layer model at once, (n_colours * K, N, H, W, C).

    F_n = P_n X: P_n (H W C0 x nbh nbw K0) places D[0]_k0 at the position each block's
    state selects (image-dependent), X (nbh nbw K0 x colours K) holds D[1]_k placed at
    each colour's units. P_n is sparse: block v's atom covers only its frame of
    (p + dh - 1)^2 pixels, nd x nd cells of p x p pixels. So each image takes one batched
    product over the blocks, (frame cells x K0) @ (K0 x units), and the frames are added
    into the cell grid at each block's place (nd^2 shifted adds), instead of a dense
    (units x nbh nbw K0) @ (nbh nbw K0 x pixels) product (about 5x the arithmetic).
    """
    g0, gt, col = model.geoms[0], model.top, model.colourings[-1]
    p, p2 = g0.p, g0.p * g0.p
    h, w, c0 = model.image_shape
    nd_h, nd_w = -(-(p + g0.dh - 1) // p), -(-(p + g0.dw - 1) // p)  # cells a frame spans
    cell = p * p * c0
    # frames[m, (dh', dw', cell), k0]: D[0]_k0 at offset m of a block, cell by cell
    frames = _place(state.d[0], _placement_index(nd_h * p, nd_w * p, g0.dh, g0.dw,
                                                 [(m // p, m % p) for m in range(p2)]))
    frames = tf.reshape(frames, [p2, nd_h, p, nd_w, p, c0, g0.k])
    frames = tf.reshape(tf.transpose(frames, [0, 1, 3, 2, 4, 5, 6]),
                        [p2, nd_h * nd_w * cell, g0.k])
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
    ch, cw = g0.nbh + nd_h - 1, g0.nbw + nd_w - 1

    def one(oh):
        placed = tf.einsum("vkm,mqk->vqk", oh, frames)  # V, frame, K0: this image's atoms
        y = tf.reshape(tf.matmul(placed, xt), [g0.nbh, g0.nbw, nd_h, nd_w, cell, n_units])
        out = tf.add_n([tf.pad(y[:, :, i, j], [[i, nd_h - 1 - i], [j, nd_w - 1 - j], [0, 0], [0, 0]])
                        for i in range(nd_h) for j in range(nd_w)])  # ch, cw, cell, U
        out = tf.transpose(tf.reshape(out, [ch, cw, p, p, c0, n_units]), [5, 0, 2, 1, 3, 4])
        return tf.reshape(out, [n_units, ch * p, cw * p, c0])[:, :h, :w]

    f = tf.map_fn(one, onehot, fn_output_signature=tf.TensorSpec([n_units, h, w, c0]),
                  parallel_iterations=1)  # N, U, H, W, C
    return masked(tf.transpose(f, [1, 0, 2, 3, 4]), mask)


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
            s_starts, d_start = _window_starts(grids, ci)
            kc = _maps_per_pass(model, s_grids, data, 1, len(idx), gt.k)
            # Z below: fixed here
            zw, mwin = _tiled_crops(zd, mask, s_grids, data, idx, kc, s_starts, d_start)
            n_img = tf.shape(state.resid)[0]

            def images(i0):  # (kc, N*M, window): the units of the maps visited i0 .. i0 + kc - 1
                ks = tf.minimum(i0 + tf.range(kc), gt.k - 1)
                ks = ks if maps is None else tf.gather(maps, ks)
                x_win = tf.repeat(tf.gather(atoms, ks), n_img * len(idx), axis=0)
                y = _push_windows(x_win, zw, model, state.d, l, mwin)
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
    excludes the unit, b = <F, R0>, P = gamma_e ||F||^2 + gamma_s:
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
    colour_ids, map_orders = scan_orders(model, model.n_layers - 1, fold_seed(seed, _SCAN_SALT))
    members = np.stack([col.member_mask(a, b) for a, b in col.colours()])
    reals = np.stack([col.real(a, b) for a, b in col.colours()])
    for slot, ci in enumerate(colour_ids):
        a, b = ci // col.g_w, ci % col.g_w
        member = _per_colour(members, ci)[None]
        real = _per_colour(reals, ci)[None]
        maps = None if map_orders is None else map_orders[slot]
        cache0, terms = colour_terms(slot, ci, maps)

        def body(i, resid, s_k, on_k, e_k, marg, cache, a=a, b=b, member=member, real=real,
                 terms=terms, ci=ci, maps=maps):
            k = i if maps is None else maps[i]
            cur = col.take(s_k[k], a, b)
            bsum, asum, finish, cache = terms(i, k, resid, cur, cache)
            prec = ge * asum + gs
            lin = ge * bsum
            if supervised:  # one unit per image: (N, 1, 1)
                cu = coef[:, a, b, k][None]  # 1, C
                rest = marg - cur[:, :, 0] * cu  # N, C: margins without the unit
                prec = prec + tf.reduce_sum(wgt * cu * cu, axis=1)[:, None, None]
                lin = lin + tf.reduce_sum(wgt * cu * (tgt - rest), axis=1)[:, None, None]
            mu = lin / prec
            logit = log_odds[:, k][:, None, None] + 0.5 * tf.math.log(gs / prec) + 0.5 * prec * mu * mu
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
    state = state._replace(s_top=tf.transpose(s_k, [1, 2, 3, 0]),
                           on=tf.transpose(on_k, [1, 2, 3, 0]), resid=resid)
    if return_expected:
        return state, tf.transpose(e_k, [1, 2, 3, 0])
    return state


# ---------------------------------------------------------------------------------------
# Unpooling blocks of layer l < L-1
# ---------------------------------------------------------------------------------------

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
    z_k = tf.transpose(state.z[l], [3, 0, 1, 2])
    lt_all = state.log_theta[l]  # N, K, S
    ge = state.gamma_e[:, None, None, None]
    resid = state.resid
    colour_ids, map_orders = scan_orders(model, l, fold_seed(seed, _SCAN_SALT))
    offsets = np.stack([[model.offset_mask(l, a, b, m) for m in range(p2)] for a, b in col.colours()])
    members = np.stack([col.member_mask(a, b) for a, b in col.colours()])
    for slot, ci in enumerate(colour_ids):
        a, b = ci // col.g_w, ci % col.g_w
        offs_c = _per_colour(offsets, ci)
        offs = [offs_c[m][None, :, :, None] for m in range(p2)]
        member = _per_colour(members, ci)[None]
        maps = None if map_orders is None else map_orders[slot]

        def body(i, resid, z_k, a=a, b=b, ci=ci, offs=offs, member=member, maps=maps):
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
    z = list(state.z)
    z[l] = tf.transpose(z_k, [1, 2, 3, 0])
    return state._replace(z=tuple(z), resid=resid)


WINDOW_FLOATS_PER_IMAGE = 1 << 20
"""Memory of the windowed passes: the candidate images of as many maps as fit in this
many floats per image (4 MB) are pushed down in one batched pass; the sequential,
residual-dependent part then runs map after map. The draws do not depend on it.
Measured at the CIFAR shapes, batch 4, 2-core CPU (docs/scaling.md): one map per pass
4.46 s per MCEM iteration and 1.28 GB at peak, 4 MB 4.19 s and 1.64 GB, 16 MB 4.30 s
and 2.76 GB (the convolutions' workspaces grow with the batch)."""


def _maps_per_pass(model: DeepModel, s_grids: dict, data, cands: int, members: int, k: int) -> int:
    areas = [gr.size_h * gr.size_w * model.geoms[j].k for j, gr in s_grids.items()]
    areas.append(data.size_h * data.size_w * model.image_shape[2])
    return int(max(1, min(k, WINDOW_FLOATS_PER_IMAGE // max(1, cands * members * max(areas)))))


def _placed_atoms(d, p: int) -> tf.Tensor:
    """(p*p, K, p + dh - 1, p + dw - 1, C): atom k of ``d`` placed at each offset of a
    p x p block -- a candidate's image in X[l] (the full convolution of a one-hot)."""
    out = [tf.pad(d, [[m // p, p - 1 - m // p], [m % p, p - 1 - m % p], [0, 0], [0, 0]])
           for m in range(p * p)]
    return tf.transpose(tf.stack(out), [0, 4, 1, 2, 3])


def _push_windows(x_win, zw: dict, model: DeepModel, d, l: int, mwin=None):
    """Windows of X[l] (B, h, w, K_{l-1}) pushed down to the data plane through the
    cropped unpooling ``zw[j]`` and D[j], j = l-1 .. 0 (``zw`` and ``mwin`` already
    tiled to B: they are fixed while a layer is drawn, so callers tile them once)."""
    for j in range(l - 1, -1, -1):
        x_win = full_conv(unpool_blocks(x_win, zw[j], model.geoms[j].p), d[j])
    return masked(x_win, mwin)


def _tiled_crops(zd, mask, s_grids: dict, data, real, reps: int, s_starts=None, d_start=None):
    """The unpooling below a colour's members and the mask, cropped to their windows and
    tiled ``reps`` times (one copy per candidate of a batched pass); ``s_starts``,
    ``d_start``: :func:`_window_starts` of a colour picked at run time."""
    zw = {j: tf.tile(mw.crop(zd[j], s_grids[j], real, None if s_starts is None else s_starts[j]),
                     [reps, 1, 1, 1]) for j in s_grids}
    mwin = None if mask is None else tf.tile(mw.crop(mask, data, real, d_start), [reps, 1, 1, 1])
    return zw, mwin


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
    z_k = tf.transpose(state.z[l], [3, 0, 1, 2])
    lt_all = state.log_theta[l]
    ge = state.gamma_e[:, None, None, None]
    valid_np = np.zeros((col.n_h * col.g_h, col.n_w * col.g_w, p2), np.float32)
    valid_np[: g.nbh, : g.nbw] = model.position_valid(l)
    placed = _placed_atoms(state.d[l], g.p)  # p2, K, wh, ww, C
    resid = state.resid
    colour_ids, map_orders = scan_orders(model, l, fold_seed(seed, _SCAN_SALT))
    grids = [model.member_grids(l, a, b) for a, b in col.colours()]
    members = np.stack([col.member_mask(a, b) for a, b in col.colours()])
    valid_grid = valid_np.reshape(col.n_h, col.g_h, col.n_w, col.g_w, p2)
    valids = np.stack([valid_grid[:, a, :, b].reshape(-1, p2) for a, b in col.colours()])
    for slot, ci in enumerate(colour_ids):
        a, b = ci // col.g_w, ci % col.g_w
        s_grids, data = grids[slot]  # the shapes of slot's class; ci's offsets below
        s_starts, d_start = _window_starts(grids, ci)
        real = np.flatnonzero(col.real(*col.colours()[slot]).ravel())
        m_count = len(real)
        kc = _maps_per_pass(model, s_grids, data, p2, m_count, g.k)
        member = _per_colour(members, ci)[None]
        valid = tf.transpose(tf.gather(_per_colour(valids, ci), real))
        valid = valid[None, :, None, :, None, None, None]
        maps = None if map_orders is None else map_orders[slot]
        # Z below layer l does not change while layer l is drawn: crop it once per colour
        zw, mwin = _tiled_crops(zd, mask, s_grids, data, real, kc * p2, s_starts, d_start)

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
            y = _push_windows(tf.reshape(x_win, [-1, wh, ww, cl]), zw, model, state.d, l, mwin)
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
    z[l] = tf.transpose(z_k, [1, 2, 3, 0])
    return state._replace(z=tuple(z), resid=resid)


def _resample_z_bottom(state: DeepState, model: DeepModel, seed, mask=None) -> DeepState:
    """Layer-0 blocks by correlations on footprint tiles (the pretraining kernel with the
    block's value fixed): energy_m = v^2 ||D_k||^2 - 2 v <R0, D_k at m>. With a mask the
    norms and correlations are taken over the observed pixels of each tile."""
    g, col = model.geoms[0], model.colourings[0]
    assert (g.gh, g.gw, g.nch, g.ncw) == (col.g_h, col.g_w, col.n_h, col.n_w)
    p2 = g.p * g.p
    d0 = state.d[0]
    kb = tf.reshape(pretrain.block_kernels(d0, g), [g.k, g.fh * g.fw * g.c, p2])
    gram = tf.einsum("kfm,kfq->kmq", kb, kb)
    dnorm = tf.linalg.diag_part(gram)[:, 0]
    zd = dense_z(state, model)
    xs = layer_inputs(state.s_top, model, state.d, zd)
    v_all = tf.transpose(xs[1], [3, 0, 1, 2])  # K, N, nbh, nbw
    z_k = tf.transpose(state.z[0], [3, 0, 1, 2])
    lt_all = state.log_theta[0]
    ge = state.gamma_e[:, None, None, None]
    n = tf.shape(state.resid)[0]
    resid = pretrain.pad_input(state.resid, g)
    colour_ids, map_orders = scan_orders(model, 0, fold_seed(seed, _SCAN_SALT))
    members = np.stack([col.member_mask(a, b) for a, b in col.colours()])
    vmask = np.zeros((col.n_h * col.g_h, col.n_w * col.g_w, p2), np.float32)
    vmask[: g.nbh, : g.nbw] = model.position_valid(0)
    vmask = vmask.reshape(col.n_h, col.g_h, col.n_w, col.g_w, p2)
    valids = np.stack([vmask[:, a, :, b] for a, b in col.colours()])
    for slot, ci in enumerate(colour_ids):
        a, b = ci // col.g_w, ci % col.g_w
        member = _per_colour(members, ci)[None]
        valid = _per_colour(valids, ci)[None]
        maps = None if map_orders is None else map_orders[slot]
        tiles0 = pretrain.colour_tiles(resid, g, a, b)
        mtiles = None if mask is None else pretrain.colour_tiles(pretrain.pad_input(mask, g), g, a, b)

        def body(i, tiles, z_k, a=a, b=b, ci=ci, member=member, valid=valid, mtiles=mtiles,
                 maps=maps):
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
        resid = resid + pretrain.tiles_to_residual(tiles - tiles0, g, a, b, n)
    z = list(state.z)
    z[0] = tf.transpose(z_k, [1, 2, 3, 0])
    return state._replace(z=tuple(z), resid=resid[:, : g.hx, : g.wx, :])


# ---------------------------------------------------------------------------------------
# Dictionaries
# ---------------------------------------------------------------------------------------

def _layer_s(state: DeepState, model: DeepModel, l: int, zd):
    """S[l] (dense) from the current state."""
    if l == model.n_layers - 1:
        return state.s_top
    xs = layer_inputs(state.s_top, model, state.d, zd)
    return unpool_blocks(xs[l + 1], zd[l], model.geoms[l].p)


def resample_d(state: DeepState, x, model: DeepModel, l: int, seed, *, mask=None,
               n_leapfrog: int = 10, adapt: bool = False, target_accept: float = 0.7,
               power_iterations: int = 6):
    """D[l] | rest: exact Gaussian draw for l = 0, HMC (Metropolis-corrected) for l >= 1.

    Returns (state, acceptance probability) -- 1.0 for the exact draw.
    """
    zd = dense_z(state, model)
    s_l = _layer_s(state, model, l, zd)
    if l == 0:
        if mask is not None:
            raise NotImplementedError("D[0] is drawn with every pixel observed; hold the "
                                      "dictionaries fixed when pixels are missing")
        g = model.geoms[0]
        lm = pretrain.LayerModel(g, model.hyper, top=False, n_images=int(x.shape[0]))
        ps = pretrain.PretrainState(
            s=pretrain.nhwc_to_blocks(s_l, g), z=None, d=state.d[0], log_theta=None,
            gamma_w=None, gamma_e=state.gamma_e, resid=None, seed=None)
        ps = pretrain.resample_d(ps, x, lm, seed)
        d = list(state.d)
        d[0] = ps.d
        return state._replace(d=tuple(d), resid=ps.resid[:, : g.hx, : g.wx, :]), tf.constant(1.0)

    ge = state.gamma_e[:, None, None, None]
    prior = model.hyper.dict_prior_precision

    def image(dl):
        return masked(down_from(full_conv(s_l, dl), l, model, state.d, zd), mask)

    def potential_and_grad(dl):
        with tf.GradientTape() as tape:
            tape.watch(dl)
            r = x - image(dl) if mask is None else masked(x - image(dl), mask)
            u = 0.5 * tf.reduce_sum(ge * tf.square(r)) + 0.5 * prior * tf.reduce_sum(tf.square(dl))
        return u, tape.gradient(u, dl)

    s_probe, s_mom, s_acc = tf.unstack(tf.random.experimental.stateless_split(seed, 3))
    q0 = state.d[l]

    def hess_vec(v):  # the conditional's precision times v (it does not depend on D[l])
        with tf.GradientTape() as tape:
            tape.watch(v)
            quad = 0.5 * tf.reduce_sum(ge * tf.square(image(v)))
        return tape.gradient(quad, v) + prior * v

    # diagonal mass: per-map mean of diag(Hessian) from one Rademacher probe
    probe = tf.sign(tf.random.stateless_uniform(tf.shape(q0), s_probe, -1.0, 1.0))
    mass = tf.maximum(tf.reduce_mean(probe * hess_vec(probe), axis=[0, 1, 2], keepdims=True), prior)
    mass = tf.broadcast_to(mass, tf.shape(q0))
    # step: the leapfrog is stable for eps < 2 / sqrt(lambda_max(M^-1/2 H M^-1/2)); a few
    # power iterations estimate lambda_max, exp(hmc_log_step) scales it (adapted in burn-in)
    # tf.while_loop, not Python loops, for the power iterations and the leapfrog: one
    # traced copy of the operator and its gradient instead of one per step (tracing a
    # sweep, not running it, is what small runs spend)
    sqrt_mass = tf.sqrt(mass)  # outside the loop body: computed once, not per iteration

    def power_step(i, v, lam):
        w = hess_vec(v / sqrt_mass) / sqrt_mass
        lam = tf.norm(w)
        return i + 1, w / lam, lam

    _, _, lam = tf.while_loop(lambda i, *_: i < power_iterations, power_step,
                              (tf.constant(0), probe / tf.norm(probe), tf.constant(1.0)))
    eps = tf.exp(state.hmc_log_step[l]) / tf.sqrt(lam)
    p0 = tf.random.stateless_normal(tf.shape(q0), s_mom) * sqrt_mass
    u0, g0 = potential_and_grad(q0)

    def leapfrog(i, q, p, u, grad):  # full momentum steps, the last one a half step
        q = q + eps * p / mass
        u, grad = potential_and_grad(q)
        p = p - tf.where(i < n_leapfrog - 1, eps, 0.5 * eps) * grad
        return i + 1, q, p, u, grad

    _, q, p, u1, _ = tf.while_loop(lambda i, *_: i < n_leapfrog, leapfrog,
                                   (tf.constant(0), q0, p0 - 0.5 * eps * g0, u0, g0))
    h0 = u0 + 0.5 * tf.reduce_sum(p0 * p0 / mass)
    h1 = u1 + 0.5 * tf.reduce_sum(p * p / mass)
    log_acc = tf.minimum(0.0, h0 - h1)
    log_acc = tf.where(tf.math.is_finite(log_acc), log_acc, -np.inf)
    accept = tf.math.log(tf.random.stateless_uniform([], s_acc)) < log_acc
    dl = tf.where(accept, q, q0)
    d = list(state.d)
    d[l] = dl
    step = state.hmc_log_step
    if adapt is not False:  # Robbins-Monro towards the target acceptance; burn-in only
        gain = 0.5 * (tf.exp(log_acc) - target_accept)
        if adapt is not True:  # a boolean tensor: one compiled sweep for both phases
            gain = tf.where(adapt, gain, 0.0)
        step = tf.tensor_scatter_nd_add(step, [[l]], [gain])
    state = state._replace(d=tuple(d), hmc_log_step=step)
    return state._replace(resid=residual(state, x, model, mask)), tf.exp(log_acc)


# ---------------------------------------------------------------------------------------
# Conjugate scalars
# ---------------------------------------------------------------------------------------

def resample_theta(state: DeepState, x, model: DeepModel, seed) -> DeepState:
    """theta_nk[l] | - ~ Dir(1/(p^2+1) + counts of each block state in the map)."""
    out = []
    for l, g in enumerate(model.geoms[:-1]):
        counts = tf.reduce_sum(tf.one_hot(state.z[l], g.n_states), axis=[1, 2])  # N, K, S
        out.append(pretrain.log_dirichlet_sample(model.alpha[l] + counts, fold_seed(seed, l)))
    return state._replace(log_theta=tuple(out))


def resample_pi(state: DeepState, x, model: DeepModel, seed) -> DeepState:
    """pi_nk | - ~ Beta(1/K + #on, 1 - 1/K + #off) over the top map's units."""
    on = tf.reduce_sum(state.on, axis=[1, 2])  # N, K
    total = float(model.top.hs * model.top.ws)
    counts = tf.stack([on, total - on], axis=-1)
    return state._replace(log_pi=pretrain.log_dirichlet_sample(model.pi_prior + counts, seed))


def resample_gamma_s(state: DeepState, x, model: DeepModel, seed) -> DeepState:
    """gamma_s | - ~ Gamma(a_w + M/2, b_w + sum_active w^2 / 2), M active top units."""
    h = model.hyper
    shape = h.a_w + 0.5 * tf.reduce_sum(state.on)
    rate = h.b_w + 0.5 * tf.reduce_sum(tf.square(state.s_top))
    return state._replace(gamma_s=tf.random.stateless_gamma([], seed, alpha=shape) / rate)


def resample_gamma_e(state: DeepState, x, model: DeepModel, seed, mask=None) -> DeepState:
    """gamma_e[n] | - ~ Gamma(a_e + n_obs/2, b_e + ||E_n||^2 / 2) (eq. SampleE)."""
    h = model.hyper
    n_obs = (tf.reduce_sum(mask, axis=[1, 2, 3]) if mask is not None
             else tf.fill([tf.shape(x)[0]], float(np.prod(x.shape[1:]))))
    sq = tf.reduce_sum(tf.square(state.resid), axis=[1, 2, 3])
    ge = tf.random.stateless_gamma(tf.shape(sq), seed, alpha=h.a_e + 0.5 * n_obs) / (h.b_e + 0.5 * sq)
    return state._replace(gamma_e=ge)


# ---------------------------------------------------------------------------------------
# Sweep, log joint
# ---------------------------------------------------------------------------------------

PER_IMAGE_FIELDS = ("z", "log_theta", "s_top", "on", "log_pi", "gamma_e", "resid")


def take_images(state: DeepState, sl: slice) -> DeepState:
    """The state restricted to images ``sl`` (every per-image field sliced; globals kept)."""
    out = {}
    for f in PER_IMAGE_FIELDS:
        v = getattr(state, f)
        out[f] = tuple(t[sl] for t in v) if isinstance(v, tuple) else v[sl]
    return state._replace(**out)


def concat_images(state: DeepState, parts: Sequence[DeepState]) -> DeepState:
    """Per-image fields of ``parts`` (in image order) joined; globals from ``state``."""
    out = {}
    for f in PER_IMAGE_FIELDS:
        v = getattr(state, f)
        if isinstance(v, tuple):
            out[f] = tuple(tf.concat([getattr(p, f)[i] for p in parts], 0) for i in range(len(v)))
        else:
            out[f] = tf.concat([getattr(p, f) for p in parts], 0)
    return state._replace(**out)


def local_steps(state: DeepState, x, model: DeepModel, seed_top, seed_z, *, mask=None,
                fast_bottom: bool = True, svm_terms=None):
    """The per-image part of a sweep: the top units, then the unpooling blocks of layers
    L-2 .. 0 (eqs. SampleS, SampleZ). Given D, gamma_s and each image's own theta, pi,
    gamma_e (and lambda, beta), images are conditionally independent, so running this on
    any split of the images into chunks draws from the same conditionals.
    Returns (state, RB posterior mean of S[L-1])."""
    state, expected = resample_top(state, x, model, seed_top, mask, return_expected=True,
                                   fast=fast_bottom, svm_terms=svm_terms)
    for l in range(model.n_layers - 2, -1, -1):
        state = resample_z(state, x, model, l, fold_seed(seed_z, l), mask, fast=fast_bottom)
    return state, expected


def global_steps(state: DeepState, x, model: DeepModel, seeds, *, mask=None,
                 update_globals: bool = True, adapt: bool = False, n_leapfrog: int = 10):
    """The rest of a sweep: (with ``update_globals``) every D and gamma_s, then theta, pi
    and gamma_e. ``seeds``: the sweep's 8-way split. Returns (state, HMC acceptance per layer)."""
    accept = [tf.constant(1.0)] * model.n_layers
    if update_globals:
        for l in range(model.n_layers):
            state, accept[l] = resample_d(state, x, model, l, fold_seed(seeds[3], l), mask=mask,
                                          n_leapfrog=n_leapfrog, adapt=adapt)
        state = resample_gamma_s(state, x, model, seeds[4])
    state = resample_theta(state, x, model, seeds[5])
    state = resample_pi(state, x, model, seeds[6])
    state = resample_gamma_e(state, x, model, seeds[7], mask)
    return state, tf.stack(accept)


def sweep(state: DeepState, x, model: DeepModel, *, mask=None, update_globals: bool = True,
          adapt: bool = False, n_leapfrog: int = 10, fast_bottom: bool = True,
          svm=None, y=None, svm_hyper=None):
    """One sweep: top units, then the blocks of layers L-2 .. 0 (:func:`local_steps`),
    then (with ``update_globals``) every D and gamma_s, then theta, pi and gamma_e
    (:func:`global_steps`); with ``svm`` (supervised model: a
    :class:`dgdm_tf.supervised.joint_svm.SvmState`, ``y`` the (C, N) targets) the top units see the
    SVM terms and lambda, beta, omega, kappa are drawn last.

    Returns (state, stats) with stats = {'expected_top': RB posterior mean of S[L-1] at
    this sweep, 'accept': HMC acceptance per layer (1.0 for exact draws)} and, with
    ``svm``, 'svm': the new SVM state.
    """
    seeds = tf.unstack(tf.random.experimental.stateless_split(state.seed, 8))
    state = state._replace(seed=seeds[0])
    # rebuild the residual from X: no round-off drifts across sweeps
    state = state._replace(resid=residual(state, x, model, mask))
    terms = None
    if svm is not None:
        terms = deep_svm.unit_terms(svm, y, state.s_top.shape[1:], svm_hyper)
    state, expected = local_steps(state, x, model, seeds[1], seeds[2], mask=mask,
                                  fast_bottom=fast_bottom, svm_terms=terms)
    state, accept = global_steps(state, x, model, seeds, mask=mask, update_globals=update_globals,
                                 adapt=adapt, n_leapfrog=n_leapfrog)
    stats = {"expected_top": expected, "accept": accept}
    if svm is not None:
        # own stream folded from seeds[4]: the split stays at 8, so unsupervised chains
        # draw exactly what they drew before supervision existed
        stats["svm"] = deep_svm.resample_svm(svm, state.s_top, y, svm_hyper,
                                             fold_seed(seeds[4], 0x5F3))
    return state, stats


def _chunked_sweep_fn(model: DeepModel, chunk: int, *, update_globals: bool, adapt,
                      n_leapfrog: int, fast_bottom: bool, svm_hyper=None):
    """:func:`sweep` with the per-image steps run ``chunk`` images at a time, one compiled
    call per chunk, so the top units' data-plane images (units x images x footprint, 120 GB
    for all 60000 MNIST images) are held for one chunk only. Chunk c > 0 is seeded by
    fold-in of c into the sweep's streams (chunk 0 by the streams themselves, so one chunk
    of all images is :func:`sweep`); the globals see all images at once."""
    local = compiled(
        lambda st, x, s1, s2, terms: local_steps(
            st._replace(resid=residual(st, x, model)), x, model, s1, s2,
            fast_bottom=fast_bottom, svm_terms=terms), reduce_retracing=True)
    glob = compiled(lambda st, x, seeds, ad: global_steps(
        st, x, model, seeds, update_globals=update_globals, adapt=ad, n_leapfrog=n_leapfrog),
        reduce_retracing=True)
    svm_fn = None
    if svm_hyper is not None:
        svm_fn = compiled(lambda sv, s_top, y, sd: deep_svm.resample_svm(sv, s_top, y, svm_hyper, sd))

    def f(state, *args):
        if adapt == "argument":
            args, ad = args[:-1], tf.convert_to_tensor(args[-1])
        else:  # a Python bool inside the compiled function: no tf.where when not adapting
            ad = adapt
        svm, x, y = args if svm_hyper is not None else (None, args[0], None)
        n = int(x.shape[0])
        seeds = tf.unstack(tf.random.experimental.stateless_split(state.seed, 8))
        state = state._replace(seed=seeds[0])
        terms = None
        if svm is not None:
            terms = deep_svm.unit_terms(svm, y, state.s_top.shape[1:], svm_hyper)
        parts, expected = [], []
        for c, lo in enumerate(range(0, n, chunk)):
            sl = slice(lo, min(lo + chunk, n))
            tc = None if terms is None else {**terms, "target": terms["target"][sl],
                                             "weight": terms["weight"][sl]}
            s1, s2 = (seeds[1], seeds[2]) if c == 0 else (fold_seed(seeds[1], c), fold_seed(seeds[2], c))
            st_c, ex = local(take_images(state, sl), x[sl], s1, s2, tc)
            parts.append(st_c)
            expected.append(ex)
        state, accept = glob(concat_images(state, parts), x, tf.stack(seeds), ad)
        stats = {"expected_top": tf.concat(expected, 0), "accept": accept}
        if svm is None:
            return state, stats
        return state, svm_fn(svm, state.s_top, y, fold_seed(seeds[4], 0x5F3)), stats

    return f


def supervised_sweep(state: DeepState, svm, x, y, model: DeepModel, svm_hyper, **kw):
    """:func:`sweep` of the supervised model: returns (state, svm, stats)."""
    state, stats = sweep(state, x, model, svm=svm, y=y, svm_hyper=svm_hyper, **kw)
    return state, stats.pop("svm"), stats


def log_joint(state: DeepState, x, model: DeepModel, mask=None, svm=None, y=None,
              svm_hyper=None) -> tf.Tensor:
    """log p(X, all variables), dropping only terms that are constant in every variable
    (the Gamma priors' normalisers and 2 pi factors of the dictionaries' priors); with
    ``svm`` the SVM's augmented pseudo-likelihood and priors too."""
    h = model.hyper
    n_obs = (tf.reduce_sum(mask, axis=[1, 2, 3]) if mask is not None
             else tf.fill([tf.shape(x)[0]], float(np.prod(x.shape[1:]))))
    ge = state.gamma_e
    sq = tf.reduce_sum(tf.square(state.resid), axis=[1, 2, 3])
    lj = tf.reduce_sum(0.5 * n_obs * tf.math.log(ge / (2 * np.pi)) - 0.5 * ge * sq)
    lj += tf.reduce_sum([-0.5 * h.dict_prior_precision * tf.reduce_sum(tf.square(dl)) for dl in state.d])
    for l, g in enumerate(model.geoms[:-1]):
        oh = tf.one_hot(state.z[l], g.n_states)  # N, nbh, nbw, K, S
        lj += tf.reduce_sum(oh * state.log_theta[l][:, None, None, :, :])
        lj += tf.reduce_sum((model.alpha[l] - 1.0) * state.log_theta[l])
    lp = state.log_pi  # N, K, 2
    lj += tf.reduce_sum(state.on * lp[:, None, None, :, 0] + (1.0 - state.on) * lp[:, None, None, :, 1])
    lj += tf.reduce_sum((model.pi_prior - 1.0) * lp)
    gs = state.gamma_s
    n_on = tf.reduce_sum(state.on)
    lj += 0.5 * n_on * tf.math.log(gs / (2 * np.pi)) - 0.5 * gs * tf.reduce_sum(tf.square(state.s_top))
    lj += (h.a_w - 1.0) * tf.math.log(gs) - h.b_w * gs
    lj += tf.reduce_sum((h.a_e - 1.0) * tf.math.log(ge) - h.b_e * ge)
    if svm is not None:
        lj += deep_svm.log_density(svm, state.s_top, y, svm_hyper)
    return lj


def make_sweep_fn(model: DeepModel, *, mask_given: bool = False, update_globals: bool = True,
                  adapt: bool = False, n_leapfrog: int = 10, fast_bottom: bool = True,
                  svm_hyper=None, chunk: int | None = None):
    """A compiled ``f(state, x[, mask]) -> (state, stats)``; with ``svm_hyper`` (the
    supervised model) ``f(state, svm, x, y) -> (state, svm, stats)``. With ``chunk`` the
    per-image steps run that many images at a time (memory; no mask): the same
    conditionals, drawn from other seeds than the unchunked sweep. ``adapt``: True
    (burn-in: the HMC steps adapt), False, or ``"argument"``: f takes the flag as a
    boolean tensor after its other arguments, so burn-in and collection share one trace
    (tracing a sweep takes longer than running a few; the draws are those of True /
    False)."""
    if adapt == "argument":
        def bind(fn):  # the compiled function of a sweep with the flag as last argument
            return lambda *args: fn(*args[:-1], adapt=args[-1])
    elif isinstance(adapt, bool):
        def bind(fn):
            return lambda *args: fn(*args, adapt=adapt)
    else:
        raise ValueError(f"adapt must be True, False or 'argument', not {adapt!r}")
    kw = dict(update_globals=update_globals, n_leapfrog=n_leapfrog, fast_bottom=fast_bottom)
    if chunk is not None:
        if mask_given:
            raise ValueError("chunked sweeps take no mask (refinement and training have none)")
        return _chunked_sweep_fn(model, int(chunk), svm_hyper=svm_hyper, adapt=adapt, **kw)
    if svm_hyper is not None:
        return compiled(bind(lambda st, svm, x, y, adapt: supervised_sweep(
            st, svm, x, y, model, svm_hyper, adapt=adapt, **kw)), reduce_retracing=True)
    if mask_given:
        return compiled(bind(lambda st, x, mask, adapt: sweep(st, x, model, mask=mask, adapt=adapt, **kw)),
                        reduce_retracing=True)
    return compiled(bind(lambda st, x, adapt: sweep(st, x, model, adapt=adapt, **kw)),
                    reduce_retracing=True)
