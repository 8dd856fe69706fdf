"""The exact floor (dgdm_tf.bench.exact_floor): its counts against brute-force counts on
tiny shapes, and the benchmarks' rows that carry it beside the convolution floor."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dgdm_tf.bench import exact_floor as E
from dgdm_tf.bench.mcem import sweep_cost
from dgdm_tf.bench.sweeps import (REFINE_COLUMNS, TEST_SWEEP, benchmark_pretrain_layers,
                                  benchmark_refine)
from dgdm_tf.core.layout import LayerGeometry
from dgdm_tf.core.model import DeepModel

LAYERS = [{"dict_size": 3, "n_dict": 2, "pool": 2}, {"dict_size": 2, "n_dict": 3, "pool": 1}]


def test_floor_is_every_layers_convolution_and_its_adjoint():
    model = DeepModel((11, 11, 1), LAYERS)
    assert E.floor_macs(model, 2) == 2 * 2 * sum(
        g.hs * g.ws * g.k * g.dh * g.dw * g.c for g in model.geoms)


def test_block_count_against_every_candidate_enumerated():
    """A 10 x 9 plane of 2 channels, atoms 4 x 3, pool 3: S is 7 x 7, blocks 3 x 3 of which
    the last row and column are partial; a candidate outside S carries no data."""
    g = LayerGeometry(hx=10, wx=9, c=2, dh=4, dw=3, k=5, p=3)
    atom = g.dh * g.dw * g.c
    macs = 0
    for bi, bj in itertools.product(range(g.nbh), range(g.nbw)):
        for r, c in itertools.product(range(g.p), range(g.p)):
            if bi * g.p + r < g.hs and bj * g.p + c < g.ws:
                macs += g.k * atom  # the candidate's correlation with the residual
        macs += g.k * atom  # the drawn atom into the residual
    assert E.block_macs(g) == macs
    # D's exact Gaussian: the blocks' right-hand sides, a factorisation and three
    # (m x m) x (m x C) products a map
    m = g.dh * g.dw
    assert E.d_exact_macs(g, 4) == 4 * g.nbh * g.nbw * g.k * atom + g.k * (m ** 3 // 3 + 3 * m * m * g.c)
    assert E.pretrain_sweep_macs(g, 4) == 4 * E.block_macs(g) + E.d_exact_macs(g, 4)


def _spread_macs(model: DeepModel, l: int, unit) -> int:
    """One candidate of layer l pushed to the data plane with ones for every atom,
    counting a multiply-add for each (non-zero input, atom entry) pair, its values
    unpooled to the first position of each block below."""
    g = model.geoms[l]
    s = np.zeros((g.hs, g.ws, g.k))
    s[unit] = 1.0
    macs = 0
    for j in range(l, -1, -1):
        gj = model.geoms[j]
        macs += np.count_nonzero(s) * gj.dh * gj.dw * gj.c
        x = np.zeros((gj.hx, gj.wx, gj.c))  # full convolution with an all-ones atom
        for u, v, _ in zip(*np.nonzero(s)):
            x[u: u + gj.dh, v: v + gj.dw, :] += 1.0
        if j > 0:
            below = model.geoms[j - 1]
            s = np.zeros((below.hs, below.ws, below.k))
            s[:: below.p, :: below.p, :] = x[: below.nbh, : below.nbw, :]
    return macs


def test_top_units_sparse_count_against_spreading_each_unit():
    """The sparse spread of every top unit of a two-layer model, unit by unit; the count
    takes it when the windowed passes cost more."""
    model = DeepModel((11, 11, 1), LAYERS)
    top = model.geoms[1]
    brute = sum(_spread_macs(model, 1, u) for u in itertools.product(
        range(top.hs), range(top.ws), range(top.k)))
    windowed = {r["layer"]: r["macs"] for r in sweep_cost(model)}[2]
    assert E.candidate_macs(model, 1) == min(brute, windowed)
    assert brute < windowed  # at this shape the sparse spread is the lesser
    # layer 1's blocks: their own atoms' correlations and updates
    assert E.candidate_macs(model, 0) == E.block_macs(model.geoms[0])


def test_topdown_sweeps_are_the_sums_of_their_steps():
    model = DeepModel((11, 11, 1), LAYERS)
    m = E.topdown_macs(model, 4, n_leapfrog=5, power_iterations=2, n_classes=3)
    floor = E.floor_macs(model, 4)
    assert m[E.TEST_SWEEP] == m[E.TOP_UNITS] + m[E.blocks_step(0)]
    assert m[E.d_step(1, 5)] == (5 + 2 + 2) * floor  # every HMC pass: layers 1..2's floor
    assert m[E.REFINE_SWEEP] == m[E.TEST_SWEEP] + m[E.d_step(0, 5)] + m[E.d_step(1, 5)]
    f = model.top.hs * model.top.ws * model.top.k + 1
    assert m[E.SUPERVISED_SWEEP] - m[E.REFINE_SWEEP] == 3 * min(f * f * 4 + f ** 3 // 3,
                                                                16 * f + 64 // 3)
    assert m[E.MCEM_ITERATION] == m[E.TEST_SWEEP] + floor + floor // 2


def test_pretraining_rows_carry_the_exact_floor_at_the_floors_rate():
    rows = benchmark_pretrain_layers((12, 12, 1), LAYERS, batch_size=2, sweeps=1, seed=0)
    for r in rows:
        g = LayerGeometry(*[int(v) for v in r["input_shape"].split("x")],
                          dh=LAYERS[r["layer"] - 1]["dict_size"], dw=LAYERS[r["layer"] - 1]["dict_size"],
                          k=LAYERS[r["layer"] - 1]["n_dict"], p=r["pool"])
        ratio = E.pretrain_sweep_macs(g, 2) / E.layer_floor_macs(g, 2)
        assert r["exact_floor_ms"] == pytest.approx(1e3 * r["floor_seconds"] * ratio)
        assert r["ratio_to_exact_floor"] == pytest.approx(r["ratio_to_floor"] / ratio)
        assert r["load_1min"] >= 0  # the load the row was measured under


@pytest.mark.slow
def test_topdown_rows_carry_the_exact_floor_beside_the_floor():
    rows = benchmark_refine((12, 12, 1), LAYERS, batch_size=2, sweeps=1, seed=0, n_leapfrog=2,
                            power_iterations=1, only=(TEST_SWEEP, E.TOP_UNITS))
    assert [r["step"] for r in rows] == [TEST_SWEEP, E.TOP_UNITS]
    model = DeepModel((12, 12, 1), LAYERS)
    exact = E.topdown_macs(model, 2, n_leapfrog=2, power_iterations=1)
    for r in rows:
        assert set(REFINE_COLUMNS) <= set(r)
        ratio = exact[r["step"]] / E.floor_macs(model, 2)
        assert r["exact_floor_ms"] == pytest.approx(1e3 * r["floor_seconds"] * ratio)
        assert r["ratio_to_exact_floor"] == pytest.approx(r["seconds"] / r["exact_floor_ms"] * 1e3)
