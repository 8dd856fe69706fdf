"""Axis layout and shape arithmetic, defined once (Sec. 2, NHWC).

Tensors are NHWC; the dictionary element index k is always the LAST axis:

    X[l]  (N, Hx, Wx, K_{l-1})   input of layer l (X[1] is the image)
    D[l]  (dh, dw, K_{l-1}, K_l) dictionary of layer l
    S[l]  (N, Hs, Ws, K_l)       feature maps, Hs = Hx - dh + 1 (full convolution)
    Z[l]  (N, Hs, Ws, K_l)       0/1 unpooling indicators

Unpooling blocks are p x p; the block grid is ceil(Hs/p) x ceil(Ws/p) (partial blocks at
the bottom/right edge). A block's state is an integer in 0..p*p: 0..p*p-1 is the
row-major position of its single non-zero entry, p*p is "block off" (Sec. 2.2). A chain
holds the states as bytes (:data:`BLOCK_STATE_DTYPE`): z is the largest per-image field of
its state (MNIST: 10 of an image's 24 KB as int32), and a sweep holds several copies.

Exact blocked Gibbs (the supplement, "Gibbs Sampling"): blocks of one map whose footprints in X are disjoint
are conditionally independent. A block's footprint in X is (p + dh - 1) x (p + dw - 1), so
colouring the block grid with a G_h x G_w pattern, G = ceil((p + d - 1) / p), gives
colours whose blocks never overlap. The sampler keeps the block grid padded to a
multiple of G so every colour has the same number of blocks (static shapes); padded
blocks are held off.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

#: dtype of the block states a chain stores (p*p + 1 states fit a signed byte for p <=
#: :data:`MAX_POOL`); computations index with int32 (a gather takes no bytes)
BLOCK_STATE_DTYPE = np.int8
MAX_POOL = 11


@dataclasses.dataclass(frozen=True)
class LayerGeometry:
    """Shapes of one layer: input (hx, wx, c), dictionary (dh, dw), K maps, pooling p."""

    hx: int
    wx: int
    c: int
    dh: int
    dw: int
    k: int
    p: int

    def __post_init__(self) -> None:
        for name in ("hx", "wx", "c", "dh", "dw", "k", "p"):
            if getattr(self, name) < 1:
                raise ValueError(f"LayerGeometry.{name} must be >= 1, got {getattr(self, name)}")
        if self.p > MAX_POOL:
            raise ValueError(f"pool {self.p} is larger than {MAX_POOL}: a block's {self.p}^2 + 1 "
                             f"states must fit a byte; use model.layers[].pool <= {MAX_POOL}")
        if self.dh > self.hx or self.dw > self.wx:
            raise ValueError(
                f"dictionary {self.dh}x{self.dw} is larger than the layer input {self.hx}x{self.wx}: "
                "reduce model.layers[].dict_size or the number of pooling steps below this layer")

    # feature-map and block-grid sizes -------------------------------------------------
    @property
    def hs(self) -> int:
        return self.hx - self.dh + 1

    @property
    def ws(self) -> int:
        return self.wx - self.dw + 1

    @property
    def nbh(self) -> int:
        return math.ceil(self.hs / self.p)

    @property
    def nbw(self) -> int:
        return math.ceil(self.ws / self.p)

    @property
    def n_states(self) -> int:
        """p*p positions plus the off state."""
        return self.p * self.p + 1

    @property
    def off(self) -> int:
        return self.p * self.p

    # colouring --------------------------------------------------------------------------
    @property
    def gh(self) -> int:
        return min(math.ceil((self.p + self.dh - 1) / self.p), self.nbh)

    @property
    def gw(self) -> int:
        return min(math.ceil((self.p + self.dw - 1) / self.p), self.nbw)

    @property
    def nch(self) -> int:
        """Blocks per colour along H (the grid is padded to nch * gh blocks)."""
        return math.ceil(self.nbh / self.gh)

    @property
    def ncw(self) -> int:
        return math.ceil(self.nbw / self.gw)

    @property
    def hs_pad(self) -> int:
        return self.nch * self.gh * self.p

    @property
    def ws_pad(self) -> int:
        return self.ncw * self.gw * self.p

    @property
    def hx_pad(self) -> int:
        return self.hs_pad + self.dh - 1

    @property
    def wx_pad(self) -> int:
        return self.ws_pad + self.dw - 1

    @property
    def fh(self) -> int:
        """Footprint of one block in X along H."""
        return self.p + self.dh - 1

    @property
    def fw(self) -> int:
        return self.p + self.dw - 1

    @property
    def crop_h(self) -> int:
        """Height of the X window that holds every footprint of one colour."""
        return (self.nch - 1) * self.gh * self.p + self.fh

    @property
    def crop_w(self) -> int:
        return (self.ncw - 1) * self.gw * self.p + self.fw

    @property
    def tile_h(self) -> int:
        """Stride between the footprints of one colour's blocks in X along H."""
        return self.gh * self.p if self.nch > 1 else self.fh

    @property
    def tile_w(self) -> int:
        return self.gw * self.p if self.ncw > 1 else self.fw

    @property
    def hr(self) -> int:
        """Rows of the sampler's zero-padded residual: every colour's tiles fit."""
        return max(self.hx_pad, (self.gh - 1) * self.p + self.nch * self.tile_h)

    @property
    def wr(self) -> int:
        return max(self.wx_pad, (self.gw - 1) * self.p + self.ncw * self.tile_w)

    @property
    def next_shape(self) -> tuple[int, int, int]:
        """(H, W, C) of the pooled output, the input of the layer above."""
        return (self.nbh, self.nbw, self.k)

    def with_k(self, k: int) -> "LayerGeometry":
        return dataclasses.replace(self, k=k)

    def valid_positions(self) -> np.ndarray:
        """(G_h, G_w, nch, ncw, p*p) bool: which (colour, block, position) exist in S.

        False for padded blocks and for positions of partial edge blocks beyond Hs/Ws.
        """
        p = self.p
        out = np.zeros((self.gh, self.gw, self.nch, self.ncw, p * p), dtype=bool)
        for a in range(self.gh):
            for b in range(self.gw):
                for u in range(self.nch):
                    for v in range(self.ncw):
                        i0 = (u * self.gh + a) * p
                        j0 = (v * self.gw + b) * p
                        for m in range(p * p):
                            out[a, b, u, v, m] = (i0 + m // p < self.hs) and (j0 + m % p < self.ws)
        return out

    def n_valid_blocks(self) -> int:
        return self.nbh * self.nbw


def layer_geometries(image_shape: tuple[int, int, int], layers: list[dict]) -> list[LayerGeometry]:
    """Geometries of a stack: layers = [{'dict_size', 'n_dict', 'pool'}, ...] (Sec. 2.2)."""
    h, w, c = image_shape
    geoms = []
    for i, spec in enumerate(layers):
        d = spec["dict_size"]
        dh, dw = (d, d) if isinstance(d, int) else tuple(d)
        g = LayerGeometry(hx=h, wx=w, c=c, dh=dh, dw=dw, k=spec["n_dict"], p=spec.get("pool", 1))
        geoms.append(g)
        h, w, c = g.next_shape
    return geoms


def dirichlet_prior(geom: LayerGeometry, top: bool) -> np.ndarray:
    """Dirichlet concentration over the p*p + 1 block states (last = off).

    Lower layers: symmetric Dir(1/(p^2+1)) as in the supplement's conditional of theta.
    A top layer without pooling (p = 1) is the paper's spike-slab (eq. 3):
    pi ~ Beta(a0, b0) with a0 = 1/K, b0 = 1 - 1/K, i.e. Dir(1/K [on], 1 - 1/K [off]).
    """
    if top and geom.p == 1:
        return np.array([1.0 / geom.k, 1.0 - 1.0 / geom.k], dtype=np.float32)
    return np.full(geom.n_states, 1.0 / geom.n_states, dtype=np.float32)
