"""A workflow's wall time on N nodes, from its jobs' measured times: the job DAG
(Snakemake's ``--dag dot``) scheduled on N identical nodes.

Each node runs one job at a time, as a 2-core machine runs the workflow's jobs (each takes
every core). A job whose per-image work the workflow splits into shard jobs (config
``shards``: a rule with a ``<rule>_shard`` companion) runs as N equal parts, one a node,
each taking its share of the measured time plus ``shard_overhead_s`` (start-up and
tracing, which every part repeats). The schedule is list scheduling: of the jobs whose
inputs are done, the one with the longest path to the end goes first, on the node free
soonest. On one node it is the jobs' sum; on many it tends to the longest chain of
dependencies (:func:`critical_path`), which no number of nodes shortens.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable, Mapping

import pandas as pd

_NODE = re.compile(r'^\s*(\d+)\[label = "([^"]*)"')
_EDGE = re.compile(r"^\s*(\d+)\s*->\s*(\d+)")
_RULE = re.compile(r"^rule\s+(\w+)\s*:", re.M)
_BENCH = re.compile(r'^\s+benchmark:\s*\n\s+"([^"]+)"', re.M)


@dataclass(frozen=True)
class Job:
    """One job of the DAG: its rule, wildcards, measured seconds and peak RSS in MB
    (None: not measured), the jobs it needs and whether its per-image work splits into
    shards."""
    name: str
    rule: str
    wildcards: Mapping[str, str]
    seconds: float | None
    deps: tuple[str, ...]
    shards: bool = False
    max_rss_mb: float | None = None


def parse_dot(text: str) -> tuple[dict[str, tuple[str, dict[str, str]]], list[tuple[str, str]]]:
    """Snakemake's ``--dag dot``: node id -> (rule, the wildcards its label shows), and the
    edges (from the job that makes an input, to the job that reads it)."""
    nodes: dict[str, tuple[str, dict[str, str]]] = {}
    edges: list[tuple[str, str]] = []
    for line in text.splitlines():
        m = _NODE.match(line)
        if m:
            rule, *rest = m.group(2).split("\\n")
            nodes[m.group(1)] = (rule, dict(part.split(": ", 1) for part in rest if ": " in part))
            continue
        m = _EDGE.match(line)
        if m:
            edges.append((m.group(1), m.group(2)))
    if not nodes:
        raise ValueError("no jobs in the DAG: expected the output of `snakemake --dag dot`")
    return nodes, edges


def benchmark_patterns(smk_texts: Iterable[str]) -> dict[str, str]:
    """Rule -> its ``benchmark:`` path pattern, from the text of the rule files."""
    out: dict[str, str] = {}
    for text in smk_texts:
        starts = [(m.start(), m.group(1)) for m in _RULE.finditer(text)] + [(len(text), "")]
        for (a, rule), (b, _) in zip(starts, starts[1:]):
            m = _BENCH.search(text, a, b)
            if m:
                out[rule] = m.group(1)
    return out


def measured(path: str | Path) -> tuple[float, float | None] | None:
    """(wall seconds, peak RSS in MB) of a Snakemake benchmark file (its last row's ``s``
    and ``max_rss``; the RSS None where not recorded), None when there is no file."""
    path = Path(path)
    if not path.is_file():
        return None
    row = pd.read_csv(path, sep="\t").iloc[-1]
    rss = pd.to_numeric(row.get("max_rss"), errors="coerce")
    return float(row["s"]), None if pd.isna(rss) else float(rss)


def dag_jobs(dot: str, patterns: Mapping[str, str], root: str | Path, *,
             defaults: Mapping[str, str] | None = None) -> dict[str, Job]:
    """The DAG's jobs with their measured times: each job's benchmark file is its rule's
    pattern filled with its wildcards (those its label leaves out from ``defaults``, e.g.
    ``{"ds": "paper_size", "ablation": "paper_size"}``), read under ``root``. A rule
    whose ``<rule>_shard`` companion exists splits into shards."""
    nodes, edges = parse_dot(dot)
    deps: dict[str, list[str]] = {n: [] for n in nodes}
    for a, b in edges:
        deps[b].append(a)
    jobs = {}
    for n, (rule, wc) in nodes.items():
        wc = {**(defaults or {}), **wc}
        name = rule + "".join(f"[{v}]" for k, v in sorted(wc.items()) if k not in (defaults or {}))
        pattern = patterns.get(rule)
        got = None
        if pattern is not None:
            try:
                got = measured(Path(root) / pattern.format(**wc))
            except KeyError:  # a wildcard neither the label nor the defaults give
                got = None
        seconds, rss = got if got is not None else (None, None)
        jobs[n] = Job(name, rule, wc, seconds, tuple(deps[n]), shards=f"{rule}_shard" in patterns,
                      max_rss_mb=rss)
    return jobs


def slowed(jobs: Mapping[str, Job], factor: float,
           by_rule: Mapping[str, float] | None = None) -> dict[str, Job]:
    """``jobs`` with every measured time ``factor`` times as long (a rule in ``by_rule``:
    its own factor): jobs run on fewer threads than measured (the factors from
    experiments/scaling/threads_side_by_side.py)."""
    by_rule = dict(by_rule or {})
    for f in [factor, *by_rule.values()]:
        if f <= 0:
            raise ValueError(f"the slowdown must be > 0, got {f}")
    return {n: replace(j, seconds=None if j.seconds is None else j.seconds * by_rule.get(j.rule, factor))
            for n, j in jobs.items()}


def _part(job: Job, nodes: int, shard_overhead_s: float) -> tuple[int, float]:
    """(parts, seconds a part) of a job on ``nodes`` nodes; a job not measured is one
    part of 0 s."""
    t = float(job.seconds or 0.0)
    if job.shards and nodes > 1 and job.seconds is not None:
        return nodes, t / nodes + shard_overhead_s
    return 1, t


def _ranks(jobs: Mapping[str, Job], nodes: int, shard_overhead_s: float):
    """(successors, upward rank, next job on the longest path): each job's rank is its
    part's seconds plus the largest rank among the jobs that need it."""
    succ: dict[str, list[str]] = {n: [] for n in jobs}
    for n, j in jobs.items():
        for d in j.deps:
            succ[d].append(n)
    rank: dict[str, float] = {}
    nxt: dict[str, str | None] = {}
    seen: set[str] = set()

    def up(n: str) -> float:
        if n not in rank:
            if n in seen:
                raise ValueError("the DAG has a cycle: not every job could be scheduled")
            seen.add(n)
            best = max(succ[n], key=up, default=None)
            nxt[n] = best
            rank[n] = _part(jobs[n], nodes, shard_overhead_s)[1] + (up(best) if best else 0.0)
        return rank[n]

    for n in jobs:
        up(n)
    return succ, rank, nxt


def critical_path(jobs: Mapping[str, Job], nodes: int = 1, *,
                  shard_overhead_s: float = 0.0) -> tuple[float, list[str]]:
    """The longest chain of dependencies (seconds, job ids from the first): the wall time
    with unlimited nodes, a sharded job counted at its part's time on ``nodes`` nodes."""
    _, rank, nxt = _ranks(jobs, nodes, shard_overhead_s)
    first = max(jobs, key=rank.__getitem__)
    path, n = [], first
    while n is not None:
        path.append(n)
        n = nxt[n]
    return rank[first], path


def schedule(jobs: Mapping[str, Job], nodes: int, *, shard_overhead_s: float = 0.0) -> dict:
    """List-schedule ``jobs`` on ``nodes`` identical nodes; returns ``seconds`` (the wall
    time), ``start`` and ``end`` (job id -> seconds) and ``busy`` (the share of node time
    used)."""
    if nodes < 1:
        raise ValueError(f"nodes must be >= 1, got {nodes}")
    succ, rank, _ = _ranks(jobs, nodes, shard_overhead_s)
    waiting = {n: set(j.deps) for n, j in jobs.items()}
    ready = [n for n, w in waiting.items() if not w]
    free = [0.0] * nodes
    start: dict[str, float] = {}
    end: dict[str, float] = {}
    work = 0.0
    while ready:
        ready.sort(key=rank.__getitem__)
        n = ready.pop()
        after = max((end[d] for d in jobs[n].deps), default=0.0)
        parts, t = _part(jobs[n], nodes, shard_overhead_s)
        ends = []
        for _ in range(parts):
            i = min(range(nodes), key=lambda k: (max(free[k], after), k))
            begin = max(free[i], after)
            free[i] = begin + t
            ends.append(begin + t)
            start[n] = min(start.get(n, begin), begin)
        end[n] = max(ends)
        work += parts * t
        for m in succ[n]:
            waiting[m].discard(n)
            if not waiting[m]:
                ready.append(m)
    total = max(end.values(), default=0.0)
    return {"seconds": total, "start": start, "end": end,
            "busy": work / (nodes * total) if total else 0.0}
