#!/usr/bin/env python3
"""`snakemake --lint` on the workflow, failing on any lint but the allowed one.

Allowed: "Specify a conda environment or container for each rule." It stays until an
environment can be built and tested on the project's machines (no conda channel, no
container runtime). Anything else (functions beside rules, absolute paths, missing log
directives, ...) fails, and so does a workflow that cannot be linted at all.

Usage: python .ci/lint.py [snakemake arguments, e.g. --configfile config/paper.yaml]
Run from anywhere; it lints the repository this file belongs to. tests/test_lint.py
runs it too, so `python -m pytest` covers it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ALLOWED = "Specify a conda environment or container for each rule."

_HEADER = re.compile(r"^Lints for (?P<target>.+):$")
_ITEM = re.compile(r"^ {4}\* (?P<title>.+):$")


def parse_text(text: str) -> list[tuple[str, str]]:
    """(target, title) of every lint in `snakemake --lint` text output: a "Lints for
    <rule or snakefile>:" header, then one "    * <title>:" line per lint, each followed
    by its indented explanation."""
    out, target = [], None
    for line in text.splitlines():
        if m := _HEADER.match(line):
            target = m["target"]
        elif (m := _ITEM.match(line)) and target is not None:
            out.append((target, m["title"]))
    return out


def parse_json(text: str) -> list[tuple[str, str]] | None:
    """The same from `snakemake --lint json`, or None when the text is not that JSON
    (Snakemake 9.27's command line accepts `--lint json` but prints text)."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or not {"snakefiles", "rules"} <= set(data):
        return None
    return [(json.dumps(entry["for"]), lint["title"])
            for kind in ("snakefiles", "rules") for entry in data[kind]
            for lint in entry["lints"]]


def check(returncode: int, stdout: str, stderr: str) -> tuple[list[tuple[str, str]], list[str]]:
    """The lints found and the problems: every lint other than ALLOWED, or output that
    is neither a lint list nor Snakemake's all-clear."""
    lints = parse_json(stdout)
    if lints is None:
        lints = parse_text(stdout + "\n" + stderr)
    problems = [f"{target}: {title}" for target, title in lints if title != ALLOWED]
    if returncode != 0 and not lints:
        problems.append(f"snakemake --lint failed (exit {returncode}) without printing lints:\n"
                        + (stdout + stderr)[-3000:])
    if returncode == 0 and not lints and "Congratulations" not in stdout + stderr:
        problems.append("snakemake --lint printed neither lints nor its all-clear:\n"
                        + (stdout + stderr)[-3000:])
    return lints, problems


def main(argv: list[str]) -> int:
    r = subprocess.run([sys.executable, "-m", "snakemake", "--lint", "json",
                        "--directory", str(REPO), "--snakefile", str(REPO / "Snakefile"),
                        *argv], capture_output=True, text=True, cwd=REPO)
    lints, problems = check(r.returncode, r.stdout, r.stderr)
    counts = Counter(title for _, title in lints)
    summary = ", ".join(f"{n} x {title!r}" for title, n in counts.most_common()) or "none"
    print(f"snakemake --lint: {len(lints)} lint(s): {summary}")
    if problems:
        print("lints other than the conda / container one (see .ci/lint.py):", file=sys.stderr)
        for p in problems:
            print(f"  {p}", file=sys.stderr)
        return 1
    print(f"snakemake --lint: clean apart from {ALLOWED!r} (allowed until an environment "
          "can be built and tested on these machines)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
