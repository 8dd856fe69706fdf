"""The GPU check (dgdm_tf.bench.gpu_check), on the CPU: its step list, its fall-back
detection (faked with the CPU as the target), its dry run and its projection's labels."""

import json
import statistics

import pytest
import tensorflow as tf
import yaml

from dgdm_tf.bench import exact_floor
from dgdm_tf.bench import gpu_check as G
from dgdm_tf.bench import placement as PL
from dgdm_tf.bench import projection as P
from dgdm_tf.core.compiled import compiled
from dgdm_tf.core.model import DeepModel

HAS_GPU = bool(tf.config.list_physical_devices("GPU"))


@pytest.fixture(scope="module")
def smoke():
    with open("config/smoke.yaml") as f:
        cfg = yaml.safe_load(f)
    name = next(iter(cfg["datasets"]))
    return cfg, cfg["datasets"][name]


def tiny_config(tmp_path, smoke):
    """The smoke config with a model of a few maps on 12 x 12 images."""
    cfg, ds = smoke
    ds = json.loads(json.dumps(ds))
    ds["image_shape"] = [12, 12, 1]
    ds["model"]["layers"] = [{"dict_size": 3, "n_dict": 3, "pool": 2}, {"dict_size": 2, "n_dict": 4, "pool": 1}]
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump({"hyper": cfg["hyper"], "datasets": {"tiny": ds},
                                    "benchmark": cfg["benchmark"]}))
    return str(path)


def test_step_list_covers_every_compiled_step_the_smoke_config_runs(smoke):
    cfg, ds = smoke
    shape = G.image_shape_of(ds)
    steps = G.smoke_steps(shape, ds, cfg["hyper"], batch_size=2, pretrain_batch_size=4, svm_images=10,
                          n_classes=10, seed=0)
    names = [s.name for s in steps]
    assert len(names) == len(set(names))
    # what the projection times for the config's rows ...
    stages, _ = P.plan(ds, int(ds["n_train"]), int(ds["n_test"]))
    kernels = {s.kernel for s in stages}
    # ... and every conditional of the top-down sampler, as the exact floor counts them
    model = DeepModel(shape, ds["model"]["layers"], cfg["hyper"])
    parts = set(exact_floor.topdown_macs(model, 2, n_leapfrog=int(ds["refine"]["n_leapfrog"]),
                                         power_iterations=int(ds["refine"]["power_iterations"])))
    # ... and the batched pretraining the config runs (pretrain.batch_size is set)
    assert ds["pretrain"]["batch_size"] is not None
    batched = {f(l + 1) for l in range(model.n_layers) for f in (G.batched_step, G.batched_global_step)}
    expected = kernels | parts | batched
    assert expected - set(names) == set(), f"steps not checked: {expected - set(names)}"
    assert set(names) - expected == set()
    assert P.SVM_ITERATION in names and all(P.pretrain_kernel(l + 1) in names for l in range(model.n_layers))
    # a config whose SVM is EM runs no Gibbs SVM step, one without batches no batched step
    em = dict(ds, svm=dict(ds["svm"], method="em"), pretrain=dict(ds["pretrain"], batch_size=None))
    names_em = {s.name for s in G.smoke_steps(shape, em, cfg["hyper"], batch_size=2, pretrain_batch_size=4,
                                              svm_images=10, n_classes=10, seed=0)}
    assert names_em == set(names) - batched - {P.SVM_ITERATION}


def _clean_step():
    inner = compiled(lambda x: tf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * 2.0), (0, x))[1])
    return G.Step("clean", lambda x: inner(x) + 1.0, (tf.ones([3]),), 3)


def test_placement_passes_a_step_on_its_device_and_flags_one_forced_elsewhere():
    p, fn, args = PL.check_placement(_clean_step(), G.CPU)
    assert p.ok and p.problems() == [] and p.n_ops > 10  # the loop's body is read too
    assert {n.op for _, n in PL.graph_nodes(fn.get_concrete_function(*args))} >= {"StatelessWhile", "Mul"}

    def forced(x):
        with tf.device("/CPU:1" if HAS_GPU else G.GPU):  # a device that is not the target
            y = x * 2.0
        return y + 1.0

    p, *_ = PL.check_placement(G.Step("forced", forced, (tf.ones([3]),), 3), G.CPU)
    assert not p.ok and any("pinned elsewhere" in m and "Mul" in m for m in p.problems())


def test_placement_flags_an_op_without_a_kernel_on_the_target_type():
    # the registry is asked about GPU kernels while the step runs on the CPU: the op that
    # a GPU would run on the CPU instead is reported
    step = G.Step("strings", lambda x: tf.strings.as_string(x * 2.0), (tf.ones([3]),), 3)
    p, *_ = PL.check_placement(step, G.CPU, kernel_device_type="GPU")
    assert not p.ok and p.no_kernel == ["AsString(T=float32)"] and p.no_gpu_kernel == p.no_kernel
    assert PL.check_placement(step, G.CPU)[0].ok  # the CPU has the kernel
    assert PL.check_placement(_clean_step(), G.CPU, kernel_device_type="GPU")[0].ok


def test_outputs_off_the_target_are_flagged():
    with tf.device(G.CPU):
        out = (tf.ones([2]), tf.constant(3))
    assert PL.misplaced_outputs(out, G.CPU) == []
    bad = PL.misplaced_outputs(out, G.GPU)
    assert len(bad) == 1 and "float32" in bad[0] and "CPU:0" in bad[0]  # int32 lives on the host


@pytest.mark.skipif(HAS_GPU, reason="needs a machine without a GPU")
def test_without_a_gpu_the_gpu_target_fails_and_the_command_says_so(capsys):
    p, *_ = PL.check_placement(_clean_step(), G.GPU)
    assert not p.ok and "strict placement failed" in p.problems()[0]
    assert G.main(["--out", "unused"]) == 2
    assert "no GPU visible" in capsys.readouterr().err


@pytest.mark.slow  # every step traced, the projection's pretraining and SVM kernels again
def test_cpu_only_runs_end_to_end_and_writes_its_table(tmp_path, smoke, capsys):
    path = tiny_config(tmp_path, smoke)
    out = tmp_path / "out"
    rc = G.main(["--cpu-only", "--smoke", path, "--project", f"{path}:tiny:100:50", "--out", str(out),
                 "--schema", "", "--repeats", "1", "--batch-size", "2", "--pretrain-batch-size", "4",
                 "--svm-images", "10", "20"])
    printed = capsys.readouterr().out
    assert rc == 0
    result = json.loads((out / "gpu_check.json").read_text())
    md = (out / "gpu_check.md").read_text()
    assert result["ok"] and result["cpu_only"] and result["target"] == G.CPU
    assert all(r["placement"] == "ok" and r["target_s"] > 0 for r in result["steps"])
    # timed on the check's own executable: a step timed under another placement setting
    # rebuilt it inside its timing (3.1 s for a 14 ms refinement sweep)
    sweep = next(r for r in result["steps"] if r["step"] == "refinement sweep")
    assert sweep["target_s"] < sweep["first_run_s"] / 5, sweep
    assert "Dry run (--cpu-only): no GPU figure is measured here." in md and md in printed
    for r in result["steps"]:
        assert f"| {r['step']} | " in md
    p = result["projection"][0]
    assert p["gpu_hours_source"] == "assumed" and p["gpu_speedup"]["source"].startswith("assumed")
    # the projected config is the smoke model: its top-down kernels are the check's own
    # CPU timings, not traced again
    sources = {r["kernel"]: r["cpu_source"] for r in p["stages"]}
    assert {k for k, v in sources.items() if "this check's CPU timings" in v} == (
        set(P.TOPDOWN_KERNELS) & set(sources)) != set(), sources
    assert "| **all stages** |" in md and "assumed" in md


def test_projection_labels_measured_and_assumed_figures(tmp_path, smoke, monkeypatch):
    path = tiny_config(tmp_path, smoke)
    cfg, ds = smoke
    ds_tiny = yaml.safe_load(open(path))["datasets"]["tiny"]
    model = DeepModel((12, 12, 1), ds_tiny["model"]["layers"], cfg["hyper"])
    q = P.sequential_steps(model)
    kernels = {k: {"a": 0.0, "b": 1e-3, "q": q[k], "measured_at": "batch 2"} for k in q}
    monkeypatch.setattr(P, "measure_kernels", lambda *a, **k: (kernels, 1e10))
    monkeypatch.setattr(G, "floor_rate", lambda *a, **k: 1e12)
    # GPU timings of the smoke steps: 2 ms a pass of each kernel, 10x faster than the CPU
    rows = [{"step": k, "target_s": 2e-3, "cpu_s": 2e-2, "speedup": 10.0} for k in q]
    target = [G.parse_target(f"{path}:tiny:100:50")]
    kw = dict(seed=0, batch_size=2, pretrain_batch_size=4, svm_images=[10, 20], n_classes=10,
              schema=None, repeats=1, progress=lambda m: None)
    gpu = G.project_targets(target, rows, ds_tiny, (12, 12, 1), cfg["hyper"], cpu_only=False, **kw)[0]
    assert gpu["gpu_speedup"]["value"] == pytest.approx(100.0) and gpu["gpu_speedup"]["source"].startswith("measured")
    lam = gpu["step_latency_s"]
    assert lam["source"].startswith("measured")
    assert lam["value"] == pytest.approx(statistics.median(2e-3 / q[k] for k in q))
    assert gpu["gpu_hours_source"] == "measured"
    for r in gpu["stages"]:
        assert r["gpu_hours_by_ratio"] == pytest.approx(r["cpu_hours"] / 10.0)
        assert r["ratio_source"].startswith("assumed") and r["cpu_source"].startswith("measured")
    dry = G.project_targets(target, rows, ds_tiny, (12, 12, 1), cfg["hyper"], cpu_only=True, **kw)[0]
    pcfg = cfg["benchmark"]["projection"]
    assert dry["gpu_hours_source"] == "assumed" and dry["gpu_hours_by_ratio"] is None
    assert dry["gpu_speedup"]["value"] == pytest.approx(pcfg["gpu_macs_per_s"] / 1e10)
    assert dry["step_latency_s"] == {"value": pcfg["gpu_step_latency_s"], "source": dry["step_latency_s"]["source"]}
    assert "assumed" in dry["step_latency_s"]["source"]
    assert dry["cpu_hours"] == pytest.approx(gpu["cpu_hours"])
