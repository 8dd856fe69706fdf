"""Kills at moments nobody chose: the tiny config (tests/_workflow.py TINY_BLOCK) run end
to end while a seeded schedule sends SIGKILL to the whole Snakemake process group (the
scheduler and its running job, as a pre-empted node loses both) at random moments, each
followed by what the README says to do after a hard kill (``snakemake --unlock``, then
the same target with ``--rerun-incomplete``); at the end every file under
``results/`` is the uninterrupted run's (``tiny_run``), bit for bit, timings aside
(experiments/determinism/compare_results.py). It is also the suite's test of bitwise
repetition: two runs of one config and seed, every rule's files compared (pretraining,
refinement, the Gibbs rows, inpainting; an inpainting seed off by a process's id fails
it). Slow tier: it runs the tiny config again, plus the work each kill throws away."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from _workflow import CORES, REPO, copy_repo

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("tiny_run")]  # compares with tiny_run

N_KILLS = 10
SEED = 20261202
#: a kill comes U(3, 3 + DELAY_SHARE * T) s after its (re)start, T the uninterrupted run's
#: summed rule seconds (its benchmark files), so the schedule scales with the machine: on
#: the one that set it (T about 400 s) that is U(3, 75), where the jobs took 5 to 60 s
#: each; kills land inside jobs, between them and in Snakemake's start, and the longer
#: ones let the run get past pretraining between kills. A fixed U(3, 75) let a machine 2.5
#: times faster finish after 9 kills.
DELAY_MIN, DELAY_SHARE = 3.0, 0.18


def _rule_seconds(repo: Path) -> float:
    """The summed wall seconds of a finished run's rules (Snakemake's benchmark files)."""
    import pandas as pd

    files = sorted((repo / "results" / "benchmarks" / "rules").rglob("*.tsv"))
    assert files, f"no benchmark files under {repo}/results/benchmarks/rules"
    return float(sum(pd.read_csv(f, sep="\t")["s"].sum() for f in files))


def _group_scripts(pgid: int) -> list[str]:
    """The workflow scripts the process group is running (the jobs it would lose)."""
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if os.getpgid(int(proc.name)) != pgid:
                continue
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except (OSError, ProcessLookupError):
            continue
        for a in args:
            a = a.decode(errors="replace")
            if "/.snakemake/scripts/" in a and a.endswith(".py"):
                out.append(a.rsplit("/", 1)[-1].split(".", 1)[-1][:-3])  # tmpXXXX.<script>.py
    return sorted(set(out))


def _start(repo: Path, cfg: Path, log) -> subprocess.Popen:
    """The run after a kill: unlock (SIGKILL leaves Snakemake's lock), then the target."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONDONTWRITEBYTECODE="1")
    subprocess.run([sys.executable, "-m", "snakemake", "--unlock", "results/tables.md", "--configfile",
                    str(cfg)], cwd=repo, env=env, stdout=log, stderr=subprocess.STDOUT, check=True,
                   timeout=300)
    return subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", CORES, "--rerun-incomplete",
                             "results/tables.md", "--configfile", str(cfg)],
                            cwd=repo, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def test_random_kills_then_reruns_end_bit_for_bit_as_the_uninterrupted_run(tiny_run, tmp_path,
                                                                          tmp_path_factory):
    base, cfg = tiny_run
    # beside the uninterrupted run's copy: the results record the config's path relative
    # to the repository, which must be the same string in both
    repo = copy_repo(tmp_path_factory.mktemp("killed_repo"))
    rng = np.random.default_rng(SEED)
    top = DELAY_MIN + DELAY_SHARE * _rule_seconds(base)
    print(f"kill delays U({DELAY_MIN}, {top:.1f}) s", flush=True)
    kills, finished_early = [], 0
    log_path = tmp_path / "snakemake.log"
    with open(log_path, "a") as log:
        while len(kills) < N_KILLS:
            proc = _start(repo, cfg, log)
            delay = float(rng.uniform(DELAY_MIN, top))
            try:
                proc.wait(timeout=delay)
                finished_early += 1  # the run ended before this kill's moment
                assert proc.returncode == 0, log_path.read_text()[-4000:]
                break
            except subprocess.TimeoutExpired:
                pass
            running = _group_scripts(proc.pid) or ["(Snakemake alone)"]
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            kills.append((round(delay, 1), running))
            print(f"kill {len(kills)} at {delay:.1f} s: {', '.join(running)}", flush=True)
        t0 = time.time()
        proc = _start(repo, cfg, log)
        assert proc.wait(timeout=1800) == 0, log_path.read_text()[-6000:]
    print(f"{len(kills)} kills, then the run to its end in {time.time() - t0:.0f} s", flush=True)
    assert len(kills) >= N_KILLS, (kills, finished_early)  # a run too fast for the schedule
    hit = {s for _, r in kills for s in r if not s.startswith("(")}
    assert len(hit) >= 3, kills  # the kills are spread over several rules' jobs
    r = subprocess.run([sys.executable, str(REPO / "experiments/determinism/compare_results.py"),
                        str(base / "results"), str(repo / "results")],
                       capture_output=True, text=True, timeout=600)
    print(r.stdout[-3000:])
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
