""".ci/budgets.py: pytest's durations summed by xdist group against the budget table at
the head of docs/benchmarks/test_suite.md, the groups over budget named."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("ci_budgets", ROOT / ".ci" / "budgets.py")
budgets = importlib.util.module_from_spec(spec)
spec.loader.exec_module(budgets)

DURATIONS = """============================== slowest durations ===============================
300.50s setup    tests/test_workflow.py::test_smoke_end_to_end_tables@test_workflow.py
200.00s call     tests/test_workflow_kills.py::test_random_kills@tiny_run
10.25s call     tests/test_a.py::test_one@test_a.py
4.75s call     tests/test_b.py::test_two@test_b.py
0.50s teardown tests/test_b.py::test_two@test_b.py
========== 5 passed in 400.00s ==========
"""
PAGE = """# The test suite's time

| group | what | budget (s) | measured (s) |
|---|---|---|---|
| `tiny_run` | the tiny run | 150 | 200 |
| `test_workflow.py` | the smoke run | 400 | 300 |
| `other` | every other group | 20 | 15 |
"""


def test_groups_are_summed_and_those_over_budget_named():
    seconds = budgets.group_seconds(DURATIONS)
    assert seconds == {"test_workflow.py": 300.5, "tiny_run": 200.0, "test_a.py": 10.25, "test_b.py": 5.25}
    table = budgets.budgets(PAGE)
    assert table == {"tiny_run": 150, "test_workflow.py": 400, "other": 20}
    lines, over = budgets.report(seconds, table)
    assert over == ["tiny_run"]  # other: 10.25 + 5.25 = 15.5 <= 20
    assert any(line.startswith("tiny_run") and line.endswith("OVER") for line in lines)
    assert lines[-1].split() == ["all", "516", "570"]


def test_a_table_without_other_is_refused():
    with pytest.raises(SystemExit, match="no `other` row"):
        budgets.report(budgets.group_seconds(DURATIONS), {"tiny_run": 10})


def test_the_page_has_a_budget_for_every_group_it_names():
    table = budgets.budgets((ROOT / "docs" / "benchmarks" / "test_suite.md").read_text())
    assert "other" in table and len(table) >= 5
    for group in table:
        assert group in ("other", "tiny_run") or (ROOT / "tests" / group).exists(), group
