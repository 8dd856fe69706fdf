"""docs/findings/: every page opens with the fixed head, and the index lists every page.

The head (docs/findings/README.md says why): the question, the answer in one line, the
status (current, or superseded by another page), the workflow target that makes the
inputs, the command, the result table, the figure and the date, in that order.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

FINDINGS = Path(__file__).resolve().parents[1] / "docs" / "findings"
FIELDS = ["Question", "Answer", "Status", "Target", "Command", "Result", "Figure", "Date"]
FIELD = re.compile(r"^- \*\*(\w+):\*\*\s*(.*)$", re.M)
INDEX_LINK = re.compile(r"^\| \[[^\]]+\]\(([\w.-]+\.md)\) \|", re.M)
SUPERSEDED = re.compile(r"^superseded by \[[^\]]+\]\(([\w.-]+\.md)\)$")

PAGES = sorted(p for p in FINDINGS.glob("*.md") if p.name != "README.md")


def indexed() -> list[str]:
    return INDEX_LINK.findall((FINDINGS / "README.md").read_text())


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_page_opens_with_the_fixed_head(page):
    text = page.read_text()
    head = text.split("\n## ", 1)[0]
    fields = FIELD.findall(head)
    assert [name for name, _ in fields] == FIELDS, f"{page.name}: head fields {fields}"
    values = dict(fields)
    assert values["Question"].endswith("?"), page.name
    assert values["Status"] == "current" or SUPERSEDED.match(values["Status"]), page.name
    superseded = SUPERSEDED.match(values["Status"])
    if superseded:
        assert superseded.group(1) in indexed(), f"{page.name}: superseded by an unlisted page"
    assert re.search(r"\b20\d\d-\d\d-\d\d\b", values["Date"]), f"{page.name}: no date"
    result = head.split("- **Result:**", 1)[1].split("- **Figure:**", 1)[0]
    assert re.search(r"^\|.*\|$", result, re.M), f"{page.name}: no result table in the head"


def test_the_index_lists_every_page_once():
    links = indexed()
    assert len(links) == len(set(links))
    missing = {p.name for p in PAGES} - set(links)
    assert not missing, f"pages missing from docs/findings/README.md: {sorted(missing)}"
