"""dgdm_tf.report.paper (the paper's numbers) and dgdm_tf.report.tables (results/tables.md)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from dgdm_tf.report import paper, tables
from dgdm_tf.report import run_notes
from dgdm_tf.report.run_notes import run_note
from dgdm_tf.report.runs import (CURVE_METHODS, IMPLEMENTED_METHODS, cnn_peer_run, cnn_peer_runs,
                                 curve_methods, load_metrics, reference_peer_run,
                                 reference_peer_runs, row_subsets)

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"


def _values(key: str) -> dict[str | None, object]:
    return {r.method or r.label: r.value for r in paper.PAPER_TABLES[key].rows}


def test_paper_numbers_match_spec_sec5():
    m = _values("mnist")
    assert (m["pretrained_svm"], m["unsupervised_svm"], m["supervised"]) == (1.42, 0.52, 0.37)
    assert m["2-layer convnet [Jarrett09ICCV]"] == 0.53
    assert m["6-layer convnet [Ciresan11IJCAI]"] == 0.35
    assert m["MCDNN [ciresan2012multi]"] == 0.23
    c = _values("cifar10")
    assert (c["pretrained_svm"], c["unsupervised_svm"], c["supervised"]) == (22.43, 14.75, 10.39)
    c = _values("cifar10_aug")
    assert (c["pretrained_svm"], c["unsupervised_svm"], c["supervised"]) == (20.62, 10.22, 8.27)
    c = _values("cifar100")
    assert (c["pretrained_svm"], c["unsupervised_svm"], c["supervised"]) == (77.25, 42.26, 34.62)
    for key, want in {"caltech101_15": (43.24, 70.47, 75.37, 62.3, 89.1),
                      "caltech101_30": (53.57, 80.39, 87.82, 72.4, 93.15),
                      "caltech256_15": (13.4, 40.7, 52.9, 46.1, 67.0),
                      "caltech256_60": (38.2, 60.9, 70.5, 60.1, 77.9)}.items():
        v = _values(key)
        got = (v["pretrained_svm"], v["unsupervised_svm"], v["supervised"], v["cnn"],
               v["imagenet_transfer"])
        assert got == want, key
        assert paper.PAPER_TABLES[key].metric == "accuracy"
    i = _values("imagenet2012")
    assert i["mcem_map"] == (37.9, 16.1) and i["model_averaging"] == (35.4, 13.6)


def _metrics(**kw):
    m = {"test_error_pct": 1.234, "train_error_pct": 0.5, "n_train": 10000, "n_test": 2000,
         "wall_seconds": 754.0, "config_file": "config/config.yaml", "dict_sizes": [41, 120],
         "config": {"pretrain": {"n_images": 2000, "burn_in": 50, "collect": 25},
                    "features": {"burn_in": 10, "collect": 10},
                    "svm": {"burn_in": 100, "collect": 100}}}
    m.update(kw)
    return m


def test_render_mnist_row_and_not_run_rows():
    datasets = {"mnist": {"kind": "mnist", "paper_table": "mnist", "methods": ["pretrained_svm"]}}
    md = tables.render_tables(datasets, {("mnist", "pretrained_svm"): _metrics()},
                              config_files=["config/config.yaml"])
    row = next(l for l in md.splitlines() if l.startswith("| Our pretrained model"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:] == ["1.23", "1.42", "`config/config.yaml`", "10000 / 2000", "12 min 34 s"]
    sup = next(l for l in md.splitlines() if l.startswith("| Our supervised model"))
    assert "not run (enable with `methods: [pretrained_svm, supervised]`" in sup and "0.37" in sup
    peer = next(l for l in md.splitlines() if l.startswith("| MCDNN"))
    assert [c.strip() for c in peer.strip("|").split("|")][1:3] == ["—", "0.23"]
    assert "dictionary sizes kept per layer: 41, 120" in md
    assert "39, 117 (inferred by pretraining from 50, 200)" in md


def test_rows_summary_holds_each_row_and_its_pairing_as_the_table_quotes_them():
    """results/rows.json (docs/benchmarks/default_run.json is the default run's copy)."""
    datasets = {"mnist": {"methods": ["pretrained_svm", "unsupervised_svm", "cnn", "supervised"]},
                "other": {"methods": ["cnn"]}}
    metrics = {("mnist", "pretrained_svm"): _metrics(test_error_pct=5.3612),
               ("mnist", "unsupervised_svm"): _metrics(test_error_pct=5.56, train_error_pct=2.2),
               ("mnist", "cnn"): {"test_error_pct": 0.86, "n_train": 10000, "n_test": 5000},
               ("mnist", "cnn_at/supervised"): _metrics()}
    paired = {("mnist", "unsupervised_svm"): {"diff_pct_points": 0.2004, "se_pct_points": 0.2812,
                                              "mcnemar_exact_p": 0.52345, "n_images": 5000}}
    out = tables.rows_summary(datasets, metrics, paired, config_files=["config/config.yaml"])
    assert out["config_files"] == ["config/config.yaml"]
    assert list(out["datasets"]) == ["mnist"]  # no row of "other" ran
    rows = out["datasets"]["mnist"]
    assert list(rows) == ["pretrained_svm", "unsupervised_svm", "cnn"]  # supervised did not run
    assert rows["pretrained_svm"] == {"test_error_pct": 5.36, "train_error_pct": 0.5,
                                      "n_train": 10000, "n_test": 2000}
    assert rows["unsupervised_svm"]["vs_pretrained_svm"] == {
        "diff_pct_points": 0.2, "se_pct_points": 0.28, "mcnemar_exact_p": 0.52, "n_images": 5000}
    assert rows["cnn"]["train_error_pct"] is None and "vs_pretrained_svm" not in rows["cnn"]
    json.dumps(out)  # written as JSON


def test_render_disabled_method_says_how_to_enable_and_accuracy_tables():
    datasets = {"c": {"kind": "caltech101", "paper_table": "caltech101_30", "methods": []}}
    md = tables.render_tables(datasets, {})
    row = next(l for l in md.splitlines() if l.startswith("| Our pretrained model"))
    assert "not run (enable with `methods: [pretrained_svm]` in `datasets.c`)" in row
    assert "53.57" in row and "accuracy" in md
    # accuracy is 100 - error when a run exists
    datasets["c"]["methods"] = ["pretrained_svm"]
    md = tables.render_tables(datasets, {("c", "pretrained_svm"): _metrics(test_error_pct=40.0)})
    row = next(l for l in md.splitlines() if l.startswith("| Our pretrained model"))
    assert "| 60.00 | 53.57 |" in row


def test_render_own_data_has_no_paper_numbers():
    datasets = {"mine": {"kind": "npz", "paper_table": None, "methods": ["pretrained_svm"]}}
    md = tables.render_tables(datasets, {("mine", "pretrained_svm"): _metrics()})
    row = next(l for l in md.splitlines() if l.startswith("| Our pretrained model"))
    assert [c.strip() for c in row.strip("|").split("|")][1:3] == ["1.23", "—"]


def test_learning_curves_named_under_the_table_where_the_dataset_asks():
    block = {"kind": "mnist", "paper_table": "mnist", "methods": ["pretrained_svm", "cnn", "encoder_svm"],
             "learning_curve": {"sizes": [1000, 2500], "methods": list(CURVE_METHODS)}}
    assert curve_methods(block) == ["pretrained_svm", "encoder_svm"]  # the curve's order, those that run
    md = tables.render_tables({"mnist": block}, {})
    line = next(l for l in md.splitlines() if l.startswith("Learning curves"))
    assert line == ("Learning curves (`pretrained_svm`, `encoder_svm`: each row's SVM refitted on the "
                    "first 1000, 2500 of its training images, test error against training images): "
                    "`results/mnist/learning_curve.csv`, `results/mnist/figures/learning_curve.png`.")
    for curve in ({"sizes": [], "methods": list(CURVE_METHODS)}, {"sizes": [10], "methods": ["unsupervised_svm"]}):
        assert curve_methods({**block, "learning_curve": curve}) == []
        assert "Learning curves" not in tables.render_tables({"mnist": {**block, "learning_curve": curve}}, {})


def test_format_seconds():
    assert tables.format_seconds(None) == "—"
    assert tables.format_seconds(5.04) == "5.0 s"
    assert tables.format_seconds(61) == "1 min 01 s"
    assert tables.format_seconds(7322) == "2 h 02 min"


# ---------------------------------------------------------------- schema and configs
def _schema() -> dict:
    return yaml.safe_load(SCHEMA.read_text())


def _fill_defaults(instance: dict) -> dict:
    """Fill schema defaults the way snakemake.utils.validate does."""
    base = jsonschema.Draft202012Validator
    validate_properties = base.VALIDATORS["properties"]

    def set_defaults(validator, properties, inst, schema):
        for prop, sub in properties.items():
            if "default" in sub and isinstance(inst, dict):
                inst.setdefault(prop, copy.deepcopy(sub["default"]))
        yield from validate_properties(validator, properties, inst, schema)

    cls = jsonschema.validators.extend(base, {"properties": set_defaults})
    inst = copy.deepcopy(instance)
    cls(_schema()).validate(inst)
    return inst


def _walk_schema(node, path="$"):
    if isinstance(node, dict):
        if "properties" in node:
            for k, sub in node["properties"].items():
                yield f"{path}.{k}", sub
        for k, v in node.items():
            yield from _walk_schema(v, f"{path}/{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _walk_schema(v, f"{path}[{i}]")


#: keys whose absence is the setting: an override's key left out keeps the rule's
#: `resources` value, so a default there would silently replace it
NO_DEFAULT_BY_DESIGN = "$/$defs/resources_override."


def test_schema_every_key_has_description_and_default():
    for path, sub in _walk_schema(_schema()):
        assert "description" in sub or "$ref" in sub, f"{path} has no description"
        assert "default" in sub or path.startswith(NO_DEFAULT_BY_DESIGN), f"{path} has no default"


def test_an_override_fills_no_default():
    """resources_by_dataset.<ds>.<rule> with only `runtime` keeps the rule's mem_mb."""
    cfg = _fill_defaults({"datasets": {"mnist": {"kind": "mnist", "paper_table": "mnist"}},
                          "resources_by_dataset": {"mnist": {"refine": {"runtime": 7}}}})
    assert cfg["resources_by_dataset"]["mnist"]["refine"] == {"runtime": 7}


def test_config_yaml_writes_out_every_default():
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    minimal = {"datasets": {"mnist": {"kind": "mnist", "paper_table": "mnist"}}}
    assert _fill_defaults(minimal) == cfg


@pytest.mark.parametrize("name", ["config.yaml", "paper.yaml", "smoke.yaml"])
def test_configs_are_valid_and_complete(name):
    cfg = yaml.safe_load((REPO / "config" / name).read_text())
    assert _fill_defaults(cfg) == cfg, "a key is missing: write every default out"


def test_schema_enums_match_the_library():
    s = _schema()
    ds = s["$defs"]["dataset"]["properties"]
    assert set(ds["methods"]["items"]["enum"]) == set(IMPLEMENTED_METHODS)
    assert set(ds["paper_table"]["enum"]) - {None} == set(paper.PAPER_TABLES)
    assert set(IMPLEMENTED_METHODS) <= set(paper.METHOD_LABELS)
    curve = ds["learning_curve"]["properties"]["methods"]
    assert curve["default"] == list(CURVE_METHODS)
    assert curve["items"]["enum"] == list(CURVE_METHODS) + ["cnn"]  # the CNN: rule cnn_learning_curve


@pytest.mark.parametrize("features, says", [("mcem", "MCEM MAP of the top layer (Algorithm 2: 2 Gibbs sweeps, then MCEM iterations to tol 0.001, at most 4)"),
                                            ("gibbs", "posterior mean of the top layer (2 burn-in + 3 Gibbs")])
def test_supervised_note_names_the_test_features(features, says):
    m = {"n_train": 600, "n_models_averaged": 2, "config": {"supervised": {
        "start_from": "refined", "burn_in": 12, "collect": 4, "thin": 1,
        "predict": {"features": features, "burn_in": 2, "collect": 3, "iterations": 4, "tol": 0.001}}}}
    note = run_note("mnist", "supervised", m)
    assert says in note and ("MCEM" in note) == (features == "mcem"), note


@pytest.mark.parametrize("route, chains, says", [
    ("layerwise", 1, "features: each layer's chain on the layer below, 5 burn-in + 5 collection sweeps."),
    ("layerwise", 4, "layer below, 2 burn-in + 3 collection sweeps, 4 chains per image averaged"),
    ("topdown", 1, "the whole pretrained model (test-time top-down chain, 3 burn-in + 2 collection"),
    ("topdown", 2, "top-down chain, 1 burn-in + 1 collection sweeps per chain, 2 chains per image averaged)")])
def test_pretrained_note_names_the_feature_route(route, chains, says):
    bi, co = (5, 5) if chains == 1 else (2, 3)
    td = {"burn_in": 3, "collect": 2} if chains == 1 else {"burn_in": 1, "collect": 1, "chains": chains}
    m = {"config": {"features": {"route": route, "burn_in": bi, "collect": co, "chains": chains},
                    "topdown_features": td}}
    note = run_note("mnist", "pretrained_svm", m)
    assert says in note and ("chains per" in note) == (chains > 1), note


@pytest.mark.parametrize("method, cfg, hyper, n_models, says", [
    ("pretrained_svm", {"features": {"route": "topdown"}, "topdown_features": {
        "route": "alg2", "alg2": {"tol": 0.001, "max_iterations": 20}}}, {"gamma_s": "image_map"}, None,
     "gamma_s per image and map; Algorithm 2 to tol 0.001 (at most 20 iterations)"),
    ("unsupervised_svm", {"topdown_features": {"route": "chain", "burn_in": 0, "collect": 1, "chains": 2}},
     {"gamma_s": "global"}, None, "one global gamma_s; first sweep, 2 chains"),
    ("unsupervised_svm", {"topdown_features": {"route": "chain", "burn_in": 16, "collect": 32, "chains": 1}},
     {}, None, "gamma_s per image and map; posterior mean after 16 + 32 sweeps"),
    ("supervised", {"supervised": {"predict": {"features": "mcem", "tol": 0.01, "iterations": 5}}},
     {"gamma_s": "image_map"}, 3, "Algorithm 2 to tol 0.01 (at most 5 iterations); 3 models averaged"),
    ("encoder_svm", {}, {}, None, "")])
def test_paper_rows_label_says_what_they_ran(method, cfg, hyper, n_models, says):
    """Each paper row's label names its model (gamma_s), feature route and (the supervised
    row alone) the models averaged."""
    m = {"config": cfg, "hyper": hyper, "n_models_averaged": n_models}
    recipe = run_notes.row_recipe(method, m)
    assert (says in recipe) if says else recipe == "", recipe
    assert ("averaged" in recipe) == (method == "supervised"), recipe


# ------------------------------------------- the reference row and the CNN at row sizes
def _block(**kw):
    b = {"kind": "mnist", "paper_table": "mnist", "n_train": 10000, "n_test": 5000,
         "methods": ["pretrained_svm", "encoder_svm", "unsupervised_svm", "supervised", "cnn"],
         "topdown_features": {"n_train": 1500, "n_test": 750},
         "supervised": {"n_train": 600, "n_test": 750}}
    b.update(kw)
    return b


def _cells(md: str, start: str) -> list[str]:
    row = next(l for l in md.splitlines() if l.startswith(start))
    return [c.strip() for c in row.strip("|").split("|")]


def test_row_subsets_and_cnn_peer_runs():
    b = _block()
    assert row_subsets(b, "pretrained_svm") == {"train": None, "test": None}
    assert row_subsets(b, "encoder_svm") == {"train": None, "test": None}
    assert row_subsets(b, "unsupervised_svm") == {"train": 1500, "test": 750}
    assert row_subsets(b, "supervised") == {"train": 600, "test": 750}
    assert row_subsets(b, "mcem_map") is None
    assert cnn_peer_runs(b) == {"pretrained_svm": "cnn",
                                       "unsupervised_svm": "cnn_at/unsupervised_svm",
                                       "supervised": "cnn_at/supervised"}
    # a row on the whole subsets (null, or at least n_train / n_test) is the cnn run's
    b = _block(topdown_features={"n_train": None, "n_test": None},
               supervised={"n_train": 10000, "n_test": 6000})
    assert set(cnn_peer_runs(b).values()) == {"cnn"}
    # n_train null (all images): a row of 1500 is not the whole subset
    b = _block(n_train=None)
    assert cnn_peer_run(b, "unsupervised_svm") == "cnn_at/unsupervised_svm"
    # no cnn, or the row not run: no peer; the reference row is not a Gibbs row
    assert cnn_peer_runs(_block(methods=["pretrained_svm", "supervised"])) == {}
    assert cnn_peer_runs(_block(methods=["cnn", "supervised"])) == {
        "supervised": "cnn_at/supervised"}
    assert cnn_peer_run(_block(), "encoder_svm") is None


def test_reference_peer_runs_mirror_the_cnn_peers():
    b = _block()
    assert reference_peer_runs(b) == {"pretrained_svm": "encoder_svm",
                                      "unsupervised_svm": "encoder_at/unsupervised_svm",
                                      "supervised": "encoder_at/supervised"}
    b = _block(topdown_features={"n_train": None, "n_test": None})
    assert reference_peer_run(b, "unsupervised_svm") == "encoder_svm"
    # only where the dataset runs the reference row, and only for the Gibbs rows
    assert reference_peer_runs(_block(methods=["pretrained_svm", "supervised", "cnn"])) == {}
    assert reference_peer_run(_block(), "encoder_svm") is None
    assert reference_peer_run(_block(), "pretrained_block_svm") is None


def test_reference_row_under_pretrained_and_cnn_same_images_column(tmp_path):
    b = _block()
    datasets = {"mnist": b}
    runs = {"pretrained_svm": _metrics(test_error_pct=18.46),
            "encoder_svm": _metrics(test_error_pct=2.6, n_features=3920, dict_sizes=[40],
                                    config={"encoder": {"alpha": 0.25},
                                            "model": {"layers": [{"pool": 3}]},
                                            "pretrain": {"n_images": 1000, "burn_in": 60,
                                                         "collect": 20},
                                            "svm": {"burn_in": 100, "collect": 100}}),
            "unsupervised_svm": _metrics(test_error_pct=13.07, n_train=1500, n_test=750),
            "cnn": _metrics(test_error_pct=0.86),
            "cnn_at/unsupervised_svm": _metrics(test_error_pct=2.4, n_train=1500, n_test=750),
            "encoder_at/unsupervised_svm": _metrics(test_error_pct=6.35, n_train=1500,
                                                    n_test=750)}
    for run, m in runs.items():
        p = tmp_path / "mnist" / run / "metrics.json"
        p.parent.mkdir(parents=True)
        p.write_text(json.dumps(m))
    metrics = load_metrics(tmp_path, datasets)
    assert ("mnist", "cnn_at/unsupervised_svm") in metrics
    assert ("mnist", "encoder_at/unsupervised_svm") in metrics
    md = tables.render_tables(datasets, metrics)
    lines = md.splitlines()
    header = next(l for l in lines if l.startswith("| method"))
    assert header.endswith("| Reference, same images: test error (%) "
                           "| CNN, same images: test error (%) |")
    i = next(i for i, l in enumerate(lines) if l.startswith("| Our pretrained model"))
    assert lines[i + 1].startswith("| Reference: learned layer-1 dictionary + soft-threshold "
                                   "encoder + SVM |")
    assert _cells(md, "| Our pretrained model")[1:] == [
        "18.46", "1.42", "`config/config.yaml`", "10000 / 2000", "12 min 34 s", "2.60", "0.86"]
    ref = _cells(md, "| Reference:")
    assert ref[1:3] == ["2.60", "—"] and ref[-2:] == ["—", "—"]
    assert _cells(md, "| Our unsupervised model")[-2:] == ["6.35", "2.40"]
    sup = _cells(md, "| Our supervised model")
    assert sup[1] == "missing (no `results/mnist/supervised/metrics.json`)"
    assert sup[-2:] == ["missing (no `results/mnist/encoder_at/supervised/metrics.json`)",
                        "missing (no `results/mnist/cnn_at/supervised/metrics.json`)"]
    assert _cells(md, "| CNN, same shape |")[-1] == "—"
    assert _cells(md, "| MCDNN")[-1] == "—"
    assert "`encoder_svm` (ours, not in the paper) ran with pretraining's layer-1 dictionary " \
           "(40 elements kept" in md and "max(c - 0.25, 0)" in md and "3920 features" in md
    assert '"CNN, same images"' in md and "`unsupervised_svm`: `results/mnist/cnn_at/" \
           "unsupervised_svm/` (1500 / 750 images)" in md
    assert '"Reference, same images"' in md and "`pretrained_svm`: the `encoder_svm` run " \
           "itself (10000 / 2000 images)" in md and "`supervised`: `results/mnist/" \
           "encoder_at/supervised/` (not run yet)" in md
    # the supervised row ran, its CNN peer did not: the cell says which file is missing
    metrics[("mnist", "supervised")] = _metrics(n_train=600, n_test=750)
    sup = _cells(tables.render_tables(datasets, metrics), "| Our supervised model")
    assert sup[1] == "1.23" and sup[-1] == (
        "missing (no `results/mnist/cnn_at/supervised/metrics.json`)")


def test_reference_row_note_says_which_svm_method_fitted_it():
    datasets = {"mnist": _block()}
    cfg = {"encoder": {"alpha": 0.25, "svm_method": "em"}, "model": {"layers": [{"pool": 3}]},
           "pretrain": {"n_images": 1000, "burn_in": 60, "collect": 20},
           "svm": {"method": "gibbs", "burn_in": 100, "collect": 100}}
    m = _metrics(n_features=4900, dict_sizes=[50], config=cfg, svm_method="em",
                 svm_iterations=50, svm_em_last_rel_decrease=0.0123)
    md = tables.render_tables(datasets, {("mnist", "encoder_svm"): m})
    assert ("the SVM model of `pretrained_svm` (same prior and hinge settings) fitted by EM "
            "towards its MAP (50 steps, the objective's last relative decrease 0.012) "
            "(`encoder.svm_method: em`; `pretrained_svm`: gibbs), on its images") in md
    # the CG solves of wide features (svm.em_solver) are named with their tolerances
    cfg["svm"].update(em_cg_tol=0.1, em_cg_start_tol=0.001)
    m.update(svm_em_solver="cg", svm_cg_iterations=2950)
    md = tables.render_tables(datasets, {("mnist", "encoder_svm"): m})
    assert ("EM towards its MAP (50 steps, the objective's last relative decrease 0.012, "
            "each step solved by conjugate gradients to 0.1 of its starting residual (first "
            "step 0.001; 2950 iterations in all))") in md
    # older metrics.json without svm_method: the config says it; gibbs names its sweeps
    cfg["encoder"]["svm_method"] = "gibbs"
    md = tables.render_tables(datasets, {("mnist", "encoder_svm"): _metrics(config=cfg)})
    assert "the SVM of `pretrained_svm` fitted by Gibbs (100 burn-in + 100 collection)" in md


def test_reference_row_only_where_pretrained_svm_runs():
    md = tables.render_tables({"m": _block(methods=["pretrained_svm"])}, {})
    assert "not run (enable with `methods: [pretrained_svm, encoder_svm]`" in md
    assert "CNN, same images" not in md  # no cnn: no column
    md = tables.render_tables({"i": {"kind": "imagenet2012", "paper_table": "imagenet2012",
                                     "methods": ["mcem_map"]}}, {})
    assert "Reference:" not in md
    # Caltech: in the pretrained row's group, accuracy in the CNN column
    b = _block(kind="caltech101", paper_table="caltech101_15")
    md = tables.render_tables({"c": b}, {("c", "pretrained_svm"): _metrics(test_error_pct=40.0),
                                         ("c", "cnn"): _metrics(test_error_pct=30.0,
                                                                class_mean_accuracy_pct=69.0)})
    lines = md.splitlines()
    i = next(i for i, l in enumerate(lines) if l.startswith("| Our pretrained model"))
    assert lines[i + 1].startswith("| Reference:")
    assert "| CNN, same images: test accuracy (%) |" in md
    assert _cells(md, "| Our pretrained model")[-1] == "69.00"


@pytest.mark.parametrize("method", ["unsupervised_svm", "supervised"])
def test_a_row_whose_chain_still_drifts_says_not_settled(method):
    """The label of a row whose training chain still drifts (metrics.json's chain,
    dgdm_tf.mcmc.diagnostics.trace_settlement) says so; a settled one, or one without a
    record, does not."""
    scalars = {k: {"drift": 0.1} for k in ("log_joint", "gamma_e_mean", "active_top", "dnorm_layer1")}
    drifting = {"settled": False, "drifting": ["log_joint", "gamma_e_mean", "dnorm_layer1"],
                "scalars": scalars}
    m = {"config": {}, "hyper": {}, "n_models_averaged": 2, "chain": drifting}
    recipe = run_notes.row_recipe(method, m)
    assert recipe.endswith("not settled: 3 of 4 traced scalars still drift (log_joint, gamma_e_mean, ...)"), recipe
    for chain in ({"settled": True, "drifting": [], "scalars": scalars}, None):
        assert "settled" not in run_notes.row_recipe(method, {**m, "chain": chain})
    short = {"settled": None, "drifting": [], "scalars": scalars, "n_sweeps": 3}
    assert run_notes.row_recipe(method, {**m, "chain": short}).endswith(
        "chain of 3 sweeps, too short to tell whether it settled")


def test_rows_paired_with_the_pretrained_row_get_its_last_column():
    datasets = {"mnist": {"kind": "mnist", "paper_table": "mnist",
                          "methods": ["pretrained_svm", "unsupervised_svm"]}}
    metrics = {("mnist", "pretrained_svm"): _metrics(), ("mnist", "unsupervised_svm"): _metrics()}
    pair = {"diff_pct_points": 0.56, "se_pct_points": 0.27, "mcnemar_exact_p": 0.043,
            "wrong_only_a": 40, "wrong_only_b": 68, "wrong_both": 200, "n_images": 5000}
    md = tables.render_tables(datasets, metrics, paired={("mnist", "unsupervised_svm"): pair})
    head = next(l for l in md.splitlines() if l.startswith("| method"))
    assert head.rstrip(" |").endswith("McNemar exact p)")
    cells = lambda start: [c.strip() for c in next(
        l for l in md.splitlines() if l.startswith(start)).strip("|").split("|")]
    assert cells("| Our unsupervised model")[-1] == "+0.56 ± 0.27, p 0.043, 5000 images"
    assert cells("| Our pretrained model")[-1] == "(the pairs' reference)"
    assert cells("| Our supervised model")[-1] == "—"  # not run
    assert len(cells("| MCDNN")) == len(cells("| Our unsupervised model"))
    assert "McNemar's exact test on the images only one" in md
    # without the pretrained row (or without pairs) the table has no such column
    alone = {"mnist": {**datasets["mnist"], "methods": ["unsupervised_svm"]}}
    assert "McNemar" not in tables.render_tables(alone, metrics, paired={})
    assert "McNemar" not in tables.render_tables(datasets, metrics)


@pytest.mark.parametrize("method, cfg, n_train, says", [
    ("pretrained_svm", {"pretrain": {"n_images": 1000}, "refine": {"n_images": 1000}}, 60000,
     "layers pretrained on 1000 of 60000 images"),
    ("unsupervised_svm", {"pretrain": {"n_images": 1000}, "refine": {"n_images": 500}}, 60000,
     "layers pretrained on 1000, refined on 500 of 60000 images"),
    ("supervised", {"pretrain": {"n_images": 1000}, "refine": {"n_images": 500},
                    "supervised": {"start_from": "refined"}}, 60000,
     "layers pretrained on 1000, refined on 500 of 60000 images (then its chain on all of them)"),
    ("supervised", {"pretrain": {"n_images": 1000}, "refine": {"n_images": 500},
                    "supervised": {"start_from": "pretrained"}}, 60000,
     "layers pretrained on 1000 of 60000 images (then its chain on all of them)"),
    ("pretrained_svm", {"pretrain": {"n_images": 1000}}, 1000, "")])
def test_a_paper_rows_label_names_the_subsets_its_layers_learned_on(method, cfg, n_train, says):
    """A row whose dictionaries were pretrained (or refined) on fewer images than it trains
    its classifier on says so in its label, and says nothing where they are all its images."""
    m = {"config": cfg, "hyper": {}, "n_train": n_train, "n_models_averaged": 2}
    recipe = run_notes.row_recipe(method, m)
    assert (says in recipe) if says else "layers " not in recipe, recipe
