"""The state of the top-down sampler: :class:`DeepState` (the variables of
:mod:`dgdm_tf.core.model`, the residual, the HMC step sizes, the seed), the start of a
chain (:func:`init_state`) and what every conditional reads from the state: the seed
streams, the dense unpooling indicators, the reconstruction and the residual.

Missing data: ``mask`` (N, H, W, C) 1 = observed; the likelihood, and so every
conditional, sees the observed pixels only.
"""

from __future__ import annotations

import collections
from typing import Sequence

import tensorflow as tf

from dgdm_tf.core import random
from dgdm_tf.core.model import DeepModel, dense_indicators, layer_inputs, stored_states
from dgdm_tf.core.ops import full_conv_adjoint
from dgdm_tf.topdown.ridge_start import gamma_e_given_fit, top_ridge_fit

DeepState = collections.namedtuple(
    "DeepState", ["d", "z", "log_theta", "s_top", "on", "log_pi", "gamma_s", "gamma_e",
                  "resid", "hmc_log_step", "seed"])


#: the fields that hold one entry per image (leading axis); the others are global
#: (gamma_s is (N, K) in both of ``Hyper.gamma_s``'s kinds: "global" holds one value in
#: every entry, so every conditional reads gamma_s[n, k] alike)
PER_IMAGE_FIELDS = ("z", "log_theta", "s_top", "on", "log_pi", "gamma_s", "gamma_e", "resid")


def take_images(state: DeepState, sl: slice) -> DeepState:
    """The state restricted to images ``sl`` (every per-image field sliced; globals kept)."""
    out = {}
    for f in PER_IMAGE_FIELDS:
        v = getattr(state, f)
        out[f] = tuple(t[sl] for t in v) if isinstance(v, tuple) else v[sl]
    return state._replace(**out)


def image_fields(state: DeepState) -> dict:
    """The per-image fields of ``state`` by name (what a chunk of images hands on)."""
    return {f: getattr(state, f) for f in PER_IMAGE_FIELDS}


def concat_images(state: DeepState, parts: Sequence[DeepState], *, consume: bool = False) -> DeepState:
    """Per-image fields of ``parts`` (in image order) joined; globals from ``state``.
    ``consume``: ``parts`` (a list) is emptied and each field's pieces are dropped once
    joined, so the pieces and the joined state are held together one field at a time,
    not whole (a state's worth less at the peak)."""
    fields = [image_fields(p) for p in parts]
    if consume:
        parts.clear()
    out = {}
    for f in PER_IMAGE_FIELDS:
        pieces = [d.pop(f) for d in fields]
        if isinstance(pieces[0], tuple):
            out[f] = tuple(tf.concat([p[i] for p in pieces], 0) for i in range(len(pieces[0])))
        else:
            out[f] = tf.concat(pieces, 0)
        del pieces
    return state._replace(**out)


#: ``seed`` folded with each salt in turn (stateless: the same salts, the same seed)
fold_seed = random.fold


def masked(y, mask):
    """``y`` on the observed pixels only (``mask`` 1 = observed; ``None``: all observed)."""
    return y if mask is None else y * mask


def dense_z(state: DeepState, model: DeepModel):
    """Every lower layer's unpooling indicators as dense one-hot maps."""
    return [dense_indicators(z, g) for z, g in zip(state.z, model.geoms[:-1])]


def reconstruct(state: DeepState, model: DeepModel) -> tf.Tensor:
    """g(S[L-1]): the noiseless image of the current state (N, H, W, C)."""
    return layer_inputs(state.s_top, model, state.d, dense_z(state, model))[0]


def residual(state: DeepState, x, model: DeepModel, mask=None) -> tf.Tensor:
    """X - g(S[L-1]) on the observed pixels: the residual the conditionals update."""
    return masked(x - reconstruct(state, model), mask)


def init_state(x, model: DeepModel, dictionaries: Sequence, seed, *, gamma_e_init=None,
               gamma_s_init: float = 1.0, mask=None, start=None,
               chunk: int | None = None) -> DeepState:
    """Start of a chain from given dictionaries (pretrained, or drawn from the prior).

    The paper leaves the start open; this sets where the chain starts, not its target:
    each block of layer l < L-1 takes the position of its largest |correlation| with the
    layer input, bottom up (X[l+1] = the correlations there over ||D_k||^2, a matched
    filter); the top layer starts off, theta and pi at their prior means, every gamma_s at
    ``gamma_s_init`` and gamma_e at ``gamma_e_init`` (or 1 / Var(X_n)). Missing pixels
    (``mask``) enter the start as zeros. The first sweep draws the top layer first, so
    it sees these positions. With ``start`` (a :class:`dgdm_tf.pretrain.ridge_start.RidgeStart`)
    the top layer starts at :mod:`dgdm_tf.topdown.ridge_start`'s order-free fit instead,
    and gamma_e at its conditional mean given that fit.

    Every image's start depends on that image alone, so ``chunk`` images at a time give
    the same state: the layers' correlation maps (MNIST: about 90 KB an image, several
    copies) then never exist for every image at once.
    """
    x = tf.convert_to_tensor(x, tf.float32)
    n = x.shape[0]
    if chunk is not None and n > int(chunk):
        parts = [init_state(x[i:i + int(chunk)], model, dictionaries, seed,
                            gamma_e_init=gamma_e_init, gamma_s_init=gamma_s_init,
                            mask=None if mask is None else mask[i:i + int(chunk)], start=start)
                 for i in range(0, n, int(chunk))]
        return concat_images(parts[0], parts)
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
        z.append(stored_states(pos))
        norm = tf.reduce_sum(tf.square(d[l]), axis=[0, 1, 2])
        h = tf.gather(c, pos, axis=-1, batch_dims=4) / norm
        log_theta.append(tf.broadcast_to(tf.math.log(model.alpha[l] / tf.reduce_sum(model.alpha[l])),
                                         [n, g.k, g.n_states]))
    gt = model.top
    s_top = tf.zeros([n, gt.hs, gt.ws, gt.k])
    on = tf.zeros_like(s_top)
    log_pi = tf.broadcast_to(tf.math.log(model.pi_prior), [n, gt.k, 2])
    if start is not None:
        zd = [dense_indicators(zz, g) for zz, g in zip(z, model.geoms[:-1])]
        s_top, on = top_ridge_fit(x, h, model, d, zd, start, mask)
        gamma_e = gamma_e_given_fit(x, layer_inputs(s_top, model, d, zd)[0], model, mask)
    elif gamma_e_init is None:
        var = tf.math.reduce_variance(tf.reshape(x, [n, -1]), axis=1)
        gamma_e = 1.0 / tf.maximum(var, 1e-6)
    else:
        gamma_e = tf.fill([n], tf.constant(float(gamma_e_init), tf.float32))
    st = DeepState(d=d, z=tuple(z), log_theta=tuple(log_theta), s_top=s_top, on=on,
                   log_pi=log_pi, gamma_s=tf.fill([n, gt.k], tf.constant(float(gamma_s_init), tf.float32)),
                   gamma_e=gamma_e, resid=tf.zeros_like(x),
                   hmc_log_step=tf.zeros([model.n_layers]),
                   seed=tf.convert_to_tensor(seed, tf.int32))
    return st._replace(resid=residual(st, x, model, mask))
