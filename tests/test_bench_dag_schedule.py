"""dgdm_tf.bench.dag_schedule: a run's job DAG scheduled on N nodes from its jobs' times,
on small DAGs whose wall time is known by hand, and on Snakemake's own dot format."""

from __future__ import annotations

from pathlib import Path

import pytest

from dgdm_tf.bench import dag_schedule as ds

REPO = Path(__file__).resolve().parents[1]

#: the head of `snakemake --forceall --dag dot -- results/tables.md` at the default config
DOT = '''digraph snakemake_dag {
    graph[bgcolor=white, margin=0];
    node[shape=box, style=rounded, fontname=sans,                 fontsize=10, penwidth=2];
    edge[penwidth=2, color=grey];
	0[label = "tables", color = "0.60 0.6 0.85", style="rounded"];
	1[label = "svm\\nmethod: pretrained_svm", color = "0.58 0.6 0.85", style="rounded"];
	2[label = "features", color = "0.31 0.6 0.85", style="rounded"];
	3[label = "prepare", color = "0.46 0.6 0.85", style="rounded"];
	5[label = "pretrain_layer\\nl: 1", color = "0.48 0.6 0.85", style="rounded"];
	1 -> 0
	2 -> 1
	5 -> 2
	3 -> 5
	3 -> 2
}
'''


def job(name, seconds, deps=(), shards=False):
    return ds.Job(name, name, {}, seconds, tuple(deps), shards)


def test_parse_dot_reads_rules_wildcards_and_edges():
    nodes, edges = ds.parse_dot(DOT)
    assert nodes == {"0": ("tables", {}), "1": ("svm", {"method": "pretrained_svm"}),
                     "2": ("features", {}), "3": ("prepare", {}), "5": ("pretrain_layer", {"l": "1"})}
    assert edges == [("1", "0"), ("2", "1"), ("5", "2"), ("3", "5"), ("3", "2")]
    with pytest.raises(ValueError, match="snakemake --dag dot"):
        ds.parse_dot("Building DAG of jobs...")


def test_benchmark_patterns_of_the_workflows_rules():
    pats = ds.benchmark_patterns(f.read_text() for f in (REPO / "workflow" / "rules").glob("*.smk"))
    assert pats["svm"] == "results/benchmarks/rules/svm/{ds}_{method}.tsv"
    assert pats["pretrain_layer"] == "results/benchmarks/rules/pretrain_layer/{ds}/layer{l}.tsv"
    assert {"features_shard", "topdown_features_shard", "block_features_shard",
            "supervised_predict_shard"} <= set(pats)
    assert "refine_shard" not in pats


def test_dag_jobs_read_each_jobs_benchmark_file(tmp_path):
    pats = {"svm": "b/svm/{ds}_{method}.tsv", "features": "b/features/{ds}.tsv",
            "features_shard": "b/fs/{ds}_{i}.tsv", "prepare": "b/prepare/{ds}.tsv",
            "pretrain_layer": "b/pl/{ds}/layer{l}.tsv"}
    for rel, s in (("b/svm/x_pretrained_svm.tsv", 12.5), ("b/features/x.tsv", 100.0),
                   ("b/pl/x/layer1.tsv", 30.0)):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(f"s\th:m:s\tmax_rss\n{s}\t0:00:10\t{10 * s}\n")
    jobs = ds.dag_jobs(DOT, pats, tmp_path, defaults={"ds": "x"})
    assert jobs["2"].max_rss_mb == 1000.0 and jobs["0"].max_rss_mb is None
    assert {j.name: j.seconds for j in jobs.values()} == {
        "tables": None, "svm[pretrained_svm]": 12.5, "features": 100.0, "prepare": None,
        "pretrain_layer[1]": 30.0}
    assert jobs["2"].shards and not jobs["1"].shards
    assert set(jobs["2"].deps) == {"5", "3"}


def test_one_node_runs_the_jobs_one_after_another_and_many_reach_the_longest_chain():
    jobs = {"a": job("a", 10), "b": job("b", 20, "a"), "c": job("c", 30, "a"),
            "d": job("d", 5, "bc"), "e": job("e", 40)}
    assert ds.schedule(jobs, 1)["seconds"] == 105
    # two nodes: e (0-40) beside a, c (0-40), then b (40-60) and d (60-65): the best
    # order (b beside e would push e to 30-70)
    two = ds.schedule(jobs, 2)
    assert two["seconds"] == 65
    assert all(two["end"][n] >= two["end"][d] + jobs[n].seconds
               for n in jobs for d in jobs[n].deps)
    bound, chain = ds.critical_path(jobs)
    assert (bound, chain) == (45, ["a", "c", "d"])
    assert ds.schedule(jobs, 8)["seconds"] == 45


def test_a_sharded_job_splits_over_the_nodes_each_part_paying_its_overhead():
    jobs = {"prep": job("prep", 10), "feat": job("feat", 400, ["prep"], shards=True),
            "svm": job("svm", 50, ["feat"])}
    assert ds.schedule(jobs, 1, shard_overhead_s=20)["seconds"] == 460
    got = ds.schedule(jobs, 4, shard_overhead_s=20)
    assert got["seconds"] == 10 + (100 + 20) + 50
    assert got["busy"] == pytest.approx((10 + 4 * 120 + 50) / (4 * 180))
    assert ds.critical_path(jobs, 4, shard_overhead_s=20)[0] == 180
    # a sharded job not yet measured counts 0 s, its parts' start-up too
    unmeasured = {**jobs, "feat": job("feat", None, ["prep"], shards=True)}
    assert ds.schedule(unmeasured, 4, shard_overhead_s=20)["seconds"] == 60


def test_a_cycle_or_no_node_is_refused():
    cyclic = {"a": job("a", 1, "b"), "b": job("b", 1, "a"), "c": job("c", 1)}
    with pytest.raises(ValueError, match="cycle"):
        ds.schedule(cyclic, 2)
    with pytest.raises(ValueError, match="cycle"):
        ds.critical_path(cyclic)
    with pytest.raises(ValueError, match="nodes"):
        ds.schedule({"a": job("a", 1)}, 0)


def test_slowed_jobs_take_factor_times_their_measured_time():
    """Two 1-thread jobs side by side on a 2-core machine, each 1.5x its 2-thread time:
    the two independent jobs overlap, so 1.5 x (100 + 60) on one worker becomes 1.5 x 100."""
    jobs = {"a": job("a", 100), "b": job("b", 60), "c": job("c", None, ["a", "b"])}
    slow = ds.slowed(jobs, 1.5)
    assert [slow[n].seconds for n in "abc"] == [150, 90, None]
    assert jobs["a"].seconds == 100  # the measured jobs are left as they were
    assert ds.schedule(slow, 1)["seconds"] == 240
    assert ds.schedule(slow, 2)["seconds"] == 150
    with pytest.raises(ValueError, match="slowdown"):
        ds.slowed(jobs, 0)
    # a rule of its own factor: a 2x, b (the default) 1.5x
    by_rule = ds.slowed(jobs, 1.5, {"a": 2.0})
    assert [by_rule[n].seconds for n in "ab"] == [200, 90]
    with pytest.raises(ValueError, match="slowdown"):
        ds.slowed(jobs, 1.5, {"a": -1.0})
