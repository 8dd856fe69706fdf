"""experiments/: every probe runs, and reads the library as a user would.

The probes reproduce the findings pages (docs/findings/); a probe that no longer runs
leaves its page's numbers with no way back to them. So (a) each file has a ``main(argv)``
behind ``if __name__ == "__main__":``, edits no ``sys.path`` (the package is installed),
imports nothing from tests/ and reaches into no private attribute (tests/test_imports.py
checks the private library names it imports); (b) each runs with ``--smoke`` on a tiny
results folder, in this process (one TensorFlow import for all), built once from library
calls: a two-layer model pretrained on 40 generated 28 x 28 digits, as
`snakemake --cores all results/<ds>/pretrain/layer2.npz` would leave it, plus the files
of the other workflow targets the probes read.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from _workflow import fake_mnist, load_config, write_config

REPO = Path(__file__).resolve().parents[1]
EXPERIMENTS = REPO / "experiments"
PROBES = sorted(EXPERIMENTS.rglob("*.py"))
TEST_MODULES = {"tests"} | {p.stem for p in Path(__file__).parent.glob("*.py")}
DS = "mnist_smoke"
#: a namedtuple's public methods, underscored so as not to clash with its fields
NAMEDTUPLE_API = {"_replace", "_asdict", "_fields", "_make"}


def rel(path: Path) -> str:
    return str(path.relative_to(EXPERIMENTS))


# --- (a) static checks -------------------------------------------------------------------

def _is_main_guard(node) -> bool:
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
            and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__"
            and isinstance(node.test.comparators[0], ast.Constant)
            and node.test.comparators[0].value == "__main__")


def _runs_at_import(node) -> bool:
    """A top-level statement that does work when the file is imported: anything but a
    docstring, an import, a definition, an assignment, the main guard or setting an
    environment default (``os.environ.setdefault``, before TensorFlow's import)."""
    if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef, ast.Assign,
                         ast.AnnAssign)) or _is_main_guard(node):
        return False
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return False
    call = node.value if isinstance(node, ast.Expr) else None
    return not (isinstance(call, ast.Call) and ast.unparse(call.func) == "os.environ.setdefault")


def problems(source: str) -> list[str]:
    """What keeps a probe from being run as the package's user runs it."""
    tree = ast.parse(source)
    out = []
    mains = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main"]
    if not mains:
        out.append("no main()")
    elif [a.arg for a in mains[0].args.args] != ["argv"] or len(mains[0].args.defaults) != 1:
        out.append("main's signature is not main(argv=None)")
    if not any(_is_main_guard(n) for n in tree.body):
        out.append('no `if __name__ == "__main__":`')
    out += [f"line {n.lineno}: runs at import" for n in tree.body if _runs_at_import(n)]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and ast.unparse(node).startswith("sys.path"):
            out.append(f"line {node.lineno}: sys.path")
        names = ([node.module or ""] if isinstance(node, ast.ImportFrom) else
                 [a.name for a in node.names] if isinstance(node, ast.Import) else [])
        out += [f"line {node.lineno}: imports {n} from tests/" for n in names
                if n.split(".")[0] in TEST_MODULES]
        # a helper beside the probes (experiments/mixing/_subsets.py was one) is found
        # only from its folder: what more than one probe needs is the library's
        out += [f"line {node.lineno}: imports {n or '.'} from beside the probe" for n in names
                if (n.startswith("_") and n != "__future__") or getattr(node, "level", 0) > 0]
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                and not node.attr.startswith("__") and node.attr not in NAMEDTUPLE_API):
            out.append(f"line {node.lineno}: private attribute .{node.attr}")
    if "--results" in source and "--smoke" not in source:
        out.append("reads --results but has no --smoke")
    return sorted(set(out))


def test_the_static_checks_catch_a_script():
    script = ("import sys\nsys.path.insert(0, 'src')\nfrom tests._workflow import fake_mnist\n"
              "from _subsets import rows\nfrom . import x\nimport numpy as np\n"
              "print(model._penalties)\n")
    assert problems(script) == sorted([
        "no main()", 'no `if __name__ == "__main__":`', "line 2: runs at import",
        "line 7: runs at import", "line 2: sys.path", "line 3: imports tests._workflow from tests/",
        "line 4: imports _subsets from beside the probe", "line 5: imports . from beside the probe",
        "line 7: private attribute ._penalties"])
    probe = ('"""doc"""\nimport os\nos.environ.setdefault("A", "1")\nX = 1\n\n\n'
             "def main(argv=None):\n    return '--results', '--smoke'\n\n\n"
             'if __name__ == "__main__":\n    main()\n')
    assert problems(probe) == []
    assert problems(probe.replace("argv=None", "argv")) == ["main's signature is not main(argv=None)"]
    assert problems(probe.replace(", '--smoke'", "")) == ["reads --results but has no --smoke"]


@pytest.mark.parametrize("path", PROBES, ids=rel)
def test_probe_has_a_main_and_imports_the_installed_package_only(path):
    assert problems(path.read_text()) == []


# --- (b) smoke runs ------------------------------------------------------------------------

def load_probe(path: Path):
    spec = importlib.util.spec_from_file_location(f"probe_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """A repository-shaped folder with config/config.yaml (the smoke config, its data set
    cut to 60 / 40 generated images) and results/mnist_smoke/ holding what the probes
    read: data/prepared.npz (rule prepare), pretrain/layer{1,2}.npz (rule pretrain_layer,
    2 + 1 sweeps on 40 images), refine/model.npz, pretrained_block_svm/features.npz and
    supervised/ (model.npz with one kept model and a random SVM, config.yaml, predictions.csv)."""
    from dgdm_tf.core.random import seed_for
    from dgdm_tf.data.steps import prepare_dataset
    from dgdm_tf.data.subsets import shared_subset, subset_indices
    from dgdm_tf.io import artifacts
    from dgdm_tf.pretrain.block_posterior import block_posterior_features
    from dgdm_tf.pretrain.chain import run_pretrain_layer
    from dgdm_tf.pretrain.options import Layer, PretrainOptions

    repo = tmp_path_factory.mktemp("repo")
    root = repo / "results" / DS
    cfg = load_config("smoke.yaml")
    block = cfg["datasets"][DS]
    block.update(kind="npz", path=str(fake_mnist(repo / "fake.npz", n_train=60, n_test=40)),
                 raw_dir=str(repo), n_train=60, n_test=40)
    (repo / "config").mkdir()
    write_config(repo / "config" / "config.yaml", cfg)
    prepare_dataset(DS, block, str(repo), str(root / "data" / "prepared.npz"), seed=cfg["seed"])

    prep = np.load(root / "data" / "prepared.npz")
    idx = subset_indices(len(prep["x_train"]), 40, seed_for(cfg["seed"], DS, "pretrain_images"))
    x, layers, pre = prep["x_train"][idx].astype(np.float32), block["model"]["layers"], block["pretrain"]
    out = []
    for l, layer in enumerate(layers):
        out.append(run_pretrain_layer(
            x, Layer(**layer, hyper=cfg["hyper"]),
            PretrainOptions(burn_in=2, collect=1, prune_min_usage=0.0, jit_compile=False,
                            scan=pre["scan"], start=pre["start"]),
            seed=seed_for(cfg["seed"], DS, "pretrain", l + 1), progress=None))
        artifacts.write_pretrained_layer(
            root / "pretrain" / f"layer{l + 1}.npz", artifacts.PretrainedLayer(
                D=out[l]["D"], kept=out[l]["kept"],
                usage=out[l]["usage"], x_next=out[l]["x_next"], gamma_e=out[l]["gamma_e"],
                gamma_w=out[l]["gamma_w"], sweeps=out[l]["sweeps"], chain_seconds=out[l]["seconds"],
                wall_seconds=out[l]["seconds"], n_input=len(x), activity_ink=0.0, layer_config=layer,
                pretrain_config=pre, image_indices=idx if l == 0 else None))
        x = np.asarray(out[l]["x_next"], np.float32)

    # The refined model's format with the pretrained layers in it: refining them would
    # trace the joint sweep for one probe; theta (each lower block's state frequencies,
    # none on or one of its p*p positions) starts flat, as the refine chain starts it.
    ds = [np.asarray(o["D"], np.float32) for o in out]
    states = layers[0]["pool"] ** 2 + 1
    artifacts.write_refined_model(
        root / "refine" / "model.npz", artifacts.RefinedModel(
            D=ds, theta=[np.full((ds[0].shape[-1], states), 1 / states, np.float32)],
            gamma_s=float(out[-1]["gamma_w"]), gamma_e=np.asarray(out[0]["gamma_e"]),
            on_rate=np.asarray(out[-1]["usage"], np.float32), image_indices=idx, sweeps=0, chain_seconds=0.0,
            wall_seconds=0.0, config=block["refine"], layers=layers))

    splits = {}
    for split in ("train", "test"):
        xs, y, rows = shared_subset(prep, split, block[f"n_{split}"], None, cfg["seed"], DS)
        f = block_posterior_features(xs, ds, [layer["pool"] for layer in layers],
                                     gamma_ws=[float(o["gamma_w"]) for o in out],
                                     gamma_es=[float(np.mean(o["gamma_e"])) for o in out])
        splits[split] = artifacts.FeatureSplit(np.asarray(f, np.float32), y, rows)
    artifacts.write_features(root / "pretrained_block_svm" / "features.npz", splits["train"], splits["test"],
                             n_classes=10, wall_seconds=0.0, config=block["block_features"])

    # A supervised row's outputs in their formats (rule supervised, supervised_predict): the
    # pretrained layers as one kept model, an SVM beta drawn at random (a real one would
    # trace the supervised sweep for one probe), the resolved config and predictions.csv.
    n_feat = splits["train"].f.shape[1]
    rng = np.random.default_rng(0)
    artifacts.write_supervised_model(
        root / "supervised" / "model.npz", artifacts.SupervisedModel(
            D=ds, samples_D=[d[None] for d in ds], theta=[
            np.full((ds[0].shape[-1], states), 1 / states, np.float32)],
            samples_beta=rng.normal(size=(1, 10, n_feat + 1)), svm_mean=np.zeros(n_feat), svm_std=np.ones(n_feat),
            n_classes=10, gamma_s=float(out[-1]["gamma_w"]), gamma_e=np.asarray(out[0]["gamma_e"]),
            on_rate=np.asarray(out[-1]["usage"], np.float32), image_indices=idx, labels=prep["y_train"][idx],
            train_error_pct=0.0, sweeps=0, chain_seconds=0.0, wall_seconds=0.0, config=block["supervised"],
            layers=layers))
    write_config(root / "supervised" / "config.yaml",
                 {"dataset": DS, "seed": cfg["seed"], "hyper": cfg["hyper"], "block": block})
    _, y_test, rows_test = shared_subset(prep, "test", block["n_test"], None, cfg["seed"], DS)
    pd.DataFrame({"test_index": rows_test, "label": y_test, "predicted": y_test,
                  **{f"score_{c}": np.zeros(len(y_test)) for c in range(10)}}).to_csv(
        root / "supervised" / "predictions.csv", index=False)
    return root


def test_every_probe_has_a_smoke_run():
    assert {rel(p) for p in PROBES} == set(SMOKE_RUNS)


@pytest.mark.slow
def test_compare_routes(results, tmp_path):
    out = tmp_path / "routes.json"
    got = load_probe(EXPERIMENTS / "estimators" / "compare_routes.py").main(
        ["--results", str(results), "--smoke", "--kinds", "global", "--out", str(out)])
    assert out.is_file()
    # the option's kind: the default's (image_map) is what the workflow runs
    assert [(w["gamma_s"], w["route"]) for w in got["rows"]] == [("global", r) for r in ("first", "mean", "alg2")]
    for w in got["rows"]:
        assert 0 <= w["test_error_pct"] <= 100 and w["se_pct"] >= 0
        if w["route"] == "mean":
            assert w["rhat_test_median"] >= 0.9 and w["ess_bulk_test_median"] > 0
        if w["route"] == "alg2":
            assert 1 <= w["iterations_test_mean"] <= 3


@pytest.mark.slow
def test_alg2_objective(results, capsys):
    load_probe(EXPERIMENTS / "estimators" / "alg2_objective.py").main(["--results", str(results), "--smoke"])
    assert "tol 0.001: an image first meets it" in capsys.readouterr().out


def test_compare_results(results, tmp_path, capsys):
    copy = shutil.copytree(results, tmp_path / DS)
    probe = load_probe(EXPERIMENTS / "determinism" / "compare_results.py")
    assert probe.main([str(results), str(copy)]) == 0
    assert " 0 differ" in capsys.readouterr().out


@pytest.mark.slow
def test_supervised_refit(results, tmp_path):
    out = tmp_path / "refit.json"
    got = load_probe(EXPERIMENTS / "estimators" / "supervised_refit.py").main(
        ["--results", str(results), "--smoke", "--out", str(out)])
    assert json.loads(out.read_text())["n_train"] == got["n_train"] == 20 and got["n_test"] == 10
    (row,) = got["per_model"]
    for k in ("joint_train", "joint_test", "refit_train", "refit_test"):
        assert 0 <= row[k]["error_pct"] <= 100
    assert set(got["row_check"]) == {"max_abs_diff", "same_labels"}  # every kept model: checked
    p = row["paired_test"]
    assert p["wrong_only_joint"] + p["wrong_only_refit"] + p["wrong_both"] <= 10 and 0 < p["mcnemar_exact_p"] <= 1


def test_mcnemar_exact_p():
    from dgdm_tf.report.scores import mcnemar_exact_p, paired_errors

    # wrong: a on images 2, 3; b on 1, 3
    assert paired_errors([0, 1, 2, 3], [0, 0, 0, 3], [0, 1, 0, 0]) == {
        "diff_pct_points": 0.0, "se_pct_points": pytest.approx(100 * 2 ** 0.5 / 4),
        "wrong_only_a": 1, "wrong_only_b": 1, "wrong_both": 1, "mcnemar_exact_p": 1.0}
    assert mcnemar_exact_p(0, 0) == 1.0 and mcnemar_exact_p(3, 3) == 1.0
    assert mcnemar_exact_p(0, 5) == pytest.approx(2 / 32)  # both one-sided tails of 1/32
    assert mcnemar_exact_p(17, 72) == pytest.approx(3.2e-9, rel=0.05)  # docs/findings/supervised_refit.md
    # past 1023 discordant images 2.0 ** n overflowed a float; the ratio is exact
    assert mcnemar_exact_p(600, 600) == 1.0 and mcnemar_exact_p(500, 700) == pytest.approx(8.4e-9, rel=0.05)


def test_prior_draws(results, tmp_path):
    scores = load_probe(EXPERIMENTS / "generation" / "prior_draws.py").main(
        ["--results", str(results), "--smoke", "--out", str(tmp_path)])
    assert set(scores) == {(pi, u) for pi in ("prior", "usage") for u in ("mean", "draw")}
    assert all(len(s) == 8 and np.all((s >= 0) & (s <= 1 + 1e-9)) for s in scores.values())
    assert len(list(tmp_path.glob("*.png"))) == 4


def test_feature_transform(results):
    errors = load_probe(EXPERIMENTS / "svm_wide" / "feature_transform.py").main(
        ["--results", str(results), "--method", "pretrained_block_svm", "--smoke"])
    assert set(errors) == {"signed", "split", "abs", "power"}
    assert all(0 <= e <= 100 for e in errors.values())


def test_x_next_rank(results):
    probe = load_probe(EXPERIMENTS / "mixing" / "x_next_rank.py")
    for block in ([], ["--block"]):
        residuals = probe.main(["--results", str(results), "--smoke", *block])
        assert set(residuals) == {2, 4} and all(0 <= r <= 1 for r in residuals.values())


def test_pretrain_floor_ratio(tmp_path):
    """Layer 1's sweep timed with each scan order, alone and beside one busy process."""
    got = load_probe(EXPERIMENTS / "scaling" / "pretrain_floor_ratio.py").main(
        ["--results", str(tmp_path), "--smoke"])
    rows = got["rows"]
    assert [(r["contend"], r["scan"]) for r in rows] == [(0, "random"), (0, "fixed"),
                                                         (1, "random"), (1, "fixed")]
    assert all(r["sweep_s"] > 0 and r["ratio_to_floor"] > 0 and r["ratio_to_exact_floor"] > 0
               for r in rows)
    assert (tmp_path / "pretrain_floor_ratio.csv").is_file() and len(got["summary"]) == 4


@pytest.mark.slow
def test_grappler_cost():
    """One (setting, model, step) of the probe in this process, Grappler as the library
    sets it ("on": the arithmetic optimizer alone off, so nothing changes for other tests)."""
    rows = load_probe(EXPERIMENTS / "tracing" / "grappler_cost.py").main(["--one", "on", "tiny", "sweep"])
    name, step, grappler, first, later, check = rows[0].split("\t")
    assert (name, step, grappler) == ("tiny", "sweep", "on")
    assert float(first) > 0 and float(later) > 0 and np.isfinite(float(check))


def test_recovery_grid(tmp_path, capsys):
    """One tiny cell: every figure in range, the true starts (layer 1's chain, the joint
    chain) above the workflow's, the cell's file skipped on a rerun, the summary and the
    figure written."""
    probe = load_probe(EXPERIMENTS / "recovery" / "recovery_grid.py")
    args = ["--smoke", "--out", str(tmp_path), "--true-start", "--refine-sweeps", "2", "--refine-truth"]
    (cell,) = probe.main(args)
    assert cell["cell"] == "k4_c1_n0.05" and cell["k_learnt"][0] <= 4
    for key in ("layer1", "layer2"):
        assert 0 < cell[key]["random"] <= 1 and 0 < cell[key]["mean"] <= 1
    assert 0 <= cell["top_code"]["shuffled"] <= 1 and 0 <= cell["top_code"]["mean"] <= 1
    assert 0 < cell["noise_rel"] < 1 and len(cell["rel_residual"]) == 2
    assert set(cell["test_error_pct"]) == {"pixels", "pretrained", "block_posterior", "encoder"}
    assert all(0 <= e <= 100 for e in cell["test_error_pct"].values())
    assert "skipped" in cell["sporco"] or 0 < cell["sporco"]["layer1"] <= 1
    for key in ("refined", "refined_from_truth"):
        assert cell[key]["sweeps"] == 2 and 0 < cell[key]["layer1"] <= 1 and 0 < cell[key]["rel_residual"]
    assert cell["refined_from_truth"]["layer1"] > cell["refined"]["layer1"]
    tr = cell["traces"]
    assert [r["sweep"] for r in tr["truth_plus_noise"]] == [0, 1, 2]
    assert tr["truth_plus_noise"][0]["layer1"] > 0.85 > tr["workflow_start"][0]["layer1"]
    assert (tmp_path / "recovery_grid.png").is_file()
    assert "| k4_c1_n0.05 |" in (tmp_path / "summary.md").read_text()
    capsys.readouterr()
    probe.main(args)
    assert "k4_c1_n0.05: present, skipped" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="no cell"):
        probe.main(args + ["--cells", "k9_c1_n0.05"])


def test_recovery_grid_skips_the_anchor_without_sporco(monkeypatch):
    import sys
    from types import SimpleNamespace

    probe = load_probe(EXPERIMENTS / "recovery" / "recovery_grid.py")
    for name in ("sporco", "sporco.dictlrn", "sporco.dictlrn.cbpdndl"):  # import: ImportError
        monkeypatch.setitem(sys.modules, name, None)
    said = []
    got = probe.sporco_anchor(np.zeros((2, 28, 28, 1)), np.zeros((8, 8, 1, 3)), 3,
                              SimpleNamespace(seed=0), said.append)
    assert got == {"skipped": "sporco not installed"} and "pip install -e .[recovery]" in said[0]


#: each probe's smoke-run test above (a new probe needs one)
def test_chain_length_snapshots_are_rewritten_the_same_on_resume(tmp_path):
    """Blocks of `every` sweeps and a last short one; a chain resumed at its checkpoint
    (sweep 2) writes the same block again; a fresh start (t = 0) clears older blocks."""
    from types import SimpleNamespace

    probe = load_probe(EXPERIMENTS / "length" / "chain_length.py")

    def state(t):
        return (SimpleNamespace(d=[np.full((2, 2), t, np.float32)], gamma_s=np.full((3, 1), 2.0 ** t),
                                gamma_e=np.array([t, t + 2.0]), on=np.ones((3, 1, 1, 2)) * t / 4), None, [])

    rec = probe.Snapshots(tmp_path, every=2, total=3)
    for t in range(3):
        rec(t, state(t))
    first = probe.load_snapshots(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sweeps_0001-0002.npz", "sweeps_0003-0003.npz"]
    assert list(first["sweep"]) == [1, 2, 3] and first["svm"] is None
    np.testing.assert_array_equal(first["gamma_e_mean"], [1.0, 2.0, 3.0])
    probe.Snapshots(tmp_path, every=2, total=3)(2, state(2))  # resumed at sweep 2 of 3
    again = probe.load_snapshots(tmp_path)
    assert all(np.array_equal(first[k], again[k]) for k in first if k != "svm")
    m = probe.model_at(first, 3, 2 / 3)  # sweeps 2..3
    assert m["sweeps"] == [2, 3] and m["gamma_s"] == 3.0 and m["D"][0][0, 0] == 1.5
    with pytest.raises(SystemExit, match="3 sweeps recorded, not 4"):
        probe.model_at(first, 4, 1 / 3)
    probe.Snapshots(tmp_path, every=2, total=3)(0, state(0))  # a fresh start
    assert not (tmp_path / "sweeps_0003-0003.npz").exists()


def test_chain_length_snapshots_survive_a_stop_between_blocks(tmp_path):
    """A chain stopped after sweep 4 of blocks of 3 (SIGTERM: its checkpoint at 4) keeps
    sweep 4 and resumes at 5; one killed at 4 with its checkpoint at 3 redraws 4 and
    reads each sweep once; a sweep lost by an older version's kill is refused only by
    the windows that need it."""
    from types import SimpleNamespace

    probe = load_probe(EXPERIMENTS / "length" / "chain_length.py")

    def state(t):
        return (SimpleNamespace(d=[np.full((2, 2), t, np.float32)], gamma_s=np.full((3, 1), 1.0),
                                gamma_e=np.array([t, t]), on=np.ones((3, 1, 1, 2))), None, [])

    rec = probe.Snapshots(tmp_path, every=3, total=6)
    for t in range(4):  # stopped after sweep 4
        rec(t, state(t))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sweeps_0001-0003.npz", "sweeps_0004-0004.npz"]
    rec = probe.Snapshots(tmp_path, every=3, total=6)  # resumed at its checkpoint, sweep 4
    for t in range(4, 6):
        rec(t, state(t))
    snaps = probe.load_snapshots(tmp_path)
    assert list(snaps["sweep"]) == [1, 2, 3, 4, 5, 6]
    np.testing.assert_array_equal(snaps["gamma_e_mean"], [0, 1, 2, 3, 4, 5])
    rec = probe.Snapshots(tmp_path, every=3, total=6)  # killed at 6, checkpoint at 3: 4, 5 redrawn
    rec(3, state(3))
    rec(4, state(4))
    assert (tmp_path / "sweeps_0004-0005.npz").exists() and not (tmp_path / "sweeps_0004-0004.npz").exists()
    assert list(probe.load_snapshots(tmp_path)["sweep"]) == [1, 2, 3, 4, 5, 6]
    (tmp_path / "sweeps_0001-0003.npz").unlink()  # sweeps 1..3 lost
    snaps = probe.load_snapshots(tmp_path)
    assert probe.model_at(snaps, 6, 1 / 3)["sweeps"] == [5, 6]
    with pytest.raises(SystemExit, match=r"lack \[3\]"):
        probe.model_at(snaps, 6, 2 / 3)


def test_chain_length_mixing_reads_chains_together(tmp_path):
    """Two stationary chains read as settled with R-hat near 1; a trending scalar as drifting;
    chains of different burn-in are refused."""
    import json

    import pandas as pd

    probe = load_probe(EXPERIMENTS / "length" / "chain_length.py")
    rng = np.random.default_rng(3)
    for c in range(2):
        d = tmp_path / f"c{c}"
        (d / "checkpoint").mkdir(parents=True)
        (d / "run.json").write_text(json.dumps({"burn_in": 10}))
        # an unsupervised two-layer chain's settlement scalars: stationary but gamma_e
        cols = ["log_joint", "active_top", "active_layer1", "dnorm_layer1", "dnorm_layer2",
                "dmove_layer1", "dmove_layer2"]
        trace = {"sweep": np.arange(1, 301), **{k: rng.standard_normal(300) for k in cols},
                 "gamma_e_mean": np.arange(300.0) + rng.standard_normal(300)}
        pd.DataFrame(trace).to_csv(d / "checkpoint" / "trace.csv", index=False)
    out = probe.main(["mixing", str(tmp_path / "c0"), str(tmp_path / "c1"), "--at", "200",
                      "--out", str(tmp_path / "m.json"), "--png", str(tmp_path / "m.png")])
    assert out["sweeps"] == 200 and out["n_chains"] == 2 and out["n_draws"] == 190
    assert out["drifting"] == ["gamma_e_mean"] and out["settled"] is False
    assert set(out["scalars"]) == set(cols) | {"gamma_e_mean"}  # refine.settle_columns(2, False)
    assert out["scalars"]["log_joint"]["rhat"] < 1.05 and abs(out["scalars"]["log_joint"]["drift"]) < 1
    assert json.loads((tmp_path / "m.json").read_text()) == json.loads(json.dumps(out))
    assert (tmp_path / "m.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (tmp_path / "c1" / "run.json").write_text(json.dumps({"burn_in": 4}))
    with pytest.raises(SystemExit, match="burn-in differ"):
        probe.main(["mixing", str(tmp_path / "c0"), str(tmp_path / "c1")])


@pytest.mark.slow  # three traces of chains and Algorithm 2: minutes
def test_chain_length(results, tmp_path):
    """Both chains from the tiny model's pretrained layers, then the rows read at sweep 3."""
    probe = load_probe(EXPERIMENTS / "length" / "chain_length.py")
    common = ["--results", str(results), "--smoke"]
    ref, sup = tmp_path / "refine", tmp_path / "supervised"
    probe.main(["run", "--kind", "refine", "--out", str(ref), *common])
    probe.main(["run", "--kind", "supervised", "--out", str(sup), *common])
    s = probe.load_snapshots(sup / "snapshots")
    assert s["beta"].shape[0] == 3 and s["svm"]["mean"].shape == (s["beta"].shape[2] - 1,)
    assert "beta" not in probe.load_snapshots(ref / "snapshots")
    assert list(probe.window(15, 1 / 3)) == list(range(11, 16))
    got = probe.main(["read", "--refine", str(ref), "--supervised", str(sup), "--lengths", "3",
                      "--refit-supervised", "--out", str(tmp_path / "read"), *common])
    assert got["n_train"] == 20 and got["n_test"] == 10
    for row in ("unsupervised_svm", "supervised", "supervised_refit"):
        r = got["lengths"]["3"][row]
        assert 0 <= r["error_pct"] <= 100 and 0 < r["vs_pretrained"]["mcnemar_exact_p"] <= 1
        assert r["sweeps_averaged"] == [3, 3]
        assert len(r["predicted"]) == got["n_test"]
    row = got["lengths"]["3"]
    for k in ("supervised", "supervised_refit"):  # each paired with the unsupervised row
        v = row[k]["vs_unsupervised"]
        disagree = int(np.sum(np.asarray(row[k]["predicted"]) != np.asarray(row["unsupervised_svm"]["predicted"])))
        assert v["wrong_only_a"] + v["wrong_only_b"] <= disagree and 0 < v["mcnemar_exact_p"] <= 1
    assert {p.name for p in (tmp_path / "read").iterdir()} == {
        "chain_length.json", "error_vs_length.png", "top_T3.png"}
    # the supervised row against the hinge weight: the chain above (gamma 1) and one at 100
    sup100 = tmp_path / "supervised_g100"
    probe.main(["run", "--kind", "supervised", "--gamma", "100", "--out", str(sup100), *common])
    w = probe.main(["weights", "--refine", str(ref), "--supervised", str(sup), str(sup100),
                    "--lengths", "3", "--out", str(tmp_path / "weights"), *common])
    rows = w["lengths"]["3"]["supervised"]
    assert set(rows) == {"gamma 1", "gamma 100"}
    for r in rows.values():
        assert 0 < r["own"]["vs_unsupervised"]["mcnemar_exact_p"] <= 1
        assert 0 <= r["train_error_test_route_pct"] <= 100 and r["purity"]["sweep"] == 3
        assert 0 < r["label_share_median"] < 1 and r["dmove_top_vs_unsupervised"] > 0
    # P_svm is linear in gamma: a hundred times the weight, a larger share
    assert rows["gamma 100"]["label_share_median"] > rows["gamma 1"]["label_share_median"]
    assert (tmp_path / "weights" / "error_vs_weight.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(SystemExit, match="other images"):
        probe.main(["weights", "--refine", str(ref), "--supervised", str(sup), "--n-train", "50",
                    "--lengths", "3", "--out", str(tmp_path / "w2"), "--results", str(results)])


@pytest.mark.slow  # four short MCEM runs and Algorithm 2 on the shared fixture: about 30 s
def test_algorithm1(results, tmp_path):
    """Algorithm 1 of both kinds from the tiny model's pretrained layers, persistent; a run
    stopped inside its second epoch resumes and writes what the uninterrupted run wrote;
    then the rows read at each epoch, with Fig. 2 at both."""
    probe = load_probe(EXPERIMENTS / "length" / "algorithm1.py")
    common = ["--results", str(results), "--smoke"]
    unsup, sup, cut = tmp_path / "unsup", tmp_path / "sup", tmp_path / "cut"
    probe.main(["run", "--kind", "unsupervised", "--local-state", "persist", "--out", str(unsup), *common])
    probe.main(["run", "--kind", "supervised", "--local-state", "persist", "--out", str(sup), *common])
    about = probe.main(["run", "--kind", "unsupervised", "--local-state", "persist", "--out", str(cut),
                        "--stop-after", "3", *common])
    assert about["iterations_per_epoch"] == 2 and not (cut / "epoch_002.npz").exists()
    probe.main(["run", "--kind", "unsupervised", "--local-state", "persist", "--out", str(cut), *common])
    for e in (1, 2):
        a, b = (np.load(f / f"epoch_{e:03d}.npz") for f in (unsup, cut))
        assert all(np.array_equal(a[k], b[k]) for k in a.files)
    assert set(probe.load_epochs(sup)) == {1, 2} and probe.load_epochs(sup)[2]["beta"] is not None
    got = probe.main(["read", "--runs", str(unsup), str(sup), "--refit-supervised",
                      "--out", str(tmp_path / "read"), *common])
    assert got["n_train"] == 20 and got["n_test"] == 20
    for run in got["runs"].values():
        assert set(run["epochs"]) == {"1", "2"} and len(run["trace_epoch_means"]) == 2
        for r in run["epochs"].values():
            assert 0 <= r["error_pct"] <= 100 and 0 < r["vs_pretrained"]["mcnemar_exact_p"] <= 1
            assert all(m > 0 for m in r["moved"])
    assert {p.name for p in (tmp_path / "read").iterdir()} == {
        "algorithm1.json", "error_vs_epochs.png", "traces.png", "top_E1_persist.png", "top_E2_persist.png",
        "readings", "algorithm1.md"}
    # a second read loads its readings (the same numbers) instead of computing them
    kept = sorted(p.name for p in (tmp_path / "read" / "readings").iterdir())
    assert len(kept) == 1 + 2 + 2 * 2  # the pretrained row, 2 epochs unsupervised, 2 x 2 supervised
    again = probe.main(["read", "--runs", str(unsup), str(sup), "--refit-supervised",
                        "--out", str(tmp_path / "read"), *common])
    assert again["pairs"] == got["pairs"]
    assert [r["error_pct"] for run in again["runs"].values() for r in run["epochs"].values()] == [
        r["error_pct"] for run in got["runs"].values() for r in run["epochs"].values()]
    # three readings a epoch: unsupervised, supervised, supervised's D with a refitted SVM
    assert set(got["pairs"]) == {"1", "2"} and all(len(v) == 3 for v in got["pairs"].values())
    assert all("refit" in r for r in got["runs"][str(sup)]["epochs"].values())

def test_chain_length_combine_merges_reads_of_the_same_images(tmp_path):
    """Two reads (lengths 15 and 300) combine into one curve; a read of other test images,
    or one that reads the same row at the same length otherwise, is refused."""
    import json

    probe = load_probe(EXPERIMENTS / "length" / "chain_length.py")

    def write(name, lengths, test=(1, 2, 3), err=14.3):
        row = lambda e: {"error_pct": e, "se_pct": 1.0}  # noqa: E731
        out = {"dataset": "mnist", "test_indices": list(test), "n_train": 500, "n_test": len(test),
               "pretrained_svm": row(err),
               "lengths": {str(t): {k: row(e) for k, e in rows.items()} for t, rows in lengths.items()}}
        (tmp_path / name).mkdir()
        (tmp_path / name / "chain_length.json").write_text(json.dumps(out))
        return str(tmp_path / name)

    a = write("a", {15: {"unsupervised_svm": 14.3}, 50: {"supervised": 18.4}})
    b = write("b", {300: {"unsupervised_svm": 13.8, "supervised": 17.2}, 50: {"supervised": 18.4}})
    got = probe.main(["combine", a, b, "--out", str(tmp_path / "all")])
    assert {t: sorted(r) for t, r in got["lengths"].items()} == {
        "15": ["unsupervised_svm"], "50": ["supervised"], "300": ["supervised", "unsupervised_svm"]}
    assert got["lengths"]["300"]["supervised"]["error_pct"] == 17.2 and got["reads"] == [a, b]
    assert json.loads((tmp_path / "all" / "chain_length.json").read_text()) == got
    assert (tmp_path / "all" / "error_vs_length.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(SystemExit, match="read other images"):
        probe.main(["combine", a, write("c", {300: {}}, test=(1, 2, 4)), "--out", str(tmp_path / "x")])
    with pytest.raises(SystemExit, match="not the same chain"):
        probe.main(["combine", b, write("d", {300: {"supervised": 16.0}}), "--out", str(tmp_path / "y")])


def test_chain_length_combine_weights_merges_reads_of_the_same_images(tmp_path):
    """Weight reads of one refinement (gamma 10 at T 50 and 150, gamma 1 at 150) combine
    into one weights.json a length; other test images, another unsupervised row at a length
    or one chain read otherwise at the same length are refused."""
    import json

    probe = load_probe(EXPERIMENTS / "length" / "chain_length.py")

    def write(name, lengths, test=(1, 2, 3), unsup=13.2, mode="fixed"):
        def row(g, e):
            return {"gamma": g, "svm_gamma": g, "gamma_mode": mode, "own": {"error_pct": e},
                    "refit": {"error_pct": e - 1},
                    "label_share_median": 1e-3, "label_share_margin": 2e-3,
                    "purity": {"weighted_purity": 0.14, "shuffled_weighted_purity": 0.126},
                    "train_error_own_features_pct": 0.0, "train_error_test_route_pct": 6.0}
        out = {"dataset": "mnist", "test_indices": list(test), "n_train": 500, "n_test": len(test),
               "window": 1 / 3, "pretrained_svm": {"error_pct": 11.7},
               "lengths": {str(t): {"unsupervised_svm": {"error_pct": unsup, "purity": {"weighted_purity": 0.141}},
                                    "supervised": {f"gamma {g}": row(g, e) for g, e in rows.items()}}
                           for t, rows in lengths.items()}}
        (tmp_path / name).mkdir()
        (tmp_path / name / "weights.json").write_text(json.dumps(out))
        return str(tmp_path / name)

    a = write("a", {150: {10: 14.9}})
    b = write("b", {150: {1: 14.6, 10: 14.9}})
    c = write("c", {50: {10: 17.2}}, unsup=13.9)
    bal = write("bal", {150: {6071: 23.1}}, mode="balanced")  # drawn as a star at its last weight
    got = probe.main(["combine-weights", a, b, c, bal, "--out", str(tmp_path / "all")])
    assert {t: sorted(r["supervised"]) for t, r in got["lengths"].items()} == {
        "150": ["gamma 1", "gamma 10", "gamma 6071"], "50": ["gamma 10"]}
    assert got["lengths"]["50"]["unsupervised_svm"]["error_pct"] == 13.9 and got["reads"] == [a, b, c, bal]
    assert json.loads((tmp_path / "all" / "weights.json").read_text()) == got
    assert (tmp_path / "all" / "error_vs_weight.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(SystemExit, match="read other images"):
        probe.main(["combine-weights", a, write("d", {150: {}}, test=(1, 2, 4)), "--out", str(tmp_path / "x")])
    with pytest.raises(SystemExit, match="not the same refinement"):
        probe.main(["combine-weights", a, write("e", {150: {1: 14.6}}, unsup=13.0), "--out", str(tmp_path / "y")])
    with pytest.raises(SystemExit, match="not the same chain"):
        probe.main(["combine-weights", b, write("f", {150: {10: 15.5}}), "--out", str(tmp_path / "z")])


def test_residual_decay_reads_the_power_law_and_a_floor(tmp_path):
    """A residual falling as sweep^-0.3 with gamma_e at its noise level reads exponent 0.3 and
    a constant rr^2 gamma_e; one that meets a floor reads exponent 0 over its last quarter."""
    import pandas as pd

    probe = load_probe(EXPERIMENTS / "length" / "residual_decay.py")
    t = np.arange(1, 201, dtype=float)
    for name, rr in (("power", 0.1 * t ** -0.3), ("floor", np.maximum(0.1 * t ** -0.3, 0.05))):
        (tmp_path / name / "checkpoint").mkdir(parents=True)
        pd.DataFrame({"sweep": t, "rel_residual": rr, "gamma_e_mean": 14.0 / rr ** 2}).to_csv(
            tmp_path / name / "checkpoint" / "trace.csv", index=False)
    out = probe.main([str(tmp_path / "power"), str(tmp_path / "floor"), "--at", "10", "300",
                      "--png", str(tmp_path / "d.png"), "--out", str(tmp_path / "d.json")])
    assert out["power"]["exponent_second_half"] == pytest.approx(0.3, abs=1e-6)
    assert out["power"]["rr2_gamma_e_spread_second_half"] == pytest.approx(0, abs=1e-9)
    assert out["power"]["at"][10]["rr2_gamma_e"] == pytest.approx(14.0) and 300 not in out["power"]["at"]
    assert out["floor"]["exponent_last_quarter"] == pytest.approx(0, abs=1e-9)
    assert (tmp_path / "d.png").stat().st_size > 0 and (tmp_path / "d.json").exists()
    with pytest.raises(SystemExit, match="1 labels for 2 chains"):
        probe.main([str(tmp_path / "power"), str(tmp_path / "floor"), "--label", "x"])


def test_element_purity_reads_a_chains_checkpoint(tmp_path):
    """A chain whose top-layer element k is used only by images of class k reads purity 1;
    the labels come from run.json's image indices into the prepared training split."""
    import json

    from dgdm_tf.io import atomic

    probe = load_probe(EXPERIMENTS / "length" / "element_purity.py")
    rng = np.random.default_rng(1)
    y_train = rng.integers(0, 3, 40)
    atomic.save_npz(tmp_path / "res" / "data" / "prepared.npz",
                    x_train=rng.random((40, 4, 4, 1), dtype=np.float32), y_train=y_train,
                    x_test=rng.random((6, 4, 4, 1), dtype=np.float32), y_test=np.arange(6) % 3,
                    class_names=np.array(["a", "b", "c"]))
    idx = rng.permutation(40)[:12]
    chain = tmp_path / "chain"
    (chain / "checkpoint").mkdir(parents=True)
    (chain / "run.json").write_text(json.dumps({"results": str(tmp_path / "res"),
                                                "image_indices": idx.tolist()}))
    top = (y_train[idx][:, None, None, None] == np.arange(3)) * np.ones((12, 2, 1, 3))  # (N, hs, ws, K)
    np.savez(chain / "checkpoint" / "checkpoint.npz", acc_features=4 * top.reshape(12, -1),
             acc_count=np.array(4.0), state_s_top=np.zeros((12, 2, 1, 3)), sweep=np.array(7))
    out = probe.main([str(chain), "--png", str(tmp_path / "p.png"), "--out", str(tmp_path / "p.json")])
    r = out["chains"]["chain"]
    assert r["sweep"] == 7 and r["weighted_purity"] == pytest.approx(1.0) and r["n_images"] == 12
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG" and (tmp_path / "p.json").exists()
    np.savez(chain / "checkpoint" / "checkpoint.npz", acc_features=top.reshape(12, -1),
             acc_count=np.array(0.0), state_s_top=np.zeros((12, 2, 1, 3)), sweep=np.array(3))
    with pytest.raises(SystemExit, match="no collected sweep yet"):
        probe.main([str(chain)])
    with pytest.raises(SystemExit, match="share a name"):
        probe.main([str(chain), str(chain)])


def test_em_steps(results, tmp_path):
    """The EM row's fits at fewer steps, each paired against the most steps' on the same
    test images (smoke: 1 and 2 steps on 20 images of the block posteriors' features)."""
    out = tmp_path / "em.json"
    rows = load_probe(EXPERIMENTS / "svm_wide" / "em_steps.py").main(
        ["--results", str(results), "--method", "pretrained_block_svm", "--smoke", "--out", str(out)])
    assert [(r["n_train"], r["steps"]) for r in rows] == [(20, 1), (20, 2)]
    assert rows[1]["against_most_steps"]["diff_pct_points"] == 0.0  # the most steps against itself
    assert all(0 <= r["test_error_pct"] <= 100 for r in rows)
    assert json.loads(out.read_text())["rows"][0]["steps"] == 1


def test_nodes_wall_time(tmp_path, capsys):
    """The projection of a saved DAG from its jobs' benchmark files: one node runs them one
    after another; on four the features rule's shards split (each part + its overhead);
    two slowed jobs at once on one node."""
    repo = tmp_path / "repo"
    (repo / "workflow").mkdir(parents=True)
    (repo / "workflow" / "rules").symlink_to(REPO / "workflow" / "rules")
    for rel_path, s in (("prepare/x.tsv", 10), ("pretrain_layer/x/layer1.tsv", 30),
                        ("features/x.tsv", 400), ("svm/x_pretrained_svm.tsv", 50)):
        f = repo / "results" / "benchmarks" / "rules" / rel_path
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(f"s\th:m:s\n{s}\t0:00:01\n")
    dot = tmp_path / "dag.dot"
    dot.write_text("digraph snakemake_dag {\n"
                   + "".join(f'\t{i}[label = "{label}", color = "0.6 0.6 0.85"];\n' for i, label in enumerate(
                       ["tables", "svm\\nmethod: pretrained_svm", "features", "prepare", "pretrain_layer\\nl: 1"]))
                   + "\t1 -> 0\n\t2 -> 1\n\t4 -> 2\n\t3 -> 4\n\t3 -> 2\n}\n")
    got = load_probe(EXPERIMENTS / "scaling" / "nodes_wall_time.py").main(
        ["--repo", str(repo), "--ds", "x", "--dag", str(dot), "--nodes", "1,4", "--shard-overhead", "20"])
    assert [r["seconds"] for r in got["rows"]] == [490, 10 + 30 + 120 + 50]
    assert got["rows"][1]["critical_path"] == ["prepare", "pretrain_layer[1]", "features", "svm[pretrained_svm]", "tables"]
    assert got["missing"] == ["tables"]
    assert got["jobs"]["features"] == {"seconds": 400.0, "max_rss_mb": None}  # no max_rss column
    assert "not measured (counted as 0 s): tables" in capsys.readouterr().out
    # one node running two jobs at once, each 1.5x its measured time: the features' two
    # shard parts side by side, 1.5 x 400 / 2 + 20 each
    got = load_probe(EXPERIMENTS / "scaling" / "nodes_wall_time.py").main(
        ["--repo", str(repo), "--ds", "x", "--dag", str(dot), "--nodes", "1", "--shard-overhead", "20",
         "--workers-per-node", "2", "--slowdown", "1.5"])
    assert [r["seconds"] for r in got["rows"]] == [15 + 45 + 320 + 75]
    got = load_probe(EXPERIMENTS / "scaling" / "nodes_wall_time.py").main(
        ["--repo", str(repo), "--ds", "x", "--dag", str(dot), "--nodes", "1", "--shard-overhead", "20",
         "--workers-per-node", "2", "--slowdown", "1.5", "--rule-slowdown", "svm=2"])
    assert [r["seconds"] for r in got["rows"]] == [15 + 45 + 320 + 100]  # the SVM 2 x 50
    assert got["jobs"]["features"]["seconds"] == 400.0  # the measured time, as measured


def test_threads_side_by_side(tmp_path):
    """One step timed as one 2-thread job, one 1-thread job and two 1-thread jobs at once
    (fresh processes each); the side-by-side throughput is the sum over both."""
    got = load_probe(EXPERIMENTS / "scaling" / "threads_side_by_side.py").main(
        ["--results", str(tmp_path), "--smoke", "--steps", "test_sweep", "--sweeps", "2"])
    rows = got["rows"]
    assert [(r["threads"], r["processes"]) for r in rows] == [(2, 1), (1, 1), (1, 2)]
    assert all(r["seconds"] > 0 and r["images_per_s"] > 0 for r in rows)
    (s,) = got["summary"]
    assert s["side by side / one job"] == pytest.approx(rows[2]["images_per_s"] / rows[0]["images_per_s"])
    assert (tmp_path / "threads_side_by_side.csv").is_file()
    # the SVM's fit, as its workers time it (here in this process, on random features)
    fn, args = load_probe(EXPERIMENTS / "scaling" / "threads_side_by_side.py").svm_fit(
        {"batch": 30, "seed": 0, "features": None, "svm_sweeps": 3})
    assert fn(*args).predict(np.zeros((2, 8), np.float32)).shape == (2,)


def test_sweep_peak_memory(tmp_path):
    """A chunked sweep on a tiny model: its state's size and the peak RSS after each sweep."""
    out = tmp_path / "mem.json"
    got = load_probe(EXPERIMENTS / "scaling" / "sweep_peak_memory.py").main(
        ["--smoke", "--images", "6", "--chunk", "4", "--sweeps", "2", "--out", str(out)])
    assert got["state_mb"] > 0 and [r["sweep"] for r in got["sweeps"]] == [1, 2]
    assert all(r["peak_rss_mb"] >= got["rss_mb_before_sweeps"] for r in got["sweeps"])
    assert json.loads(out.read_text())["images"] == 6


SMOKE_RUNS = {
    "length/algorithm1.py": test_algorithm1,
    "length/chain_length.py": test_chain_length,
    "length/residual_decay.py": test_residual_decay_reads_the_power_law_and_a_floor,
    "length/element_purity.py": test_element_purity_reads_a_chains_checkpoint,
    "estimators/compare_routes.py": test_compare_routes,
    "estimators/alg2_objective.py": test_alg2_objective,
    "estimators/supervised_refit.py": test_supervised_refit,
    "determinism/compare_results.py": test_compare_results,
    "generation/prior_draws.py": test_prior_draws,
    "svm_wide/feature_transform.py": test_feature_transform,
    "mixing/x_next_rank.py": test_x_next_rank,
    "scaling/pretrain_floor_ratio.py": test_pretrain_floor_ratio,
    "tracing/grappler_cost.py": test_grappler_cost,
    "recovery/recovery_grid.py": test_recovery_grid,
    "scaling/nodes_wall_time.py": test_nodes_wall_time,
    "svm_wide/em_steps.py": test_em_steps,
    "scaling/threads_side_by_side.py": test_threads_side_by_side,
    "scaling/sweep_peak_memory.py": test_sweep_peak_memory,
}

