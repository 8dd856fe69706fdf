"""Layer-wise pretraining model (supplement, "Bottom-Up Pretraining"): its priors, state
and the chain's start. One Gibbs sweep: :mod:`dgdm_tf.pretrain.kernel`.

Model of one layer (eq. x_lp1), images n = 1..N, maps k = 1..K:

    X_n = sum_k D_k * (Z_nk . W_nk) + E_n,   E_n ~ N(0, 1/gamma_e[n]),  gamma_e ~ Gamma(a_e, b_e)
    z_nk[block] ~ Mult(1, theta_nk) over p*p positions + off,  theta_nk ~ Dir(alpha)
    W ~ N(0, 1/gamma_w),  gamma_w ~ Gamma(a_w, b_w),  D_k ~ N(0, I / dict_prior_precision)

``gamma_w`` is one precision per layer, as in the model's definition (gamma_{wl}); the
supplement's conditional indexes it per (n, k), but with a Gamma(1e-6, 1e-6) prior a
per-(n, k) precision is unidentified once that map is off everywhere in an image.

The state's block layout: :mod:`dgdm_tf.pretrain.blocks`.
"""

from __future__ import annotations

import collections
import math

import numpy as np
import tensorflow as tf

from dgdm_tf.core import random
from dgdm_tf.core.hyper import Hyper
from dgdm_tf.core.layout import LayerGeometry, dirichlet_prior
from dgdm_tf.pretrain.blocks import pad_input

PretrainState = collections.namedtuple(
    "PretrainState", ["s", "z", "d", "log_theta", "gamma_w", "gamma_e", "resid", "seed"])

#: the start's streams: the initial D (prior draw, window rows, window columns), the chain's seed
START_SEEDS = ("d_prior", "d_rows", "d_cols", "chain")


class LayerModel:
    """Everything a sweep needs that is not state: geometry, priors, masks."""

    def __init__(self, geom: LayerGeometry, hyper: Hyper, top: bool, n_images: int,
                 colour_order: tuple[tuple[int, int], ...] | None = None, scan: str = "random"):
        self.geom = geom
        # ``scan``: "random" draws the order of the colours and, within each colour, of
        # the maps afresh every sweep from the sweep's seed; "fixed" visits the colours in
        # ``colour_order`` (row-major by default) and the maps in index order. Every
        # order gives an exact sweep, and a random order drawn independently of the state
        # is a mixture of exact sweeps. With a fixed order the blocks visited first take
        # whatever residual a sweep finds, so a chain's features drift towards the colour
        # visited first (docs/findings/layerwise_scan_order.md).
        if scan not in ("random", "fixed"):
            raise ValueError(f"scan must be 'random' or 'fixed', got {scan!r}")
        self.scan = scan
        grid = [(a, b) for a in range(geom.gh) for b in range(geom.gw)]
        self.colour_order = tuple(grid) if colour_order is None else tuple(
            (int(a), int(b)) for a, b in colour_order)
        if sorted(self.colour_order) != grid:
            raise ValueError(f"colour_order must visit each of the {len(grid)} colours "
                             f"{grid} once, got {self.colour_order}")
        if scan == "random" and colour_order is not None:
            raise ValueError("colour_order is the fixed scan's order: pass scan='fixed' with it")
        self.hyper = hyper
        self.top = top
        self.n = n_images
        self.alpha = tf.constant(dirichlet_prior(geom, top))
        valid = geom.valid_positions()  # (Gh, Gw, nch, ncw, P2): position inside S
        self.valid = tf.constant(valid)
        self.block_valid = tf.constant(valid.any(-1))  # (Gh, Gw, nch, ncw): a real block
        self.n_pixels = float(geom.hx * geom.wx * geom.c)
        # A[t, t'] = ac[t' - t]: indices into the flattened circular (Hx x Wx) autocorrelation.
        th, tw = np.meshgrid(np.arange(geom.dh), np.arange(geom.dw), indexing="ij")
        th, tw = th.ravel(), tw.ravel()
        lag_h = (th[None, :] - th[:, None]) % geom.hx
        lag_w = (tw[None, :] - tw[:, None]) % geom.wx
        self.lag_index = tf.constant(lag_h * geom.wx + lag_w, dtype=tf.int32)

    def cache_key(self) -> tuple:
        """What a compiled sweep's trace depends on: :func:`dgdm_tf.core.compiled.cached_builder`
        shares traces between equal models. The prior's constant is derived from the rest
        but enters the key too, so a probe that swaps the prior gets its own trace."""
        return (self.geom, self.hyper, self.top, self.n, self.colour_order, self.scan,
                self.alpha.numpy())



def init_state(x, model: LayerModel, seed, dict_init: str = "patches",
               init_off: float = 0.9, gamma_e_init: float | None = None) -> PretrainState:
    """Start of the chain (the paper leaves it open; these choices only set where the
    chain starts, never what it converges to):

    * D: ``"patches"`` -- the most energetic of 4K random dh x dw x C windows of X, each
      scaled to the prior's expected norm sqrt(dh dw C / dict_prior_precision) (a short
      chain from prior noise spends most of its sweeps turning noise into strokes);
      ``"prior"`` -- a draw from N(0, I / dict_prior_precision).
    * every block off; theta_nk puts ``init_off`` on the off state and spreads the rest
      evenly (starting sparse lets the noise precision grow as the fit improves rather
      than starting with every block on);
    * gamma_w = 1 and gamma_e = 1 / Var(X_n), data-scaled starts (the Gamma(1e-6, 1e-6)
      prior puts almost all of its mass near 0 or infinity), or ``gamma_e_init`` when
      given (feature inference starts there from the pretrained noise level).
    """
    seed = tf.convert_to_tensor(seed, dtype=tf.int32)
    s_next = random.split(seed, START_SEEDS).chain
    x = tf.convert_to_tensor(x, tf.float32)
    d = initial_dictionary(x, model, seed, dict_init)
    s, z, log_theta, gamma_e = initial_locals(x, model, init_off, gamma_e_init)
    return PretrainState(s=s, z=z, d=d, log_theta=log_theta, gamma_w=tf.constant(1.0),
                         gamma_e=gamma_e, resid=pad_input(x, model.geom), seed=s_next)


def initial_dictionary(x, model: LayerModel, seed, dict_init: str = "patches") -> tf.Tensor:
    """D of :func:`init_state` (dh, dw, C, K); reads only the 4K windows it picks from X."""
    g = model.geom
    seed = tf.convert_to_tensor(seed, dtype=tf.int32)
    s_d, s_i, s_j, _ = random.split(seed, START_SEEDS)
    x = tf.convert_to_tensor(x, tf.float32)
    n = x.shape[0]
    scale = math.sqrt(g.dh * g.dw * g.c / model.hyper.dict_prior_precision)
    if dict_init == "prior":
        return tf.random.stateless_normal([g.dh, g.dw, g.c, g.k], s_d) * (
            scale / math.sqrt(g.dh * g.dw * g.c))
    if dict_init != "patches":
        raise ValueError(f"dict_init must be 'patches' or 'prior', got {dict_init!r}")
    # 4K random windows, keep the K with the most energy (an empty background window
    # has no direction), each scaled to the prior's expected norm.
    m = 4 * g.k
    img = tf.random.stateless_uniform([m], s_d, 0, n, dtype=tf.int32)
    ii = tf.random.stateless_uniform([m], s_i, 0, g.hx - g.dh + 1, dtype=tf.int32)
    jj = tf.random.stateless_uniform([m], s_j, 0, g.wx - g.dw + 1, dtype=tf.int32)
    rows = tf.gather(x, img)  # m, hx, wx, C
    patches = tf.gather(rows, ii[:, None] + tf.range(g.dh)[None], axis=1, batch_dims=1)
    patches = tf.gather(patches, jj[:, None] + tf.range(g.dw)[None], axis=2, batch_dims=1)
    norm = tf.sqrt(tf.reduce_sum(tf.square(patches), axis=[1, 2, 3]))
    top = tf.math.top_k(norm, k=g.k).indices
    patches, norm = tf.gather(patches, top), tf.gather(norm, top)
    noise = tf.random.stateless_normal(tf.shape(patches), s_i)
    noise = noise / tf.sqrt(tf.reduce_sum(tf.square(noise), axis=[1, 2, 3], keepdims=True))
    unit = tf.where(norm[:, None, None, None] > 1e-6,
                    patches / tf.maximum(norm, 1e-12)[:, None, None, None], noise)
    return tf.transpose(unit * scale, [1, 2, 3, 0])


def initial_locals(x, model: LayerModel, init_off: float = 0.9,
                   gamma_e_init: float | None = None):
    """(s, z, log_theta, gamma_e) of :func:`init_state` for the images X."""
    g = model.geom
    x = tf.convert_to_tensor(x, tf.float32)
    n = x.shape[0]
    s = tf.zeros([g.gh, g.gw, g.k, n, g.nch, g.ncw, g.p * g.p], tf.float32)
    z = tf.fill([g.gh, g.gw, g.k, n, g.nch, g.ncw], g.off)
    n_on = g.n_states - 1
    theta0 = np.full(g.n_states, (1.0 - init_off) / n_on, np.float32)
    theta0[-1] = init_off
    log_theta = tf.broadcast_to(tf.math.log(tf.constant(theta0)), [n, g.k, g.n_states])
    var = tf.math.reduce_variance(tf.reshape(x, [n, -1]), axis=1)
    gamma_e = 1.0 / tf.maximum(var, 1e-6)
    if gamma_e_init is not None:
        gamma_e = tf.fill([n], tf.constant(gamma_e_init, tf.float32))
    return s, tf.cast(z, tf.int32), log_theta, gamma_e

