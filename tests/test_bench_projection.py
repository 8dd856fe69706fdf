"""The projected wall time of a config's rows (dgdm_tf.bench.projection)."""

import pandas as pd
import pytest
import yaml

from dgdm_tf.bench import projection as P
from dgdm_tf.bench.report import projection_lines
from dgdm_tf.core.model import DeepModel


@pytest.fixture(scope="module")
def paper():
    with open("config/paper.yaml") as f:
        return yaml.safe_load(f)


def test_plan_reads_each_rows_schedule_from_the_config(paper):
    ds = paper["datasets"]["mnist"]
    stages, left_out = P.plan(ds, 60000, 10000)
    by = {(s.row, s.stage): s for s in stages}
    pre = ds["pretrain"]
    assert [s.kernel for s in stages[:2]] == [P.pretrain_kernel(1), P.pretrain_kernel(2)]
    assert stages[0].passes == pre["burn_in"] + pre["collect"] * pre["thin"]
    assert stages[0].batch == pre["batch_size"]
    # the top layer by Algorithm 2 (paper.yaml's route): its sweeps, then at most
    # max_iterations MCEM iterations an image
    a = ds["topdown_features"]["alg2"]
    assert ds["topdown_features"]["route"] == "alg2"
    sweeps = by[("pretrained_svm", "top-down features (train + test): sweeps")]
    its = by[("pretrained_svm", "top-down features (train + test): MCEM iterations, at most")]
    assert (sweeps.kernel, sweeps.images, sweeps.passes) == (P.TEST_SWEEP, 70000, a["burn_in"])
    assert (its.kernel, its.images, its.passes) == (P.MCEM_ITERATION, 70000, a["max_iterations"])
    # refinement runs once, for the first row that needs it: burn-in + collect x thin sweeps
    refines = [s for s in stages if s.kernel == P.REFINE_SWEEP]
    r = ds["refine"]
    assert len(refines) == 1 and refines[0].row == "unsupervised_svm"
    assert refines[0].passes == r["burn_in"] + r["collect"] * r["thin"]
    # the supervised row's test time: each kept model's sweeps, then its MCEM iterations
    p = ds["supervised"]["predict"]
    assert p["features"] == "mcem"
    n_models = min(p["models"], ds["supervised"]["collect"])
    mcem = [s for s in stages if s.kernel == P.MCEM_ITERATION and s.row == "supervised"]
    assert len(mcem) == 1 and mcem[0].passes == n_models * p["iterations"]
    assert mcem[0].images == 10000 + p["mismatch_images"]  # the re-inferred training images too
    # one Gibbs SVM per SVM row, none for the encoder's EM
    assert sorted(s.row for s in stages if s.kernel == P.SVM_ITERATION) == [
        "pretrained_block_svm", "pretrained_svm", "unsupervised_svm"]
    assert any(l.startswith("encoder_svm") for l in left_out) and any(l.startswith("cnn") for l in left_out)


def test_plan_reads_the_chains_under_route_chain(paper):
    ds = dict(paper["datasets"]["mnist"])
    # the features rule reads block topdown_features for pretrained_svm too (chains 3
    # here, unlike block features')
    t = ds["topdown_features"] = dict(ds["topdown_features"], route="chain", chains=3)
    assert ds["features"].get("chains") != 3
    stages, _ = P.plan(ds, 60000, 10000)
    by = {(s.row, s.stage): s for s in stages}
    feats = by[("pretrained_svm", "top-down features (train + test)")]
    assert (feats.images, feats.passes) == (70000, 3 * (t["burn_in"] + t["collect"]))
    un = by[("unsupervised_svm", "top-down features (train + test)")]
    assert un.passes == 3 * (t["burn_in"] + t["collect"])


def test_plan_shares_refinement_with_a_supervised_row_started_from_it(paper):
    ds = dict(paper["datasets"]["mnist"], methods=["supervised", "unsupervised_svm"])
    ds["supervised"] = dict(ds["supervised"], start_from="refined")
    stages, _ = P.plan(ds, 100, 50)
    refines = [s for s in stages if s.kernel == P.REFINE_SWEEP]
    assert len(refines) == 1 and refines[0].row == "supervised"


def test_projection_is_the_stated_formula():
    stages = [P.Stage("r", "sampler", "k", images=1000, passes=10, batch=100),
              P.Stage("r", "svm", "s", images=1000, passes=3, batch=1000)]
    kernels = {"k": {"a": 0.0, "b": 0.02, "q": 50}, "s": {"a": 1.0, "b": 0.001, "q": 1}}
    rows = P.project(stages, kernels, gpu_speedup=100.0, step_latency_s=1e-3)
    assert rows[0]["cpu_hours"] == pytest.approx(10 * 0.02 * 1000 / 3600)
    # arithmetic 0.2 s a pass, sequential 10 batches x 50 steps x 1 ms = 0.5 s a pass
    assert rows[0]["gpu_hours"] == pytest.approx(10 * 0.5 / 3600) and rows[0]["gpu_bound"] == "sequential steps"
    assert rows[1]["cpu_hours"] == pytest.approx(3 * 2.0 / 3600)
    assert rows[1]["gpu_hours"] == pytest.approx(3 * 0.02 / 3600) and rows[1]["gpu_bound"] == "arithmetic"
    with pytest.raises(KeyError, match="no measurement of kernel 'k'"):
        P.project(stages, {"s": kernels["s"]}, gpu_speedup=1.0, step_latency_s=0.0)
    with pytest.raises(ValueError, match="gpu_speedup"):
        P.project(stages, kernels, gpu_speedup=0.0, step_latency_s=0.0)


def test_sequential_steps_count_every_colour_and_map(paper):
    layers = paper["datasets"]["mnist"]["model"]["layers"]
    model = DeepModel((28, 28, 1), layers)
    q = P.sequential_steps(model)
    top, l1 = model.colourings[1], model.colourings[0]
    assert (top.g_h, top.g_w) == (2, 2)  # the 2 x 2 top units all overlap
    assert q[P.TEST_SWEEP] == 4 * 200 + l1.g_h * l1.g_w * 50
    assert q[P.REFINE_SWEEP] == q[P.TEST_SWEEP] + 250


def test_fit_linear_recovers_a_line():
    a, b = P.fit_linear([100, 200, 400], [0.5 + 0.01 * n for n in (100, 200, 400)])
    assert a == pytest.approx(0.5) and b == pytest.approx(0.01)
    # noisy timings at small sizes can fall with n: a flat cost, never a negative one
    assert P.fit_linear([20, 40], [0.03, 0.02]) == (0.03, 0.0)


def test_projection_section_sums_rows_and_datasets():
    rows = pd.DataFrame([
        {"dataset": "d", "row": "x", "stage": "s1", "kernel": "k", "images": 1, "passes": 1, "batch": 1,
         "measured_at": "batch 1", "cpu_s_per_pass": 1.0, "cpu_hours": 24.0, "q": 1, "gpu_hours": 1.0,
         "gpu_bound": "arithmetic", "gpu_speedup": 10.0, "left_out": "cnn: the baseline"},
        {"dataset": "d", "row": "y", "stage": "s2", "kernel": "k", "images": 1, "passes": 1, "batch": 1,
         "measured_at": "batch 1", "cpu_s_per_pass": 1.0, "cpu_hours": 48.0, "q": 1, "gpu_hours": 2.0,
         "gpu_bound": "arithmetic", "gpu_speedup": 10.0, "left_out": "cnn: the baseline"}])
    md = "\n".join(projection_lines(rows))
    line = next(l for l in md.splitlines() if "all rows" in l)
    assert [c.strip() for c in line.strip("|").split("|")][2:6] == ["72.00", "3.00", "3.00", "0.125"]
    assert "d 10x" in md and "cnn: the baseline" in md


def test_measured_topdown_rows_are_taken_in_place_of_a_second_measurement(monkeypatch):
    """The workflow's projection takes benchmark_refine's rows of the four top-down kernels
    when it measured the same model at the same batch; it measures nothing of them again,
    and says where each figure comes from. A set that lacks one of them is refused."""
    layers = [{"dict_size": 3, "n_dict": 3, "pool": 2}, {"dict_size": 2, "n_dict": 4, "pool": 1}]

    def measured_again(*a, **k):
        raise AssertionError("the top-down kernels were measured again")

    monkeypatch.setattr(P, "benchmark_refine", measured_again)
    rows = [{"step": k, "seconds": 0.01 * (i + 1), "batch_size": 2} for i, k in enumerate(P.TOPDOWN_KERNELS)]
    kw = dict(batch_size=2, pretrain_batch_size=4, svm_images=[10, 20], n_classes=10, sweeps=1, seed=0,
              n_leapfrog=3, power_iterations=2, progress=lambda m: None)
    kernels, _ = P.measure_kernels((12, 12, 1), layers, topdown_rows=rows, **kw)
    for i, k in enumerate(P.TOPDOWN_KERNELS):
        assert kernels[k]["b"] == pytest.approx(0.01 * (i + 1) / 2)
        assert kernels[k]["measured_at"] == "batch 2, benchmark_refine's"
    with pytest.raises(ValueError, match="not one row of each"):
        P.measure_kernels((12, 12, 1), layers, topdown_rows=rows[1:], **kw)
