"""The projection onto a cluster of nodes (dgdm_tf.bench.cluster): what each kernel
all-reduces, the ring's time, the stages' hours at each node count, the loopback
all-reduce measured between two TensorFlow workers, and the report's section."""

import math

import pandas as pd
import pytest

from dgdm_tf.bench import cluster as C
from dgdm_tf.bench import projection as P
from dgdm_tf.bench.report import cluster_lines
from dgdm_tf.core.model import DeepModel

LAYERS = [{"dict_size": 3, "n_dict": 4, "pool": 2}, {"dict_size": 2, "n_dict": 5, "pool": 1}]


@pytest.fixture(scope="module")
def model():
    return DeepModel((12, 12, 1), LAYERS)


def test_reductions_count_each_global_conditionals_sums(model):
    g0, g1 = model.geoms
    stats0 = 2 * g0.hx * (g0.wx // 2 + 1) * g0.k * (g0.c + g0.k)  # F and Q, complex
    assert C.reductions(model, P.TEST_SWEEP, n_leapfrog=10, power_iterations=3, n_classes=3) == C.Reductions(0, 0)
    assert C.reductions(model, P.MCEM_ITERATION, n_leapfrog=10, power_iterations=3, n_classes=3).count == 0
    pre1 = C.reductions(model, P.pretrain_kernel(1), n_leapfrog=10, power_iterations=3, n_classes=3)
    assert pre1 == C.Reductions(2, stats0 + g0.k + 2)
    refine = C.reductions(model, P.REFINE_SWEEP, n_leapfrog=10, power_iterations=3, n_classes=3)
    hmc = 1 + 3 + 1 + 10  # probe, power iterations, start gradient, leapfrog gradients
    d1 = g1.dh * g1.dw * g1.c * g1.k
    assert refine.count == 1 + hmc + 1
    assert refine.floats == stats0 + hmc * d1 + (g0.k + 2) + (g1.k + 2)
    f1 = model.top.hs * model.top.ws * model.top.k + 1
    sup = C.reductions(model, P.SUPERVISED_SWEEP, n_leapfrog=10, power_iterations=3, n_classes=3)
    assert (sup.count, sup.floats) == (refine.count + 1, refine.floats + 3 * (f1 * f1 + f1))
    assert sup.bytes == 4 * sup.floats
    with pytest.raises(KeyError, match="no all-reduce count"):
        C.reductions(model, "some other kernel", n_leapfrog=1, power_iterations=1, n_classes=2)


def test_ring_seconds_follow_the_ring_all_reduce():
    red = C.Reductions(3, 1_000_000)
    assert C.ring_seconds(red, 1, latency_s=1e-3, bytes_per_s=1e9) == 0.0
    assert C.ring_seconds(C.Reductions(0, 0), 8, latency_s=1e-3, bytes_per_s=1e9) == 0.0
    two = C.ring_seconds(red, 2, latency_s=1e-3, bytes_per_s=1e9)
    assert math.isclose(two, 3 * 2 * 1e-3 + 2 * 0.5 * 4e6 / 1e9)
    assert C.ring_seconds(red, 64, latency_s=1e-3, bytes_per_s=1e9) > two


def test_project_nodes_splits_the_per_image_work_and_adds_the_exchanges():
    rows = [{"dataset": "d", "row": "r", "stage": "chain", "kernel": "k", "passes": 10,
             "cpu_s_per_pass": 100.0},
            {"dataset": "d", "row": "r", "stage": "svm", "kernel": "svm", "passes": 4,
             "cpu_s_per_pass": 30.0}]
    kernels = {"k": {"a": 0.0}, "svm": {"a": 10.0}}
    reds = {"k": C.Reductions(2, 1000), "svm": C.Reductions(0, 0)}
    out = C.project_nodes(rows, kernels, reds, nodes=[1, 4], cores_per_node=8, cores_measured=2,
                          latency_s=1e-3, bytes_per_s=1e6)
    by = {(r["stage"], r["nodes"]): r for r in out}
    assert by[("chain", 1)]["comm_s_per_pass"] == 0.0
    assert math.isclose(by[("chain", 1)]["compute_s_per_pass"], 100.0 * 2 / 8)
    assert math.isclose(by[("chain", 4)]["compute_s_per_pass"], 100.0 * 2 / 32)
    assert math.isclose(by[("chain", 4)]["comm_s_per_pass"], C.ring_seconds(
        reds["k"], 4, latency_s=1e-3, bytes_per_s=1e6))
    # the SVM's a stays serial, its b N splits
    assert math.isclose(by[("svm", 4)]["compute_s_per_pass"], 10.0 + 20.0 * 2 / 32)
    assert math.isclose(by[("chain", 4)]["hours"],
                        10 * (by[("chain", 4)]["compute_s_per_pass"] + by[("chain", 4)]["comm_s_per_pass"]) / 3600)


@pytest.mark.slow
def test_the_loopback_all_reduce_is_measured_between_two_workers():
    out = C.measure_allreduce([100, 200_000], workers=2, repeats=3, timeout=240)
    assert out["workers"] == 2 and [s["floats"] for s in out["sizes"]] == [100, 200_000]
    assert all(s["seconds"] > 0 for s in out["sizes"])
    assert out["latency_s"] == out["sizes"][0]["seconds"] and out["bytes_per_s"] > 0
    lat, bps = C.combined_link(out, network_latency_s=2e-5, network_gbit_s=25.0)
    assert lat == out["latency_s"] + 2e-5 and bps <= 25e9 / 8
    with pytest.raises(ValueError, match="two sizes"):
        C.measure_allreduce([100])


def test_cluster_section_says_whether_the_rows_fit_the_day():
    rows = []
    for n, h in ((1, 100.0), (8, 13.0)):
        rows.append({"dataset": "mnist", "row": "supervised", "stage": "supervised chain",
                     "kernel": "k", "nodes": n, "passes": 1, "allreduces_per_pass": 2,
                     "mb_per_pass": 1.0, "compute_s_per_pass": h * 3600, "comm_s_per_pass": 0.0,
                     "hours": h, "cores_per_node": 32, "cores_measured": 2,
                     "loopback_latency_s": 1e-3, "loopback_bytes_per_s": 5e8})
    md = "\n".join(cluster_lines(pd.DataFrame(rows)))
    assert "## Projected wall time on a cluster" in md and "hours on 8 nodes" in md
    assert "mnist on 1 node: 100.0 h, over 24 h" in md
    assert "mnist on 8 nodes: 13.0 h, within 24 h" in md


def _stage(dataset, row, stage, nodes, hours):
    return {"dataset": dataset, "row": row, "stage": stage, "nodes": nodes, "hours": hours}


def test_rule_runtimes_take_the_spread_rules_at_n_nodes_and_the_rest_at_one():
    rows = []
    for n, h in ((1, 80.0), (8, 10.0)):
        rows += [_stage("m", "(pretraining, shared)", "pretraining layer 1", n, h / 10),
                 _stage("m", "(pretraining, shared)", "pretraining layer 2", n, h / 20),
                 _stage("m", "unsupervised_svm", "refinement", n, h),
                 _stage("m", "unsupervised_svm", "top-down features (train + test): sweeps", n, h / 100),
                 _stage("m", "unsupervised_svm", "top-down features (train + test): MCEM iterations, at most", n, h / 50),
                 _stage("m", "supervised", "supervised chain", n, h),
                 _stage("m", "pretrained_svm", "Bayesian SVM (Gibbs)", n, 0.001),
                 _stage("m", "supervised", "Bayesian SVM (Gibbs)", n, 0.5)]
    got = C.rule_runtimes(rows, nodes=8, headroom=1.5)["m"]
    assert got["refine"] == math.ceil(1.5 * 10.0 * 60)                       # spread: 8 nodes
    assert got["topdown_features"] == math.ceil(1.5 * (0.1 + 0.2) * 60)      # both stages, 8 nodes
    assert got["supervised"] == math.ceil(1.5 * 80.0 * 60)                   # one node
    assert got["pretrain_layer"] == math.ceil(1.5 * 8.0 * 60)                # the longer layer
    assert got["svm"] == 45                                                  # the longer row's SVM
    assert C.rule_runtimes(rows, nodes=8, headroom=1.0, minimum=10)["m"]["svm"] == 30
    assert "features" not in got  # no pretrained_svm top-down stage in these rows


def test_paper_config_gives_cifar10_its_own_runtimes_and_mnist_the_rules():
    """config/paper.yaml's per-dataset runtimes reach the rules' resources by wildcard;
    a dataset without its own keeps `resources.<rule>`."""
    import sys
    from types import SimpleNamespace
    from pathlib import Path
    import yaml

    repo = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(repo / "workflow" / "lib"))
    import dgdm_workflow as W

    config = yaml.safe_load((repo / "config" / "paper.yaml").read_text())
    wiring = W.Wiring(config)
    refine = wiring.res("refine")
    assert refine["runtime"](SimpleNamespace(ds="cifar10")) == config["resources_by_dataset"]["cifar10"]["refine"]["runtime"]
    assert refine["runtime"](SimpleNamespace(ds="mnist")) == config["resources"]["refine"]["runtime"]
    assert refine["mem_mb"](SimpleNamespace(ds="cifar10")) == config["resources"]["refine"]["mem_mb"]
    assert wiring.res("tables") == {"mem_mb": 500, "runtime": 5, "gpu": 0}  # no override: plain values
    assert config["datasets"]["mnist"]["refine"]["workers"] == config["shards"] == 8
