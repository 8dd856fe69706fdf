"""The MCEM benchmark's figures on a tiny model: the multiply-add count of the windowed
passes against a count by hand, and per-step timings of both paths (the figures in
docs/scaling.md come from this module; `measure` itself runs in the benchmark_mcem rule,
whose shapes are configured only in config/paper.yaml)."""

from __future__ import annotations

import pytest

from dgdm_tf.bench import mcem as B
from dgdm_tf.core.model import DeepModel

LAYERS = [{"dict_size": 3, "n_dict": 2, "pool": 2}, {"dict_size": 3, "n_dict": 3, "pool": 2},
          {"dict_size": 2, "n_dict": 2, "pool": 1}]


def test_sweep_cost_counts_the_windowed_passes():
    """20x20x1: S[0] 18x18 (blocks 9x9), X[1] 9x9, S[1] 7x7 (blocks 4x4, G = 3: colours
    of 2x2, 1x2, 2x1 or 1x1 real members), X[2] 4x4, top 3x3 (supervised: 9 colours)."""
    model = DeepModel((20, 20, 1), LAYERS, supervised=True)
    rows = {r["layer"]: r for r in B.sweep_cost(model)}
    # layer 2: a block (2x2) -> X[1] window 4x4 -> S[0] window 8x8 (K0 = 2) -> data 10x10
    per = 2 * 2 * 9 * 2 + 8 * 8 * 2 * 9 * 1
    members = sum(int(model.colourings[1].real(a, b).sum()) for a, b in model.colourings[1].colours())
    assert members == 16
    assert rows[2]["macs"] == 3 * 4 * members * per and rows[2]["sequential_steps"] == 9 * 3
    # top: a unit -> X[2] 2x2 -> S[1] 4x4 (K1 = 3) -> X[1] 6x6 -> S[0] 12x12 (K0 = 2)
    per_top = 1 * 4 * 3 + 16 * 3 * 9 * 2 + 144 * 2 * 9 * 1
    assert rows[3]["macs"] == 2 * 9 * per_top and rows[3]["sequential_steps"] == 9 * 2


@pytest.mark.slow
def test_step_times_of_both_paths():
    """Each E-step step of a three-layer model timed on its windowed and whole-plane
    paths (the docs' per-step table)."""
    spec = {"name": "tiny", "image_shape": [20, 20, 1], "layers": LAYERS, "batch_size": 2}
    steps = B.step_times(spec)
    assert [s["step"] for s in steps] == ["top units", "blocks of layer 2", "blocks of layer 1"]
    assert all(s["fast_seconds"] > 0 and s["generic_seconds"] > 0 for s in steps)
    assert steps[1]["windowed_macs_per_image"] > 0 and steps[2]["windowed_macs_per_image"] == 0


@pytest.mark.slow
def test_measure_in_its_own_process_reports_every_figure():
    """`run_isolated` (what the benchmark_mcem rule calls) on a tiny supervised model:
    every figure present, positive and consistent (throughput = batch / seconds per
    iteration); a spec it cannot run comes back as an error, not an exception."""
    spec = {"name": "tiny", "image_shape": [12, 12, 1], "batch_size": 2, "iterations": 2,
            "n_classes": 3, "infer_iterations": 1, "infer_burn_in": 1, "seed": 0,
            "layers": [{"dict_size": 3, "n_dict": 2, "pool": 2},
                       {"dict_size": 2, "n_dict": 2, "pool": 1}]}
    r = B.run_isolated(spec, timeout=600)
    assert "error" not in r, r
    assert (r["name"], r["image_shape"], r["layers"], r["iterations"]) == ("tiny", "12x12x1", 2, 2)
    assert r["top_features"] == 4 * 4 * 2  # 12 -> 10, pool 2 -> 5 -> 4, K = 2
    assert r["seconds_per_iteration"] > 0 and r["first_iteration_s"] > 0
    assert abs(r["train_images_per_s"] - 2 / r["seconds_per_iteration"]) < 1e-9
    assert r["infer_images_per_s"] > 0 and r["peak_rss_mb"] > 100 and r["device"] == "CPU"
    bad = B.run_isolated({**spec, "layers": [{"dict_size": 30, "n_dict": 2, "pool": 1}]})
    assert bad["name"] == "tiny" and bad["error"], bad
