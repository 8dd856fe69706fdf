"""The smoke config end to end, in the slow tier: every row of its tables, its learning
curves and benchmarks, its report opened in headless Chromium (the probes' own tests,
tests/test_experiments.py, run them on the smoke config's model). Bitwise repetition is
tests/test_workflow_kills.py's: the tiny config rerun through ten kills, every file of
its pretraining, refinement, Gibbs rows and inpainting compared with the uninterrupted
run's (an unseeded inpainting draw fails it). The default tier's run is the tiny
config's (tests/test_workflow_tiny.py: the Gibbs rows' outputs, what a change reruns, the
shards, two workers); tests/test_workflow_config.py has the dry runs and bad configs.

Each test runs snakemake in a temporary copy of the repository (no results/ or data/),
so it never touches the working tree's outputs.
"""

from __future__ import annotations

import base64
import json
import os
import re
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
import yaml
from _browser import CHROMIUM, Chromium, report_views
from _workflow import CORES, copy_repo, planned_jobs, smoke_config, snakemake, write_config

pytestmark = pytest.mark.slow  # the slow tier; tests/test_workflow_tiny.py is the default tier's run

# ---------------------------------------------------- smoke config, end to end
@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    """The smoke config end to end (tables + benchmarks), once for the tests below."""
    repo = copy_repo(tmp_path_factory.mktemp("smoke_repo"))
    cfg = smoke_config(tmp_path_factory.mktemp("smoke_data"))
    t0 = time.time()
    r = snakemake(repo, "--cores", CORES, "results/tables.md", "results/benchmarks.md",
                  "--configfile", str(cfg), timeout=2400)
    seconds = time.time() - t0
    logs = "\n".join(f"== {p}\n{p.read_text()[-3000:]}"
                     for p in sorted((repo / "results" / "logs").rglob("*.log")))
    assert r.returncode == 0, r.stdout[-5000:] + r.stderr[-5000:] + logs
    print(f"smoke workflow: {seconds:.1f} s")
    return repo, cfg


def test_smoke_end_to_end_tables(smoke_run):
    repo, cfg = smoke_run
    md = (repo / "results" / "tables.md").read_text()
    row = next(l for l in md.splitlines() if l.startswith("| Our pretrained model"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    ours = float(cells[1])  # a number, not "not run"
    assert 0.0 <= ours <= 100.0
    assert cells[2] == "1.42"
    assert cells[4] == "300 / 200"
    assert "MNIST" in md and "MCDNN" in md
    m = json.loads((repo / "results/mnist_smoke/pretrained_svm/metrics.json").read_text())
    assert m["test_error_pct"] == pytest.approx(ours, abs=0.006)
    assert m["n_train"] == 300 and m["n_test"] == 200 and m["seed"] == 0
    assert m["config"]["pretrain"]["burn_in"] == 3
    assert set(m["wall_seconds_by_step"]) == {"prepare", "pretrain_layer1", "pretrain_layer2",
                                              "features", "svm"}
    assert m["wall_seconds"] == pytest.approx(sum(m["wall_seconds_by_step"].values()))
    run_cfg = yaml.safe_load((repo / "results/mnist_smoke/pretrained_svm/config.yaml").read_text())
    assert run_cfg["block"]["kind"] == "npz" and run_cfg["seed"] == 0
    pred = (repo / "results/mnist_smoke/pretrained_svm/predictions.csv").read_text().splitlines()
    assert pred[0].startswith("test_index,label,predicted,score_0") and len(pred) == 201
    for l in (1, 2):
        for kind in ("dictionary", "trace", "activity"):
            png = repo / f"results/mnist_smoke/figures/pretrain_layer{l}_{kind}.png"
            assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png
        with np.load(repo / f"results/mnist_smoke/pretrain/layer{l}.npz") as z:
            assert -1.0 <= float(z["activity_ink"]) <= 1.0
    # the mixing diagnostics of the three feature routes, and the block-posterior row
    for method, png, n in (("pretrained_svm", "features_layer1_activity.png", 300),
                           ("pretrained_block_svm", "block_features_layer1_activity.png", 300),
                           ("unsupervised_svm", "topdown_features_layer1_activity.png", 60)):
        mix = json.loads((repo / f"results/mnist_smoke/{method}/mixing.json").read_text())
        assert -1.0 <= mix["activity_ink_layer1"] <= 1.0 and mix["images"] == n
        assert np.shape(mix["activity_map_layer1"]) == np.shape(mix["ink_map_layer1"])
        assert (repo / f"results/mnist_smoke/figures/{png}").read_bytes()[:4] == b"\x89PNG"
        if method == "pretrained_svm":  # the default route: the top layer given the whole model
            assert mix["route"] == "topdown" and m["n_features"] == 2 * 2 * m["dict_sizes"][-1]
        if method != "pretrained_block_svm":  # both top-down rows: Algorithm 2, no chain averaged
            assert run_cfg["block"]["topdown_features"]["route"] == "alg2" and mix["chains"] == 0
            a2 = mix["alg2"]  # the iterations the images took, at most the smoke's 3
            assert 1.0 <= a2["iterations_mean"] <= a2["iterations_max"] <= 3, a2
            assert 0.0 <= a2["converged"] <= 1.0 and len(a2["q_trace"]) == a2["iterations_max"]
    block = next(l for l in md.splitlines() if l.startswith("| Our pretrained model, block"))
    mb = json.loads((repo / "results/mnist_smoke/pretrained_block_svm/metrics.json").read_text())
    assert mb["n_train"] == 300 and mb["n_test"] == 200
    assert float(block.strip("|").split("|")[1]) == pytest.approx(mb["test_error_pct"], abs=0.006)
    # the checkpoint folders are gone once the layers are written
    assert not list((repo / "results/mnist_smoke/pretrain").glob("*_ckpt"))
    # the reference row and the CNN on exactly the supervised row's images: the two columns
    # before the last, which pairs the row with the pretrained row on their shared test images
    sup = next(l for l in md.splitlines() if l.startswith("| Our supervised model"))
    sup = [c.strip() for c in sup.strip("|").split("|")]
    assert sup[4] == "40 / 40"
    assert sup[-1].endswith(", 40 images"), sup[-1]
    for col, run in ((-3, "encoder_at"), (-2, "cnn_at")):
        peer = json.loads((repo / f"results/mnist_smoke/{run}/supervised/metrics.json").read_text())
        assert peer["same_images_as"] == "supervised" and (peer["n_train"], peer["n_test"]) == (40, 40)
        assert float(sup[col]) == pytest.approx(peer["test_error_pct"], abs=0.006), run


def test_smoke_learning_curves(smoke_run):
    """Each SVM row asked refitted at the smoke sizes (20, 60): the two rows on 300 images
    end at their own fit, unsupervised_svm (60 images) at 60, its own fit; the CNN trained
    afresh at 20 and 60, its own run at 300; the figure and the line in results/tables.md."""
    import pandas as pd

    repo, _ = smoke_run
    df = pd.read_csv(repo / "results/mnist_smoke/learning_curve.csv")
    assert list(df.columns) == ["method", "n_train", "n_test", "test_error_pct", "se_pct",
                                "train_error_pct", "seconds", "source", "note"]
    got = [(r.method, int(r.n_train), r.source) for r in df.itertuples()]
    assert got == [(m, n, s) for m in ("pretrained_svm", "pretrained_block_svm")
                   for n, s in ((20, "fit"), (60, "fit"), (300, "row"))] + [
        ("unsupervised_svm", 20, "fit"), ("unsupervised_svm", 60, "row"),
        ("cnn", 20, "fit"), ("cnn", 60, "fit"), ("cnn", 300, "row")]  # rule cnn_learning_curve
    assert (df["n_test"] == np.where(df["method"] == "unsupervised_svm", 40, 200)).all()
    p = df["test_error_pct"] / 100
    assert np.allclose(df["se_pct"], 100 * np.sqrt(p * (1 - p) / df["n_test"]), rtol=1e-5)
    assert df["test_error_pct"].between(0, 100).all() and df["train_error_pct"].between(0, 100).all()
    for r in df[df["source"] == "row"].itertuples():  # the row's own fit, as in its metrics.json
        m = json.loads((repo / f"results/mnist_smoke/{r.method}/metrics.json").read_text())
        assert r.test_error_pct == pytest.approx(m["test_error_pct"], abs=1e-4)
        assert r.n_train == m["n_train"] and r.n_test == m["n_test"]
    assert (repo / "results/mnist_smoke/figures/learning_curve.png").read_bytes()[:4] == b"\x89PNG"
    md = (repo / "results" / "tables.md").read_text()
    assert "`results/mnist_smoke/learning_curve.csv`, `results/mnist_smoke/figures/learning_curve.png`" in md


def test_smoke_benchmarks(smoke_run):
    repo, _ = smoke_run
    md = (repo / "results" / "benchmarks.md").read_text()
    assert "Pretraining sweeps against the floor" in md
    for rule in ("pretrain_layer", "features", "svm", "prepare"):
        assert f"| {rule} |" in md, rule
    import pandas as pd

    csv = pd.read_csv(repo / "results" / "benchmarks.csv")
    sweeps = csv[csv["benchmark"] == "pretrain_sweep"]  # the CNN's rows follow them
    # one row per layer and configured compilation mode (smoke: graph only) at the one batch size
    assert len(sweeps) == 2 * 1
    assert sorted(sweeps["jit_compile"].astype(str)) == ["False", "False"]
    # each sweep beside its exact floor (dgdm_tf.bench.exact_floor), as are the top-down steps
    assert (sweeps["ratio_to_exact_floor"] > 0).all() and (sweeps["exact_floor_ms"] > 0).all()
    refine = csv[csv["benchmark"] == "refine_step"]
    assert len(refine) and (refine["ratio_to_exact_floor"] > 0).all()
    assert md.count("| ratio_to_floor | exact_floor_ms | ratio_to_exact_floor |") == 2
    # the smoke model's schedule projected to the full data set, from kernels measured here
    assert "## Projected wall time of `config/smoke.yaml`'s rows" in md
    from dgdm_tf.bench.scaling import SCALING_COLUMNS

    s = pd.read_csv(repo / "results" / "benchmarks" / "scaling.csv")
    assert set(SCALING_COLUMNS) <= set(s.columns)
    # smoke: batch sizes [8, 16] + side factor [1.0] + K factor [1.0] at batch 8, three
    # kernels (the pretraining sweep, the top-down sweep, the CNN step); the axes' curves
    # are tests/test_baselines_cnn.py's (test_benchmark_scaling_rows)
    assert len(s) == 3 * 4 and sorted(s["image_side"].unique()) == [28]
    assert sorted(s["benchmark"].unique()) == ["cnn_train_step", "pretrain_sweep", "topdown_sweep"]
    assert sorted(s["n_dict"].unique()) == [12] and sorted(s["batch_size"].unique()) == [8, 16]
    assert (s["images_per_s"] > 0).all()
    proj = pd.read_csv(repo / "results" / "benchmarks" / "projection.csv")
    assert set(proj["dataset"]) == {"mnist_smoke"}
    assert (proj["cpu_hours"] > 0).all() and (proj["gpu_hours"] > 0).all()
    assert "refinement sweep" in set(proj["kernel"]) and "SVM Gibbs iteration" in set(proj["kernel"])
    # the smoke config projects its own model: the top-down kernels are benchmark_refine's
    assert set(proj.loc[proj["kernel"] == "refinement sweep", "measured_at"]) == {"batch 4, benchmark_refine's"}
    # the same stages on 1, 8 and 64 nodes (smoke: the network's figures, no loopback run)
    clu = pd.read_csv(repo / "results" / "benchmarks" / "cluster.csv")
    assert sorted(clu["nodes"].unique()) == [1, 8, 64] and len(clu) == 3 * len(proj)
    assert "## Projected wall time on a cluster" in md and "hours on 8 nodes" in md
    from dgdm_tf.bench.cnn import CNN_COLUMNS

    c = pd.read_csv(repo / "results" / "benchmarks" / "cnn.csv")
    assert set(CNN_COLUMNS) <= set(c.columns) and len(c) == 2  # batch 16: step, inference
    assert (c["images_per_s"] > 0).all()




def read_report(path: Path) -> tuple[dict, str, set]:
    """A `snakemake --report` .zip: each result's entry (its category and subcategory
    added) by path, the front page's HTML, the names of the files the zip holds."""
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
        page = next(n for n in names if n.endswith("/report.html"))
        html = z.read(page).decode()
        folder = page.rsplit("/", 1)[0]

    def js(var: str):
        m = re.search(rf'<script id="{var}">\s*var {var} = (.*?);\s*</script>', html, re.S)
        return json.loads(m.group(1))

    results = js("results")
    for cat, subcats in js("categories").items():
        for sub, paths in subcats.items():
            for p in paths:
                results[p].update(category=cat, subcategory=sub)
    front = json.loads(re.search(r"var workflow_desc = (.*?);\n", html, re.S).group(1))
    return results, front, {n[len(folder) + 1:] for n in names}


def build_report(repo: Path, cfg: Path, out: Path) -> Path:
    """`snakemake --report out` (a .zip or a single .html) of the run in repo."""
    t0 = time.time()
    r = snakemake(repo, "--report", str(out), "--configfile", str(cfg), timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    print(f"{out.name}: {time.time() - t0:.1f} s")
    return out


@pytest.fixture(scope="module")
def smoke_report(smoke_run, tmp_path_factory) -> Path:
    """`snakemake --report report.zip` after the smoke run."""
    repo, cfg = smoke_run
    return build_report(repo, cfg, tmp_path_factory.mktemp("smoke_report") / "report.zip")


def test_smoke_report_holds_every_table_and_figure(smoke_run, smoke_report):
    """`snakemake --report` after the smoke run: every figure and both tables, each in
    its category with a caption that renders; the front page holds the MNIST table and
    the error-vs-time figure beside the chains' traces."""
    repo, cfg = smoke_run
    results, front, stored = read_report(smoke_report)

    produced = {p.relative_to(repo).as_posix() for p in (repo / "results").rglob("*.png")}
    produced |= {"results/tables.md", "results/benchmarks.md"}
    assert len(produced) > 20
    assert produced <= set(results), sorted(produced - set(results))
    for path in produced:
        entry = results[path]
        assert entry["data_uri"] in stored, path  # the file itself is in the zip
        assert len(entry["caption"]) > 100 and "system-message" not in entry["caption"], path
        assert "{{" not in entry["caption"], path
    cats = {p: (e["category"], e["subcategory"]) for p, e in results.items()}
    assert cats["results/tables.md"][0] == "1. Tables" == min(e["category"] for e in results.values())
    assert cats["results/mnist_smoke/figures/error_vs_time.png"] == ("1. Tables", "mnist_smoke")
    assert cats["results/mnist_smoke/figures/pretrain_layer2_trace.png"][0] == "3. Pretraining"
    assert cats["results/mnist_smoke/figures/generated.png"][0] == "4. Top-down model"
    assert cats["results/mnist_smoke/figures/confusion_supervised.png"][0] == "5. Supervised model"
    assert cats["results/benchmarks_scaling.png"][0] == "7. Benchmarks"
    assert {e["category"] for e in results.values()} == {
        "1. Tables", "2. Data", "3. Pretraining", "4. Top-down model", "5. Supervised model",
        "6. Baselines", "7. Benchmarks"}
    assert "Table 1" in results["results/tables.md"]["caption"]
    assert "Fig. 3" in results["results/mnist_smoke/figures/generated.png"]["caption"]

    # the front page: the MNIST table beside the paper's numbers, then the figures
    assert "system-message" not in front
    # the paper rows' labels end with what they ran (gamma_s, the read-out)
    row = re.search(r"<tr><td>Our pretrained model \+ SVM \(2 step\) \(([^<]*)\)</td>"
                    r"\s*<td>([^<]*)</td>\s*<td>([^<]*)</td>", front)
    assert row and row.group(3) == "1.42", front[:3000]
    assert "gamma_s per image and map; Algorithm 2" in row.group(1)
    md = (repo / "results/tables.md").read_text()
    assert f"| Our pretrained model + SVM (2 step) ({row.group(1)}) | {row.group(2)} | 1.42 |" in md
    traces = sorted(p.name for p in (repo / "results/mnist_smoke/figures").glob("*trace.png"))
    shown = re.findall(r'<img alt="([^"]+)"', front)
    assert shown == ["error_vs_time.png"] + traces, shown
    src = re.search(r'<img alt="refine_trace.png" src="data:image/png;base64,([^"]*)"', front)
    png = base64.b64decode(src.group(1), validate=True)
    assert png == (repo / "results/mnist_smoke/figures/refine_trace.png").read_bytes()


def _png(path: Path) -> tuple[tuple[int, int], int]:
    """A PNG's width and height, and the sum of its RGBA bytes."""
    from PIL import Image

    with Image.open(path) as im:
        return im.size, int(np.asarray(im.convert("RGBA"), dtype=np.int64).sum())


@pytest.fixture(scope="module")
def chromium() -> Path:
    """Debian's chromium. Missing, the browser tests skip; when CI is set, they fail.
    (Module-scoped and first in a test's arguments, it is checked before the smoke run.)"""
    if not CHROMIUM.exists():
        if os.environ.get("CI", "").lower() not in ("", "0", "false"):
            pytest.fail(f"{CHROMIUM} is missing under CI: .ci/run installs Debian's chromium")
        pytest.skip(f"{CHROMIUM} is missing: `apt-get install chromium` (Debian) to run it")
    return CHROMIUM


@pytest.mark.parametrize("kind", ["html", "zip"])
def test_smoke_report_shows_every_image_in_chromium(chromium, smoke_run, smoke_report, kind,
                                                    tmp_path):
    """The smoke report opened in headless Chromium (Debian's package), as the single
    .html and as the unpacked .zip: on the front page and in each category (every
    result as its eye button shows it, every caption) each image has loaded, with a
    natural width above zero and its file's size, and its pixels are the file's where
    the browser lets the page read them back (all but the .zip's files, which come from
    file://). The front page's figures were once percent-encoded data URIs wrapped over
    lines: Chromium kept the line breaks among the bytes and showed broken images."""
    repo, cfg = smoke_run
    if kind == "html":
        page = build_report(repo, cfg, tmp_path / "report.html")
    else:
        with zipfile.ZipFile(smoke_report) as z:
            z.extractall(tmp_path / "unzipped")
        page = next((tmp_path / "unzipped").rglob("report.html"))
    t0 = time.time()
    with Chromium(tmp_path / "chromium-profile") as browser:
        views = report_views(browser, page, screenshot=tmp_path / "front_page.png")
    print(f"chromium, {kind}: {len(views)} views in {time.time() - t0:.1f} s; "
          f"the front page: {tmp_path / 'front_page.png'}")

    broken = [(v["view"], v["path"], i["alt"] or i["src"]) for v in views for i in v["images"]
              if i["width"] == 0]
    assert not broken, "broken (view, result, image):\n" + "\n".join(map(str, broken))

    def matches(image: dict, file: Path, inlined: bool) -> bool:
        (w, h), pixel_sum = _png(file)
        if (image["width"], image["height"]) != (w, h):
            return False
        if image["pixel_sum"] is None:
            return not inlined
        return abs(image["pixel_sum"] - pixel_sum) <= 1e-3 * pixel_sum

    # the front page: the error-vs-time figure and the traces, inlined
    figures = repo / "results/mnist_smoke/figures"
    front = [i for i in views[0]["images"] if i["alt"]]  # the logo has no alt text
    traces = sorted(p.name for p in figures.glob("*trace.png"))
    assert [i["alt"] for i in front] == ["error_vs_time.png"] + traces
    assert [i["alt"] for i in front if not matches(i, figures / i["alt"], True)] == []

    # every result shown, every caption opened; each image result is its file
    results, _, _ = read_report(smoke_report)
    assert {v["path"] for v in views if v["view"].endswith(": caption")} == set(results)
    shown = {v["path"]: [i for i in v["images"] if i["is_result"]]
             for v in views if v["view"].endswith(": result")}
    pngs = {p for p in results if p.endswith(".png")}
    assert pngs <= set(shown), sorted(pngs - set(shown))
    assert all(len(shown[p]) == 1 for p in pngs), {p: len(shown[p]) for p in pngs}
    wrong = [p for p in pngs if not matches(shown[p][0], repo / p, kind == "html")]
    assert wrong == [], wrong
