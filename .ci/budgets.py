#!/usr/bin/env python3
"""The test suite's time against its budgets: each group's summed item seconds (pytest's
``--durations=0`` report, as .ci/run writes it) beside the budget the table at the head of
docs/benchmarks/test_suite.md gives it, with the groups over budget named.

A group is an xdist group (a test file, or ``tiny_run``: every test that reads the tiny
run); the table's last row, ``other``, budgets every group it does not name. The suite
runs on two workers, so its wall time is about half the summed seconds; the budgets sum
to what 25 minutes of `.ci/run` allows. Machines differ by up to 2.5x on one commit, so
this prints and never fails: the change that takes a group over its budget pays for it.

Usage: python .ci/budgets.py .ci/durations.txt [docs/benchmarks/test_suite.md]
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ITEM = re.compile(r"^\s*([\d.]+)s (?:setup|call|teardown)\s+(\S+)")
BUDGET_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|[^|]*\|\s*(\d+)\s*\|")


def group_seconds(durations: str) -> Counter:
    """Summed seconds by xdist group (the ``@group`` pytest-xdist appends to each item),
    read from pytest's "slowest durations" section only (a log may repeat some lines)."""
    out = Counter()
    section = durations.split("slowest durations", 1)[-1].split("\n=", 1)[0]
    for line in section.splitlines():
        m = ITEM.match(line)
        if m:
            nodeid = m[2]
            group = nodeid.rsplit("@", 1)[1] if "@" in nodeid else nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
            out[group] += float(m[1])
    return out


def budgets(page: str) -> dict[str, int]:
    """The budget table's rows: ``| `group` | what | budget s | ...``."""
    return {m[1]: int(m[2]) for line in page.splitlines() if (m := BUDGET_ROW.match(line))}


def report(seconds: Counter, budget: dict[str, int]) -> tuple[list[str], list[str]]:
    """The table's lines (group, summed s, budget s) and the groups over budget."""
    if "other" not in budget:
        raise SystemExit("the budget table has no `other` row: every group needs a budget")
    named = {g: s for g, s in seconds.items() if g in budget}
    named["other"] = sum(s for g, s in seconds.items() if g not in budget)
    lines = [f"{'group':40s} {'summed s':>9s} {'budget s':>9s}"]
    over = []
    for g, b in budget.items():
        s = named.get(g, 0.0)
        flag = "  OVER" if s > b else ""
        lines.append(f"{g:40s} {s:9.0f} {b:9d}{flag}")
        if s > b:
            over.append(g)
    lines.append(f"{'all':40s} {sum(seconds.values()):9.0f} {sum(budget.values()):9d}")
    return lines, over


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    durations = Path(argv[0]).read_text()
    page = Path(argv[1] if len(argv) > 1 else ROOT / "docs/benchmarks/test_suite.md").read_text()
    seconds = group_seconds(durations)
    if not seconds:
        print(f"budgets: no item durations in {argv[0]}", file=sys.stderr)
        return 0
    lines, over = report(seconds, budgets(page))
    print("\n".join(lines))
    if over:
        print(f"budgets: over budget: {', '.join(over)} (docs/benchmarks/test_suite.md)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
