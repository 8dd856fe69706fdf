"""The L-layer top-down generative model (Sec. 2.2; supplement, "Notations" 3 and 5).

Layers are indexed 0..L-1 here (the paper's 1..L). With the axis layout of
:mod:`dgdm_tf.core.layout`:

    X[L-1] = sum_k D[L-1]_k * S[L-1]_k,   S[L-1] = W . Z[L-1]      (top: spike-slab)
    S[l]   = unpool(X[l+1], Z[l]),  X[l] = sum_k D[l]_k * S[l]_k    (l = L-2 .. 0)
    X      = X[0] + E,  E_n ~ N(0, 1/gamma_e[n])                    (residual at the bottom)

Z[l] (l < L-1) is held as block states (N, nbh, nbw, K_l): 0..p*p-1 the position of the
block's single non-zero entry, p*p off. A position of a partial edge block that falls
outside S[l] carries nothing (it acts like the off state), as in pretraining.

This module holds what is not a conditional: shapes, the generative function g (a pass
from any layer down to the data plane, linear in what it starts from), the footprint
colouring that says which variables the Gibbs sampler may draw together, and draws
from the prior (generation). The conditionals are in :mod:`dgdm_tf.topdown`.

Footprints (Sec. 2.2, stochastic unpooling): a unit at row i of S[l] reaches data-plane rows
[i P_l, i P_l + E_l - 1], P_l = prod_{j<l} p_j, E_l = the extent of one D[l] atom pushed
down through every layer below. A block of S[l] (p_l units) reaches
(p_l - 1) P_l + E_l rows starting at u p_l P_l. Colouring the blocks (or, at the top, the
units) with a G x G pattern, G = ceil(extent / step), gives colours whose members have
disjoint footprints in the data plane: given everything else they are conditionally
independent, so the sampler draws a colour of one map at once (exact).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

import numpy as np
import tensorflow as tf

from dgdm_tf.core import random
from dgdm_tf.core.draws import log_dirichlet_sample
from dgdm_tf.core.layout import BLOCK_STATE_DTYPE, LayerGeometry, layer_geometries
from dgdm_tf.core.windows import Grid
from dgdm_tf.core.ops import full_conv
from dgdm_tf.core.hyper import Hyper


@dataclasses.dataclass(frozen=True)
class Colouring:
    """Which members (blocks, or top-layer units) of one map are drawn together.

    Members along H are indexed u = 0..nb_h-1 and sit in S at rows [u*unit, (u+1)*unit).
    Colour a holds u = a, a+G_h, a+2G_h, ...; member t of colour a reaches data-plane rows
    [a*step + t*tile, a*step + t*tile + extent): tiles of one colour never overlap.
    """

    unit: int  # members are unit x unit blocks of S (p for unpooling layers, 1 at the top)
    nb_h: int
    nb_w: int
    g_h: int
    g_w: int
    step_h: int  # data-plane rows between consecutive members
    step_w: int
    ext_h: int  # data-plane extent of one member's footprint
    ext_w: int
    hx: int  # data plane size
    wx: int

    @property
    def n_h(self) -> int:
        """Members per colour along H (the member grid is padded to n_h * g_h)."""
        return math.ceil(self.nb_h / self.g_h)

    @property
    def n_w(self) -> int:
        return math.ceil(self.nb_w / self.g_w)

    @property
    def tile_h(self) -> int:
        return self.g_h * self.step_h if self.n_h > 1 else self.ext_h

    @property
    def tile_w(self) -> int:
        return self.g_w * self.step_w if self.n_w > 1 else self.ext_w

    @property
    def pad_h(self) -> int:
        return max(self.hx, (self.g_h - 1) * self.step_h + self.n_h * self.tile_h)

    @property
    def pad_w(self) -> int:
        return max(self.wx, (self.g_w - 1) * self.step_w + self.n_w * self.tile_w)

    def colours(self):
        return [(a, b) for a in range(self.g_h) for b in range(self.g_w)]

    # ---- per-member values <-> the member grid -----------------------------------------
    # The colour (a, b) of these may be ints or scalar tensors (a scan order drawn at run
    # time): the shapes do not depend on it.
    def take(self, grid: tf.Tensor, a: int, b: int) -> tf.Tensor:
        """(N, nb_h, nb_w) member values -> (N, n_h, n_w) of colour (a, b) (padding 0)."""
        grid = tf.pad(grid, [[0, 0], [0, self.n_h * self.g_h - self.nb_h],
                             [0, self.n_w * self.g_w - self.nb_w]])
        n = tf.shape(grid)[0]
        grid = tf.reshape(grid, [n, self.n_h, self.g_h, self.n_w, self.g_w])
        return grid[:, :, a, :, b]

    def put(self, vals: tf.Tensor, a: int, b: int) -> tf.Tensor:
        """Inverse of :meth:`take`: (N, n_h, n_w) -> (N, nb_h, nb_w), zeros elsewhere."""
        n = tf.shape(vals)[0]
        v = tf.pad(vals[:, :, None, :, None],
                   [[0, 0], [0, 0], [a, self.g_h - 1 - a], [0, 0], [b, self.g_w - 1 - b]])
        v = tf.reshape(v, [n, self.n_h * self.g_h, self.n_w * self.g_w])  # static, whatever (a, b)
        return v[:, : self.nb_h, : self.nb_w]

    def member_mask(self, a: int, b: int) -> np.ndarray:
        """(nb_h, nb_w) bool: members of colour (a, b)."""
        m = np.zeros((self.nb_h, self.nb_w), bool)
        m[a:: self.g_h, b:: self.g_w] = True
        return m

    def real(self, a: int, b: int) -> np.ndarray:
        """(n_h, n_w) bool: which slots of colour (a, b) are real members (not padding)."""
        return np.outer(np.arange(self.n_h) * self.g_h + a < self.nb_h,
                        np.arange(self.n_w) * self.g_w + b < self.nb_w)

    # ---- data plane <-> tiles --------------------------------------------------------
    def tile_sum(self, y: tf.Tensor, a: int, b: int) -> tf.Tensor:
        """(N, hx, wx, C) -> (N, n_h, n_w): the sum of y over each member's tile."""
        n = tf.shape(y)[0]
        y = tf.pad(y, [[0, 0], [0, self.pad_h - self.hx], [0, self.pad_w - self.wx], [0, 0]])
        i0, j0 = a * self.step_h, b * self.step_w
        y = y[:, i0: i0 + self.n_h * self.tile_h, j0: j0 + self.n_w * self.tile_w, :]
        y = tf.reshape(y, [n, self.n_h, self.tile_h, self.n_w, self.tile_w, -1])
        return tf.reduce_sum(y, axis=[2, 4, 5])

    def tile_broadcast(self, vals: tf.Tensor, a: int, b: int) -> tf.Tensor:
        """(N, n_h, n_w) -> (N, hx, wx, 1): each member's value over its whole tile."""
        v = tf.repeat(tf.repeat(vals, self.tile_h, axis=1), self.tile_w, axis=2)
        i0, j0 = a * self.step_h, b * self.step_w
        v = tf.pad(v, [[0, 0], [i0, self.pad_h - i0 - self.n_h * self.tile_h],
                       [j0, self.pad_w - j0 - self.n_w * self.tile_w]])
        v = tf.reshape(v, [tf.shape(vals)[0], self.pad_h, self.pad_w])  # static, whatever (a, b)
        return v[:, : self.hx, : self.wx, None]


class DeepModel:
    """Shapes, priors and colourings of an L-layer model; the last layer has pool 1."""

    def __init__(self, image_shape: Sequence[int], layers: Sequence[dict], hyper: Hyper | dict | None = None,
                 *, supervised: bool = False, scan: str = "random"):
        """``supervised``: the SVM couples every top unit of an image to every other
        (through the margins), so the top layer gets one unit per colour.

        ``scan``: the order the Gibbs sweeps (:mod:`dgdm_tf.topdown.scan`) visit a layer's
        blocks in. "random": the colours, and within each colour the maps, in an order
        drawn afresh every sweep from the sweep's seed (:meth:`scan_classes` says which
        colours may trade places); "fixed": colours row-major, maps in index order (the
        sampler before the random scan, draw for draw); "matched": as "fixed", but each
        image visits its top units in its own order, by decreasing matched-filter
        response (:func:`dgdm_tf.topdown.top_units.matched_order`; a top layer whose units
        all overlap). Every order is an exact sweep and an order drawn independently of
        the state a mixture of them; with a fixed order the blocks visited first take
        whatever residual a sweep finds, and the chain keeps that decomposition
        (docs/findings/layerwise_scan_order.md, docs/findings/matched_scan.md)."""
        if scan not in ("random", "fixed", "matched"):
            raise ValueError(f"scan must be 'random', 'fixed' or 'matched', got {scan!r}")
        self.scan = scan
        if len(layers) < 1:
            raise ValueError("the model needs at least one layer")
        if int(layers[-1].get("pool", 1)) != 1:
            raise ValueError("the top layer has no pooling (spike-slab prior): set the last "
                             "layer's pool to 1")
        self.image_shape = tuple(int(v) for v in image_shape)
        self.layers = [dict(lay) for lay in layers]
        self.geoms: list[LayerGeometry] = layer_geometries(self.image_shape, self.layers)
        self.hyper = hyper if isinstance(hyper, Hyper) else Hyper.from_dict(hyper)
        self.supervised = bool(supervised)
        self.n_layers = len(self.geoms)
        hx, wx, _ = self.image_shape
        self.colourings = []
        scale = 1  # P_l: data-plane rows per row of X[l]
        for l, g in enumerate(self.geoms):
            # extent of one atom of D[l] in the data plane
            eh, ew = g.dh, g.dw
            for j in range(l - 1, -1, -1):
                gj = self.geoms[j]
                eh, ew = eh * gj.p + gj.dh - 1, ew * gj.p + gj.dw - 1
            top = l == self.n_layers - 1
            unit = 1 if top else g.p
            nb_h, nb_w = (g.hs, g.ws) if top else (g.nbh, g.nbw)
            ext_h, ext_w = (unit - 1) * scale + eh, (unit - 1) * scale + ew
            st_h = st_w = unit * scale
            g_h, g_w = min(math.ceil(ext_h / st_h), nb_h), min(math.ceil(ext_w / st_w), nb_w)
            if top and self.supervised:
                g_h, g_w = nb_h, nb_w
            self.colourings.append(Colouring(
                unit=unit, nb_h=nb_h, nb_w=nb_w, g_h=g_h, g_w=g_w, step_h=st_h, step_w=st_w,
                ext_h=ext_h, ext_w=ext_w, hx=hx, wx=wx))
            scale *= g.p
        self.alpha = [tf.constant(np.full(g.n_states, 1.0 / g.n_states, np.float32))
                      for g in self.geoms[:-1]]
        k_top = self.geoms[-1].k
        self.pi_prior = tf.constant([1.0 / k_top, 1.0 - 1.0 / k_top], tf.float32)

    @property
    def top(self) -> LayerGeometry:
        return self.geoms[-1]

    def cache_key(self) -> tuple:
        """What a compiled step's trace depends on: :func:`dgdm_tf.core.compiled.cached_builder`
        shares traces between equal models. The priors' constants are derived from the
        rest but enter the key too, so a probe that swaps a prior gets its own trace."""
        return (self.image_shape, self.layers, self.hyper, self.supervised, self.scan,
                [a.numpy() for a in self.alpha], self.pi_prior.numpy())

    def with_ks(self, ks: Sequence[int]) -> "DeepModel":
        layers = [dict(lay, n_dict=int(k)) for lay, k in zip(self.layers, ks)]
        return DeepModel(self.image_shape, layers, self.hyper, supervised=self.supervised,
                         scan=self.scan)

    def windowed(self, l: int) -> bool:
        """Whether the fast path of layer l's members pushes them down inside their
        windows (:mod:`dgdm_tf.core.windows`): blocks of layers >= 1, and the top units
        of a model of three or more layers."""
        return l > 0 and not (l == self.n_layers - 1 and self.n_layers == 2)

    def scan_classes(self, l: int) -> np.ndarray:
        """(colours,) int, row-major: the colours of layer l a random scan may put in one
        another's place. A windowed pass (:meth:`windowed`) holds a colour's real members
        only, so its shapes follow the colour's count of real member rows and columns
        (edge colours of a partial grid have one fewer): a step traced for one colour
        runs any colour of the same counts, picked at run time, and the random scan
        permutes the colours within each class, keeping the row-major sequence of
        classes. Every other path holds the whole padded member grid: one class."""
        col = self.colourings[l]
        if not self.windowed(l):
            return np.zeros(col.g_h * col.g_w, np.int64)
        shapes = [(int(col.real(a, b).any(1).sum()), int(col.real(a, b).any(0).sum()))
                  for a, b in col.colours()]
        labels = {s: i for i, s in enumerate(sorted(set(shapes)))}
        return np.array([labels[s] for s in shapes], np.int64)

    def position_valid(self, l: int) -> np.ndarray:
        """(nbh, nbw, p*p) bool: block positions of layer l < L-1 that lie inside S[l]."""
        g = self.geoms[l]
        out = np.zeros((g.nbh, g.nbw, g.p * g.p), bool)
        for m in range(g.p * g.p):
            r, c = divmod(m, g.p)
            out[:, :, m] = ((np.arange(g.nbh) * g.p + r < g.hs)[:, None]
                            & (np.arange(g.nbw) * g.p + c < g.ws)[None, :])
        return out

    def member_grids(self, l: int, a: int, b: int) -> tuple[dict, Grid]:
        """Where the members of colour (a, b) of layer l reach on every plane below:
        ({j: Grid of S[j]} for j < l, Grid of the data plane). A member's block of S[l]
        becomes a window of X[l] one dictionary larger; each unpooling below scales it,
        each convolution grows it; the data-plane window is the footprint (ext)."""
        g, col = self.geoms[l], self.colourings[l]
        u = col.unit
        grid = Grid(a * u, b * u, col.g_h * u, col.g_w * u, u, u, col.n_h, col.n_w)
        grid = grid.grown(g.dh - 1, g.dw - 1)  # X[l]
        s_grids = {}
        for j in range(l - 1, -1, -1):
            gj = self.geoms[j]
            s_grids[j] = grid.scaled(gj.p)
            grid = s_grids[j].grown(gj.dh - 1, gj.dw - 1)
        assert (grid.size_h, grid.size_w) == (col.ext_h, col.ext_w), (grid, col)
        return s_grids, grid

    def offset_mask(self, l: int, a: int, b: int, m: int) -> np.ndarray:
        """(hs, ws) float: entries of S[l] at offset m of the blocks of colour (a, b)."""
        g, col = self.geoms[l], self.colourings[l]
        blocks = col.member_mask(a, b)
        r, c = divmod(m, g.p)
        mask = np.zeros((g.nbh * g.p, g.nbw * g.p), np.float32)
        mask[r:: g.p, c:: g.p] = blocks
        return mask[: g.hs, : g.ws]


# ---------------------------------------------------------------------------------------
# The generative function g
# ---------------------------------------------------------------------------------------

def indicator_map(weights: tf.Tensor, geom: LayerGeometry) -> tf.Tensor:
    """Per-block position weights (N, nbh, nbw, K, p*p) -> the dense map (N, hs, ws, K)
    (position m of a block row-major; positions outside S dropped)."""
    p = geom.p
    w = tf.cast(weights, tf.float32)
    n = tf.shape(w)[0]
    # the static map count, not -1: with an unknown batch (a retraced chunk) a -1 leaves
    # the channels unknown too, and the windowed passes need them
    k = w.shape[3] if w.shape[3] is not None else -1
    w = tf.reshape(w, [n, geom.nbh, geom.nbw, k, p, p])
    w = tf.transpose(w, [0, 1, 4, 2, 5, 3])
    w = tf.reshape(w, [n, geom.nbh * p, geom.nbw * p, k])
    return w[:, : geom.hs, : geom.ws, :]


def stored_states(z) -> tf.Tensor:
    """Block states as a chain's state holds them (:data:`dgdm_tf.core.layout.BLOCK_STATE_DTYPE`)."""
    return tf.cast(z, BLOCK_STATE_DTYPE)


def state_index(z) -> tf.Tensor:
    """Block states as indices (int32: what gathers, bincounts and the scans read)."""
    return tf.cast(z, tf.int32)


def dense_indicators(z: tf.Tensor, geom: LayerGeometry) -> tf.Tensor:
    """Block states (N, nbh, nbw, K) -> 0/1 unpooling map Z (N, hs, ws, K)."""
    p = geom.p
    return indicator_map(tf.one_hot(z, p * p + 1, dtype=tf.float32)[..., : p * p], geom)


def soft_indicators(z: tf.Tensor, geom: LayerGeometry, probs: tf.Tensor | None = None,
                    where: tf.Tensor | None = None) -> tf.Tensor:
    """:func:`dense_indicators` with the blocks ``where`` (N, nbh, nbw, bool) given by
    their expected indicators instead of their state: ``probs`` (N, K, p*p + 1), each
    map's state probabilities (theta) of the image; the off state and positions outside
    S carry nothing, as in a draw. With ``where`` None this is dense_indicators(z)."""
    if where is None:
        return dense_indicators(z, geom)
    p = geom.p
    oh = tf.one_hot(z, p * p + 1, dtype=tf.float32)[..., : p * p]  # N, nbh, nbw, K, P2
    pr = tf.cast(probs, tf.float32)[:, None, None, :, : p * p]  # N, 1, 1, K, P2
    return indicator_map(tf.where(tf.convert_to_tensor(where, tf.bool)[..., None, None], pr, oh), geom)


def unseen_blocks(mask: np.ndarray, model: "DeepModel") -> list[np.ndarray]:
    """Per layer l < L-1, (N, nbh, nbw) bool: the blocks whose data-plane footprint
    (every position, through any unpooling below: the colouring's ``ext`` from
    ``step``) holds no observed pixel of ``mask`` (N, H, W, C), 1 = observed. Their
    states do not enter the likelihood: given theta and the rest, each is a draw from
    theta, independent of everything else."""
    obs = (np.asarray(mask) > 0).any(axis=-1).astype(np.int64)  # N, H, W
    n, hx, wx = obs.shape
    cum = np.zeros((n, hx + 1, wx + 1), np.int64)
    cum[:, 1:, 1:] = obs.cumsum(1).cumsum(2)
    out = []
    for l, g in enumerate(model.geoms[:-1]):
        col = model.colourings[l]
        r0 = np.minimum(np.arange(g.nbh) * col.step_h, hx)
        r1 = np.minimum(r0 + col.ext_h, hx)
        c0 = np.minimum(np.arange(g.nbw) * col.step_w, wx)
        c1 = np.minimum(c0 + col.ext_w, wx)
        seen = (cum[:, r1][:, :, c1] - cum[:, r0][:, :, c1] - cum[:, r1][:, :, c0]
                + cum[:, r0][:, :, c0])
        out.append(seen == 0)
    return out


def unpool_blocks(x_above: tf.Tensor, zd: tf.Tensor, p: int) -> tf.Tensor:
    """S[l] = unpool(X[l+1], Z[l]) with Z given densely (supplement, notation 3)."""
    up = tf.repeat(tf.repeat(x_above, p, axis=1), p, axis=2)
    return up[:, : tf.shape(zd)[1], : tf.shape(zd)[2], :] * zd


def down_from(x_l: tf.Tensor, l: int, model: DeepModel, d: Sequence[tf.Tensor],
              zd: Sequence[tf.Tensor]) -> tf.Tensor:
    """Push X[l] down to the data plane through unpooling Z[l-1], D[l-1], ..., D[0]."""
    x = x_l
    for j in range(l - 1, -1, -1):
        x = full_conv(unpool_blocks(x, zd[j], model.geoms[j].p), d[j])
    return x


def layer_inputs(s_top: tf.Tensor, model: DeepModel, d: Sequence[tf.Tensor],
                 zd: Sequence[tf.Tensor]) -> list[tf.Tensor]:
    """[X[0], X[1], ..., X[L-1]]: every layer's input, X[0] the reconstruction."""
    xs = [None] * model.n_layers
    x = full_conv(s_top, d[-1])
    xs[-1] = x
    for j in range(model.n_layers - 2, -1, -1):
        x = full_conv(unpool_blocks(x, zd[j], model.geoms[j].p), d[j])
        xs[j] = x
    return xs


def generate(s_top: tf.Tensor, model: DeepModel, d: Sequence[tf.Tensor],
             z: Sequence[tf.Tensor]) -> tf.Tensor:
    """X[0] = g(S[L-1]): the noiseless image of the top-layer weights (block-state z)."""
    zd = [dense_indicators(zz, g) for zz, g in zip(z, model.geoms[:-1])]
    return layer_inputs(s_top, model, d, zd)[0]


def project_top_to_data(model: DeepModel, d: Sequence[tf.Tensor], layer: int = -1) -> np.ndarray:
    """Fig. 2: each element of D[layer] seen in the data plane, (K, h, w, C).

    The paper projects the top-layer elements through the generative process; the lower
    layers' unpooling is a random choice, so the projection uses its expected value
    under a uniform position in every block (each block spreads 1/p^2 to each position),
    which shows the element's average footprint, not one sample of it.
    """
    l = model.n_layers - 1 if layer == -1 else layer
    g = model.geoms[l]
    # one unit per map at the centre-ish of S[l]
    s = np.zeros((g.k, g.hs, g.ws, g.k), np.float32)
    s[np.arange(g.k), g.hs // 2, g.ws // 2, np.arange(g.k)] = 1.0
    x = full_conv(tf.constant(s), d[l])
    for j in range(l - 1, -1, -1):
        gj = model.geoms[j]
        zd = tf.fill([g.k, gj.hs, gj.ws, gj.k], 1.0 / (gj.p * gj.p))
        x = full_conv(unpool_blocks(x, zd, gj.p), d[j])
    return np.asarray(x)


def draw_top_prior(model: DeepModel, n: int, seed, gamma_s: float,
                   on_rate: np.ndarray | None = None) -> tf.Tensor:
    """(n, hs, ws, K) top layers S[L-1] = W . Z from the model's prior (Sec. 2):
    W ~ N(0, 1 / gamma_s), Z ~ Bern(pi), pi ~ Beta(1/K, 1 - 1/K) per image and map (a
    U-shaped prior: most maps have all their units off, a few all on); with ``on_rate``
    (K,) each map's pi held at it instead."""
    gt = model.top
    seeds = random.split(tf.convert_to_tensor(seed, tf.int32), ("pi", "on", "w"))
    if on_rate is None:
        pi = tf.exp(log_dirichlet_sample(tf.broadcast_to(model.pi_prior, [n, gt.k, 2]), seeds.pi)[..., 0])
    else:
        pi = tf.broadcast_to(tf.constant(on_rate, tf.float32), [n, gt.k])
    u = tf.random.stateless_uniform([n, gt.hs, gt.ws, gt.k], seeds.on)
    w = tf.random.stateless_normal([n, gt.hs, gt.ws, gt.k], seeds.w) / math.sqrt(gamma_s)
    return w * tf.cast(u < pi[:, None, None, :], tf.float32)


def images_given_top(model: DeepModel, d: Sequence[tf.Tensor], s_top: tf.Tensor,
                     theta: Sequence[np.ndarray], unpooling: str = "mean", seed=(0, 0)) -> tf.Tensor:
    """X[0] of top layers ``s_top`` with no residual. ``unpooling``: "mean" puts each block
    of layer l < L-1 at E[Z | theta[l]] ((K_l, p*p+1) state probabilities), the model's
    mean image given S[L-1] (g is linear in each layer's indicators); "draw" draws each
    block's state from theta[l] (from ``seed``)."""
    if unpooling not in ("mean", "draw"):
        raise ValueError(f"unpooling must be 'mean' or 'draw', got {unpooling!r}")
    m = tf.shape(s_top)[0]
    zd = []
    for l, g in enumerate(model.geoms[:-1]):
        probs = tf.broadcast_to(tf.constant(theta[l], tf.float32), [m, g.k, g.n_states])
        if unpooling == "mean":  # every block at E[Z | theta]: its position probabilities
            zd.append(indicator_map(tf.broadcast_to(probs[:, None, None, :, : g.p * g.p],
                                                    [m, g.nbh, g.nbw, g.k, g.p * g.p]), g))
        else:
            logits = tf.math.log(tf.maximum(tf.reshape(
                tf.broadcast_to(probs[:, None, None], [m, g.nbh, g.nbw, g.k, g.n_states]),
                [-1, g.n_states]), 1e-30))
            draw = tf.random.stateless_categorical(logits, 1, random.fold(
                tf.convert_to_tensor(seed, tf.int32), l), dtype=tf.int32)
            zd.append(dense_indicators(tf.reshape(draw, [m, g.nbh, g.nbw, g.k]), g))
    return layer_inputs(s_top, model, d, zd)[0]


def sample_prior_images(model: DeepModel, d: Sequence[np.ndarray], *, n: int, seed,
                        gamma_s: float, theta: Sequence[np.ndarray], on_rate: np.ndarray | None = None,
                        unpooling: str = "mean") -> np.ndarray:
    """Images drawn top-down from random top-layer weights (Fig. 3, supplement Sec. 1.1):
    :func:`draw_top_prior`, then :func:`images_given_top`. Draws with every top unit off
    (a blank image; about 15 % under the prior at MNIST's K) are skipped."""
    dd = [tf.constant(x, tf.float32) for x in d]
    seed = tf.convert_to_tensor(seed, tf.int32)
    out, rnd = [], 0
    while sum(len(v) for v in out) < n:  # 2n candidates a round: rarely more than one
        s_top, s_z = tf.unstack(tf.random.experimental.stateless_split(random.fold(seed, rnd), 2))
        top = draw_top_prior(model, 2 * n, s_top, gamma_s, on_rate)
        img = np.asarray(images_given_top(model, dd, top, theta, unpooling, s_z))
        out.append(img[np.asarray(tf.reduce_any(top != 0, axis=[1, 2, 3]))])
        rnd += 1
    return np.concatenate(out)[:n]
