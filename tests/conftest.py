"""Shared test setup: the package from src/ even without an install, quiet TF logs, and
the heaviest test files first."""

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
SRC = Path(__file__).resolve().parents[1] / "src"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))

from dgdm_tf.core.compiled import clear_builder_caches  # noqa: E402  (after SRC is on the path)

# Test files by the time they take, heaviest first (full run on 2 cores, 2026-11-23:
# 310, 280, 130, 130, 100, 85, 75, 75, 55 s; the rest under 40 s each). `pytest -n 2
# --dist loadfile --no-loadscope-reorder` (pyproject.toml) hands whole files to whichever
# worker is free, in collection order; longest first keeps both workers busy to the end.
# xdist's own order (most tests first) left the two single-test end-to-end workflow files,
# about 4 minutes together, for last. Only the order changes, never what runs.
HEAVIEST_FIRST = (
    "test_workflow.py", "test_topdown_sweep.py", "test_supervised_joint_svm.py", "test_workflow_datasets.py",
    "test_workflow_scale.py", "test_workflow_config.py", "test_workflow_shards.py",
    "test_topdown_refine_distributed.py", "test_experiments.py", "test_topdown_chain.py", "test_pretrain_batched.py",
    "test_bench_mcem.py",
    "test_mcem_stochastic.py", "test_data.py",
)


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


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(HEAVIEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable within a file
