"""docs/findings/: every page opens with the fixed head, and the index lists every page.

The head (docs/findings/README.md says why): the question, the answer in one line, the
status, the workflow target that makes the inputs, the command, the result table, the
figure and the date, in that order. Every page says what holds now: its status is
current, its answer short enough to read at a glance, and its only section after the
head is its Details (earlier measurements fold there, not into sections appended one
after another). A superseded page leaves docs/findings/ for the index's archive list,
which names it in git. The index's cells stay short, and it links the glossary.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

FINDINGS = Path(__file__).resolve().parents[1] / "docs" / "findings"
FIELDS = ["Question", "Answer", "Status", "Target", "Command", "Result", "Figure", "Date"]
FIELD = re.compile(r"^- \*\*(\w+):\*\*\s*(.*)$", re.M)
INDEX_LINK = re.compile(r"^\| \[[^\]]+\]\(([\w.-]+\.md)\) \|", re.M)
ARCHIVED = re.compile(r"^- `([\w.-]+)`, superseded by \[[^\]]+\]\(([\w.-]+\.md)\): "
                      r"`git show ([0-9a-f]{7,40}):docs/findings/([\w.-]+\.md)`$", re.M)
#: the longest Answer of a head, and the longest cell of the index's tables (characters)
ANSWER_MAX, CELL_MAX = 600, 300

PAGES = sorted(p for p in FINDINGS.glob("*.md") if p.name not in ("README.md", "glossary.md"))


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
    assert values["Status"] == "current", (
        f"{page.name}: a superseded page leaves docs/findings/ for the index's archive list")
    assert len(values["Answer"]) <= ANSWER_MAX, (
        f"{page.name}: Answer of {len(values['Answer'])} characters; say what holds now in "
        f"at most {ANSWER_MAX} and move the rest to Details")
    assert re.search(r"\b20\d\d-\d\d-\d\d\b", values["Date"]), f"{page.name}: no date"
    result = head.split("- **Result:**", 1)[1].split("- **Figure:**", 1)[0]
    assert re.search(r"^\|.*\|$", result, re.M), f"{page.name}: no result table in the head"
    sections = re.findall(r"^## (.*)$", text, re.M)
    assert sections in ([], ["Details"]), (
        f"{page.name}: sections {sections}; fold later measurements into the head and Details")


def test_the_index_lists_every_page_once():
    links = indexed()
    assert len(links) == len(set(links))
    missing = {p.name for p in PAGES} - set(links)
    assert not missing, f"pages missing from docs/findings/README.md: {sorted(missing)}"


def test_the_index_cells_are_short_and_it_links_the_glossary():
    index = (FINDINGS / "README.md").read_text()
    assert "(glossary.md)" in index and (FINDINGS / "glossary.md").is_file()
    for line in index.splitlines():
        if line.startswith("| ["):
            long = [c.strip()[:60] for c in line.strip("|").split("|") if len(c.strip()) > CELL_MAX]
            assert not long, f"index cells over {CELL_MAX} characters: {long}"


def test_the_archive_names_each_superseded_page_in_git():
    index = (FINDINGS / "README.md").read_text()
    archive = index.split("\n## Archive\n", 1)
    assert len(archive) == 2 and "\n## " not in archive[1], "the archive is the index's last section"
    entries = ARCHIVED.findall(archive[1])
    assert entries, "no archive entries"
    git = shutil.which("git") and subprocess.run(
        ["git", "rev-parse", "--git-dir"], cwd=FINDINGS, capture_output=True).returncode == 0
    for name, successor, commit, path in entries:
        assert path == f"{name}.md" and not (FINDINGS / path).exists(), name
        assert successor in indexed(), f"{name}: superseded by an unlisted page {successor}"
        if git:  # a shallow clone may lack the commit: then only the form is checked
            has = subprocess.run(["git", "cat-file", "-e", commit], cwd=FINDINGS,
                                 capture_output=True).returncode == 0
            if has:
                found = subprocess.run(["git", "cat-file", "-e", f"{commit}:docs/findings/{path}"],
                                       cwd=FINDINGS, capture_output=True).returncode == 0
                assert found, f"{commit} has no docs/findings/{path}"
