"""Throughput benchmarks: Gibbs sweeps against two floors.

The (convolution) floor: for a batch, one ``full_conv`` of every map and its adjoint --
the least work any sampler that touches every feature-map entry must do per sweep --
timed here. The exact floor: the multiply-adds the step's exact conditional needs
(:mod:`dgdm_tf.bench.exact_floor`) at the rate this machine reached on the convolution
floor of the same batch, ``floor seconds x exact multiply-adds / floor multiply-adds``.
:func:`benchmark_pretrain_layers`: the layer-wise pretraining sweep;
:func:`benchmark_refine`: the top-down sampler, its steps and the supervised model's.
Timings: :mod:`dgdm_tf.bench.timing`. Every row also gives the 1-minute load average as
it was measured (``load_1min``): the sweeps are thousands of small sequential kernels, and
while other processes share the cores they slow down far more than the floor's few large
convolutions, so a row measured above the machine's cores reads several times its quiet
ratio (docs/findings/pretrain_floor_ratio_load.md).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import numpy as np
import tensorflow as tf

from dgdm_tf.bench import exact_floor
from dgdm_tf.bench.exact_floor import (MCEM_ITERATION, REFINE_SWEEP, SUPERVISED_SWEEP, TEST_SWEEP,
                                       TOP_UNITS, blocks_step, d_step)
from dgdm_tf.bench.timing import median_seconds
from dgdm_tf.core.compiled import compiled
from dgdm_tf.core.layout import layer_geometries
from dgdm_tf.core.memory import peak_rss_mb
from dgdm_tf.core.ops import full_conv, full_conv_adjoint
from dgdm_tf.pretrain.kernel import make_sweep_fn
from dgdm_tf.core.hyper import Hyper
from dgdm_tf.pretrain.layer_model import LayerModel, init_state
from dgdm_tf.topdown.dictionaries import N_LEAPFROG, POWER_ITERATIONS


def pretrain_steps(image_shape: tuple[int, int, int], layers: list[dict], *, batch_size: int,
                   seed: int, hyper: dict | None = None, update_d: bool = True,
                   jit_compile: bool = False, scan: str = "random", rng=None) -> Iterator[tuple]:
    """Each layer's compiled pretraining sweep, as the workflow runs it (with the
    Rao-Blackwellised pooled features), and its arguments: ``(geometry, fn, state, x)``,
    one per layer, bottom up, each built as it is asked for; ``fn(state, x)`` returns
    ``(state, expected pool)``. Random inputs at each layer's true shape, drawn from
    ``rng`` (a fresh one from ``seed``)."""
    hyp = Hyper.from_dict(hyper)
    rng = np.random.default_rng(seed) if rng is None else rng
    for li, g in enumerate(layer_geometries(tuple(image_shape), layers)):
        x = rng.random((batch_size, g.hx, g.wx, g.c), dtype=np.float32)
        model = LayerModel(g, hyp, top=(g.p == 1), n_images=batch_size, scan=scan)
        state = init_state(x, model, tf.constant([seed, li], tf.int32))
        fn = make_sweep_fn(model, update_d=update_d, jit_compile=jit_compile,
                           return_expected_pool=True)
        yield g, fn, state, tf.constant(x)


def benchmark_pretrain_layers(image_shape: tuple[int, int, int], layers: list[dict], *,
                              batch_size: int, sweeps: int, seed: int,
                              hyper: dict | None = None, update_d: bool = True,
                              jit_compile: bool = False, scan: str = "random") -> list[dict]:
    """One row per layer: seconds per pretraining sweep vs the floor and the exact floor,
    at ``batch_size``; ``scan``: the sweep's order (``pretrain.scan``).

    Inputs are random, at each layer's true shape; the sweep's cost does not depend on
    the values (every block is visited whatever its state).
    """
    rng = np.random.default_rng(seed)
    rows = []
    for li, (g, fn, state, xt) in enumerate(pretrain_steps(
            image_shape, layers, batch_size=batch_size, seed=seed, hyper=hyper, update_d=update_d,
            jit_compile=jit_compile, scan=scan, rng=rng)):
        holder = {"st": fn(state, xt)[0]}  # warm-up: trace and compile

        def one_sweep():
            holder["st"], expected = fn(holder["st"], xt)
            return expected

        sweep_s = median_seconds(one_sweep, sweeps)
        s = tf.constant(rng.normal(size=(batch_size, g.hs, g.ws, g.k)).astype(np.float32))
        d = tf.constant(rng.normal(size=(g.dh, g.dw, g.c, g.k)).astype(np.float32))
        floor_fn = compiled(lambda s, d: full_conv_adjoint(full_conv(s, d), d))
        floor_fn(s, d)
        floor_s = median_seconds(lambda: floor_fn(s, d), max(sweeps, 3))
        rows.append({
            "layer": li + 1, "batch_size": batch_size, "jit_compile": jit_compile,
            "input_shape": f"{g.hx}x{g.wx}x{g.c}", "dict": f"{g.dh}x{g.dw}x{g.k}", "pool": g.p,
            "sweep_seconds": sweep_s, "images_per_s": batch_size / sweep_s,
            "floor_seconds": floor_s, "floor_images_per_s": batch_size / floor_s,
            "ratio_to_floor": sweep_s / floor_s,
            **exact_columns(sweep_s, floor_s, exact_floor.layer_floor_macs(g, batch_size),
                            exact_floor.pretrain_sweep_macs(g, batch_size)),
            "peak_rss_mb": peak_rss_mb(), "load_1min": os.getloadavg()[0],
        })
    return rows


def exact_columns(seconds: float, floor_s: float, floor_macs: int, exact_macs: int) -> dict:
    """A row's exact floor (ms, at the rate ``floor_macs / floor_s`` measured on its
    convolution floor) and the step's ratio to it."""
    exact_s = floor_s * exact_macs / floor_macs
    return {"exact_floor_ms": 1e3 * exact_s, "ratio_to_exact_floor": seconds / exact_s}


REFINE_COLUMNS = ("step", "batch_size", "input_shape", "dicts", "seconds", "images_per_s",
                  "floor_seconds", "ratio_to_floor", "exact_floor_ms", "ratio_to_exact_floor",
                  "peak_rss_mb", "load_1min")


class RefineSteps(NamedTuple):
    """The top-down sampler's compiled steps at one batch (:func:`refine_steps`): each
    ``steps[name](state, x)`` returns the next state, or ``(state, stats)`` for a whole
    sweep (:func:`step_state` reads either); ``floor(s_top)``: one generative pass of the
    whole model and its adjoint."""

    model: object
    x: tf.Tensor
    state: object
    s_top: tf.Tensor
    floor: object
    steps: dict
    n_classes: int


def step_state(out):
    """The state a step of :class:`RefineSteps` returns: a sweep returns (state, stats)."""
    from dgdm_tf.topdown import state as deep_state

    return out if isinstance(out, deep_state.DeepState) else out[0]


def refine_steps(image_shape: tuple[int, int, int], layers: list[dict], *, batch_size: int,
                 seed: int, hyper: dict | None = None, n_leapfrog: int = N_LEAPFROG,
                 power_iterations: int = POWER_ITERATIONS, n_classes: int = 10) -> RefineSteps:
    """Every compiled step of the top-down sampler (dgdm_tf.topdown) at ``batch_size``,
    keyed by the names :mod:`dgdm_tf.bench.exact_floor` gives them: a refinement sweep
    (every conditional), a test-time sweep (dictionaries fixed), the supervised model's
    sweep, one test-time MCEM iteration, the top units, each layer's unpooling blocks and
    dictionaries. Random inputs and dictionaries at the configured shapes; the cost does
    not depend on the values."""
    from dgdm_tf.topdown import dictionaries, top_units, unpooling
    from dgdm_tf.topdown import state as deep_state
    from dgdm_tf.topdown import sweep as deep_sweep
    from dgdm_tf.core.model import DeepModel, layer_inputs

    model = DeepModel(tuple(image_shape), layers, hyper)
    rng = np.random.default_rng(seed)
    x = rng.random((batch_size, *model.image_shape), dtype=np.float32)
    ds = [(rng.normal(size=(g.dh, g.dw, g.c, g.k)) / np.sqrt(g.dh * g.dw * g.c)).astype(np.float32)
          for g in model.geoms]
    xt = tf.constant(x)
    st = deep_state.init_state(x, model, ds, tf.constant([seed, 1], tf.int32), gamma_e_init=100.0)
    s = tf.constant(rng.normal(size=st.s_top.shape).astype(np.float32))
    zd = deep_state.dense_z(st, model)

    @compiled
    def floor_fn(s):
        with tf.GradientTape() as tape:
            tape.watch(s)
            r = xt - layer_inputs(s, model, st.d, zd)[0]
            loss = 0.5 * tf.reduce_sum(r * r)
        return tape.gradient(loss, s)

    steps = {
        REFINE_SWEEP: deep_sweep.make_sweep_fn(model, n_leapfrog=n_leapfrog,
                                                     power_iterations=power_iterations),
        TEST_SWEEP: deep_sweep.make_sweep_fn(model, update_globals=False),
        TOP_UNITS: compiled(lambda st, x: top_units.resample_top(st, x, model, st.seed)),
    }
    # the supervised model (Sec. 2.3): its sweep (SVM terms in S[L], then the SVM's own
    # draws) on random labels, and one test-time MCEM iteration (Algorithm 2)
    from dgdm_tf.mcem import test_time as deep_mcem
    from dgdm_tf.supervised import joint_svm as deep_svm

    sup_model = DeepModel(tuple(image_shape), layers, hyper, supervised=True)
    mean, std = deep_svm.standardisation(s)
    svm = deep_svm.init_svm(n_classes, mean, std, batch_size, deep_svm.SvmHyper())._replace(
        beta=tf.constant(rng.normal(size=(n_classes, mean.size + 1)) * 0.1))
    y = deep_svm.targets(rng.integers(0, n_classes, batch_size), n_classes)
    sup_fn = deep_sweep.make_sweep_fn(sup_model, n_leapfrog=n_leapfrog, power_iterations=power_iterations,
                                      svm_hyper=deep_svm.SvmHyper())
    steps[SUPERVISED_SWEEP] = lambda st, x: sup_fn(st, svm, x, y)
    mcem_fn = deep_mcem.make_iteration_fn(model, lr=1e-3, decay=0.95, steps=1)
    steps[MCEM_ITERATION] = (
        lambda st, x: mcem_fn(st, st.s_top, tf.zeros_like(st.s_top), x))
    for l in range(model.n_layers - 1):
        steps[blocks_step(l)] = compiled(
            lambda st, x, l=l: unpooling.resample_z(st, x, model, l, st.seed))
    steps[d_step(0, n_leapfrog)] = compiled(
        lambda st, x: dictionaries.resample_d(st, x, model, 0, st.seed)[0])
    for l in range(1, model.n_layers):
        steps[d_step(l, n_leapfrog)] = compiled(
            lambda st, x, l=l: dictionaries.resample_d(st, x, model, l, st.seed,
                                                       n_leapfrog=n_leapfrog,
                                                       power_iterations=power_iterations)[0])
    return RefineSteps(model, xt, st, s, floor_fn, steps, n_classes)


def benchmark_refine(image_shape: tuple[int, int, int], layers: list[dict], *, batch_size: int,
                     sweeps: int, seed: int, hyper: dict | None = None,
                     n_leapfrog: int = N_LEAPFROG, power_iterations: int = POWER_ITERATIONS,
                     only: Sequence[str] | None = None) -> list[dict]:
    """Top-down sampler (dgdm_tf.topdown) at ``batch_size``: each step of
    :func:`refine_steps` against the floor: one generative pass of the whole model from
    the top layer to the image and its adjoint (the gradient back to the top layer).
    Random inputs and dictionaries at the configured shapes; the cost does not depend on
    the values. ``only``: the names of the steps to time (default: every one)."""
    r = refine_steps(image_shape, layers, batch_size=batch_size, seed=seed, hyper=hyper,
                     n_leapfrog=n_leapfrog, power_iterations=power_iterations)
    model, xt, st, steps, n_classes = r.model, r.x, r.state, r.steps, r.n_classes
    r.floor(r.s_top)
    floor_s = median_seconds(lambda: r.floor(r.s_top), max(sweeps, 3))
    exact = exact_floor.topdown_macs(model, batch_size, n_leapfrog=n_leapfrog,
                                     power_iterations=power_iterations, n_classes=n_classes)
    floor_macs = exact_floor.floor_macs(model, batch_size)
    rows = []
    dicts = ", ".join(f"{g.dh}x{g.dw}x{g.k}/p{g.p}" for g in model.geoms)
    if only is not None and set(only) - set(steps):
        raise ValueError(f"no step named {sorted(set(only) - set(steps))}; the steps: {list(steps)}")
    for name, fn in steps.items():
        if only is not None and name not in only:
            continue

        holder = {"st": step_state(fn(st, xt))}  # warm-up: trace

        def one(fn=fn):
            holder["st"] = step_state(fn(holder["st"], xt))
            return holder["st"].resid

        sec = median_seconds(one, sweeps)
        rows.append({"step": name, "batch_size": batch_size,
                     "input_shape": "x".join(map(str, model.image_shape)), "dicts": dicts,
                     "seconds": sec, "images_per_s": batch_size / sec, "floor_seconds": floor_s,
                     "ratio_to_floor": sec / floor_s,
                     **exact_columns(sec, floor_s, floor_macs, exact[name]),
                     "peak_rss_mb": peak_rss_mb(), "load_1min": os.getloadavg()[0]})
    return rows
