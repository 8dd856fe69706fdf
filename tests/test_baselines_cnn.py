"""dgdm_tf.baselines.cnn (the "CNN, same shape" baseline), its benchmarks in dgdm_tf.bench.cnn
and dgdm_tf.bench.scaling, its row in results/tables.md and the error-vs-time / scaling
figures. Tiny shapes only; no assertion is about speed (timings are only checked to be
present and to respond to the batch size)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from dgdm_tf.bench.cnn import CNN_COLUMNS, benchmark_cnn
from dgdm_tf.bench.report import combined_table, render_benchmarks_md
from dgdm_tf.bench.scaling import SCALING_COLUMNS, benchmark_scaling
from dgdm_tf.bench.time_to_accuracy import time_to_accuracy, time_to_accuracy_rows

from dgdm_tf.baselines import cnn

from dgdm_tf.report import plots, tables
from dgdm_tf.report.runs import runs_of_dataset
from _workflow import fake_mnist

TINY = [{"dict_size": 8, "n_dict": 6, "pool": 3}, {"dict_size": 6, "n_dict": 8, "pool": 1}]
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory):
    """200 train / 100 test MNIST-shaped images (the workflow tests' generator)."""
    path = fake_mnist(tmp_path_factory.mktemp("cnn") / "fake.npz", n_train=200, n_test=100)
    with np.load(path) as z:
        x = {k: z[k] for k in z.files}
    f = lambda a: (a.astype(np.float32) / 255.0)[..., None]  # noqa: E731
    return f(x["x_train"]), x["y_train"], f(x["x_test"]), x["y_test"]


def _train(data, seed=0, epochs=2):
    options = cnn.CnnOptions(epochs=epochs, batch_size=32, fc_units=32, dropout=0.5,
                             learning_rate=1e-3)
    return cnn.train_cnn(data[:2], data[2:], options, layers=TINY, n_classes=10, seed=seed,
                         progress=lambda _: None)


@pytest.fixture(scope="module")
def trained(tiny_data):
    return _train(tiny_data)


def test_train_cnn_trains_and_scores_tiny_data(trained):
    r = trained
    for k in ("test_error_pct", "train_error_pct", "best_test_error_pct", "train_seconds",
              "train_images_per_s", "inference_images_per_s", "peak_rss_mb"):
        assert math.isfinite(r[k]), k
    assert 0.0 <= r["test_error_pct"] <= 100.0 and 0.0 <= r["train_error_pct"] <= 100.0
    assert [c["epoch"] for c in r["curve"]] == [1, 2]
    for c in r["curve"]:
        assert set(c) == {"epoch", "epoch_seconds", "seconds_cumulative", "train_loss",
                          "test_error_pct", "eval_seconds"}
        assert all(math.isfinite(v) for v in c.values())
    cum = [c["seconds_cumulative"] for c in r["curve"]]
    assert cum[0] > 0 and cum[1] > cum[0]
    assert r["test_error_pct"] == r["curve"][-1]["test_error_pct"]
    assert r["best_test_error_pct"] == min(c["test_error_pct"] for c in r["curve"])
    assert r["test_predictions"].shape == (100,)
    # conv 8x8 VALID: 28 -> 21, SAME 3x3 pooling -> 7, conv 6x6 -> 2 (top: no pooling)
    assert [s["pooled"] for s in r["conv_shapes"]] == [(7, 7, 6), (2, 2, 8)]
    json.dumps({k: v for k, v in r.items() if k != "test_predictions"})  # JSON-ready


def test_train_cnn_is_deterministic_for_a_seed(tiny_data, trained):
    again = _train(tiny_data)
    assert again["test_error_pct"] == trained["test_error_pct"]
    assert [c["train_loss"] for c in again["curve"]] == [c["train_loss"] for c in trained["curve"]]
    np.testing.assert_array_equal(again["test_predictions"], trained["test_predictions"])
    other = _train(tiny_data, seed=1, epochs=1)
    assert other["curve"][0]["train_loss"] != trained["curve"][0]["train_loss"]


def test_build_cnn_shapes_and_clear_errors():
    m = cnn.build_cnn((28, 28, 1), TINY, 10, fc_units=16)
    names = [layer.name for layer in m.layers]
    assert names[1:] == ["conv1", "pool1", "conv2", "flatten", "fc1", "dropout1", "fc2",
                         "dropout2", "softmax"]
    assert m.output_shape == (None, 10)
    with pytest.raises(ValueError, match="does not fit"):
        cnn.build_cnn((10, 10, 1), TINY, 10)
    with pytest.raises(ValueError, match="missing key"):
        cnn.conv_shapes((28, 28, 1), [{"dict_size": 3, "pool": 1}])
    with pytest.raises(ValueError, match="y_train must lie in"):
        cnn.train_cnn((np.zeros((4, 28, 28, 1)), np.array([0, 1, 2, 12])),
                      (np.zeros((2, 28, 28, 1)), np.array([0, 1])), cnn.CnnOptions(epochs=1),
                      layers=TINY, n_classes=10)
    with pytest.raises(ValueError, match="epochs and batch_size must be >= 1"):
        cnn.CnnOptions(epochs=0)
    with pytest.raises(ValueError, match="unknown key 'epoch'"):
        cnn.CnnOptions.from_config({"epoch": 3})


# ------------------------------------------------------------------------ tables
def _cnn_metrics(err=1.24):
    return {"test_error_pct": err, "train_error_pct": 0.08, "best_test_error_pct": 0.96,
            "best_epoch": 8, "n_train": 10000, "n_test": 5000, "wall_seconds": 88.0,
            "config_file": "config/config.yaml",
            "curve": [{"epoch": 1, "seconds_cumulative": 4.0, "test_error_pct": 5.0},
                      {"epoch": 2, "seconds_cumulative": 8.0, "test_error_pct": err}],
            "config": {"model": {"layers": TINY},
                       "cnn": {"epochs": 2, "batch_size": 128, "fc_units": 1024,
                               "dropout": 0.5, "learning_rate": 0.001}}}


def _row(md: str, start: str) -> list[str]:
    line = next(l for l in md.splitlines() if l.startswith(start))
    return [c.strip() for c in line.strip("|").split("|")]


def test_cnn_row_in_every_kind_of_table():
    datasets = {"mnist": {"kind": "mnist", "paper_table": "mnist",
                          "methods": ["pretrained_svm", "cnn"]}}
    md = tables.render_tables(datasets, {("mnist", "cnn"): _cnn_metrics()})
    cells = _row(md, "| CNN, same shape |")
    # the last cell: "CNN, same images" (the CNN row is not a Gibbs row: no peer of its own)
    assert cells[1:] == ["1.24", "—", "`config/config.yaml`", "10000 / 5000", "1 min 28 s", "—"]
    assert "`cnn` ran with conv 8x8x6 + 3x3 max-pool, 6x6x8; 2 FC 1024" in md
    assert "best test error 0.96% (epoch 8" in md
    assert "missing (no `results/mnist/pretrained_svm/metrics.json`)" in md
    # Caltech: the paper reports its CNN baseline (accuracy); ours is 100 - error
    datasets = {"c": {"kind": "caltech101", "paper_table": "caltech101_15", "methods": ["cnn"]}}
    md = tables.render_tables(datasets, {("c", "cnn"): _cnn_metrics(err=40.0)})
    assert _row(md, "| CNN, same shape |")[1:3] == ["60.00", "62.3"]
    assert "3-layer convnet" in md
    # own data and ImageNet: a row too; not enabled -> says how to enable it
    for key in (None, "imagenet2012"):
        datasets = {"d": {"kind": "npz", "paper_table": key, "methods": ["pretrained_svm"]}}
        cells = _row(tables.render_tables(datasets, {}), "| CNN, same shape |")
        assert "enable with `methods: [pretrained_svm, cnn]`" in cells[1] and cells[2] == "—"


def test_runs_of_dataset_lists_what_is_missing(tmp_path):
    (tmp_path / "mnist" / "cnn").mkdir(parents=True)
    (tmp_path / "mnist" / "cnn" / "metrics.json").write_text(json.dumps(_cnn_metrics()))
    block = {"kind": "mnist", "paper_table": "mnist", "methods": ["pretrained_svm", "cnn"]}
    runs, missing = runs_of_dataset(tmp_path, "mnist", block)
    assert list(runs) == ["cnn"]
    assert "metrics.json" in missing["pretrained_svm"]
    assert missing["supervised"] == "not enabled in datasets.mnist.methods"
    block["methods"] = ["pretrained_svm"]
    runs, missing = runs_of_dataset(tmp_path, "mnist", block)
    assert runs == {} and missing["cnn"] == "not enabled in datasets.mnist.methods"


# ----------------------------------------------------------------- figures
def test_error_vs_time_figure_with_and_without_runs(tmp_path):
    dgdm = {"test_error_pct": 18.46, "wall_seconds": 1020.0}
    out = tmp_path / "e.png"
    plots.plot_error_vs_time({"pretrained_svm": dgdm, "cnn": _cnn_metrics()}, out, "t",
                             missing={"supervised": "not implemented yet"},
                             machine={"cpu": "test cpu", "cores": 2})
    assert out.read_bytes()[:8] == PNG
    empty = tmp_path / "none.png"
    plots.plot_error_vs_time({}, empty, "t", missing={"cnn": "no metrics.json"})
    assert empty.read_bytes()[:8] == PNG


# --------------------------------------------------------------- benchmarks
def test_time_to_accuracy_reached_and_not_reached():
    c = _cnn_metrics()
    r = time_to_accuracy({"test_error_pct": 5.0, "wall_seconds": 100.0}, c)
    assert r["cnn_reached"] and r["cnn_epoch"] == 1 and r["cnn_seconds"] == 4.0
    assert r["ratio"] == pytest.approx(25.0)
    r = time_to_accuracy({"test_error_pct": 0.5, "wall_seconds": 100.0}, c)
    assert not r["cnn_reached"] and r["cnn_epoch"] == 2 and r["cnn_test_error_pct"] == 1.24
    rows = time_to_accuracy_rows(
        {("a", "pretrained_svm"): {"test_error_pct": 5.0, "wall_seconds": 100.0},
         ("a", "cnn"): c, ("b", "cnn"): c}, ["a", "b", "z"])
    assert [r["dataset"] for r in rows] == ["a", "b"]
    assert rows[0]["ratio"] == pytest.approx(25.0) and "no `pretrained_svm` run" in rows[1]["missing"]


@pytest.fixture(scope="module")
def cnn_bench():
    return benchmark_cnn((28, 28, 1), TINY, 10, batch_sizes=[4, 32], steps=2,
                         seed=0, fc_units=16)


def test_benchmark_cnn_writes_every_column(cnn_bench):
    assert len(cnn_bench) == 4
    for r in cnn_bench:
        assert tuple(r) == CNN_COLUMNS
        assert all(v is not None for v in r.values())
        assert r["images_per_s"] > 0 and r["step_seconds"] > 0 and r["peak_rss_mb"] > 0
    assert {r["benchmark"] for r in cnn_bench} == {"cnn_train_step", "cnn_inference"}


def test_benchmark_cnn_throughput_follows_the_batch_size(cnn_bench):
    """Perturb the batch size: the rows say so and their throughput entries change."""
    by = {(r["benchmark"], r["batch_size"]): r for r in cnn_bench}
    for kind in ("cnn_train_step", "cnn_inference"):
        small, large = by[(kind, 4)], by[(kind, 32)]
        assert small["images_per_s"] != large["images_per_s"]
        assert small["images_per_s"] == pytest.approx(4 / small["step_seconds"])
        assert large["images_per_s"] == pytest.approx(32 / large["step_seconds"])


@pytest.fixture(scope="module")
def scaling():
    layers = [{"dict_size": 5, "n_dict": 3, "pool": 2}, {"dict_size": 3, "n_dict": 4, "pool": 1}]
    return benchmark_scaling((12, 12, 1), layers, 10, batch_sizes=[2, 4],
                             side_factors=[1.0, 0.5], side_batch_size=2,
                             k_factors=[1.0, 2.0], sweeps=1, steps=1, seed=0,
                             fc_units=8)


@pytest.mark.slow
def test_benchmark_scaling_rows(scaling):
    df = pd.DataFrame(scaling)
    assert tuple(df.columns) == SCALING_COLUMNS
    # 3 kernels x (2 batch sizes + 2 side factors + 2 K factors)
    assert len(df) == 18
    assert sorted(df["image_side"].unique()) == [6, 12]
    k_rows = df[df["sweep"] == "n_dict"]
    assert sorted(k_rows["n_dict"].unique()) == [3, 6]
    for kind in ("pretrain_sweep", "topdown_sweep"):
        sweep = df[(df["benchmark"] == kind) & (df["note"] == "")]
        assert len(sweep) and (sweep["ratio_to_floor"] > 0).all()
        assert (sweep["ratio_to_exact_floor"] > 0).all()
    cnn_rows = df[df["benchmark"] == "cnn_train_step"]
    assert cnn_rows[["ratio_to_floor", "ratio_to_exact_floor"]].isna().all().all()
    ok = df[df["note"] == ""]
    assert (ok["images_per_s"] > 0).all() and ok[["seconds", "peak_rss_mb"]].notna().all().all()
    # 6x6 images: the 5x5 conv -> 2x2, pooled 1x1, then a 3x3 conv does not fit (the
    # CNN and the top-down model; the pretraining sweep is layer 1's alone)
    skipped = df[df["note"].str.startswith("skipped")]
    assert list(skipped["benchmark"]) == ["topdown_sweep", "cnn_train_step"]
    assert skipped["images_per_s"].isna().all() and "does not fit" in skipped["note"].iloc[-1]
    # the point all three series share (batch 2, side 12, K 3) is measured once
    for kind in ("pretrain_sweep", "topdown_sweep", "cnn_train_step"):
        shared = df[(df["benchmark"] == kind) & (df["batch_size"] == 2) & (df["image_side"] == 12)
                    & (df["n_dict"] == 3)]
        assert len(shared) == 3 and shared["seconds"].nunique() == 1


@pytest.mark.slow
def test_benchmarks_md_csv_and_scaling_figure(tmp_path, cnn_bench, scaling):
    machine = {"cpu": "test cpu", "cores": 2, "gpu": "none"}
    layers = pd.DataFrame([{"layer": 1, "batch_size": 4, "jit_compile": False,
                            "input_shape": "28x28x1", "sweep_seconds": 0.5,
                            "images_per_s": 8.0, "floor_seconds": 0.1, "ratio_to_floor": 5.0,
                            "exact_floor_ms": 62.0, "ratio_to_exact_floor": 8.06,
                            "peak_rss_mb": 900.0}])
    refine = pd.DataFrame([{"step": "top units", "batch_size": 4, "input_shape": "28x28x1",
                            "dicts": "8x8x50/p3, 6x6x200/p1", "seconds": 0.5,
                            "images_per_s": 8.0, "floor_seconds": 0.02, "ratio_to_floor": 25.0,
                            "exact_floor_ms": 323.0, "ratio_to_exact_floor": 1.55,
                            "peak_rss_mb": 900.0, "load_1min": 2.1}])
    cnn_df = pd.DataFrame(cnn_bench)
    combined = combined_table(layers, cnn_df, machine)
    assert list(combined["benchmark"]) == ["pretrain_sweep"] + list(cnn_df["benchmark"])
    assert set(CNN_COLUMNS) | {"jit_compile", "sweep_seconds", "machine_cpu"} \
        <= set(combined.columns)
    tta = time_to_accuracy_rows(
        {("m", "pretrained_svm"): {"test_error_pct": 5.0, "wall_seconds": 100.0},
         ("m", "cnn"): _cnn_metrics()}, ["m"])
    jobs = pd.DataFrame([{"rule": "cnn", "job": "m", "wall_s": 88.0, "max_rss_mb": 990.0,
                          "cpu_time_s": 100.0, "mean_load": 1.0, "measured": "now"}])
    md = render_benchmarks_md(
        machine=machine, config_files=["config/smoke.yaml"], layers=layers, cnn=cnn_df,
        scaling=pd.DataFrame(scaling), time_to_acc=tta, cnn_runs=[_cnn_metrics()],
        jobs=jobs, scaling_png="benchmarks_scaling.png", refine=refine)
    # both tables give the exact floor beside the floor
    assert ("| layer | batch_size | jit_compile | input_shape | sweep_seconds | images_per_s | "
            "floor_seconds | ratio_to_floor | exact_floor_ms | ratio_to_exact_floor |") in md
    assert ("| floor_seconds | ratio_to_floor | exact_floor_ms | ratio_to_exact_floor | peak_rss_mb "
            "| load_1min |") in md
    assert "| top units | 4 | 28x28x1 | 8x8x50/p3, 6x6x200/p1 | 0.5 | 8.00 | 0.02 | 25.00 | 323 | 1.55 |" in md
    for section in ("## Pretraining sweeps against the floor", "## The top-down sampler against the floor",
                    "## The CNN baseline: training step and inference", "## Time to accuracy",
                    "## How cost grows with work", "## Workflow jobs"):
        assert section in md, section
    assert "Machine: cpu: test cpu, cores: 2" in md
    assert "| cnn_train_step | 4 |" in md and "ratio 25" in md
    assert "batch 4: one pretraining sweep of all 1 layers" in md
    png = tmp_path / "s.png"
    plots.plot_scaling(scaling, png, machine=machine)
    assert png.read_bytes()[:8] == PNG


def test_topdown_scaling_point_skips_a_batch_whose_unit_images_exceed_the_budget():
    from dgdm_tf.bench.scaling import _scaling_point

    layers = [{"dict_size": 5, "n_dict": 3, "pool": 2}, {"dict_size": 3, "n_dict": 4, "pool": 1}]
    # 12x12: a 2 x 2 top grid of 4 maps, 16 units of 144 pixels: 4 images need 36.9 kB
    kw = dict(sweeps=1, steps=1, seed=0, hyper=None, fc_units=8, dropout=0.5, learning_rate=1e-3)
    r = _scaling_point("topdown_sweep", (12, 12, 1), 4, layers, 10, None, topdown_max_gb=3e-5, **kw)
    assert np.isnan(r["seconds"]) and r["note"].startswith("skipped: the top units' images of 4 images")
    r = _scaling_point("topdown_sweep", (12, 12, 1), 4, layers, 10, None, topdown_max_gb=4e-5, **kw)
    assert r["seconds"] > 0 and r["ratio_to_floor"] > 0 and r["ratio_to_exact_floor"] > 0
    assert r["note"] == ""
