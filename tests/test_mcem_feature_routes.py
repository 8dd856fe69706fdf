"""mcem.feature_routes: a `topdown_features` block's features by its route, with the
diagnostics its rows write to mixing.json, on draws from a small two-layer model."""

from __future__ import annotations

import numpy as np

from _topdown_model import LAYERS, draw
from dgdm_tf.mcem import feature_routes
from dgdm_tf.topdown.options import Start

BLOCK = {"n_train": None, "n_test": None, "burn_in": 2, "collect": 4, "chains": 2, "batch_size": 6,
         "scan": "fixed", "start": {"kind": "off", "threshold": 0.5, "ridge": 0.01, "iterations": 20},
         "route": "chain",
         "alg2": {"burn_in": 1, "max_iterations": 2, "tol": 1.0e-2, "batch_size": 6,
                  "rmsprop_lr": 0.001, "rmsprop_decay": 0.95, "rmsprop_steps": 1},
         "posterior_check": {"images": 3, "sweeps": 2}}


def test_the_chain_route_reports_its_chains_mixing_and_shards_join_bit_for_bit():
    _model, d, x = draw(12, seed=4, noise=0.02)
    start = Start(d, LAYERS, gamma_e_init=1000.0, gamma_s_init=0.25)
    whole = feature_routes.per_image(x, start, BLOCK, seed=3, progress=None)
    parts = [feature_routes.per_image(x, start, BLOCK, seed=3, images=(lo, hi), progress=None)
             for lo, hi in ((0, 6), (6, 12))]
    joined = feature_routes.gather(BLOCK)(parts)
    for key in ("features", "trace_sums", "trace_images", "draws"):
        np.testing.assert_array_equal(joined[key], whole[key])
    said = []
    res = feature_routes.summarise(x, start, BLOCK, joined, check_seed=1, progress=said.append)
    mix = res["chain_mixing"]
    assert mix["n_chains"] == 2 and mix["n_sweeps"] == 6 and mix["n_draws"] == 4
    assert {"active_top", "gamma_e_mean", "feature_mean"} == set(mix["scalars"])
    assert all(v["rhat"] is not None for v in mix["scalars"].values())
    assert "trace_sums" not in res and "chain_features" not in res and res["half_distance"] > 0
    assert res["convergence"]["n_chains"] == 2
    assert any("test-time chains' traced scalars: worst R-hat" in m for m in said), said
    assert feature_routes.route_batch(BLOCK) == 6
    # the posterior check: 3 images scored after the block's 6 sweeps and 2 more
    assert res["posterior_check"]["images"] == 3 and res["posterior_check"]["sweeps"] == [6, 8]


def test_the_alg2_route_summarises_its_iterations():
    _model, d, x = draw(6, seed=5, noise=0.02)
    start = Start(d, LAYERS, gamma_e_init=1000.0, gamma_s_init=0.25)
    block = {**BLOCK, "route": "alg2"}
    res = feature_routes.summarise(x, start, block,
                                   feature_routes.per_image(x, start, block, seed=0, progress=None),
                                   progress=None)
    assert res["chains"] == 0 and 1 <= res["alg2"]["iterations_max"] <= 2
    assert "chain_mixing" not in res and feature_routes.route_batch(block) == 6
