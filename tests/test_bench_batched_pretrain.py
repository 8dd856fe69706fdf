"""The batched-pretraining benchmark: a row per size from its own process, figures that
follow from the run (state on disk, the unbatched chain's state), and its section of
results/benchmarks.md."""

import pandas as pd
import pytest

from dgdm_tf.bench.report import render_benchmarks_md
from dgdm_tf.core.layout import LayerGeometry
from dgdm_tf.bench.batched_pretrain import run_isolated, state_bytes_per_image

SPEC = {"name": "tiny", "image_shape": [12, 12, 1],
        "layer": {"dict_size": 3, "n_dict": 4, "pool": 2}, "n_images": 12, "batch_size": 5,
        "sweeps": 2, "seed": 0, "hyper": None,
        "start": {"kind": "ridge", "threshold": 0.5, "ridge": 0.01, "iterations": 5}}


@pytest.mark.slow
def test_batched_pretrain_benchmark_row_from_its_own_process(tmp_path):
    row = run_isolated({**SPEC, "workdir": str(tmp_path)}, timeout=600)
    assert "error" not in row, row
    assert row["n_images"] == 12 and row["batch_size"] == 5
    assert row["sweep_s"] > 0 and row["ratio_to_floor"] > 0 and row["peak_rss_mb"] > 100
    assert row["ratio_to_exact_floor"] > 0
    # three batch files in each of two buffers, plus the head: the 12 images' state
    # (int8 block state, float32 weight, theta, gamma_e) twice, the collected buffer's
    # running sums of x_next (5 x 5 cells x 4 maps) and gamma_e, and npz headers and the
    # head within 64 kB; the folder is gone after the run
    geom = LayerGeometry(hx=12, wx=12, c=1, dh=3, dw=3, k=4, p=2)
    per = state_bytes_per_image(geom)
    disk = row["state_on_disk_mb"] * 2 ** 20
    state = 2 * 12 * per["batched"]
    sums = 12 * 4 * (geom.nbh * geom.nbw * geom.k + 1)
    assert state + sums - 100 <= disk <= state + sums + 2 ** 16, (disk, state, sums)
    assert not (tmp_path / "tiny").exists()
    assert per["in_memory"] > 4 * per["batched"]


def test_batched_pretrain_section_in_benchmarks_md():
    batched = pd.DataFrame([{"name": "m_60000", "n_images": 60000, "batch_size": 1000,
                            "peak_rss_mb": 2500, "in_memory_state_mb": 5400.0}])
    md = render_benchmarks_md(
        machine={"cpu": "c"}, config_files=[], layers=pd.DataFrame([{"layer": 1}]),
        cnn=pd.DataFrame(), scaling=pd.DataFrame(), time_to_acc=[], cnn_runs=[],
        jobs=pd.DataFrame(columns=["rule", "job", "wall_s", "max_rss_mb", "cpu_time_s",
                                   "measured"]),
        scaling_png="s.png", batched_pretrain=batched)
    assert "## Pretraining in batches: memory against the data set's size" in md
    assert "| m_60000 | 60000 | 1000 | 2500 |" in md
