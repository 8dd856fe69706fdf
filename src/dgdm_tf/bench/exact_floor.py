"""The two floors of each sampler step, in multiply-adds, counted before any kernel runs.

The convolution floor (:func:`floor_macs`, :func:`layer_floor_macs`) is one generative
pass of the model and its adjoint: what any sampler that touches every feature-map entry
must compute. The exact floor is what the step's exact conditional needs. An exact Gibbs step may need more than that (the top units of MNIST's
two-layer model need some 30x more), or less (a pretraining sweep skips the unpooled
zeros). This module counts, per step, what its exact conditional cannot do without,
before any kernel runs; :mod:`dgdm_tf.bench.sweeps` turns the count into seconds at the
rate the machine reached on the convolution floor of the same batch
(``exact seconds = floor seconds x exact multiply-adds / floor multiply-adds``), and each
timed step's ratio to it goes beside its ratio to the convolution floor in
``results/benchmarks.md``. The target: every step within 2x of its exact floor.

What each step's conditional needs, per image unless said (``atom_l`` = dh dw C of layer
l's dictionary, ``pos_l`` = hs ws K of its feature maps, ``blocks_l`` = nbh nbw K):

* **A layer's own unpooling blocks** (a pretraining layer; layer 1 of the top-down model),
  :func:`block_macs`: each block's categorical over its p^2 positions needs the
  correlation of D_k at each position with the residual left by every block drawn before
  it, ``atom`` multiply-adds a position, every position of every map once:
  ``pos x atom`` (one dense adjoint pass, the unpooled zeros included, since every
  position is a candidate). Then the drawn atom goes into the residual, ``atom`` a block:
  ``blocks x atom``, counted with every block on (the sparse terms at their largest).
* **D of a layer by its exact Gaussian** (pretraining; D[1] of the top-down model),
  :func:`d_exact_macs`, per batch: its mean's right-hand side correlates the residual
  with each map's non-zeros, ``blocks x atom`` an image (every block on); its precision
  is factored once a map, ``m^3 / 3`` (m = dh dw), and the mean and the draw take
  three products with ``m x m`` matrices for each of the C channels. S_k's
  autocorrelation (at most (2 dh - 1)(2 dw - 1) products an on-block, C times fewer than
  the right-hand side's) is not counted.
* **Units or blocks of a layer l >= 2 of the top-down model**, :func:`candidate_macs`:
  each candidate (a block's value at one of its p^2 positions, or a top unit) needs its
  image in the data plane through the current unpooling below it, once a sweep (its
  norm changes with the unpooling below). The lesser of two ways to build it: spread
  sparsely (its value spread by its atom, each of those atom_l values placed at one
  position of its block below and spread by that layer's atom, and so on down:
  ``pos_l x sum_{i <= l} prod_{i <= j <= l} atom_j``, no zeros and no block outside the
  footprint), or dense over its footprint windows
  (:func:`dgdm_tf.bench.mcem.sweep_cost`). The inner products of the images with the
  residual and the residual's updates (no more than the images' own size) are not
  counted. This is the count of the deleted probe ``experiments/scaling/arithmetic_ratio.py``
  (docs/scaling.md quotes it), for every layer.
* **D[l >= 2] by HMC**, :func:`hmc_macs`, per batch: the kernel's n_leapfrog + 1
  potential gradients, its Hutchinson probe and its power iterations (products with the
  conditional's precision) are each one pass of D[l]'s image down to the data plane and
  its adjoint back: the convolution floor of layers 1..l. (Its Gaussian conditional could
  be drawn exactly only through an N-image Gram of dh dw K_{l-1} columns a map; the
  step as built is the HMC kernel, and this is its own least arithmetic.)
* **The SVM's beta** (the supervised sweep), :func:`beta_macs`, per batch: C Gaussians
  in F + 1 dimensions from B images, through the lesser of the primal ((F+1)^2 B +
  (F+1)^3 / 3) and the dual (B^2 (F+1) + B^3 / 3) factorisation.
* **One MCEM iteration of Algorithm 2**: the E-step's blocks below the top layer, the
  units' maximisation (their images, as the top units' step), each RMSprop step's
  gradient (one convolution floor) and the residual after it (one generative pass).

theta, pi, the noise and slab precisions, lambda, omega and kappa read sums the steps
above leave behind (a pass over the pixels or units at most) and are not counted. Whole
sweeps are the sums of their steps.
"""

from __future__ import annotations

from math import prod

from dgdm_tf.bench.mcem import sweep_cost

#: names of :func:`dgdm_tf.bench.sweeps.benchmark_refine`'s sweeps (its rows' ``step``)
REFINE_SWEEP = "refinement sweep"
TEST_SWEEP = "test-time sweep (D fixed)"
SUPERVISED_SWEEP = "supervised sweep (with the SVM)"
MCEM_ITERATION = "test-time MCEM iteration (supervised)"
TOP_UNITS = "top units"


def blocks_step(l: int) -> str:
    """The name of the step that draws the unpooling blocks of layer ``l`` (0-based)."""
    return f"blocks of layer {l + 1}"


def d_step(l: int, n_leapfrog: int) -> str:
    """The name of the step that draws D of layer ``l`` (0-based)."""
    return "D[1] (exact Gaussian)" if l == 0 else f"D[{l + 1}] (HMC, {n_leapfrog} leapfrog)"


def layer_floor_macs(geom, batch: int) -> int:
    """Multiply-adds of one layer's convolution floor: every map's convolution at full
    size (the unpooled zeros included) and its adjoint."""
    return 2 * batch * geom.hs * geom.ws * geom.k * geom.dh * geom.dw * geom.c


def floor_macs(model, batch: int) -> int:
    """Multiply-adds of the whole model's convolution floor: one generative pass of every
    layer and its adjoint."""
    return sum(layer_floor_macs(g, batch) for g in model.geoms)


def _atom(g) -> int:
    return g.dh * g.dw * g.c


def block_macs(g) -> int:
    """A layer's own blocks, one image: every position's correlation with the residual
    (``hs ws K atom``) and every block's drawn atom into it (``nbh nbw K atom``)."""
    return (g.hs * g.ws + g.nbh * g.nbw) * g.k * _atom(g)


def d_exact_macs(g, batch: int) -> int:
    """D of a layer from its exact Gaussian, a batch: the right-hand sides (every block's
    atom, every image) and each map's factorisation and three products per channel."""
    m = g.dh * g.dw
    return batch * g.nbh * g.nbw * g.k * _atom(g) + g.k * (m ** 3 // 3 + 3 * m * m * g.c)


def pretrain_sweep_macs(g, batch: int) -> int:
    """One pretraining sweep of a layer of geometry ``g`` over ``batch`` images."""
    return batch * block_macs(g) + d_exact_macs(g, batch)


def candidate_macs(model, l: int) -> int:
    """Layer ``l``'s (0-based) candidates' data-plane images, one image: layer 0's are
    :func:`block_macs`; above it the lesser of the sparse spread and the windowed passes."""
    if l == 0:
        return block_macs(model.geoms[0])
    g = model.geoms[l]
    spread = sum(prod(_atom(model.geoms[j]) for j in range(i, l + 1)) for i in range(l + 1))
    sparse = g.hs * g.ws * g.k * spread
    windowed = {r["layer"]: r["macs"] for r in sweep_cost(model)}[l + 1]
    return min(sparse, windowed)


def hmc_macs(model, l: int, batch: int, n_leapfrog: int, power_iterations: int) -> int:
    """D[l] (l >= 1) by HMC, a batch: n_leapfrog + 1 gradients, one probe and
    ``power_iterations`` precision products, each the convolution floor of layers 0..l."""
    passes = n_leapfrog + 2 + power_iterations
    return passes * sum(layer_floor_macs(model.geoms[j], batch) for j in range(l + 1))


def beta_macs(n_features: int, n_classes: int, batch: int) -> int:
    """The SVM's beta, a batch: the lesser of the primal and the dual factorisation."""
    f = n_features + 1
    return n_classes * min(f * f * batch + f ** 3 // 3, batch * batch * f + batch ** 3 // 3)


def topdown_macs(model, batch: int, *, n_leapfrog: int, power_iterations: int,
                 n_classes: int = 10, rmsprop_steps: int = 1) -> dict[str, int]:
    """The exact floor's multiply-adds of every step :func:`dgdm_tf.bench.sweeps.benchmark_refine`
    times, over ``batch`` images, keyed by the step's name."""
    top = model.n_layers - 1
    out = {TOP_UNITS: batch * candidate_macs(model, top)}
    for l in range(top):
        out[blocks_step(l)] = batch * candidate_macs(model, l)
    out[d_step(0, n_leapfrog)] = d_exact_macs(model.geoms[0], batch)
    for l in range(1, model.n_layers):
        out[d_step(l, n_leapfrog)] = hmc_macs(model, l, batch, n_leapfrog, power_iterations)
    local = sum(out[blocks_step(l)] for l in range(top))
    out[TEST_SWEEP] = out[TOP_UNITS] + local
    out[REFINE_SWEEP] = out[TEST_SWEEP] + sum(out[d_step(l, n_leapfrog)]
                                              for l in range(model.n_layers))
    g = model.top
    out[SUPERVISED_SWEEP] = out[REFINE_SWEEP] + beta_macs(g.hs * g.ws * g.k, n_classes, batch)
    floor = floor_macs(model, batch)
    out[MCEM_ITERATION] = local + out[TOP_UNITS] + rmsprop_steps * floor + floor // 2
    return out
