"""The default run's figures come from one place: docs/benchmarks/default_run.json (a
default run's results/rows.json, rule tables, with its source). README.md's account of
the reproduction, the header of config/config.yaml and the heads of the findings pages
and of docs/benchmarks/default_runs.md quote rows of that run; every quote must equal
the file.

A quote is a row's name followed by its test error, "pretrained + SVM 5.36 %" (and
"(train 1.86 %)"), or by its paired difference from pretrained + SVM,
"unsupervised + SVM +0.20 ± 0.28 points (p 0.52)". In README.md the claims table's
Table 1 rows are read cell by cell. In a findings head only sentences that name "the
default run" are read: other sentences quote probes on other images.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "docs" / "benchmarks" / "default_run.json"

#: how the docs name each row, and the method of rows.json it is
NAMES = {r"pretrained \+ SVM": "pretrained_svm", r"unsupervised \+ SVM": "unsupervised_svm",
         r"supervised(?: model)?": "supervised", r"block posteriors \+ SVM": "pretrained_block_svm",
         r"reference(?: row)?": "encoder_svm", r"CNN": "cnn"}
NAME = "|".join(f"(?:{n})" for n in NAMES)
ERROR = re.compile(rf"\b(?<!un)({NAME})\s+(\d+\.\d+)\s*%(?:\s*\(train (\d+\.\d+)\s*%\))?")
PAIRED = re.compile(rf"\b(?<!un)({NAME})\s+([+-]\d+\.\d+)\s*±\s*(\d+\.\d+)(?:\s*points)?\s*"
                    r"\(p (\d+(?:\.\d+)?(?:e-?\d+)?)\)")
CELL_PAIRED = re.compile(r"\(([+-]\d+\.\d+)\s*±\s*(\d+\.\d+),\s*p (\d+(?:\.\d+)?)\)")


def method_of(name: str) -> str:
    return next(m for n, m in NAMES.items() if re.fullmatch(n, name))


def rows() -> dict:
    return json.loads(SOURCE.read_text())["datasets"]["mnist"]


def same(quoted: str, value) -> bool:
    return value is not None and abs(float(quoted) - float(value)) < 1e-9


def check_text(text: str, where: str, table: dict) -> tuple[list[str], set[str]]:
    """The quotes in text that differ from table, and the methods text quotes."""
    bad, seen = [], set()
    for m in ERROR.finditer(text):
        method = method_of(m.group(1))
        seen.add(method)
        row = table[method]
        if not same(m.group(2), row["test_error_pct"]):
            bad.append(f"{where}: {m.group(0)!r}, the file has {row['test_error_pct']} %")
        if m.group(3) and not same(m.group(3), row["train_error_pct"]):
            bad.append(f"{where}: {m.group(0)!r}, the file has train {row['train_error_pct']} %")
    for m in PAIRED.finditer(text):
        method = method_of(m.group(1))
        pair = table[method].get("vs_pretrained_svm") or {}
        want = (pair.get("diff_pct_points"), pair.get("se_pct_points"), pair.get("mcnemar_exact_p"))
        if not all(same(q, v) for q, v in zip(m.group(2, 3, 4), want)):
            bad.append(f"{where}: {m.group(0)!r}, the file has {want}")
    return bad, seen


def readme_account() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("## Does it reproduce?")
    return text[start:text.index("\n## ", start + 1)]


def check_claims_table(account: str, table: dict) -> tuple[list[str], set[str]]:
    """README.md's claims table: each "Table 1, <row>" row's ours cell against the file."""
    bad, seen = [], set()
    for line in account.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not cells[0].startswith("Table 1, "):
            continue
        method = method_of(cells[0].removeprefix("Table 1, "))
        seen.add(method)
        row = table[method]
        ours = re.match(r"(\d+\.\d+)\s*%", cells[2])
        if not ours or not same(ours.group(1), row["test_error_pct"]):
            bad.append(f"README.md claims table, {cells[0]}: ours {cells[2]!r}, the file has "
                       f"{row['test_error_pct']} %")
        pair = CELL_PAIRED.search(cells[2])
        want = row.get("vs_pretrained_svm")
        if want is not None and method != "pretrained_svm":
            got = pair.groups() if pair else (None, None, None)
            values = (want["diff_pct_points"], want["se_pct_points"], want["mcnemar_exact_p"])
            if not all(q is not None and same(q, v) for q, v in zip(got, values)):
                bad.append(f"README.md claims table, {cells[0]}: paired {got}, the file has {values}")
    return bad, seen


def config_expected() -> str:
    header = []
    for line in (ROOT / "config" / "config.yaml").read_text().splitlines():
        if not line.startswith("#"):
            break
        header.append(line.lstrip("#").strip())
    text = "\n".join(header)
    start = text.index("Expected:")
    end = re.compile(r"^\w[\w ]*:\s", re.M).search(text, start + len("Expected:"))
    return " ".join(text[start:end.start() if end else len(text)].split())


def default_run_sentences(path: Path) -> str:
    """The sentences of a page's head (before its first "## " section) that name the
    default run."""
    head = path.read_text(encoding="utf-8").split("\n## ", 1)[0]
    sentences = re.split(r"(?<=[.;|])\s+", " ".join(head.split()))
    return "\n".join(s for s in sentences if re.search(r"\bdefault run\b", s, re.I))


def heads() -> list[Path]:
    pages = sorted((ROOT / "docs" / "findings").glob("*.md"))
    return pages + [ROOT / "docs" / "benchmarks" / "default_runs.md"]


def test_the_source_holds_every_row_of_the_default_run():
    data = json.loads(SOURCE.read_text())
    assert data["source"]["commit"] and data["source"]["log"]
    assert (ROOT / data["source"]["log"]).is_file()
    assert set(rows()) == {"pretrained_svm", "pretrained_block_svm", "encoder_svm",
                           "unsupervised_svm", "supervised", "cnn"}
    for method, row in rows().items():
        assert row["test_error_pct"] is not None, method
        if method != "pretrained_svm":
            assert row["vs_pretrained_svm"]["n_images"] == row["n_test"], method


def test_the_patterns_read_each_form():
    table = rows()
    bad, seen = check_text("pretrained + SVM 5.36 % (train 1.86 %), unsupervised + SVM 5.56 %, "
                           "the reference row 1.90 %, the CNN 0.86 %; supervised +0.28 ± 0.29 "
                           "points (p 0.37)", "t", table)
    assert not bad and seen == {"pretrained_svm", "unsupervised_svm", "encoder_svm", "cnn"}
    bad, _ = check_text("unsupervised + SVM 5.57 % and supervised +0.28 ± 0.29 (p 0.38)", "t", table)
    assert len(bad) == 2, bad
    bad, _ = check_text("pretrained + SVM 5.36 % (train 1.87 %)", "t", table)
    assert len(bad) == 1, bad


def test_readme_quotes_the_default_run():
    table = rows()
    account = readme_account()
    bad, seen = check_claims_table(account, table)
    assert seen == {"pretrained_svm", "unsupervised_svm", "supervised"}, \
        f"README.md's claims table lacks Table 1 rows: it has {sorted(seen)}"
    more, quoted = check_text(account, "README.md", table)
    assert {"pretrained_block_svm", "encoder_svm", "cnn"} <= quoted
    assert not bad + more, "\n".join(bad + more)


def test_config_header_quotes_the_default_run():
    bad, seen = check_text(config_expected(), "config/config.yaml Expected", rows())
    assert seen == set(rows()), f"the Expected line quotes only {sorted(seen)}"
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("page", heads(), ids=lambda p: p.name)
def test_heads_quote_the_default_run(page):
    bad, seen = check_text(default_run_sentences(page), str(page.relative_to(ROOT)), rows())
    assert not bad, "\n".join(bad)
    if page.name == "default_runs.md":  # the run log's head holds the current rows
        assert seen == set(rows()), f"default_runs.md's head quotes only {sorted(seen)}"
