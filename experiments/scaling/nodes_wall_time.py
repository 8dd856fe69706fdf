"""A run's wall time on N nodes, projected from its rules' measured times.

Reads the job DAG of the targets (``snakemake --dag dot --forceall``, run in ``--repo``
unless ``--dag`` gives its output) and each job's benchmark file under
``<repo>/results/benchmarks/rules/``, then schedules the jobs on 1, 2, 4, ... nodes like
the machine that measured them (dgdm_tf.bench.dag_schedule): each job on one node, the
rules with shard jobs (config ``shards``) split over every node, each part paying
``--shard-overhead`` seconds of its own start-up. Prints, per node count, the projected
wall time and the chain of jobs that bounds it, after each job's measured wall time and
peak RSS; jobs with no benchmark file are named and counted as 0 s.

``--workers-per-node W --slowdown F``: each node runs W jobs at once (``--config
threads=<cores / W>``), each job F times its measured time (F from
experiments/scaling/threads_side_by_side.py, which times a step on 1 thread against all
cores; ``--rule-slowdown svm=F2 ...`` gives a rule its own); ``--nodes 1
--workers-per-node 2`` is one 2-core machine running two 1-thread jobs side by side.

    python experiments/scaling/nodes_wall_time.py --repo <clone> --ds paper_size \
        --targets results/paper_size/tables.md results/paper_size/learning_curve.csv \
        --configfile config/config.yaml
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

from dgdm_tf.bench import dag_schedule as ds


def dag_text(repo: Path, targets: list[str], configfiles: list[str]) -> str:
    """The targets' whole DAG, every job as if it had to run (``--forceall``)."""
    cmd = ["snakemake", "--nolock", "--forceall", "--dag", "dot"]
    if configfiles:
        cmd += ["--configfile", *configfiles]
    cmd += ["--", *targets]
    done = subprocess.run(cmd, cwd=repo, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"`{' '.join(cmd)}` in {repo} failed:\n{done.stderr[-2000:]}")
    return done.stdout


def fmt(s: float) -> str:
    return f"{s / 60:.1f} min"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repo", default=".", help="the run's repository (its workflow and results/)")
    p.add_argument("--ds", required=True, help="the dataset (or ablation) whose jobs these are")
    p.add_argument("--targets", nargs="+", default=None,
                   help="the run's targets (default: results/<ds>/tables.md)")
    p.add_argument("--configfile", nargs="*", default=[], help="the run's --configfile, if any")
    p.add_argument("--dag", default=None, help="a saved `snakemake --dag dot` of the run (skips snakemake)")
    p.add_argument("--nodes", default="1,2,4,8,16", help="node counts, comma-separated")
    p.add_argument("--shard-overhead", type=float, default=30.0,
                   help="seconds each shard part repeats (start-up, tracing); assumed")
    p.add_argument("--workers-per-node", type=int, default=1,
                   help="jobs a node runs at once (default 1: a job takes the node's cores)")
    p.add_argument("--slowdown", type=float, default=1.0,
                   help="each job's time on a worker over its measured time (default 1)")
    p.add_argument("--rule-slowdown", nargs="*", default=[], metavar="RULE=F",
                   help="a rule's own slowdown in place of --slowdown (e.g. svm=1.84)")
    p.add_argument("--out", default=None, help="write the projection as JSON here")
    args = p.parse_args(argv)

    repo = Path(args.repo)
    targets = args.targets or [f"results/{args.ds}/tables.md"]
    dot = Path(args.dag).read_text() if args.dag else dag_text(repo, targets, args.configfile)
    patterns = ds.benchmark_patterns(f.read_text() for f in sorted((repo / "workflow" / "rules").glob("*.smk")))
    jobs = ds.dag_jobs(dot, patterns, repo, defaults={"ds": args.ds, "ablation": args.ds})
    if args.workers_per_node < 1:
        raise SystemExit(f"--workers-per-node must be >= 1, got {args.workers_per_node}")
    missing = sorted(j.name for j in jobs.values() if j.seconds is None)
    measured = sum(j.seconds or 0.0 for j in jobs.values())
    print(f"{len(jobs)} jobs, {len(jobs) - len(missing)} measured: {fmt(measured)} one after another")
    if missing:
        print(f"not measured (counted as 0 s): {', '.join(missing)}")
    print("| job | wall | peak RSS |\n|---|---|---|")
    for j in sorted(jobs.values(), key=lambda j: -(j.seconds or 0.0)):
        if j.seconds is not None:
            rss = f"{j.max_rss_mb / 1024:.2f} GB" if j.max_rss_mb is not None else "-"
            print(f"| {j.name} | {fmt(j.seconds)} | {rss} |")
    w = args.workers_per_node
    if w > 1 or args.slowdown != 1.0:
        print(f"{w} job(s) at once a node, each {args.slowdown:g} x its measured time")
    try:
        by_rule = {r: float(f) for r, f in (x.split("=", 1) for x in args.rule_slowdown)}
    except ValueError:
        raise SystemExit(f"--rule-slowdown takes RULE=F pairs, got {args.rule_slowdown}")
    if by_rule:
        print("their own slowdowns: " + ", ".join(f"{r} {f:g} x" for r, f in by_rule.items()))
    run_jobs = ds.slowed(jobs, args.slowdown, by_rule)
    print("| nodes | projected wall time | workers busy | the chain that bounds it (unlimited nodes) |")
    print("|---|---|---|---|")
    rows = []
    for n in [int(x) for x in args.nodes.split(",")]:
        got = ds.schedule(run_jobs, n * w, shard_overhead_s=args.shard_overhead)
        bound, chain = ds.critical_path(run_jobs, n * w, shard_overhead_s=args.shard_overhead)
        names = [f"{run_jobs[c].name} {fmt(run_jobs[c].seconds or 0.0)}" for c in chain]
        print(f"| {n} | {fmt(got['seconds'])} | {100 * got['busy']:.0f} % | {fmt(bound)}: {' -> '.join(names)} |")
        rows.append({"nodes": n, "seconds": got["seconds"], "busy": got["busy"],
                     "critical_seconds": bound, "critical_path": [jobs[c].name for c in chain]})
    out = {"ds": args.ds, "targets": targets, "shard_overhead_s": args.shard_overhead,
           "workers_per_node": w, "slowdown": args.slowdown, "rule_slowdown": by_rule,
           "jobs": {j.name: {"seconds": j.seconds, "max_rss_mb": j.max_rss_mb} for j in jobs.values()},
           "missing": missing, "rows": rows}
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
