"""Pointers into the docs resolve: every `docs/findings/<name>.md` that the code, the
workflow, the experiments, the configs or README.md cite exists, and every section cited
as `docs/design.md, "<Section>"` or `docs/design.md ("<Section>")` is a heading of
docs/design.md.

Measurements moved from design.md's dated sections to one page per finding
(docs/findings/); a pointer to a section that is gone sends the reader nowhere. A cited
section may span lines (a YAML folded description, a comment block, an rst caption):
each file is read as one text with its line breaks and comment markers folded away.
"""

from __future__ import annotations

import bisect
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DESIGN = ROOT / "docs" / "design.md"
FINDINGS = ROOT / "docs" / "findings"

TEXT_SUFFIXES = {".py", ".md", ".txt", ".yaml", ".yml", ".toml", ".cfg", ".json", ".rst",
                 ".smk"}

FINDINGS_POINTER = re.compile(r"docs/findings/([\w-]+\.md)")
# docs/design.md, then optionally a Markdown link target, RST backticks, and a comma or an
# opening parenthesis, then the first quoted section; further sections follow after commas.
QUOTE = r'\\?["\u201c]([^"\u201c\u201d\\]+)\\?["\u201d]'
DESIGN_POINTER = re.compile(r"docs/design\.md(?:\]\([^)\s]*\))?`{0,2}\s*(?:,\s*|\(\s*)?" + QUOTE)
MORE_SECTIONS = re.compile(r"\s*,\s*" + QUOTE)
# A line's leading indentation and comment marker (#, #:, ##), folded away when joining.
LEAD = re.compile(r"^\s*(?:#+:?\s?)?\s*")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*$", re.M)
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def scanned_files() -> list[Path]:
    files = [ROOT / "README.md"]
    for top in (ROOT / "workflow", ROOT / "src" / "dgdm_tf", ROOT / "experiments", ROOT / "config"):
        files += sorted(p for p in top.rglob("*")
                        if p.is_file() and p.suffix in TEXT_SUFFIXES
                        and "__pycache__" not in p.parts and not any(
                            part.endswith(".egg-info") for part in p.parts))
    return files


def joined(text: str) -> tuple[str, list[int]]:
    """The text as one line (indentation and comment markers dropped, lines joined by a
    space) and the offset at which each original line starts in it."""
    parts, starts, offset = [], [], 0
    for line in text.splitlines():
        line = LEAD.sub("", line)
        starts.append(offset)
        parts.append(line)
        offset += len(line) + 1
    return " ".join(parts), starts


def _squash(s: str) -> str:
    return " ".join(s.split())


def sections_of(markdown: str) -> set[str]:
    """A Markdown page's headings outside code blocks, each also without a parenthesised
    or colon-separated tail ("Pretraining in batches (`pretrain.batch_size`)" is also
    "Pretraining in batches")."""
    names = set()
    for heading in HEADING.findall(FENCE.sub("", markdown)):
        heading = _squash(heading)
        names |= {heading, heading.split(" (")[0].strip(), heading.split(":")[0].strip()}
    return names


def design_sections() -> set[str]:
    return sections_of(DESIGN.read_text(encoding="utf-8"))


def pointers(text: str) -> list[tuple[int, str, str]]:
    """(line, kind, target) of every findings page and design.md section text cites."""
    flat, starts = joined(text)
    line = lambda pos: bisect.bisect_right(starts, pos)  # noqa: E731
    found = [(line(m.start()), "findings", m.group(1)) for m in FINDINGS_POINTER.finditer(flat)]
    for m in DESIGN_POINTER.finditer(flat):
        found.append((line(m.start()), "design", _squash(m.group(1))))
        end = m.end()
        while more := MORE_SECTIONS.match(flat, end):
            found.append((line(m.start()), "design", _squash(more.group(1))))
            end = more.end()
    return found


def broken(text: str) -> list[str]:
    sections = design_sections()
    out = []
    for number, kind, target in pointers(text):
        if kind == "findings" and not (FINDINGS / target).is_file():
            out.append(f"line {number}: docs/findings/{target} does not exist")
        elif kind == "design" and target not in sections:
            out.append(f'line {number}: docs/design.md has no section "{target}"')
    return out


def test_the_patterns_find_each_form():
    text = ('a (docs/design.md, "Mixing") b\n'
            '# c docs/design.md ("Seeding") and\n'
            '#   docs/design.md, "The SVM\'s EM on\n'
            '#   wide features"; d\n'
            "``docs/design.md``,\n\"Averaging chains\".\n"
            'e (docs/design.md, "One", "Two"; docs/scaling.md, "Three")\n'
            '"of it, docs/design.md, \\"Where the mass is\\")"\n'
            "[docs/design.md](docs/design.md), \"What a\nrun writes\"\n"
            "see docs/design.md; docs/findings/x_y.md and docs/findings/README.md.\n")
    got = {(kind, target) for _, kind, target in pointers(text)}
    assert got == {("findings", "x_y.md"), ("findings", "README.md"), ("design", "Mixing"),
                   ("design", "Seeding"), ("design", "The SVM's EM on wide features"),
                   ("design", "Averaging chains"), ("design", "One"), ("design", "Two"),
                   ("design", "Where the mass is"), ("design", "What a run writes")}
    lines = {target: number for number, _, target in pointers(text)}
    assert lines["Mixing"] == 1 and lines["The SVM's EM on wide features"] == 3
    assert lines["Averaging chains"] == 5 and lines["What a run writes"] == 9
    assert lines["x_y.md"] == 11


def test_headings_outside_code_blocks_and_their_short_forms():
    page = ("# Title\n\n## Layout\n\n### Pretraining in batches (`pretrain.batch_size`)\n"
            "```python\n# not a heading\n```\n### Seeding: one seed per rule\n")
    assert sections_of(page) == {"Title", "Layout", "Pretraining in batches (`pretrain.batch_size`)",
                                 "Pretraining in batches", "Seeding: one seed per rule", "Seeding"}


@pytest.mark.parametrize("path", scanned_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_pointers_resolve(path):
    problems = broken(path.read_text(encoding="utf-8"))
    assert not problems, f"{path.relative_to(ROOT)}: " + "; ".join(problems)
