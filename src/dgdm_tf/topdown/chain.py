"""The top-down sampler's chains with the dictionaries fixed: test-time features (the
posterior mean of the top layer given an image, several chains in different map orders)
and missing data. The refinement chain is :mod:`dgdm_tf.topdown.refine`; kernels are in
:mod:`dgdm_tf.topdown.sweep`."""

from __future__ import annotations

import time
from typing import Callable, Sequence

import numpy as np
import tensorflow as tf

from dgdm_tf.core import random
from dgdm_tf.core.shards import concat_parts, image_range
from dgdm_tf.mcmc.driver import Kernel, Schedule, run_in_memory
from dgdm_tf.topdown.options import Start, TopdownOptions
from dgdm_tf.topdown.state import init_state
from dgdm_tf.topdown.sweep import make_sweep_fn
from dgdm_tf.pretrain.chain_parts import check_finite
from dgdm_tf.core.model import DeepModel, layer_inputs, soft_indicators, unseen_blocks


def chain_permutations(ks: Sequence[int], chain: int) -> list[np.ndarray]:
    """The map order of chain ``chain`` of :func:`infer_topdown`, per layer: identity
    for chain 0, else the chain-th of a fixed sequence of permutations of each layer's
    K_l maps. Not drawn from the run's seed: train and test images (seeded apart) must
    be visited in the same orders, or their features differ by the order."""
    if chain == 0:
        return [np.arange(k) for k in ks]
    rng = random.numpy_rng(None, "topdown_chain_orders", chain)
    return [rng.permutation(int(k)) for k in ks]


def permute_maps(dictionaries: Sequence[np.ndarray], perms: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The same model with layer l's maps in order ``perms[l]``: D[l]'s atoms and
    D[l+1]'s input channels permuted alike (map j of the result is map perms[l][j])."""
    out = []
    for l, d in enumerate(dictionaries):
        d = np.asarray(d, np.float32)[..., perms[l]]
        if l > 0:
            d = d[:, :, perms[l - 1], :]
        out.append(np.ascontiguousarray(d))
    return out


#: the scalars each test-time top-down chain traces at every sweep, each an image's value
#: summed over the batch (``trace_sums``): the share of top units on, gamma_e, the mean
#: Rao-Blackwellised top feature
TRACE_SCALARS = ("active_top", "gamma_e_mean", "feature_mean")


class _TopdownKernel(Kernel):
    """One chain of one batch with every dictionary held, for
    :func:`dgdm_tf.mcmc.driver.run_in_memory`. Its state: (the model's state, the running
    sums of the collected draws' top features, reconstruction and layer 1's pooled
    output, the chain's kept draws). The sums start where the batch's earlier chains left
    them, so a batch's chains add into one sum in one order. ``back``: the chain's maps
    back to the given order (top layer, layer 1); with ``trace``, each sweep's row holds
    :data:`TRACE_SCALARS`."""

    def __init__(self, sweep_fn, xt, mask, model, unseen, *, back, keep_draws, trace):
        self.sweep_fn, self.xt, self.mask = sweep_fn, xt, mask
        self.model, self.unseen, self.keep_draws, self.trace = model, unseen, keep_draws, trace
        self.back_top, self.back_l1 = back

    def step(self, state, at):
        st, (f_acc, r_acc, l1_acc), drawn = state
        before = st  # the unpooling the top units were drawn against, its theta
        st, stats = self.sweep_fn(st, self.xt) if self.mask is None else \
            self.sweep_fn(st, self.xt, self.mask)
        row = {}
        if self.trace:  # the traced scalars (TRACE_SCALARS), summed over the batch's images
            row = {name: float(np.sum(np.mean(np.asarray(v, np.float64), axis=tuple(range(1, np.ndim(v))))))
                   for name, v in zip(TRACE_SCALARS, (st.on, st.gamma_e[:, None], stats["expected_top"]))}
        if at.collected:
            model, nb = self.model, int(self.xt.shape[0])
            ex = stats["expected_top"]
            f_t = np.asarray(ex)[..., self.back_top].reshape(nb, -1)
            f_acc = f_acc + f_t
            if self.keep_draws:
                drawn = drawn + [f_t.astype(np.float32)]
            zd = [soft_indicators(z, g, None if u is None else tf.exp(lt), u)
                  for z, lt, u, g in zip(before.z, before.log_theta, self.unseen, model.geoms[:-1])]
            xs = layer_inputs(ex, model, st.d, zd)
            r_acc = r_acc + np.asarray(xs[0])
            # layer 1's pooled output (its S when it is the top), for the mixing diagnostics
            l1_acc = l1_acc + np.asarray(xs[1] if model.n_layers > 1 else ex)[..., self.back_l1]
        return (st, (f_acc, r_acc, l1_acc), drawn), row, None


def infer_topdown(x: np.ndarray, start: Start, options: TopdownOptions, *, seed: int, mask=None,
                  images: Sequence[int] | None = None,
                  progress: Callable[[str], None] | None = print) -> dict:
    """Posterior means with every dictionary of ``start`` (:class:`Start`) and gamma_s
    (its ``gamma_s_init``) fixed: each image's own Z, S, theta, pi and gamma_e are sampled,
    with the settings ``options`` (:class:`TopdownOptions`, config block
    `topdown_features`; :class:`InpaintOptions`, block `inpaint`). ``mask`` (same shape as
    x, 1 = observed) drops the missing pixels from the likelihood. ``options.start``: the
    top layer's order-free start (:mod:`dgdm_tf.topdown.ridge_start`; None or kind off:
    every top unit off).

    Returns {'features': (N, F) Rao-Blackwellised mean of S[L-1],
    'reconstruction': (N, H, W, C) posterior mean of g(S[L-1], Z) (the whole image,
    missing pixels included), 'layer1_pooled': (N, h, w, K_1) posterior
    mean of layer 1's pooled output X[1] under the same draws (layer 1's S when it is the
    top; the mixing diagnostics read it), 'chains': how many chains each output averages,
    'seconds'}; with two or more chains also 'trace_sums': (batches, chains, scalars,
    sweeps) each chain's :data:`TRACE_SCALARS` at every sweep summed over the batch's
    images and 'trace_images': (batches,) their counts
    (:func:`dgdm_tf.mcmc.diagnostics.pooled_traces` makes them per-image means); with ``keep_chains`` also 'chain_features': (chains, N, F), each chain's own
    mean (their average is 'features'); with ``keep_draws`` also 'draws': (chains, collect,
    N, F), every collected sweep's features (for R-hat and ESS across chains). Batch b's chain is seeded by
    fold-in of (seed, b), so results do not depend on the batches before it. ``images``
    (start, stop): only those images' batches, whole ones
    (:func:`dgdm_tf.core.shards.shard_bounds`), with the same draws and outputs as in the
    call on all of ``x``; :func:`gather_topdown` joins such shards into that call's result.

    The reconstruction is Rao-Blackwellised twice, each sweep adding g at conditional
    means given the state before it: the top units' (drawn against that unpooling), and,
    with a ``mask``, the unpooling states of the blocks whose whole footprint is hidden
    (:func:`dgdm_tf.core.model.unseen_blocks`): they are absent from the likelihood, so
    given theta and the rest they are independent of the top units and of each other and
    distributed as theta; E[Z_b | theta] = theta replaces the one draw of each (the
    draws stay in the chain; its law is unchanged).

    ``chains`` > 1: that many independent chains per batch, averaged (each output is the
    mean of the chains' means). Chain 0 is the single chain (same seed, same draws);
    chain c >= 1 is seeded by fold-in of c and runs on the model with each layer's maps
    in the c-th of a fixed sequence of orders (:func:`chain_permutations`; the same model and posterior,
    visited in another scan order: the chains freeze into scan-order decompositions, so
    chains in one order differ little); its features are put back in the given order.
    ``chain_orders``: "permuted" (as just said) or "same": every chain visits the maps in
    the given order and differs from chain 0 by its seed alone.
    ``scan``: the sweeps' visiting order (:class:`DeepModel`); with "random" every
    chain draws its own orders, sweep by sweep, and the permuted maps only relabel them.
    """
    o, dictionaries = options, start.dictionaries
    collect, batch_size, chains = int(o.collect), int(o.batch_size), int(o.chains)
    keep_chains, keep_draws, top_start = o.keep_chains, o.keep_draws, o.ridge_start
    x = np.asarray(x, np.float32)
    if mask is not None:
        mask = np.asarray(mask, np.float32)
        if mask.shape != x.shape:
            raise ValueError(f"mask shape {mask.shape} differs from the images' {x.shape}")
        # missing pixels never enter (and need not be finite)
        x = np.where(mask > 0, x, 0.0).astype(np.float32)
    check_finite("inference input x (observed pixels)", x)
    say = progress or (lambda _m: None)
    ks = [int(np.shape(d)[-1]) for d in dictionaries]
    model = DeepModel(x.shape[1:], start.layers, start.hyper, scan=o.scan).with_ks(ks)
    lower = model.geoms[:-1]
    perms = [chain_permutations(ks, c if o.chain_orders == "permuted" else 0) for c in range(chains)]
    dicts = [permute_maps(dictionaries, pm) for pm in perms]
    feats, recs, l1s, per_chain, draws, traces, trace_images = [], [], [], [], [], [], []
    fns = {}
    lo, hi = image_range(images, len(x), batch_size)
    t0 = time.time()
    for b0 in range(lo, hi, batch_size):
        xb = x[b0: b0 + batch_size]
        mb = None if mask is None else tf.constant(mask[b0: b0 + batch_size])
        unseen = [None] * len(lower)
        if mask is not None:
            unseen = [u if u.any() else None for u in unseen_blocks(mask[b0: b0 + batch_size], model)]
        nb = len(xb)
        if nb not in fns:
            fns[nb] = make_sweep_fn(model, mask_given=mask is not None, update_globals=False)
        bseed = random.fold(random.salted(seed, "topdown_batch", tf.int32), b0 // batch_size)
        xt = tf.constant(xb)
        acc, f_chain, d_chain, t_chain = (0.0, 0.0, 0.0), [], [], []
        for c in range(int(chains)):
            f_before = acc[0]
            cseed = bseed if c == 0 else tf.random.experimental.stateless_fold_in(bseed, c)
            st = init_state(xb, model, dicts[c], cseed, gamma_e_init=start.gamma_e_init,
                            gamma_s_init=start.gamma_s_init, mask=mb, start=top_start)
            kernel = _TopdownKernel(fns[nb], xt, mb, model, unseen,
                                    back=(np.argsort(perms[c][-1]), np.argsort(perms[c][0])),
                                    keep_draws=keep_draws, trace=chains > 1)
            run = run_in_memory(kernel, o.schedule, (st, acc, []))
            _st, acc, drawn = run.state
            d_chain += drawn
            if chains > 1:
                t_chain.append([[row[k] for row in run.rows] for k in TRACE_SCALARS])
            if keep_chains:
                f_chain.append(((acc[0] - f_before) / collect).astype(np.float32))
        f_acc, r_acc, l1_acc = acc
        n_draws = collect * int(chains)
        check_finite("top-down features", f_acc)
        feats.append((f_acc / n_draws).astype(np.float32))
        recs.append((r_acc / n_draws).astype(np.float32))
        l1s.append((l1_acc / n_draws).astype(np.float32))
        if keep_chains:
            per_chain.append(np.stack(f_chain))
        if keep_draws:
            draws.append(np.stack(d_chain).reshape(int(chains), collect, nb, -1))
        if chains > 1:
            traces.append(np.asarray(t_chain, np.float64))
            trace_images.append(nb)
        done = b0 + nb - lo
        say(f"top-down inference: {done}/{hi - lo} images, {done / max(time.time() - t0, 1e-9):.2f} images/s")
    out = {"features": np.concatenate(feats), "reconstruction": np.concatenate(recs),
           "layer1_pooled": np.concatenate(l1s), "chains": int(chains),

           "seconds": time.time() - t0}
    if chains > 1:
        out["trace_sums"], out["trace_images"] = np.stack(traces), np.asarray(trace_images, np.int64)
    if keep_chains:
        out["chain_features"] = np.concatenate(per_chain, axis=1)
    if keep_draws:
        out["draws"] = np.concatenate(draws, axis=2)
    return out


def gather_topdown(parts: Sequence[dict]) -> dict:
    """:func:`infer_topdown`'s result on all images from its results on shards (in image
    order, each on whole batches via ``images``): every array joined along its image
    axis, bit for bit the unsplit call's."""
    return concat_parts(parts, {"chain_features": 1, "draws": 2})


class _StatesKernel(Kernel):
    """Sweeps of one chain that keep its state after each sweep count of ``keep``
    (state: (the model's state, {sweeps: state})), for
    :func:`dgdm_tf.mcmc.driver.run_in_memory`."""

    def __init__(self, sweep_fn, x, keep):
        self.sweep_fn, self.x, self.keep = sweep_fn, x, keep

    def step(self, state, at):
        st, kept = state
        st, _ = self.sweep_fn(st, self.x)
        return (st, {**kept, at.t + 1: st} if at.t + 1 in self.keep else kept), {}, None


def chain_states(x: np.ndarray, start: Start, *, seed, sweeps: Sequence[int], scan: str = "fixed",
                 top_start=None) -> tuple[DeepModel, dict]:
    """One chain of :func:`infer_topdown`'s kind on all of ``x`` at once, every dictionary
    of ``start`` (:class:`Start`) and its gamma_s (``gamma_s_init``) held, from stateless
    ``seed`` (a shape-(2,) seed), the top layer started by ``top_start``: returns (model,
    {t: the state after t sweeps} for each t in ``sweeps``). For the diagnostics that
    score the states themselves (:mod:`dgdm_tf.topdown.evidence`) rather than average
    them."""
    x = np.asarray(x, np.float32)
    check_finite("inference input x", x)
    model = DeepModel(x.shape[1:], start.layers, start.hyper, scan=scan).with_ks(
        [int(np.shape(d)[-1]) for d in start.dictionaries])
    st = init_state(x, model, start.dictionaries, seed, gamma_e_init=start.gamma_e_init,
                    gamma_s_init=start.gamma_s_init, start=top_start)
    keep = {int(t) for t in sweeps}
    kernel = _StatesKernel(make_sweep_fn(model, update_globals=False), tf.constant(x), keep)
    first = (st, {0: st} if 0 in keep else {})
    return model, run_in_memory(kernel, Schedule.steps(max(keep, default=0)), first).state[1]


def missing_mask(shape, kind: str, *, fraction: float = 0.5, block: int = 8, seed: int = 0) -> np.ndarray:
    """1 = observed. ``half``: the bottom half of every image hidden (the paper's figure);
    ``pixels``: each pixel hidden with probability ``fraction``; ``blocks``: one random
    ``block`` x ``block`` square hidden per image."""
    n, h, w, c = shape
    m = np.ones(shape, np.float32)
    rng = np.random.default_rng(seed)
    if kind == "half":
        m[:, h // 2:, :, :] = 0.0
    elif kind == "pixels":
        m = (rng.random((n, h, w, 1)) >= fraction).astype(np.float32) * np.ones((1, 1, 1, c), np.float32)
    elif kind == "blocks":
        if block > min(h, w):
            raise ValueError(f"missing block {block} is larger than the image {h}x{w}")
        for i in range(n):
            r, q = rng.integers(0, h - block + 1), rng.integers(0, w - block + 1)
            m[i, r: r + block, q: q + block, :] = 0.0
    else:
        raise ValueError(f"mask kind must be 'half', 'pixels' or 'blocks', got {kind!r}")
    return m


def hidden_error(x, x_hat, mask, peak: float = 1.0) -> dict:
    """MSE and PSNR (dB, peak ``peak``) over the hidden pixels (mask == 0)."""
    hid = np.asarray(mask) == 0
    if not hid.any():
        raise ValueError("the mask hides no pixel")
    mse = float(np.mean((np.asarray(x)[hid] - np.asarray(x_hat)[hid]) ** 2))
    return {"mse": mse, "psnr_db": float(10 * np.log10(peak ** 2 / max(mse, 1e-30)))}
