"""dgdm_tf.io.artifacts: each writer writes the bytes the workflow script's own
``save_npz`` call wrote before (the calls are copied below from the scripts as they were),
each reader gives back what was written, and a missing or malformed file names itself and
the rule that writes it.

Byte comparison is sound: numpy's npz members are ``ZipInfo(name)`` entries, dated
1980-01-01 whatever the clock says (checked below), so equal arrays give equal files."""

from __future__ import annotations

import ast
import json
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from dgdm_tf.io import artifacts, atomic as atomic_io

RNG = np.random.default_rng(0)
LAYER = {"dict_size": 3, "n_dict": 4, "pool": 2}
PRE = {"n_images": 5, "burn_in": 2, "collect": 1}
LAYERS = [LAYER, {"dict_size": 2, "n_dict": 3, "pool": 1}]
CFG = {"burn_in": 1, "collect": 2, "scan": "random", "n_images": None}


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def same_bytes(old: Path, new: Path) -> None:
    assert old.read_bytes() == new.read_bytes()
    with zipfile.ZipFile(new) as zf:
        assert {i.date_time for i in zf.infolist()} == {(1980, 1, 1, 0, 0, 0)}


def pretrain_out(first: bool):
    """A pretrain_layer run's result (dgdm_tf.pretrain.chain.run_pretrain_layer's dtypes)."""
    return {"D": f32(3, 3, 1, 4), "kept": np.arange(4, dtype=np.int64), "usage": f32(4),
            "x_next": f32(5, 2, 2, 4), "gamma_e": f32(5), "gamma_w": np.float32(1.5),
            "sweeps": 3, "seconds": 1.25, "idx": np.arange(5, dtype=np.int64) if first else None}


@pytest.mark.parametrize("first", [True, False])
def test_pretrained_layer_bytes_and_round_trip(tmp_path, first):
    out = pretrain_out(first)
    extra = {} if not first else {"image_indices": out["idx"]}
    kept = np.asarray(out["kept"])
    # workflow/scripts/pretrain_layer.py, before
    atomic_io.save_npz(
        tmp_path / "old.npz",
        activity_ink=np.float64(0.25),
        D=np.asarray(out["D"], dtype=np.float32),
        kept=kept,
        usage=np.asarray(out["usage"]),
        x_next=np.asarray(out["x_next"], dtype=np.float32),
        gamma_e=np.asarray(out["gamma_e"]),
        gamma_w=np.asarray(out["gamma_w"]),
        sweeps=np.int64(out["sweeps"]),
        chain_seconds=np.float64(out["seconds"]),
        wall_seconds=np.float64(2.5),
        n_input=np.int64(5),
        layer_config=np.array(json.dumps(LAYER)),
        pretrain_config=np.array(json.dumps(PRE)),
        **extra,
    )
    artifacts.write_pretrained_layer(
        tmp_path / "new.npz", artifacts.PretrainedLayer(
            D=out["D"], kept=kept, usage=out["usage"], x_next=out["x_next"],
            gamma_e=out["gamma_e"], gamma_w=out["gamma_w"], sweeps=out["sweeps"],
            chain_seconds=out["seconds"], wall_seconds=2.5, n_input=5, activity_ink=0.25,
            layer_config=LAYER, pretrain_config=PRE, image_indices=out["idx"]))
    same_bytes(tmp_path / "old.npz", tmp_path / "new.npz")

    z = artifacts.read_pretrained_layer(tmp_path / "new.npz")
    assert z.x_next is None
    assert z.D.dtype == np.float32 and np.array_equal(z.D, out["D"])
    assert np.array_equal(z.kept, out["kept"]) and np.array_equal(z.usage, out["usage"])
    assert z.gamma_e.dtype == np.float32 and np.array_equal(z.gamma_e, out["gamma_e"])
    assert z.gamma_w == 1.5 and z.gamma_e_mean == float(np.mean(out["gamma_e"]))
    assert (z.sweeps, z.n_input, z.activity_ink) == (3, 5, 0.25)
    assert (z.chain_seconds, z.wall_seconds, z.seconds) == (1.25, 2.5, 2.5)
    assert (z.layer_config, z.pretrain_config) == (LAYER, PRE)
    if first:
        assert z.image_indices.dtype == np.int64 and np.array_equal(z.image_indices, out["idx"])
    else:
        assert z.image_indices is None
    x_next = artifacts.read_pretrained_layer(tmp_path / "new.npz", x_next=True).x_next
    assert x_next.dtype == np.float32 and np.array_equal(x_next, out["x_next"])


def feature_splits(f_dtype):
    return {s: (f32(n, 6).astype(f_dtype), RNG.integers(0, 3, n).astype(np.int64),
                np.sort(RNG.permutation(20)[:n]).astype(np.int64)) for s, n in (("train", 7), ("test", 4))}


@pytest.mark.parametrize("f_dtype", [np.float32, np.float64])
def test_features_bytes_and_round_trip(tmp_path, f_dtype):
    sp = feature_splits(f_dtype)
    out = {}
    for split, (f, y, idx) in sp.items():  # workflow/scripts/features.py (and the other three)
        out[f"f_{split}"] = f
        out[f"y_{split}"] = y
        out[f"idx_{split}"] = idx
    atomic_io.save_npz(tmp_path / "old.npz", **out, n_classes=np.int64(3),
                       wall_seconds=np.float64(4.5), features_config=np.array(json.dumps(CFG)))
    artifacts.write_features(tmp_path / "new.npz", artifacts.FeatureSplit(*sp["train"]),
                             artifacts.FeatureSplit(*sp["test"]), n_classes=3, wall_seconds=4.5,
                             config=CFG)
    same_bytes(tmp_path / "old.npz", tmp_path / "new.npz")

    feats = artifacts.read_features(tmp_path / "new.npz")
    for split, got in (("train", feats.train), ("test", feats.test)):
        for want, have in zip(sp[split], (got.f, got.y, got.idx)):
            assert have.dtype == want.dtype and np.array_equal(have, want)
    assert (feats.n_classes, feats.wall_seconds, feats.config) == (3, 4.5, CFG)
    with pytest.raises(ValueError, match="idx"):
        artifacts.write_features(tmp_path / "x.npz", artifacts.FeatureSplit(*sp["train"][:2]),
                                 artifacts.FeatureSplit(*sp["test"]), n_classes=3,
                                 wall_seconds=1.0, config=CFG)


def test_transfer_features_bytes_and_round_trip(tmp_path):
    f_tr, f_te = f32(5, 6), f32(3, 6)
    y_tr, y_te = np.arange(5, dtype=np.int64), np.arange(3, dtype=np.int64)
    atomic_io.save_npz(tmp_path / "old.npz", f_train=f_tr, y_train=y_tr, f_test=f_te, y_test=y_te)
    artifacts.write_transfer_features(tmp_path / "new.npz", artifacts.FeatureSplit(f_tr, y_tr),
                                      artifacts.FeatureSplit(f_te, y_te))
    same_bytes(tmp_path / "old.npz", tmp_path / "new.npz")
    train, test = artifacts.read_transfer_features(tmp_path / "new.npz")
    assert np.array_equal(train.f, f_tr) and np.array_equal(test.y, y_te) and train.idx is None


def refine_out():
    """dgdm_tf.topdown.refine.run_refine's result, two layers."""
    return {"D": [f32(3, 3, 1, 4), f32(2, 2, 4, 3)], "theta": [f32(4, 10)], "gamma_s": 2.0,
            "gamma_e": f32(5), "on_rate": f32(3), "sweeps": 3, "seconds": 7.5}


#: a chain's diagnostics (dgdm_tf.mcmc.diagnostics.trace_settlement), the files' one new key
SETTLE = {"settled": False, "drifting": ["log_joint"], "scalars": {"log_joint": {"drift": 3.2}}}


def test_refined_model_bytes_and_round_trip(tmp_path):
    out, idx = refine_out(), np.arange(5, dtype=np.int64)
    # workflow/scripts/refine.py, before
    arrs = {f"D{l + 1}": d for l, d in enumerate(out["D"])}
    arrs.update({f"theta{l + 1}": t for l, t in enumerate(out["theta"])})
    atomic_io.save_npz(
        tmp_path / "old.npz", **arrs, n_layers=np.int64(len(out["D"])),
        gamma_s=np.float64(out["gamma_s"]), gamma_e=out["gamma_e"], on_rate=out["on_rate"],
        image_indices=idx, sweeps=np.int64(out["sweeps"]), chain_seconds=np.float64(out["seconds"]),
        wall_seconds=np.float64(8.0), refine_config=np.array(json.dumps(CFG)),
        layers=np.array(json.dumps(LAYERS)), settlement=np.array(json.dumps(SETTLE)))
    artifacts.write_refined_model(
        tmp_path / "new.npz", artifacts.RefinedModel(
            D=out["D"], theta=out["theta"], gamma_s=out["gamma_s"],
            gamma_e=out["gamma_e"], on_rate=out["on_rate"], image_indices=idx, sweeps=out["sweeps"],
            chain_seconds=out["seconds"], wall_seconds=8.0, config=CFG, layers=LAYERS, settlement=SETTLE))
    same_bytes(tmp_path / "old.npz", tmp_path / "new.npz")

    m = artifacts.read_refined_model(tmp_path / "new.npz")
    assert m.n_layers == 2 and all(d.dtype == np.float32 for d in m.D)
    assert all(np.array_equal(a, b) for a, b in zip(m.D + m.theta, out["D"] + out["theta"]))
    assert len(m.theta) == 1 and np.array_equal(m.on_rate, out["on_rate"])
    assert (m.gamma_s, m.gamma_e_mean) == (2.0, float(np.mean(out["gamma_e"])))
    assert np.array_equal(m.image_indices, idx) and (m.sweeps, m.seconds) == (3, 8.0)
    assert (m.config, m.layers, m.settlement) == (CFG, LAYERS, SETTLE)
    with np.load(tmp_path / "old.npz") as z:  # a file written before the key: no settlement
        atomic_io.save_npz(tmp_path / "before.npz", **{k: z[k] for k in z.files if k != "settlement"})
    assert artifacts.read_refined_model(tmp_path / "before.npz").settlement is None


def test_supervised_model_bytes_and_round_trip(tmp_path):
    out, idx = refine_out(), np.arange(5, dtype=np.int64)
    out["samples"] = {"D": [np.stack([d, d]) for d in out["D"]],
                      "beta": RNG.standard_normal((2, 3, 13))}
    out["svm_mean"], out["svm_std"] = RNG.standard_normal(12), RNG.random(12)
    labels = np.array([0, 1, 2, 1, 0], np.int64)
    # workflow/scripts/supervised.py, before
    arrs = {f"D{l + 1}": v for l, v in enumerate(out["D"])}
    arrs.update({f"samples_D{l + 1}": v for l, v in enumerate(out["samples"]["D"])})
    arrs.update({f"theta{l + 1}": t for l, t in enumerate(out["theta"])})
    atomic_io.save_npz(
        tmp_path / "old.npz", **arrs, n_layers=np.int64(len(out["D"])),
        samples_beta=out["samples"]["beta"], svm_mean=out["svm_mean"], svm_std=out["svm_std"],
        n_classes=np.int64(3), gamma_s=np.float64(out["gamma_s"]), gamma_e=out["gamma_e"],
        on_rate=out["on_rate"], image_indices=idx, labels=labels,
        train_error_pct=np.float64(12.5), sweeps=np.int64(out["sweeps"]),
        chain_seconds=np.float64(out["seconds"]), wall_seconds=np.float64(9.0),
        supervised_config=np.array(json.dumps(CFG)), layers=np.array(json.dumps(LAYERS)),
        settlement=np.array(json.dumps(SETTLE)))
    artifacts.write_supervised_model(
        tmp_path / "new.npz", artifacts.SupervisedModel(
            D=out["D"], samples_D=out["samples"]["D"], theta=out["theta"],
            samples_beta=out["samples"]["beta"], svm_mean=out["svm_mean"], svm_std=out["svm_std"],
            n_classes=3, gamma_s=out["gamma_s"], gamma_e=out["gamma_e"], on_rate=out["on_rate"],
            image_indices=idx, labels=labels, train_error_pct=12.5, sweeps=out["sweeps"],
            chain_seconds=out["seconds"], wall_seconds=9.0, config=CFG, layers=LAYERS, settlement=SETTLE))
    same_bytes(tmp_path / "old.npz", tmp_path / "new.npz")

    m = artifacts.read_supervised_model(tmp_path / "new.npz")
    assert m.n_layers == 2 and all(d.dtype == np.float32 for d in m.samples_D)
    assert all(np.array_equal(a, b) for a, b in zip(m.samples_D, out["samples"]["D"]))
    assert np.array_equal(m.samples_beta, out["samples"]["beta"])
    assert np.array_equal(m.svm_mean, out["svm_mean"]) and np.array_equal(m.svm_std, out["svm_std"])
    assert (m.n_classes, m.train_error_pct, m.seconds, m.gamma_s) == (3, 12.5, 9.0, 2.0)
    assert np.array_equal(m.labels, labels) and (m.config, m.layers) == (CFG, LAYERS)
    assert m.settlement == SETTLE


def test_mcem_model_and_samples_bytes_and_round_trip(tmp_path):
    res = {"D": [f32(3, 3, 1, 4), f32(2, 2, 4, 3)], "beta": f32(3, 13), "mean": f32(12),
           "std": f32(12), "seconds": 3.5}
    # workflow/scripts/mcem_train.py, before
    atomic_io.save_npz(tmp_path / "old.npz", **{f"D{l + 1}": d for l, d in enumerate(res["D"])},
                       beta=res["beta"], mean=res["mean"], std=res["std"],
                       n_layers=np.array(len(res["D"])), n_total=np.array(40),
                       n_classes=np.array(3), image_shape=np.array((8, 8, 1)),
                       train_seconds=np.array(res["seconds"]), wall_seconds=np.array(4.0))
    artifacts.write_mcem_model(tmp_path / "new.npz", artifacts.McemModel(
    D=res["D"], beta=res["beta"], mean=res["mean"],
                               std=res["std"], n_total=40, n_classes=3, image_shape=(8, 8, 1),
                               train_seconds=res["seconds"], wall_seconds=4.0))
    same_bytes(tmp_path / "old.npz", tmp_path / "new.npz")
    m = artifacts.read_mcem_model(tmp_path / "new.npz")
    assert m.n_layers == 2 and all(np.array_equal(a, b) for a, b in zip(m.D, res["D"]))
    assert np.array_equal(m.beta, res["beta"]) and m.beta.dtype == np.float32
    assert (m.n_total, m.n_classes, m.image_shape, m.train_seconds, m.wall_seconds) == (
        40, 3, (8, 8, 1), 3.5, 4.0)

    samp = {"D": [[d + k for d in res["D"]] for k in range(3)], "beta": f32(3, 3, 13),
            "accept": RNG.random((6, 2))}
    # workflow/scripts/mcem_average.py, before
    atomic_io.save_npz(tmp_path / "old_s.npz",
                       **{f"sample{k}_D{l + 1}": d for k, ds_ in enumerate(samp["D"]) for l, d in enumerate(ds_)},
                       beta=samp["beta"], mean=res["mean"], std=res["std"],
                       n_samples=np.array(len(samp["D"])), n_layers=np.array(2),
                       hmc_accept_mean=samp["accept"].mean(0), wall_seconds=np.array(6.0))
    artifacts.write_mcem_samples(tmp_path / "new_s.npz", D=samp["D"], beta=samp["beta"],
                                 mean=res["mean"], std=res["std"], n_layers=2,
                                 hmc_accept_mean=samp["accept"].mean(0), wall_seconds=6.0)
    same_bytes(tmp_path / "old_s.npz", tmp_path / "new_s.npz")
    s = artifacts.read_mcem_samples(tmp_path / "new_s.npz")
    assert (s.n_samples, s.n_layers, s.wall_seconds) == (3, 2, 6.0)
    for k, (dk, bk) in enumerate(s.models()):
        assert all(np.array_equal(a, b) for a, b in zip(dk, samp["D"][k]))
        assert np.array_equal(bk, samp["beta"][k])


def test_upstream_seconds_reads_each_rule_in_order(tmp_path):
    """A row's wall time by step: prepare's summary.json, each layer's seconds (its own
    clock where that is longer), refinement's; in that order (metrics.json keeps it)."""
    (tmp_path / "summary.json").write_text(json.dumps({"seconds": 1.5, "n_train": 3}))
    layers = []
    for i, (chain, wall) in enumerate([(4.0, 3.0), (2.0, 6.0)], start=1):
        out = pretrain_out(i == 1)
        layers.append(tmp_path / f"layer{i}.npz")
        artifacts.write_pretrained_layer(
            layers[-1], artifacts.PretrainedLayer(
                D=out["D"], kept=out["kept"], usage=out["usage"], x_next=out["x_next"],
                gamma_e=out["gamma_e"], gamma_w=out["gamma_w"], sweeps=3, chain_seconds=chain,
                wall_seconds=wall, n_input=5, activity_ink=0.25, layer_config=LAYER,
                pretrain_config=PRE, image_indices=out["idx"]))
    layers = [artifacts.read_pretrained_layer(p) for p in layers]
    by_step = artifacts.upstream_seconds(tmp_path / "summary.json", layers)
    assert list(by_step.items()) == [("prepare", 1.5), ("pretrain_layer1", 4.0), ("pretrain_layer2", 6.0)]
    out = refine_out()
    artifacts.write_refined_model(
        tmp_path / "refine.npz", artifacts.RefinedModel(
            D=out["D"], theta=out["theta"], gamma_s=out["gamma_s"],
            gamma_e=out["gamma_e"], on_rate=out["on_rate"], image_indices=np.arange(5), sweeps=3,
            chain_seconds=7.0, wall_seconds=8.0, config=CFG, layers=LAYERS))
    by_step = artifacts.upstream_seconds(tmp_path / "summary.json", layers[:1],
                                         artifacts.read_refined_model(tmp_path / "refine.npz"))
    assert list(by_step.items()) == [("prepare", 1.5), ("pretrain_layer1", 4.0), ("refine", 8.0)]
    (tmp_path / "bare.json").write_text("{}")
    assert artifacts.upstream_seconds(tmp_path / "bare.json") == {"prepare": 0.0}


def test_a_missing_key_names_the_file_and_the_rule(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = "results/mnist/pretrain/layer1.npz"
    Path(path).parent.mkdir(parents=True)
    atomic_io.save_npz(path, kept=np.arange(3))
    with pytest.raises(artifacts.ArtifactError) as err:
        artifacts.read_pretrained_layer(path)
    assert str(err.value) == (f"{path} has no 'D': rerun `snakemake --force {path}` "
                              "(rule pretrain_layer writes it)")
    feats = "results/mnist/unsupervised_svm/features.npz"
    Path(feats).parent.mkdir(parents=True)
    atomic_io.save_npz(feats, f_train=np.zeros((2, 3)))
    with pytest.raises(artifacts.ArtifactError, match=r"has no 'y_train'.*rule topdown_features"):
        artifacts.read_features(feats)
    model = "results/mnist/refine/model.npz"
    Path(model).parent.mkdir(parents=True)
    atomic_io.save_npz(model, n_layers=np.int64(2), D1=f32(2, 2, 1, 3))
    with pytest.raises(artifacts.ArtifactError, match=r"model.npz has no 'D2'.*rule refine"):
        artifacts.read_refined_model(model)


@pytest.mark.parametrize("reader, rule", [
    (artifacts.read_pretrained_layer, "pretrain_layer"), (artifacts.read_features, "features"),
    (artifacts.read_refined_model, "refine"), (artifacts.read_supervised_model, "supervised"),
    (artifacts.read_mcem_model, "mcem_train"), (artifacts.read_mcem_samples, "mcem_average"),
    (artifacts.read_transfer_features, "transfer")])
def test_a_missing_or_malformed_file_names_the_file_and_the_rule(tmp_path, reader, rule):
    path = tmp_path / "pretrained_svm" / "x.npz"
    with pytest.raises(FileNotFoundError, match=rf"{path} is missing: run `snakemake {path}` \(rule {rule}"):
        reader(path)
    path.parent.mkdir()
    path.write_bytes(b"not a zip file at all")
    with pytest.raises(artifacts.ArtifactError, match=rf"{path} is not an .npz archive.*rule {rule}") as exc:
        reader(path)
    assert "allow_pickle" not in str(exc.value)  # numpy's advice to unpickle it is not passed on
    np.save(path.with_suffix(".npy"), np.arange(3))
    path.with_suffix(".npy").replace(path)
    with pytest.raises(artifacts.ArtifactError, match=r"single .npy array"):
        reader(path)


def test_artifacts_imports_only_numpy_the_standard_library_and_atomic():
    source = Path(artifacts.__file__).read_text()
    mods = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            mods.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            mods.update(f"{node.module}.{a.name}" if node.module == "dgdm_tf.io" else node.module
                        for a in node.names)
    outside = {m for m in mods if m.split(".")[0] not in sys.stdlib_module_names}
    assert outside == {"numpy", "dgdm_tf.io.atomic", "dgdm_tf.io.npz_files"}
