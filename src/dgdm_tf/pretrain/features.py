"""Top-layer features of images with the dictionaries fixed (Gibbs, samples averaged).

Layer by layer, bottom up: the local variables of each image (z, W, theta, gamma_e) are
sampled with D and gamma_w held at their pretrained values; the posterior mean of the
pooled feature maps over the collected sweeps (Rao-Blackwellised: the conditional
expectation of each block at its draw, see ``pretrain.resample_zw``) is the next
layer's input, as in pretraining. The top layer's averaged maps, flattened, are the
features (Sec. 4.1: MNIST 2 x 2 x K_2). Images are processed in batches; batch b's chain is seeded by
fold-in of (seed, layer, b), so features do not depend on how many batches ran before.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np
import tensorflow as tf

from dgdm_tf.core import random
from dgdm_tf.core.compiled import per_layer
from dgdm_tf.mcmc import anneal
from dgdm_tf.pretrain.chain_parts import check_finite
from dgdm_tf.core.layout import LayerGeometry
from dgdm_tf.mcmc.diagnostics import map_distance, pooled_traces, trace_settlement
from dgdm_tf.mcmc.driver import Kernel, run_in_memory
from dgdm_tf.pretrain.kernel import make_sweep_fn
from dgdm_tf.core.hyper import Hyper
from dgdm_tf.pretrain.layer_model import LayerModel, init_state
from dgdm_tf.pretrain.options import FeatureOptions, Pretrained
from dgdm_tf.pretrain.ridge_start import ridge_start


#: the scalars each layer-wise feature chain traces at every sweep, each an image's value
#: summed over the batch: the mean pooled feature, gamma_e
TRACE_SCALARS = ("feature_mean", "gamma_e_mean")


class _FeatureKernel(Kernel):
    """One batch's chain with D and gamma_w held, for
    :func:`dgdm_tf.mcmc.driver.run_in_memory`: a sweep of its local state (gamma_e
    capped over the tempered steps), whose draw is the sweep's Rao-Blackwellised pooled
    maps (``x_next``); with ``trace``, each sweep's row holds :data:`TRACE_SCALARS`."""

    def __init__(self, sweep_fn, xt, cap_start, anneal_ratio, *, trace):
        self.sweep_fn, self.xt, self.trace = sweep_fn, xt, trace
        self.cap_start, self.anneal_ratio = cap_start, anneal_ratio

    def step(self, state, at):
        cap = anneal.gamma_e_cap(self.cap_start, at.t, at.anneal, self.anneal_ratio)
        state, expected = (self.sweep_fn(state, self.xt) if cap is None
                           else self.sweep_fn(state, self.xt, tf.constant(cap)))
        ex = np.asarray(expected) if at.collected or self.trace else None
        row = {}
        if self.trace:  # the traced scalars (TRACE_SCALARS), summed over the batch's images
            row = {"feature_mean": float(np.sum(np.mean(ex, axis=(1, 2, 3), dtype=np.float64))),
                   "gamma_e_mean": float(np.sum(np.asarray(state.gamma_e, np.float64)))}
        return state, row, {"x_next": ex} if at.collected else None


def infer_layer(x: np.ndarray, model: Pretrained, options: FeatureOptions, *, seed: int,
                layer: int = 0, stats: dict | None = None,
                progress: Callable[[str], None] | None = print) -> np.ndarray:
    """Posterior mean of pooled S (N, ceil(Hs/p), ceil(Ws/p), K) of layer ``layer`` (0:
    layer 1) of ``model`` (:class:`dgdm_tf.pretrain.options.Pretrained`: its D and gamma_w
    fixed) on that layer's input ``x``, with the settings ``options``
    (:class:`FeatureOptions`, config block `features`).

    The first ``anneal_sweeps`` burn-in sweeps cap gamma_e by a schedule rising
    ``anneal_ratio``-fold from ``anneal_start`` / Var(x_n) (:mod:`dgdm_tf.mcmc.anneal`).
    ``scan`` is the sampler's visiting order (``pretrain.LayerModel``; ``colour_order``
    the fixed scan's order of chain 0). ``start``: each chain's local state starts at
    :mod:`dgdm_tf.pretrain.ridge_start`'s fit of the image (gamma_e at its conditional
    mean there, the model's gamma_e start unused); ``None``: every block off, gamma_e at
    the model's start for the layer.

    ``chains`` independent chains per image are averaged. At the model's noise precision
    one chain keeps the decomposition of the image it reaches in its first sweeps; the
    posterior mean averages over many (docs/findings/layerwise_chains_top.md). Chain 0 is
    the single chain (``colour_order``, the seeds of ``chains=1``); chain c > 0 of the
    fixed scan visits the colours in the c-th of a fixed sequence of orders (a
    permutation seeded by (layer, c), not by ``seed``, so train and test features are
    built by the same orders), each an exact sweep; its draws come from ``seed``. With
    ``scan="random"`` the chains differ by their seeds only. With ``stats`` (a dict) and
    two or more chains, ``stats['half_distance']`` is the relative distance between the
    averages of the even and the odd chains (``mixing.map_distance`` of the two feature
    tensors): near 0 when the chains agree, ~1.4 when they are unrelated; and
    ``stats['trace_sums']`` (batches, chains, len(TRACE_SCALARS), sweeps) with
    ``stats['trace_images']`` (batches,), each chain's traced scalars summed over each
    batch's images (:func:`dgdm_tf.mcmc.diagnostics.pooled_traces`), and
    ``stats['chain_mixing']``, their R-hat, bulk ESS and drift
    (:func:`dgdm_tf.mcmc.diagnostics.trace_settlement`).
    """
    o, layer_index = options, layer
    x = np.asarray(x, np.float32)
    d = np.asarray(model.dictionaries[layer], np.float32)
    pool, gamma_w = model.pools[layer], model.gamma_ws[layer]
    gamma_e_init = model.gamma_e_init(layer)
    jit_compile = o.jit_for(layer, len(model))
    n, h, w, c = x.shape
    if d.shape[2] != c:
        raise ValueError(f"dictionary of layer {layer_index + 1} expects {d.shape[2]} input "
                         f"channels, the input has {c}")
    hyp = Hyper.from_dict(model.hyper)
    say = progress or (lambda _m: None)
    geom = LayerGeometry(hx=h, wx=w, c=c, dh=d.shape[0], dw=d.shape[1], k=d.shape[3], p=pool)
    colours = [(a, b) for a in range(geom.gh) for b in range(geom.gw)]
    sums = np.zeros((2, n, geom.nbh, geom.nbw, geom.k), np.float64)  # even, odd chains
    t0 = time.time()
    chains, batch_size, collect = o.chains, o.batch_size, o.collect
    traces, trace_images = {}, {}  # by batch: each chain's traced scalars, the batch's images
    for ch in range(chains):
        order = o.colour_order
        if ch > 0 and o.scan == "fixed":
            # the same orders for every image set: train and test features built alike
            perm = np.random.default_rng([layer_index, ch]).permutation(len(colours))
            order = [colours[i] for i in perm]
        fns = {}
        for b0, b1 in o.batch_bounds(n):
            xb = x[b0: b1]
            nb = len(xb)
            lm = LayerModel(geom, hyp, top=(pool == 1), n_images=nb, colour_order=order,
                            scan=o.scan)
            if nb not in fns:  # the last, shorter batch gets its own trace
                fns[nb] = make_sweep_fn(lm, update_d=False, update_gamma_w=False,
                                        return_expected_pool=True, jit_compile=jit_compile)
            bseed = tf.random.experimental.stateless_fold_in(
                tf.constant([seed, layer_index], tf.int32), b0 // batch_size)
            if ch > 0:
                bseed = random.fold(bseed, random.SALTS["feature_chains"] + ch)
            st = init_state(xb, lm, bseed, gamma_e_init=gamma_e_init)
            st = st._replace(d=tf.constant(d), gamma_w=tf.constant(np.float32(gamma_w)))
            xt = tf.constant(xb)
            if o.start is not None:
                st = ridge_start(st, xt, lm, o.start,
                                 random.fold(bseed, "pretrain_start"),
                                 fixed_gamma_w=True)
            kernel = _FeatureKernel(fns[nb], xt, o.anneal_start * anneal.start_precision(xb),
                                    o.anneal_ratio, trace=chains > 1)
            run = run_in_memory(kernel, o.schedule, st)
            acc = run.sums["x_next"]
            if chains > 1:
                traces.setdefault(b0, []).append([[row[k] for row in run.rows] for k in TRACE_SCALARS])
                trace_images[b0] = nb
            check_finite(f"layer {layer_index + 1} features", acc)
            sums[ch % 2, b0: b0 + nb] += acc / collect
            done = ch * n + b0 + nb
            say(f"layer {layer_index + 1}" + (f", chain {ch + 1}/{chains}" if chains > 1 else "")
                + f": {b0 + nb}/{n} images, {done / max(time.time() - t0, 1e-9):.1f} images/s")
    if stats is not None and chains > 1:
        halves = [sums[0] / ((chains + 1) // 2), sums[1] / (chains // 2)]
        stats["half_distance"] = map_distance(halves[0].ravel(), halves[1].ravel())
        stats["trace_sums"] = np.asarray([traces[b] for b in sorted(traces)], np.float64)
        stats["trace_images"] = np.asarray([trace_images[b] for b in sorted(traces)], np.int64)
        stats["chain_mixing"] = trace_settlement(
            pooled_traces(stats["trace_sums"], stats["trace_images"], TRACE_SCALARS),
            collected=[o.schedule.at(t).collected for t in range(o.schedule.total)])
    return (sums.sum(axis=0) / chains).astype(np.float32)


def infer_features(x: np.ndarray, model: Pretrained, options: FeatureOptions, *, seed: int,
                   layer_outputs: list | None = None, layer_stats: list | None = None,
                   progress: Callable[[str], None] | None = print) -> np.ndarray:
    """(N, F) top-layer features of ``x`` through every layer of ``model``
    (:class:`dgdm_tf.pretrain.options.Pretrained`), samples averaged, each layer's
    chains those of :func:`infer_layer` with the settings ``options``
    (:class:`FeatureOptions`, config block `features`).

    ``layer_outputs``, a list, receives each layer's pooled posterior mean (N, h, w, K)
    (the mixing diagnostics read layer 1's); ``layer_stats``, a list, receives each
    layer's stats (:func:`infer_layer`). ``jit_compile``: XLA for every layer's (z, W)
    step, for the top layer's alone (``"top"``), or a list, one flag per layer
    (:func:`dgdm_tf.core.compiled.per_layer`).
    """
    per_layer(options.jit_compile, len(model))  # a wrong list is refused before any chain runs
    h = np.asarray(x, np.float32)
    for l in range(len(model)):
        st = {}
        h = infer_layer(h, model, options, seed=seed, layer=l, stats=st, progress=progress)
        if layer_outputs is not None:
            layer_outputs.append(h)
        if layer_stats is not None:
            layer_stats.append(st)
    return h.reshape(len(h), -1)
