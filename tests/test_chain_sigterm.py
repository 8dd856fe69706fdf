"""A real SIGTERM sent to a running refinement (one process, and two data-parallel
workers started by ``cluster.run_as_workers``, which passes the signal on): the process
exits with status 143 after the sweep it was in, its checkpoint is at that sweep, and a
rerun resumes to an uninterrupted run's bits (:mod:`dgdm_tf.mcmc.driver`)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from dgdm_tf.mcmc.checkpoint import CheckpointDir
from dgdm_tf.mcmc.driver import EXIT_TERMINATED
from dgdm_tf.topdown import refine
from _topdown_model import LAYERS, draw as _draw

REPO = Path(__file__).resolve().parents[1]
#: 7 images in chunks of 3 (two workers: one chunk each at least); 8 sweeps, so the
#: signal at sweep 2 lands mid-run, inside burn-in, off the checkpoints' schedule
KW = dict(burn_in=4, collect=4, n_leapfrog=3, chunk=3, checkpoint_every=5)


def _refine(x, d_true, ck, *, workers=1, progress=None):
    """The chain of options ``KW`` on ``workers``, checkpointing into ``ck``."""
    return refine.run_refine(x, refine.Start(d_true, LAYERS, gamma_e_init=50.0, gamma_s_init=0.25),
                             refine.RefineOptions(**KW, workers=workers), seed=1,
                             checkpoint=CheckpointDir(ck), progress=progress)

CHAIN = textwrap.dedent("""
    import json, sys
    sys.path[:0] = [{src!r}, {tests!r}]
    from dgdm_tf.core import cluster
    if {distribute!r}:
        cluster.workers()  # before TensorFlow runs anything
    from _topdown_model import draw as _draw
    from test_chain_sigterm import _refine
    _, d_true, x = _draw(7, seed=5)
    _refine(x, d_true, {ck!r}, workers=2 if {distribute!r} else 1,
            progress=lambda m: print(m, flush=True))
""")

PARENT = textwrap.dedent("""
    import sys
    sys.path[:0] = [{src!r}]
    from dgdm_tf.core import cluster
    cluster.run_as_workers([sys.executable, "-c", {code!r}], 2, threads=1)
""")


def _sigterm_at_sweep(argv, at: int):
    """Start ``argv``, SIGTERM it once it has printed sweep ``at``; (exit status, its
    output, the sweep it was in, seconds from the signal to its exit)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "TF_CONFIG"))}
    proc = subprocess.Popen(argv, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if f"refine sweep {at}/" in line:
            break
    else:
        raise AssertionError("".join(lines)[-3000:])
    proc.send_signal(signal.SIGTERM)
    t0 = time.time()
    out = proc.communicate(timeout=600)[0]
    return proc.returncode, "".join(lines) + out, at, time.time() - t0


def _checkpoint(ck):
    with np.load(Path(ck) / "checkpoint.npz") as z:
        return ({k: z[k] for k in z.files if k != "trace"},
                [{k: v for k, v in r.items() if k != "seconds"} for r in json.loads(str(z["trace"]))])


@pytest.mark.slow
@pytest.mark.parametrize("distribute", [False, True], ids=["one_process", "two_workers"])
def test_sigterm_leaves_after_the_sweep_with_its_checkpoint_and_status_143(tmp_path, distribute):
    ck = tmp_path / "ck"
    code = CHAIN.format(src=str(REPO / "src"), tests=str(REPO / "tests"), ck=str(ck),
                        distribute=distribute)
    argv = [sys.executable, "-c", code]
    if distribute:
        argv = [sys.executable, "-c", PARENT.format(src=str(REPO / "src"), code=code)]
    status, out, at, seconds = _sigterm_at_sweep(argv, at=2)
    assert status == EXIT_TERMINATED == 143, out[-3000:]
    stopped = re.search(r"SIGTERM: stopped after sweep (\d+)/8, ([\d.]+) s after the signal", out)
    assert stopped, out[-3000:]
    done = int(stopped.group(1))
    assert at <= done <= at + 1  # the sweep it was in (or, signalled between, the next)
    print(f"SIGTERM at sweep {at}: left after sweep {done}, {seconds:.1f} s after the signal "
          f"(the chain's own count {stopped.group(2)} s)")
    if distribute:
        assert "their exit codes [143, 143]" in out, out[-3000:]
    arrays, trace = _checkpoint(ck)
    assert int(arrays["sweep"]) == done and len(trace) == done  # not a multiple of every=5

    _, d_true, x = _draw(7, seed=5)
    said = []
    resumed = _refine(x, d_true, ck, progress=said.append)
    assert f"resuming refinement from checkpoint at sweep {done}/8" in said[0]
    whole = _refine(x, d_true, tmp_path / "whole")
    for key in ("D", "theta"):
        for a, b in zip(whole[key], resumed[key]):
            np.testing.assert_array_equal(a, b, err_msg=key)
    for key in ("gamma_s", "gamma_e", "on_rate", "features"):
        np.testing.assert_array_equal(whole[key], resumed[key], err_msg=key)
    end_w, end_r = _checkpoint(tmp_path / "whole"), _checkpoint(ck)
    assert sorted(end_w[0]) == sorted(end_r[0]) and end_w[1] == end_r[1]
    for k in end_w[0]:
        np.testing.assert_array_equal(end_w[0][k], end_r[0][k], err_msg=k)
