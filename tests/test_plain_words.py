"""Words a reader can resolve and commands anyone can rerun.

- No process word: "issue N" or "stop N" names a tracker entry or a session that a reader
  of the repository cannot open. Name the finding page, the commit or the thing itself.
  Checked in README.md, docs/, config/, src/, experiments/, workflow/ and profiles/.
- No absolute path of the machine that ran a command (/work/..., /tmp/..., /root/...,
  /home/...) in README.md, docs/ or experiments/: a command names its folders by
  placeholders (`<clone>`, `<run>`, `<runs>`, `<out>`; docs/findings/glossary.md says how
  to make them) or by paths inside the repository.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEXT_SUFFIXES = {".py", ".md", ".txt", ".yaml", ".yml", ".toml", ".cfg", ".json", ".rst",
                 ".smk", ".sh", ".conf"}

PROCESS_WORD = re.compile(r"\b[Ii]ssue [0-9]+|\b[Ss]top [0-9]+")
MACHINE_PATH = re.compile(r"(?<![\w.<>~-])/(?:work|tmp|root|home)/")


def files_under(*tops: str, suffixes=TEXT_SUFFIXES) -> list[Path]:
    out = []
    for top in tops:
        path = ROOT / top
        if path.is_file():
            out.append(path)
            continue
        out += sorted(p for p in path.rglob("*")
                      if p.is_file() and p.suffix in suffixes and "__pycache__" not in p.parts
                      and not any(part.endswith(".egg-info") for part in p.parts))
    return out


def hits(pattern: re.Pattern, text: str) -> list[str]:
    return [f"line {n}: {m.group()!r}" for n, line in enumerate(text.splitlines(), 1)
            for m in pattern.finditer(line)]


def test_the_patterns():
    assert hits(PROCESS_WORD, "as issue 17 asks; at stop 60\nIssue 5, Stop 3") == [
        "line 1: 'issue 17'", "line 1: 'stop 60'", "line 2: 'Issue 5'", "line 2: 'Stop 3'"]
    assert hits(PROCESS_WORD, "the issue of speed; it stops 3 times; tissue 3; nonstop 4") == []
    assert len(hits(MACHINE_PATH, "--out /tmp/gen and /work/longruns/x, (/home/u) `/root/a`")) == 4
    assert hits(MACHINE_PATH, "--out <runs>/tmp/x, results/tmp/a, ../work/b, data/raw/home/") == []


@pytest.mark.parametrize("path", files_under("README.md", "docs", "config", "src", "experiments",
                                             "workflow", "profiles"),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_no_process_words(path):
    found = hits(PROCESS_WORD, path.read_text(encoding="utf-8", errors="replace"))
    assert not found, (f"{path.relative_to(ROOT)}: " + ", ".join(found)
                       + " (name the finding page, the commit or the thing itself)")


@pytest.mark.parametrize("path", files_under("README.md", "docs", "experiments"),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_no_machine_paths(path):
    found = hits(MACHINE_PATH, path.read_text(encoding="utf-8", errors="replace"))
    assert not found, (f"{path.relative_to(ROOT)}: " + ", ".join(found)
                       + " (use a placeholder: <clone>, <run>, <runs>, <out>)")
