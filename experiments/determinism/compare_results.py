"""Are two runs' results the same, bit for bit? Compares every file under two results
folders (e.g. two fresh clones run with the same config and seed, or one run before and
one after a change that must not move the numbers):

    python experiments/determinism/compare_results.py <a>/results <b>/results

Arrays (.npz), JSON, CSV/TSV, text and figures are compared exactly, except what measures
time: keys and columns whose name has the word seconds, elapsed, started, finished, date
rss, wall or cpu_time, ends in _per_s, or is ratio_to_floor (a ratio of two timings) (``TIMING``), durations in text lines (``TIMING_LINE``), the
folders of timings and logs (``SKIP_DIRS``) and figures of times (``SKIP_FILES``).
Prints one line per file that differs, and where; exits 1 if any does, 0 if none.
"""
from __future__ import annotations

import argparse
import io
import json
import math
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

#: names of keys and columns whose values are wall-clock measurements (whole words of a
#: snake_case name: "beta", "theta" or "learning_rate" are not timings)
TIMING = re.compile(r"(^|_)(seconds|second|minutes|elapsed|finished|started|date|rss|wall|cpu_time)(_|$)"
                    r"|_per_s(econd)?$|^ratio_to_floor$")
#: folders written for timing and logs alone (Snakemake's benchmark: and log: files)
SKIP_DIRS = {"benchmarks", "logs"}
#: figures whose axes are measured times; the workflow jobs' own benchmark files gathered (wall, CPU, memory, load)
SKIP_FILES = {"error_vs_time.png", "benchmarks_scaling.png", "benchmarks_rules.csv",
              "benchmarks.md"}  # its every figure a time or a memory peak; benchmarks.csv is compared
#: in text lines (the tables' wall-time column), durations such as "59.1 s" or
#: "1 min 02 s", and dates
TIMING_LINE = re.compile(r"((\d+(\.\d+)?\s*(s|min|h|seconds|minutes)\b\s*)+|\d{4}-\d{2}-\d{2})")


def _json_strip(v):
    if isinstance(v, dict):
        return {k: _json_strip(x) for k, x in v.items() if not TIMING.search(k)}
    if isinstance(v, list):
        return [_json_strip(x) for x in v]
    return v


def _first_json_diff(a, b, path="") -> str | None:
    if type(a) is not type(b):
        return f"{path}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{path}/{k}: only in one"
            d = _first_json_diff(a[k], b[k], f"{path}/{k}")
            if d:
                return d
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: length {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = _first_json_diff(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    both_nan = isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    return None if a == b or both_nan else f"{path}: {a!r} vs {b!r}"


def compare_file(a: Path, b: Path) -> str | None:
    """None when the two files agree (timings aside), else where they first differ."""
    suffix = a.suffix.lower()
    if suffix == ".npz":
        za, zb = np.load(a, allow_pickle=False), np.load(b, allow_pickle=False)
        keys = sorted(k for k in set(za.files) | set(zb.files) if not TIMING.search(k))
        for k in keys:
            if k not in za.files or k not in zb.files:
                return f"array {k} only in one"
            x, y = za[k], zb[k]
            if x.dtype.kind == "U" and x.ndim == 0 and str(x).startswith("{"):
                d = _first_json_diff(_json_strip(json.loads(str(x))), _json_strip(json.loads(str(y))))
                if d:
                    return f"array {k} (JSON) {d}"
                continue
            if x.shape != y.shape or x.dtype != y.dtype:
                return f"array {k}: {x.shape} {x.dtype} vs {y.shape} {y.dtype}"
            differ = ~((x == y) | (np.isnan(x) & np.isnan(y))) if x.dtype.kind in "fc" else (x != y)
            if differ.any():
                diff = np.abs(x.astype(np.complex128) - y.astype(np.complex128)) if x.dtype.kind in "fciu" else None
                return (f"array {k}: {int(differ.sum())} of {x.size} entries differ"
                        + ("" if diff is None else f", by at most {np.nanmax(diff):.3g}"))
        return None
    if suffix == ".json":
        return _first_json_diff(_json_strip(json.loads(a.read_text())),
                                _json_strip(json.loads(b.read_text())))
    if suffix in (".csv", ".tsv"):
        sep = "\t" if suffix == ".tsv" else ","
        da, db = (pd.read_csv(io.StringIO(p.read_text()), sep=sep) for p in (a, b))
        if list(da.columns) != list(db.columns):
            return f"columns {list(da.columns)} vs {list(db.columns)}"
        cols = [c for c in da.columns if not TIMING.search(str(c))]
        da, db = da[cols], db[cols]
        if da.shape != db.shape:
            return f"shape {da.shape} vs {db.shape}"
        same = (da == db) | (da.isna() & db.isna())
        if not same.all().all():
            col = same.all()[~same.all()].index[0]
            return f"column {col!r}: {int((~same[col]).sum())} rows differ"
        return None
    if suffix in (".md", ".txt", ".yaml", ".yml", ".html"):
        la, lb = a.read_text().splitlines(), b.read_text().splitlines()
        if len(la) != len(lb):
            return f"{len(la)} vs {len(lb)} lines"
        for i, (x, y) in enumerate(zip(la, lb)):
            if x != y and not (TIMING_LINE.search(x) and TIMING_LINE.sub("#", x) == TIMING_LINE.sub("#", y)):
                return f"line {i + 1}: {x[:100]!r} vs {y[:100]!r}"
        return None
    return None if a.read_bytes() == b.read_bytes() else "bytes differ"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("a", type=Path, help="one results folder (e.g. A/results)")
    p.add_argument("b", type=Path, help="the other")
    args = p.parse_args(argv)
    ra, rb = args.a, args.b
    files_a = {p.relative_to(ra) for p in ra.rglob("*") if p.is_file()}
    files_b = {p.relative_to(rb) for p in rb.rglob("*") if p.is_file()}
    keep = lambda rel: not (set(rel.parts[:-1]) & SKIP_DIRS) and rel.name not in SKIP_FILES  # noqa: E731
    bad = 0
    for rel in sorted(r for r in files_a ^ files_b if keep(r)):
        print(f"ONLY IN {'A' if rel in files_a else 'B'}  {rel}")
        bad += 1
    common = sorted(r for r in files_a & files_b if keep(r))
    for rel in common:
        d = compare_file(ra / rel, rb / rel)
        if d:
            print(f"DIFFERS  {rel}: {d}")
            bad += 1
    print(f"{len(common)} files compared, {bad} differ or are missing (timings, "
          f"{sorted(SKIP_FILES)} and the {sorted(SKIP_DIRS)} folders skipped)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
