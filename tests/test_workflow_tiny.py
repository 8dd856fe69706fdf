"""The workflow end to end in the default tier: the tiny config (tests/_workflow.py
TINY_BLOCK: the three Gibbs rows and the CNN, small dictionaries, no benchmark rules)
run once (tests/conftest.py `tiny_run`), then read: its tables, rows, figures, traces
and run directories; each job's library; what a changed key reruns; a bitwise rerun of
two rules; the shards' gather; a refinement of 2 workers against 1.

The tests that change files work on a copy of the run (`tiny_copy`), so the order of
the tests does not matter. The smoke config end to end (every row, the benchmarks, the
report in Chromium) is the slow tier's: tests/test_workflow.py.
"""

from __future__ import annotations

import copy
import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from _workflow import CORES, REPO, planned_jobs, snakemake, write_config

pytestmark = pytest.mark.xdist_group("tiny_run")  # conftest.TINY_RUN: one worker builds it

DS = "results/mnist_smoke"
PNG = b"\x89PNG\r\n\x1a\n"


def _is_png(path: Path) -> bool:
    return path.read_bytes()[:8] == PNG


def _rows(md: str) -> dict:
    """The rows of results/tables.md by their label, without the label's run notes."""
    return {l.split("|")[1].strip().split(" (gamma_s ")[0]: [c.strip() for c in l.strip("|").split("|")]
            for l in md.splitlines() if l.startswith("| Our ") or l.startswith("| CNN")}


@pytest.fixture
def tiny_copy(tiny_run, tmp_path):
    """A copy of the tiny run (repository, results, Snakemake's records), to change."""
    repo, cfg = tiny_run
    dest = tmp_path / "copy"
    shutil.copytree(repo, dest, symlinks=True)
    return dest, cfg


def _config(cfg: Path, path: Path, edit=None, **top) -> Path:
    c = yaml.safe_load(Path(cfg).read_text())
    if edit is not None:
        edit(c["datasets"]["mnist_smoke"])
    c.update(top)
    return write_config(path, c)


def _npz(path: Path, drop=("wall_seconds", "chain_seconds")) -> dict:
    with np.load(path) as z:
        return {k: z[k] for k in z.files if k not in drop}


# ------------------------------------------------------------------ what the run wrote
def test_every_job_ran_the_library_of_its_own_checkout(tiny_run):
    """The jobs import dgdm_tf from the copy's src/, not from an installed package or
    another checkout (Snakemake may import workflow/scripts/_common.py from its source
    cache, where no src/ sits beside it)."""
    repo, _ = tiny_run
    logs = sorted((repo / "results" / "logs").rglob("*.log"))
    starts = [l for p in logs for l in p.read_text().splitlines() if "=== rule" in l]
    assert len(starts) >= 10
    want = f"from {(repo / 'src' / 'dgdm_tf').resolve()}"
    assert all(want in l for l in starts), [l for l in starts if want not in l][:3]


def test_tables_hold_the_gibbs_rows_and_the_cnn(tiny_run):
    """results/tables.md: each row's error is its metrics.json's, beside the paper's;
    the label says what it ran; the data sizes are the config's."""
    repo, _ = tiny_run
    md = (repo / "results" / "tables.md").read_text()
    rows = _rows(md)
    want = {"Our pretrained model + SVM (2 step)": ("pretrained_svm", "1.42", "80 / 40"),
            "Our unsupervised model + SVM (2 step)": ("unsupervised_svm", "0.52", "80 / 40"),
            "Our supervised model": ("supervised", "0.37", "80 / 40"),
            "CNN, same shape": ("cnn", "—", "80 / 40")}
    assert set(want) <= set(rows), sorted(rows)
    for label, (method, paper, size) in want.items():
        cells = rows[label]
        m = json.loads((repo / f"{DS}/{method}/metrics.json").read_text())
        assert float(cells[1]) == pytest.approx(m["test_error_pct"], abs=0.006), label
        assert 0.0 <= m["test_error_pct"] <= 100.0 and cells[2] == paper and cells[4] == size, label
    # results/rows.json: the same rows as data, each paired with the pretrained row
    summary = json.loads((repo / "results" / "rows.json").read_text())["datasets"]["mnist_smoke"]
    for label, (method, _, _) in want.items():
        m = json.loads((repo / f"{DS}/{method}/metrics.json").read_text())
        assert summary[method]["test_error_pct"] == round(m["test_error_pct"], 2), method
    assert "vs_pretrained_svm" not in summary["pretrained_svm"]
    assert summary["unsupervised_svm"]["vs_pretrained_svm"]["n_images"] == 40
    # chains of 2 and 3 sweeps are never called settled: drifting, their rows say "not
    # settled"; else "too short to tell" (which, hangs on the machine's rounding)
    assert "(gamma_s per image and map; Algorithm 2 to tol 0.001 (at most 2 iterations); 1 model " \
           "averaged; " in rows["Our supervised model"][0]
    for label, method in (("Our supervised model", "supervised"),
                          ("Our unsupervised model + SVM (2 step)", "unsupervised_svm")):
        chain = json.loads((repo / f"{DS}/{method}/metrics.json").read_text())["chain"]
        assert chain["settled"] is not True, (method, chain)
        say = "; not settled: " if chain["settled"] is False else "sweeps, too short to tell whether it settled"
        assert say in rows[label][0], (rows[label][0], chain)
    assert "not settled" not in rows["Our pretrained model + SVM (2 step)"][0]
    assert "MNIST" in md and "MCDNN" in md
    # a row the config does not run says how to enable it
    ref = next(l for l in md.splitlines() if l.startswith("| Reference: learned layer-1"))
    assert "not run (enable with `methods: [pretrained_svm, unsupervised_svm, supervised, cnn, " \
           "encoder_svm]` in `datasets.mnist_smoke`)" in ref


def test_pretrained_row_run_directory(tiny_run):
    repo, _ = tiny_run
    run = repo / DS / "pretrained_svm"
    m = json.loads((run / "metrics.json").read_text())
    assert m["n_train"] == 80 and m["n_test"] == 40 and m["seed"] == 0
    assert m["config"]["pretrain"]["burn_in"] == 2
    assert set(m["wall_seconds_by_step"]) == {"prepare", "pretrain_layer1", "pretrain_layer2",
                                              "features", "svm"}
    assert m["wall_seconds"] == pytest.approx(sum(m["wall_seconds_by_step"].values()))
    assert m["n_features"] == 2 * 2 * m["dict_sizes"][-1]
    run_cfg = yaml.safe_load((run / "config.yaml").read_text())
    assert run_cfg["block"]["kind"] == "npz" and run_cfg["seed"] == 0
    pred = (run / "predictions.csv").read_text().splitlines()
    assert pred[0].startswith("test_index,label,predicted,score_0") and len(pred) == 41
    for l in (1, 2):
        for kind in ("dictionary", "trace", "activity"):
            assert _is_png(repo / f"{DS}/figures/pretrain_layer{l}_{kind}.png"), (l, kind)
        with np.load(repo / f"{DS}/pretrain/layer{l}.npz") as z:
            assert -1.0 <= float(z["activity_ink"]) <= 1.0
    for method, png, n in (("pretrained_svm", "features_layer1_activity.png", 80),
                           ("unsupervised_svm", "topdown_features_layer1_activity.png", 80)):
        mix = json.loads((repo / f"{DS}/{method}/mixing.json").read_text())
        assert -1.0 <= mix["activity_ink_layer1"] <= 1.0 and mix["images"] == n
        if method == "pretrained_svm":  # the default route: the top layer given the whole model
            assert mix["route"] == "topdown"
        assert mix["chains"] == 0  # Algorithm 2: no chain averaged
        a2 = mix["alg2"]
        assert 1.0 <= a2["iterations_mean"] <= a2["iterations_max"] <= 2, a2
        assert 0.0 <= a2["converged"] <= 1.0 and len(a2["q_trace"]) == a2["iterations_max"]
        assert _is_png(repo / f"{DS}/figures/{png}")
    assert not list((repo / DS / "pretrain").glob("*_ckpt"))  # gone once the layers are written
    curve = pd.read_csv(repo / DS / "learning_curve.csv")
    assert [(r.method, int(r.n_train), r.source) for r in curve.itertuples()] == [
        ("pretrained_svm", 20, "fit"), ("pretrained_svm", 80, "row"),
        ("cnn", 20, "fit"), ("cnn", 80, "row")]  # the CNN trained afresh on 20 (cnn_learning_curve)
    cnn = json.loads((repo / f"{DS}/cnn/metrics.json").read_text())
    assert curve["test_error_pct"].iloc[-1] == pytest.approx(cnn["test_error_pct"], abs=1e-4)
    assert _is_png(repo / f"{DS}/figures/learning_curve.png")


def test_top_down_model_outputs(tiny_run):
    """Refinement, the unsupervised row, generation, missing data, the refine trace."""
    repo, _ = tiny_run
    m = json.loads((repo / f"{DS}/unsupervised_svm/metrics.json").read_text())
    assert set(m["wall_seconds_by_step"]) == {"prepare", "pretrain_layer1", "pretrain_layer2",
                                              "refine", "topdown_features", "svm"}
    assert m["refine_n_images"] == 40 and m["n_features"] == 2 * 2 * m["dict_sizes"][-1]
    assert 0.0 <= m["pretrained_same_subset_test_error_pct"] <= 100.0
    # the row's features are the refined model's (rule topdown_features), not another row's:
    # their record names the refinement chain they came from
    mix = json.loads((repo / f"{DS}/unsupervised_svm/mixing.json").read_text())
    assert mix["refine_chain"]["n_sweeps"] == 3 and mix["route"] == "alg2", sorted(mix)
    with np.load(repo / f"{DS}/unsupervised_svm/features.npz") as z:
        assert z["f_train"].shape == (80, m["n_features"]), z.files
    inp = json.loads((repo / f"{DS}/inpainting/metrics.json").read_text())
    assert set(inp["hidden_pixels"]) == {"refined", "pretrained", "mean_fill"}
    for v in inp["hidden_pixels"].values():
        assert v["mse"] > 0 and np.isfinite(v["psnr_db"])
    for name in ("generated", "inpainting", "refine_trace", "top_dictionary_refined",
                 "top_dictionary_pretrained"):
        assert _is_png(repo / f"{DS}/figures/{name}.png"), name
    trace = pd.read_csv(repo / f"{DS}/refine/trace.csv")
    assert list(trace["sweep"]) == [1, 2, 3]
    assert {"log_joint", "gamma_e_mean", "active_top", "active_layer1", "accept_d2"} <= set(trace)
    assert np.all(np.isfinite(trace["log_joint"]))
    assert not (repo / f"{DS}/refine/ckpt").exists()


def test_supervised_row_and_outputs(tiny_run):
    """The supervised model: per-image decision values, the confusion matrix, Fig. 2's
    comparison, the chain's trace with the SVM's error; the CNN on each row's images."""
    repo, _ = tiny_run
    md = (repo / "results" / "tables.md").read_text()
    # every row trains and tests on the CNN's images: its "CNN, same images" is the CNN run
    cnn = json.loads((repo / f"{DS}/cnn/metrics.json").read_text())
    for label in ("Our pretrained model + SVM (2 step)", "Our unsupervised model + SVM (2 step)",
                  "Our supervised model"):
        # the CNN's column, then the pairs' (each row against the pretrained row)
        assert float(_rows(md)[label][-2]) == pytest.approx(cnn["test_error_pct"], abs=0.006), label
    assert not (repo / DS / "cnn_at").exists()
    from dgdm_tf.report.predictions import paired_on_shared_images, read_predictions
    ref = read_predictions(repo / f"{DS}/pretrained_svm/predictions.csv")
    for label, method in (("Our unsupervised model + SVM (2 step)", "unsupervised_svm"),
                          ("Our supervised model", "supervised"), ("CNN, same shape", "cnn")):
        pair = paired_on_shared_images(ref, read_predictions(repo / f"{DS}/{method}/predictions.csv"))
        assert pair["n_images"] == 40
        assert _rows(md)[label][-1] == (f"{pair['diff_pct_points']:+.2f} ± {pair['se_pct_points']:.2f}, "
                                        f"p {pair['mcnemar_exact_p']:.2g}, 40 images"), label
    assert _rows(md)["Our pretrained model + SVM (2 step)"][-1] == "(the pairs' reference)"
    m = json.loads((repo / f"{DS}/supervised/metrics.json").read_text())
    assert m["n_models_averaged"] == 1 and len(m["per_model_test_error_pct"]) == 1
    assert m["test_features"] == "mcem" and len(m["mcem_q_trace"]) == 1
    assert set(m["wall_seconds_by_step"]) == {"prepare", "pretrain_layer1", "pretrain_layer2",
                                              "refine", "supervised", "supervised_predict"}
    pred = pd.read_csv(repo / f"{DS}/supervised/predictions.csv")
    scores = [f"score_{c}" for c in range(10)]
    assert len(pred) == 40 and scores == list(pred.columns[3:])
    assert np.all(pred["predicted"] == pred[scores].to_numpy().argmax(1))
    assert 100.0 * np.mean(pred["predicted"] != pred["label"]) == pytest.approx(m["test_error_pct"])
    for name in ("confusion_supervised", "supervised_trace", "top_dictionary_supervised",
                 "top_dictionary_unsupervised_vs_supervised"):
        assert _is_png(repo / f"{DS}/figures/{name}.png"), name
    trace = pd.read_csv(repo / f"{DS}/supervised/trace.csv")
    assert list(trace["sweep"]) == [1, 2]
    assert np.all(np.isfinite(trace["svm_train_error"].iloc[1:]))
    assert not (repo / f"{DS}/supervised/ckpt").exists()


def test_cnn_run_directory_row_and_figure(tiny_run):
    repo, _ = tiny_run
    run = repo / DS / "cnn"
    m = json.loads((run / "metrics.json").read_text())
    assert m["method"] == "cnn" and m["n_train"] == 80 and m["n_test"] == 40
    for k in ("test_error_pct", "train_error_pct", "best_test_error_pct", "wall_seconds",
              "train_images_per_s", "inference_images_per_s", "peak_rss_mb"):
        assert math.isfinite(m[k]), k
    assert len(m["curve"]) == 1 and m["config"]["cnn"]["epochs"] == 1
    assert set(m["wall_seconds_by_step"]) == {"prepare", "cnn"}
    assert "pretrain" not in m["config"] and m["machine"]["cores"] >= 1
    curve = pd.read_csv(run / "curve.csv")
    assert list(curve.columns[:3]) == ["epoch", "seconds_cumulative", "test_error_pct"]
    assert curve["test_error_pct"].iloc[-1] == pytest.approx(m["test_error_pct"])
    assert len(pd.read_csv(run / "predictions.csv")) == 40
    resolved = yaml.safe_load((run / "config.yaml").read_text())
    assert resolved["method"] == "cnn" and resolved["block"]["cnn"]["fc_units"] == 32
    assert _is_png(repo / f"{DS}/figures/error_vs_time.png")


# ------------------------------------------------------------- what a change reruns
def test_a_rows_target_reruns_only_its_steps(tiny_copy):
    repo, cfg = tiny_copy
    (repo / f"{DS}/pretrained_svm/metrics.json").unlink()
    jobs = planned_jobs(repo, f"{DS}/pretrained_svm/metrics.json", cfg)
    assert jobs.get("svm") == 1 and "pretrain_layer" not in jobs and "features" not in jobs, jobs


def test_only_the_keys_a_rule_reads_rerun_it(tiny_run, tmp_path):
    """A test-time setting of the supervised model reruns its prediction only, a
    training setting its chain; the CNN's key reruns the CNN and nothing upstream; a
    pretraining / SVM key does not rerun the CNN."""
    repo, cfg = tiny_run
    original = Path(cfg).read_text()

    def plan(target, edit):
        # the run's config file, changed: its name is recorded (config_files), so it counts too
        try:
            return planned_jobs(repo, target, _config(cfg, Path(cfg), edit))
        finally:
            Path(cfg).write_text(original)

    jobs = plan(f"{DS}/supervised/metrics.json", lambda b: b["supervised"]["predict"].update(iterations=3))
    assert jobs.get("supervised_predict") == 1 and "supervised" not in jobs, jobs
    jobs = plan(f"{DS}/supervised/metrics.json", lambda b: b["supervised"].update(burn_in=2))
    assert jobs.get("supervised") == 1 and "refine" not in jobs, jobs
    cnn = f"{DS}/cnn/metrics.json"
    assert plan(cnn, lambda b: (b["pretrain"].update(burn_in=7), b["svm"].update(collect=3))) == {}
    jobs = plan(cnn, lambda b: b["cnn"].update(epochs=3))
    assert jobs.get("cnn") == 1 and "prepare" not in jobs and "download" not in jobs, jobs


# ------------------------------------------------------ the same bits, other ways
def test_shards_two_workers_and_a_forced_svm_give_the_first_runs_bits(tiny_copy, tmp_path):
    """One rerun of three of the run's rules, each another way, in one Snakemake call
    (each call pays its own start, TensorFlow imports and traces):

    - `shards: 2`: the pretrained row's features as 2 shard jobs per split and a gather,
      which writes every array of features.npz and every value of mixing.json of the
      unsplit run (times aside; the other split rules share the scripts' shard path,
      their functions' shards are checked bit for bit in tests/test_core_shards.py, slow tier);
    - `refine.workers: 2`: two local worker processes, each sweeping one of the 2 chunks
      of 20 images, write the refined model of the run's `workers: 1`, bit for bit;
    - the pretrained row's `svm`, forced on those gathered features: its predictions and
      errors are the first run's, bit for bit."""
    repo, cfg = tiny_copy
    feats, model = f"{DS}/pretrained_svm/features.npz", f"{DS}/refine/model.npz"
    metrics, pred = f"{DS}/pretrained_svm/metrics.json", f"{DS}/pretrained_svm/predictions.csv"

    def mixing():
        m = json.loads((repo / f"{DS}/pretrained_svm/mixing.json").read_text())
        m["alg2"].pop("seconds")  # a time, not a result
        return m

    before = {"features": _npz(repo / feats, drop=("wall_seconds",)), "mixing": mixing(),
              "model": _npz(repo / model), "pred": (repo / pred).read_bytes(),
              "metrics": json.loads((repo / metrics).read_text())}
    edited = _config(cfg, tmp_path / "shards2_workers2.yaml", lambda b: b["refine"].update(workers=2),
                     shards=2)
    r = snakemake(repo, "--cores", CORES, feats, model, metrics, "--forcerun", "svm",
                  "--configfile", str(edited), timeout=900)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-6000:]
    assert "rule features_shard:" in out and "rule svm:" in out and "rule pretrain_layer:" not in out
    assert len(list((repo / f"{DS}/pretrained_svm/shards").glob("*_?of2.npz"))) == 4
    got = _npz(repo / feats, drop=("wall_seconds",))
    assert sorted(got) == sorted(before["features"])
    for k, v in before["features"].items():
        np.testing.assert_array_equal(got[k], v, err_msg=k)
    assert mixing() == before["mixing"]
    assert "refining with 2 workers" in (repo / "results/logs/refine/mnist_smoke.log").read_text()
    got = _npz(repo / model)
    assert sorted(got) == sorted(before["model"])
    for k, v in before["model"].items():
        if k != "refine_config":  # it names its worker count
            np.testing.assert_array_equal(got[k], v, err_msg=k)
    assert (repo / pred).read_bytes() == before["pred"]
    m = json.loads((repo / metrics).read_text())
    assert (m["test_error_pct"], m["train_error_pct"]) == (before["metrics"]["test_error_pct"],
                                                           before["metrics"]["train_error_pct"])
