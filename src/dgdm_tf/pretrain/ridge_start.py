"""An order-free start for the layer-wise chains: every block at its best-matching
position, the weights a ridge fit of the image on that support.

Why: started with every block off, a chain builds its first decomposition colour by
colour, and the blocks visited first take every stroke in their footprints; at the noise
precision the layer settles at, no later single-block update moves a stroke's
explanation to a neighbour, so the features encode the scan order
(docs/findings/layerwise_scan_order.md). The state built here is a deterministic function of the image and the
dictionary, the same whatever the scan order, shift-equivariant by whole pooling blocks,
and it already fits the image, so the first sweeps have no residual for the first-visited
colour to take. It only sets where the chain starts; every sweep after it is the exact
Gibbs sweep of :mod:`dgdm_tf.pretrain.kernel`.

For images X (N, H, W, C) and D (dh, dw, C, K) (layout :mod:`dgdm_tf.core.layout`):

1. support: c = D (*) X (the model's correlation, ``ops.full_conv_adjoint``); each block
   of each map takes the position m of its largest score |c_m| / ||D_k|| (the correlation
   with a unit-norm element), and is on where that score exceeds ``threshold`` times the
   image's largest score (scale-free, so the same setting serves the image and the
   pooled maps above it);
2. weights: S = argmin ||X - sum_k D_k * S_k||^2 + lam ||S||^2 over S on that support,
   lam = ``ridge`` * mean_k ||D_k||^2, by conjugate gradients with the model's two
   operators (nothing of size (H W C)^2 is formed);
3. the precisions at their conditional means given that state: gamma_e[n] = (a_e + H W C
   / 2) / (b_e + ||E_n||^2 / 2), gamma_w = (a_w + M / 2) / (b_w + ||W||^2 / 2) over the M
   active weights (or gamma_w kept, when the chain holds it fixed); theta drawn from its
   conditional given the support (``pretrain.resample_theta``).
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from dgdm_tf.core.compiled import compiled
from dgdm_tf.core.ops import full_conv, full_conv_adjoint
from dgdm_tf.pretrain.blocks import nhwc_to_blocks, pad_input
from dgdm_tf.pretrain.kernel import resample_theta
from dgdm_tf.pretrain.layer_model import LayerModel, PretrainState


@dataclasses.dataclass(frozen=True)
class RidgeStart:
    """Settings of the start (config keys ``start``, ``threshold``, ``ridge``,
    ``iterations`` of ``pretrain`` and ``features``)."""

    threshold: float = 0.5
    ridge: float = 0.01
    iterations: int = 40

    @classmethod
    def from_config(cls, cfg: dict | None) -> "RidgeStart | None":
        """A config block ``{kind, threshold, ridge, iterations}`` -> settings, or ``None``
        for ``kind: off`` (every block off at the start)."""
        cfg = dict(cfg or {})
        kind = cfg.pop("kind", "ridge")
        if kind not in ("ridge", "off"):
            raise ValueError(f"start.kind must be 'ridge' or 'off', got {kind!r}")
        return None if kind == "off" else cls(**cfg)

    def __post_init__(self):
        if not 0 <= self.threshold < 1 or self.ridge <= 0 or self.iterations < 1:
            raise ValueError("the ridge start needs 0 <= threshold < 1, ridge > 0 and "
                             f"iterations >= 1, got {self}")


def support(x, d, p: int, threshold: float) -> tf.Tensor:
    """(N, Hs, Ws, K) 0/1: each block's position of largest |c| / ||D_k||, where above
    ``threshold`` times the image's largest; at most one 1 per p x p block of each map
    (partial edge blocks too)."""
    c = full_conv_adjoint(x, d)
    n, hs, ws, k = c.shape
    nbh, nbw = -(-hs // p), -(-ws // p)
    score = tf.abs(c) / tf.sqrt(tf.reduce_sum(tf.square(d), axis=[0, 1, 2]))
    # padded positions score -1: never the argmax, never above a threshold >= 0
    score = tf.pad(score, [[0, 0], [0, nbh * p - hs], [0, nbw * p - ws], [0, 0]],
                   constant_values=-1.0)
    blocks = tf.transpose(tf.reshape(score, [n, nbh, p, nbw, p, k]), [0, 1, 3, 5, 2, 4])
    blocks = tf.reshape(blocks, [n, nbh, nbw, k, p * p])
    best = tf.reduce_max(blocks, axis=-1)
    top = tf.reduce_max(best, axis=[1, 2, 3], keepdims=True)
    on = tf.cast(tf.logical_and(best > threshold * top, best > 0), tf.float32)
    mask = tf.one_hot(tf.argmax(blocks, axis=-1), p * p) * on[..., None]
    mask = tf.transpose(tf.reshape(mask, [n, nbh, nbw, k, p, p]), [0, 1, 4, 2, 5, 3])
    return tf.reshape(mask, [n, nbh * p, nbw * p, k])[:, :hs, :ws, :]


@compiled(reduce_retracing=True)
def ridge_fit(x, d, mask, lam, iterations):
    """S on ``mask`` minimising ||X - full_conv(S, D)||^2 + lam ||S||^2: conjugate
    gradients on (M D^T D M + lam I) S = M D^T X, M the support, one CG per image."""
    def normal(s):
        return mask * full_conv_adjoint(full_conv(s, d), d) + lam * s

    def dot(a, b):
        return tf.reduce_sum(a * b, axis=[1, 2, 3], keepdims=True)

    rhs = mask * full_conv_adjoint(x, d)
    s = tf.zeros_like(rhs)

    def body(i, s, r, direction, rr):
        q = normal(direction)
        step = rr / tf.maximum(dot(direction, q), 1e-30)
        s = s + step * direction
        r = r - step * q
        rr_new = dot(r, r)
        return i + 1, s, r, r + rr_new / tf.maximum(rr, 1e-30) * direction, rr_new

    _, s, _, _, _ = tf.while_loop(lambda i, *_: i < iterations, body,
                                  (tf.constant(0), s, rhs, rhs, dot(rhs, rhs)))
    return s * mask


def ridge_start(state: PretrainState, x, model: LayerModel, settings: RidgeStart, seed, *,
                fixed_gamma_w: bool = False) -> PretrainState:
    """``state`` with its local variables (s, z, resid, theta, gamma_e; gamma_w unless
    ``fixed_gamma_w``) replaced by the start above, given ``state.d``."""
    g = model.geom
    h = model.hyper
    x = tf.convert_to_tensor(x, tf.float32)
    d = state.d
    mask = support(x, d, g.p, settings.threshold)
    lam = settings.ridge * tf.reduce_mean(tf.reduce_sum(tf.square(d), axis=[0, 1, 2]))
    s = ridge_fit(x, d, mask, lam, tf.constant(settings.iterations))
    s_blocks = nhwc_to_blocks(s, g)
    mask_blocks = nhwc_to_blocks(mask, g)
    on = tf.reduce_any(mask_blocks > 0, axis=-1)
    z = tf.where(on, tf.argmax(mask_blocks, axis=-1, output_type=tf.int32), g.off)
    resid = x - full_conv(s, d)
    gamma_e = (h.a_e + 0.5 * model.n_pixels) / (
        h.b_e + 0.5 * tf.reduce_sum(tf.square(resid), axis=[1, 2, 3]))
    state = state._replace(s=s_blocks, z=z, resid=pad_input(resid, g), gamma_e=gamma_e)
    if not fixed_gamma_w:
        state = state._replace(gamma_w=gamma_w_mean(
            tf.reduce_sum(tf.cast(on, tf.float32)), tf.reduce_sum(tf.square(s)), h))
    return resample_theta(state, x, model, seed)


def gamma_w_mean(active, sum_w2, hyper):
    """gamma_w's conditional mean given M = ``active`` weights with sum of squares
    ``sum_w2``: (a_w + M / 2) / (b_w + sum_w2 / 2)."""
    return (hyper.a_w + 0.5 * active) / (hyper.b_w + 0.5 * sum_w2)
