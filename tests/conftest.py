"""Shared test setup: the package from src/ even without an install, quiet TF logs, the
two tiers, each file's tests on one worker, the heaviest files first, and the default
tier's one end-to-end workflow run.

Two tiers (README, Quickstart): ``python -m pytest`` runs the default tier, every test not
marked ``slow``; ``python -m pytest --slow`` runs both tiers (``.ci/run`` does). The slow
tier holds the smoke config end to end, the mock datasets, the multi-process chains, the
full-size Geweke tests and the recoveries; the default tier keeps each conditional's
Geweke test at a reduced size whose power is stated (docs/findings/geweke_power.md)."""

import os
import sys
import time
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Two pytest-xdist workers on two cores: TensorFlow's default thread pools (one thread a
# core each) in both workers oversubscribe the cores, and its spinning threads then take
# turns with the other worker's work. One thread a worker ran two concurrent Geweke tests
# in 73 s against 97 s (docs/benchmarks/test_suite.md, 2026-12-02); the workflow runs of
# the tests take tests/_workflow.CORES.
from _workflow import SHARED_CORES  # noqa: E402  (numpy and yaml only: before TensorFlow)

if SHARED_CORES:
    for _var in ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS"):
        os.environ.setdefault(_var, "1")
SRC = Path(__file__).resolve().parents[1] / "src"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))

from dgdm_tf.core.compiled import clear_builder_caches  # noqa: E402  (after SRC is on the path)

# Test files by the time they take, heaviest first. `pytest -n 2 --dist loadgroup
# --no-loadscope-reorder` (pyproject.toml) hands whole groups (a file, or the files that
# share a model: `xdist_group`) to whichever worker is free, in collection order; longest
# first keeps both workers busy to the end. Only the order changes, never what runs.
HEAVIEST_FIRST = (
    "test_workflow.py", "test_workflow_tiny.py", "test_topdown_sweep.py", "test_supervised_joint_svm.py",
    "test_workflow_datasets.py", "test_workflow_scale.py", "test_topdown_refine_distributed.py",
    "test_experiments.py", "test_topdown_chain.py", "test_pretrain_batched.py",
    "test_mcem_stochastic.py", "test_data.py",
)

TINY_RUN = "tiny_run"  # the xdist group of every test that reads the `tiny_run` fixture


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", default=False,
                     help="also run the slow tier (tests marked slow): the smoke config end to end "
                          "with its benchmarks and report, the mock datasets, the multi-process "
                          "chains, the full-size Geweke tests and the recoveries")


@pytest.fixture(autouse=True)
def _fresh_traces_around_retrace(request):
    """A test marked ``retrace`` patches what a compiled step calls or reads while it is
    traced: the cached traces (dgdm_tf.core.compiled.cached_builder) are emptied before
    it, so it traces its patch, and after it, so no later test runs the patched trace.
    Other tests share the process's traces."""
    marked = request.node.get_closest_marker("retrace") is not None
    if marked:
        clear_builder_caches()
    yield
    if marked:
        clear_builder_caches()


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config, items):
    if not config.getoption("--slow"):
        slow = [item for item in items if item.get_closest_marker("slow")]
        if slow:
            config.hook.pytest_deselected(items=slow)
            items[:] = [item for item in items if not item.get_closest_marker("slow")]
    for item in items:  # a file is a group unless its tests name a group of their own
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.path.name))
    rank = {name: i for i, name in enumerate(HEAVIEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable within a file


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """The default tier's end-to-end run: ``results/tables.md`` of the tiny config
    (tests/_workflow.py TINY_BLOCK: the Gibbs rows and the CNN) in a copy of the
    repository, once per worker; every test that takes it is in group ``tiny_run``, so
    once in all. Returns (repo, config path). Tests that change files of the run work
    on a copy (``tiny_copy``)."""
    from _workflow import CORES, copy_repo, snakemake, tiny_config

    repo = copy_repo(tmp_path_factory.mktemp("tiny_repo"))
    cfg = tiny_config(tmp_path_factory.mktemp("tiny_data"))
    t0 = time.time()
    r = snakemake(repo, "--cores", CORES, "results/tables.md", "--configfile", str(cfg), timeout=1800)
    logs = "\n".join(f"== {p}\n{p.read_text()[-3000:]}"
                     for p in sorted((repo / "results" / "logs").rglob("*.log")))
    assert r.returncode == 0, r.stdout[-5000:] + r.stderr[-5000:] + logs
    print(f"tiny workflow: {time.time() - t0:.1f} s")
    return repo, cfg
