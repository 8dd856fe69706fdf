"""Ablation files (config/ablations/<name>.yaml): each runs as a dataset of its own
under results/<name>/ and never writes into the main run's results; its changes reach
its runs only; a bad file or a missing base says what to do."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml
from _workflow import REPO, copy_repo, load_config, smoke_config, snakemake, write_config

ABLATIONS = sorted(p.stem for p in (REPO / "config" / "ablations").glob("*.yaml"))


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    return copy_repo(tmp_path_factory.mktemp("repo"))


def planned_files(out: str) -> list[str]:
    """Every output, log and benchmark file a dry run lists."""
    files = []
    for m in re.finditer(r"^\s*(output|log|benchmark): (.*)$", out, re.M):
        files += [f.strip() for f in m.group(2).split(",")]
    return files


def test_the_shipped_ablations_exist():
    assert {"gamma_s_global", "readout_chain", "pretrain_burn_in_60",
            "pretrain_burn_in_240", "supervised_gamma_1000"} <= set(ABLATIONS)


@pytest.mark.parametrize("name", ABLATIONS)
def test_an_ablation_writes_under_its_own_folder_only(repo, name):
    r = snakemake(repo, "-n", f"results/{name}/tables.md")
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "rule ablation_tables:" in out and "rule tables:" not in out
    files = planned_files(out)
    assert len(files) > 5
    outputs = [f for f in files if not f.startswith(("results/logs/", "results/benchmarks/rules/"))]
    assert all(f.startswith(f"results/{name}/") for f in outputs), outputs
    assert all(name in f for f in files), [f for f in files if name not in f]
    assert not [f for f in files if f.startswith("results/mnist/")]


def test_the_main_run_plans_no_ablation(repo):
    r = snakemake(repo, "-n", "results/tables.md")
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "ablation_tables" not in out
    assert not [f for f in planned_files(out) for a in ABLATIONS if f"/{a}/" in f or f"/{a}." in f]


def test_an_ablations_changes_reach_its_runs_only():
    """The ablation's dataset is its base with the changes written over it, and its hyper
    block is the config's with its own keys; the base keeps the config's."""
    sys.path.insert(0, str(REPO / "workflow" / "lib"))
    import dgdm_workflow as W
    from snakemake.utils import validate

    schema = str(REPO / "workflow" / "schemas" / "config.schema.yaml")
    config = load_config("config.yaml")
    ready, unavailable = W.load_ablations(config, REPO / "config" / "ablations",
                                          lambda c: validate(c, schema))
    assert set(ready) == set(ABLATIONS) and unavailable == {}
    wiring = W.Wiring(config, ready, unavailable)
    assert wiring.hyper("gamma_s_global")["gamma_s"] == "global"
    assert wiring.hyper("mnist")["gamma_s"] == config["hyper"]["gamma_s"] == "image_map"
    rc = wiring.run_config("readout_chain")
    assert rc["ablation_of"] == "mnist" and rc["dataset"] == "readout_chain"
    assert rc["block"]["topdown_features"]["route"] == "chain"
    assert rc["block"]["topdown_features"]["alg2"] == config["datasets"]["mnist"]["topdown_features"]["alg2"]
    assert "ablation_of" not in wiring.run_config("mnist")
    assert wiring.ds_cfg("pretrain_burn_in_240")["pretrain"]["burn_in"] == 240
    assert wiring.ds_cfg("mnist")["pretrain"]["burn_in"] == config["datasets"]["mnist"]["pretrain"]["burn_in"]
    # the base's raw files, not a download of the ablation's own
    assert wiring.raw_dir("gamma_s_global") == wiring.raw_dir("mnist")
    # its draws are seeded as the base's (images, chains, SVMs): the two compare paired
    wc = lambda ds: type("Wildcards", (), {"ds": ds})()
    assert wiring.seed_name(wc("readout_chain")) == wiring.seed_name(wc("mnist")) == "mnist"


def _rules() -> dict[str, str]:
    """rule name -> its text, the shared params dicts it unpacks (``**NAME``) written in."""
    text = "\n".join(p.read_text() for p in sorted((REPO / "workflow" / "rules").glob("*.smk")))
    shared = dict(re.findall(r"^([A-Z_]+_PARAMS) = dict\((.*?)^\)", text, re.M | re.S))
    rules = {}
    for m in re.finditer(r"^rule (\w+):\n(.*?)(?=^rule |\Z)", text, re.M | re.S):
        body = m.group(2)
        rules[m.group(1)] = body + "".join(shared.get(n, "") for n in re.findall(r"\*\*([A-Z_]+_PARAMS)", body))
    return rules


def test_every_rule_whose_script_seeds_by_dataset_passes_its_seed_name():
    """A script seeds its draws by ``params.seed_name`` (an ablation's base), never by
    the wildcard itself, and every rule that runs it passes that param."""
    scripts = REPO / "workflow" / "scripts"
    seeding = {p.name for p in scripts.glob("*.py") if "params.seed_name" in p.read_text()}
    assert {"pretrain_layer.py", "svm.py", "refine.py", "supervised.py", "cnn_baseline.py"} <= seeding
    for p in scripts.glob("*.py"):
        src = p.read_text()
        assert not re.search(r"seed_for\([^,]+, ds\b|subset_seeds\(seed, ds\)|seed, ds\)", src), p.name
    missing = [name for name, body in _rules().items()
               if re.search(r"scripts/(\w+\.py)", body) and re.search(r"scripts/(\w+\.py)", body).group(1) in seeding
               and "seed_name=seed_name" not in body]
    assert not missing, f"rules that run a seeding script without params.seed_name: {missing}"


def test_an_ablation_of_a_dataset_the_config_lacks_says_which_config(repo, tmp_path):
    r = snakemake(repo, "-n", "results/gamma_s_global/tables.md",
                  "--configfile", str(smoke_config(tmp_path)))
    out = r.stdout + r.stderr
    assert r.returncode != 0
    assert "varies dataset 'mnist', which this config does not define" in out, out[-3000:]
    assert "config/config.yaml" in out


@pytest.mark.parametrize("text,expect", [
    ("ablation: {base: mnist, changes: {pretrain: {burnin: 3}}}", ["'burnin'", "bad_key.yaml"]),
    ("ablation: {base: mnist, chnges: {}}", ["bad_key.yaml", "`changes`"]),
    ("ablation: {base: mnist, changes: {}, extra: 1}", ["'extra'", "bad_key.yaml"]),
])
def test_a_bad_ablation_file_is_named_with_its_key(tmp_path, text, expect):
    repo = copy_repo(tmp_path / "repo")
    (repo / "config" / "ablations" / "bad_key.yaml").write_text(text + "\n")
    r = snakemake(repo, "-n", "results/tables.md")
    out = r.stdout + r.stderr
    assert r.returncode != 0
    assert all(e in out for e in expect), out[-3000:]



def test_an_ablations_table_reads_its_runs_beside_the_main_runs_and_touches_no_main_file(tmp_path):
    """Rule ablation_tables on metrics.json files written here (the ablation's two rows,
    the main run's one): the table puts each row beside the main run's with the
    difference, names its file relative to the repository, and writes nothing under
    results/mnist/."""
    import json

    repo = copy_repo(tmp_path / "repo")

    def metrics(path: str, err: float) -> Path:
        p = repo / path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps({"test_error_pct": err, "n_test": 5000, "n_train": 10000}))
        return p

    metrics("results/gamma_s_global/unsupervised_svm/metrics.json", 6.0)
    metrics("results/gamma_s_global/supervised/metrics.json", 7.0)
    main = metrics("results/mnist/unsupervised_svm/metrics.json", 5.0)
    # the two runs' predictions on the same 4 test images: the ablation wrong on 2 the
    # main run gets right, the main run on none it gets wrong
    for ds, pred in (("gamma_s_global", "0,1,1,1"), ("mnist", "0,1,2,3")):
        rows = [f"{i},{i},{p}" for i, p in enumerate(pred.split(","))]
        rows[1] = "1,1,0" if ds == "gamma_s_global" else rows[1]
        (repo / f"results/{ds}/unsupervised_svm/predictions.csv").write_text(
            "test_index,label,predicted\n" + "\n".join(rows) + "\n")
    before = {p: p.stat().st_mtime_ns for p in (repo / "results/mnist").rglob("*")}
    r = snakemake(repo, "--cores", "1", "results/gamma_s_global/tables.md")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    md = (repo / "results/gamma_s_global/tables.md").read_text()
    assert "from `config/ablations/gamma_s_global.yaml`" in md
    row = next(l for l in md.splitlines() if l.startswith("| Our unsupervised model"))
    # wrong only in the ablation: images 1, 2, 3 of 4 -> +75 points, McNemar p 2 / 8
    assert "| 6.00 ± 0.34 | 5.00 ± 0.31 | +1.00 ± 0.46 | +75.00 ± " in row, row
    assert ", p 0.25, 4 images | 10000 / 5000 |" in row, row
    assert "not run (`results/mnist/supervised/`)" in md
    assert {p: p.stat().st_mtime_ns for p in (repo / "results/mnist").rglob("*")} == before
    assert main.read_text() == json.dumps({"test_error_pct": 5.0, "n_test": 5000, "n_train": 10000})
