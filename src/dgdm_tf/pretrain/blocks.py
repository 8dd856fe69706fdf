"""Block layout of the layer-wise sampler (:mod:`dgdm_tf.pretrain.kernel`).

Block values are kept colour-major: ``s[a, b, k, n, u, v, m]`` is the value at position m
(row-major in the p x p block) of block (u*G_h + a, v*G_w + b) of map k, image n; ``z``
holds block states (p*p = off). The residual ``resid`` is X - sum D*S on the padded grid
(padding is always exactly zero). The blocks of one colour have disjoint footprints,
held as tiles (:func:`colour_tiles`).
"""

from __future__ import annotations

import tensorflow as tf

from dgdm_tf.core.layout import LayerGeometry


def pad_input(x: tf.Tensor, geom: LayerGeometry) -> tf.Tensor:
    """Zero-pad X (N, hx, wx, C) to the sampler's padded grid."""
    return tf.pad(x, [[0, 0], [0, geom.hr - geom.hx], [0, geom.wr - geom.wx], [0, 0]])


def blocks_to_nhwc(s: tf.Tensor, geom: LayerGeometry) -> tf.Tensor:
    """Colour-major block values (Gh, Gw, K, N, nch, ncw, P2) -> S (N, hs, ws, K)."""
    g = geom
    k, n = tf.shape(s)[2], tf.shape(s)[3]
    s = tf.reshape(s, [g.gh, g.gw, k, n, g.nch, g.ncw, g.p, g.p])
    s = tf.transpose(s, [3, 4, 0, 6, 5, 1, 7, 2])  # N, u, a, r, v, b, c, K
    s = tf.reshape(s, [n, g.hs_pad, g.ws_pad, k])
    return s[:, : g.hs, : g.ws, :]


def nhwc_to_blocks(s: tf.Tensor, geom: LayerGeometry) -> tf.Tensor:
    """Inverse of :func:`blocks_to_nhwc` (positions outside Hs/Ws must be absent)."""
    g = geom
    n, k = tf.shape(s)[0], tf.shape(s)[3]
    s = tf.pad(s, [[0, 0], [0, g.hs_pad - g.hs], [0, g.ws_pad - g.ws], [0, 0]])
    s = tf.reshape(s, [n, g.nch, g.gh, g.p, g.ncw, g.gw, g.p, k])
    s = tf.transpose(s, [2, 5, 7, 0, 1, 4, 3, 6])
    return tf.reshape(s, [g.gh, g.gw, k, n, g.nch, g.ncw, g.p * g.p])


def block_kernels(d: tf.Tensor, geom: LayerGeometry) -> tf.Tensor:
    """(K, fh, fw, C, P2): D_k placed at each of the p*p offsets of a block's footprint."""
    g = geom
    cols = []
    for m in range(g.p * g.p):
        r, c = divmod(m, g.p)
        cols.append(tf.pad(d, [[r, g.p - 1 - r], [c, g.p - 1 - c], [0, 0], [0, 0]]))
    kb = tf.stack(cols, axis=-1)  # fh, fw, C, K, P2
    return tf.transpose(kb, [3, 0, 1, 2, 4])


def blocks_to_pooled(v: tf.Tensor, geom: LayerGeometry) -> tf.Tensor:
    """(Gh, Gw, K, N, nch, ncw) per-block values -> (N, nbh, nbw, K)."""
    g = geom
    v = tf.transpose(v, [3, 4, 0, 5, 1, 2])  # N, u, a, v, b, K
    n, k = tf.shape(v)[0], tf.shape(v)[5]
    v = tf.reshape(v, [n, g.nch * g.gh, g.ncw * g.gw, k])
    return v[:, : g.nbh, : g.nbw, :]


def reconstruction(s: tf.Tensor, d: tf.Tensor, geom: LayerGeometry) -> tf.Tensor:
    """sum_k D_k * S_k on the unpadded grid (N, hx, wx, C)."""
    from dgdm_tf.core.ops import full_conv
    return full_conv(blocks_to_nhwc(s, geom), d)



def colour_tiles(resid, g: LayerGeometry, a, b):
    """The footprints of colour (a, b)'s blocks in the residual, one row per block:
    (N * nch * ncw, fh * fw * C). Footprints of one colour are disjoint. ``a``, ``b``
    may be tensors (a scan order drawn at run time)."""
    n = tf.shape(resid)[0]
    # a roll to the colour's offset, then a static slice: under XLA a slice whose start
    # is only known at run time recompiles on every call
    reg = tf.roll(resid, tf.stack([-a * g.p, -b * g.p]), axis=[1, 2])
    reg = reg[:, : g.nch * g.tile_h, : g.ncw * g.tile_w, :]
    reg = tf.reshape(reg, [n, g.nch, g.tile_h, g.ncw, g.tile_w, g.c])[:, :, : g.fh, :, : g.fw, :]
    reg = tf.transpose(reg, [0, 1, 3, 2, 4, 5])
    return tf.reshape(reg, [n * g.nch * g.ncw, g.fh * g.fw * g.c])


def tiles_to_residual(tiles, g: LayerGeometry, a, b, n):
    """Inverse placement of :func:`colour_tiles` (zeros elsewhere), on the padded grid."""
    t = tf.reshape(tiles, [n, g.nch, g.ncw, g.fh, g.fw, g.c])
    t = tf.transpose(t, [0, 1, 3, 2, 4, 5])
    t = tf.pad(t, [[0, 0], [0, 0], [0, g.tile_h - g.fh], [0, 0], [0, g.tile_w - g.fw], [0, 0]])
    t = tf.reshape(t, [n, g.nch * g.tile_h, g.ncw * g.tile_w, g.c])
    # static padding, then a roll to the colour's offset: XLA needs a pad's widths at
    # compile time, a roll's shift it does not; the zeros padded below and right are at
    # least the offset, so nothing but zeros wraps around
    t = tf.pad(t, [[0, 0], [0, g.hr - g.nch * g.tile_h], [0, g.wr - g.ncw * g.tile_w], [0, 0]])
    return tf.roll(t, tf.stack([a * g.p, b * g.p]), axis=[1, 2])

