"""experiments/determinism/compare_results.py: two results folders agree bit for bit,
timings aside, and one changed bit is found."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "compare_results", REPO / "experiments" / "determinism" / "compare_results.py")
cmp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cmp)


def _write_run(root: Path, seconds: float, features: np.ndarray) -> Path:
    (root / "mnist" / "svm").mkdir(parents=True)
    (root / "logs").mkdir()
    np.savez(root / "mnist" / "svm" / "features.npz", f=features, wall_seconds=np.float64(seconds),
             config=np.array(json.dumps({"burn_in": 5, "chain_seconds": seconds})))
    (root / "mnist" / "svm" / "metrics.json").write_text(json.dumps(
        {"test_error_pct": 1.5, "finished": f"2026-11-25T16:{int(seconds):02d}:00",
         "wall_seconds_by_step": {"svm": seconds}}))
    (root / "mnist" / "trace.tsv").write_text(f"sweep\tlog_lik\tseconds\n1\t-3.5\t{seconds}\n")
    (root / "logs" / "svm.log").write_text(f"took {seconds} s\n")
    wall = f"{seconds:.1f} s" if seconds < 60 else f"{int(seconds // 60)} min {int(seconds % 60):02d} s"
    (root / "tables.md").write_text(f"| pretrained | 1.50 | 1.42 | {wall} |\n")
    return root


def test_runs_that_differ_only_in_timings_agree(tmp_path, capsys):
    f = np.random.default_rng(0).normal(size=(4, 8)).astype(np.float32)
    a = _write_run(tmp_path / "a", 12.0, f)
    b = _write_run(tmp_path / "b", 62.0, f.copy())  # "12.0 s" against "1 min 02 s"
    assert cmp.main([str(a), str(b)]) == 0
    assert "4 files compared, 0 differ" in capsys.readouterr().out


def test_one_changed_bit_and_a_missing_file_are_found(tmp_path, capsys):
    f = np.random.default_rng(0).normal(size=(4, 8)).astype(np.float32)
    g = f.copy()
    g.view(np.uint32)[2, 3] ^= 1  # the last bit of one entry
    a = _write_run(tmp_path / "a", 12.0, f)
    b = _write_run(tmp_path / "b", 12.0, g)
    (a / "mnist" / "extra.json").write_text("{}")
    assert cmp.main([str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "DIFFERS  mnist/svm/features.npz: array f: 1 of 32 entries differ" in out
    assert "ONLY IN A  mnist/extra.json" in out


def test_names_that_only_contain_a_timing_word_are_compared(tmp_path, capsys):
    """beta, theta and learning_rate hold 'eta', 'rate' or 'time'-like letters but are
    model values: a change in them is a difference."""
    for name, beta, rate in (("a", 1.0, 0.01), ("b", 1.5, 0.02)):
        (tmp_path / name).mkdir()
        np.savez(tmp_path / name / "model.npz", samples_beta=np.full(3, beta), log_theta=np.zeros(2),
                 wall_seconds=np.float64(beta))
        (tmp_path / name / "metrics.json").write_text(json.dumps(
            {"learning_rate": rate, "test_images_per_s": 100 * rate, "nan": float("nan")}))
    assert cmp.main([str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    out = capsys.readouterr().out
    assert "DIFFERS  model.npz: array samples_beta: 3 of 3 entries differ" in out
    assert "DIFFERS  metrics.json: /learning_rate: 0.01 vs 0.02" in out
    assert "2 files compared, 2 differ" in out
