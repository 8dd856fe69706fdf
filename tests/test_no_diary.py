"""No diary in the code: README.md, docs/design.md, config/*.yaml and src/ carry no ISO
date and no commit hash.

Those files describe what is true now. A date or a commit says when something was
measured, and the measurement belongs on a findings page (docs/findings/) or in the
generated results, where it can go out of date without misleading a reader of the code.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

ISO_DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
# A commit-like word: 7 to 40 lowercase hex characters with at least one digit and one
# letter, standing alone. Hex literals (0x5F3) are not words of their own, and plain
# numbers or words like "deadbeef" lack a letter or a digit.
COMMIT = re.compile(r"(?<![0-9A-Za-z_])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}"
                    r"(?![0-9A-Za-z_])")
# A checksum the code verifies is named as one on its line; it is data, not a commit.
CHECKSUM = re.compile(r"\b(md5|sha1|sha256|checksum)\b", re.I)

TEXT_SUFFIXES = {".py", ".md", ".txt", ".yaml", ".yml", ".toml", ".cfg", ".json", ".rst"}


def scanned_files() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "docs" / "design.md"]
    files += sorted((ROOT / "config").glob("*.yaml"))
    files += sorted(p for p in (ROOT / "src").rglob("*")
                    if p.is_file() and p.suffix in TEXT_SUFFIXES and "__pycache__" not in p.parts)
    return files


def diary_entries(text: str) -> list[tuple[int, str]]:
    """(line number, word) of every ISO date and commit-like word in text."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        found += [(number, m.group()) for m in ISO_DATE.finditer(line)]
        if not CHECKSUM.search(line):
            found += [(number, m.group()) for m in COMMIT.finditer(line)]
    return found


def test_the_patterns_catch_dates_and_commits_only():
    assert diary_entries("measured 2026-11-28 at e1d4803") == [(1, "2026-11-28"), (1, "e1d4803")]
    assert diary_entries("`3547be1`, (6950b0f)") == [(1, "3547be1"), (1, "6950b0f")]
    assert diary_entries("SALTS = {'a': 0x5F3, 'b': 0xdee9a7c}") == []
    assert diary_entries("deadbeef 1234567 1.0e-6 batch_size=2000 cafe") == []
    assert diary_entries("md5 67b4f42ca05d46448c6bb8ecd2220f6d") == []


@pytest.mark.parametrize("path", scanned_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_date_or_commit(path):
    found = diary_entries(path.read_text(encoding="utf-8"))
    assert not found, (f"{path.relative_to(ROOT)}: " + ", ".join(f"line {n}: {w}" for n, w in found)
                       + " (move the measurement to docs/findings/ or the generated results)")
