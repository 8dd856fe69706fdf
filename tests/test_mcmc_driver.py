"""mcmc.driver: one driver for every chain. A toy kernel (a Gaussian AR(1) chain, its
step t drawn from the seed folded with t) checks what every chain relies on: a run
stopped and resumed from its checkpoint ends bit for bit where an uninterrupted run
ends; the sums hold exactly the collected draws; a checkpoint of other settings is not
resumed; an early stop returns None; a damaged checkpoint is set aside and the chain
starts afresh; SIGTERM ends the chain after its step, with its checkpoint, status 143."""

from __future__ import annotations

import os
import re
import signal
import struct
import threading
import zipfile

import numpy as np
import pytest
import tensorflow as tf

from _damage import random_bytes, truncate
from dgdm_tf.mcmc.checkpoint import Checkpoint, fit
from dgdm_tf.mcmc.driver import (EXIT_TERMINATED, Kernel, Schedule, Terminated, run_chain,
                                 run_in_memory)


#: 3 burn-in steps, then 7 draws: 10 steps
TEN = Schedule(burn_in=3, collect=7)


class AR1(Kernel):
    """x_{t+1} = 0.5 x_t + N(0, 1); the draws of the steps its schedule collects."""

    def __init__(self, seed: int):
        self.seed, self.reports = seed, 0

    def start(self):
        return np.zeros(3, np.float64)

    def restore(self, arrays):
        return arrays["x"]

    def arrays(self, state):
        return {"x": np.asarray(state)}

    def step(self, state, at):
        seed = tf.random.experimental.stateless_fold_in(tf.constant([self.seed, 7], tf.int64), at.t)
        x = 0.5 * state + tf.random.stateless_normal([3], seed, dtype=tf.float64).numpy()
        draw = {"x": x, "count": np.array(1.0)} if at.collected else None
        return x, {"step": at.t + 1, "x0": float(x[0])}, draw

    def report(self, rows, at, sec_per_step):
        self.reports += 1


def _run(tmp_path, stop_after=None, seed=0, fingerprint="a", every=2):
    ck = Checkpoint(tmp_path / "ck.npz", fingerprint, every=every)
    said = []
    return run_chain(AR1(seed), TEN, ck, say=said.append, stop_after=stop_after), said


def test_resumed_chain_ends_where_an_uninterrupted_one_ends(tmp_path):
    whole, _ = _run(tmp_path / "a")
    assert _run(tmp_path / "b", stop_after=5)[0] is None
    resumed, said = _run(tmp_path / "b")
    assert any("resuming from checkpoint at sweep 4/10" in m for m in said)  # saved every 2
    assert resumed.steps_here == 6
    np.testing.assert_array_equal(resumed.state, whole.state)
    for k in whole.sums:
        np.testing.assert_array_equal(resumed.sums[k], whole.sums[k])
    assert resumed.rows == whole.rows and len(whole.rows) == 10


def test_sums_hold_exactly_the_collected_draws(tmp_path):
    run, _ = _run(tmp_path)
    assert float(run.sums["count"]) == 7.0  # steps 3..9
    xs, x = [], np.zeros(3)
    k = AR1(0)
    for t in range(10):
        x, _, draw = k.step(x, TEN.at(t))
        if draw is not None:
            xs.append(x)
    np.testing.assert_allclose(run.sums["x"], np.sum(xs, 0), rtol=0, atol=1e-12)


def test_checkpoint_of_other_settings_is_not_resumed(tmp_path):
    _run(tmp_path, stop_after=6)
    run, said = _run(tmp_path, fingerprint="b", seed=1)
    assert any("starting afresh" in m for m in said) and run.steps_here == 10


def test_a_finished_chain_resumes_at_its_end(tmp_path):
    first, _ = _run(tmp_path)
    again, said = _run(tmp_path)
    assert again.steps_here == 0 and any("sweep 10/10" in m for m in said)
    np.testing.assert_array_equal(again.state, first.state)


def test_without_a_path_nothing_is_written(tmp_path):
    run = run_chain(AR1(0), Schedule(burn_in=3, collect=1), Checkpoint(None, "x"), stop_after=None)
    assert run.steps_here == 4 and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("every", [1, 3])
def test_checkpoints_every_k_steps_and_at_the_end(tmp_path, every):
    _run(tmp_path, stop_after=7, every=every)
    with np.load(tmp_path / "ck.npz") as z:
        assert int(z["sweep"]) == (7 if every == 1 else 6)
        assert set(z.files) == {"fingerprint", "sweep", "trace", "x", "acc_x", "acc_count"}


@pytest.mark.parametrize("drop", ["trace", "x"])
def test_a_checkpoint_of_an_older_layout_starts_afresh(tmp_path, drop):
    """A checkpoint written before a field existed (the driver's trace, or one of the
    kernel's arrays) is not resumed: the chain says why and runs from its start, to the
    same end as a chain that never had a checkpoint."""
    whole, _ = _run(tmp_path / "a")
    _run(tmp_path / "b", stop_after=6)
    path = tmp_path / "b" / "ck.npz"
    with np.load(path) as z:
        kept = {k: z[k] for k in z.files if k != drop}
    np.savez(path, **kept)
    run, said = _run(tmp_path / "b")
    assert run.steps_here == 10 and any("older version" in m and "afresh" in m for m in said)
    np.testing.assert_array_equal(run.state, whole.state)


def test_on_step_sees_each_new_state_and_changes_nothing(tmp_path):
    """on_step(t, state) is called once per step taken with that step's new state; the
    run's state, sums and rows are those of a run without it."""
    plain, _ = _run(tmp_path / "a")
    seen = []
    ck = Checkpoint(tmp_path / "b" / "ck.npz", "a", every=2)
    run = run_chain(AR1(0), TEN, ck, on_step=lambda t, s: seen.append((t, s.copy())))
    assert [t for t, _ in seen] == list(range(10))
    np.testing.assert_array_equal(seen[-1][1], plain.state)
    np.testing.assert_array_equal(run.state, plain.state)
    assert run.rows == plain.rows and all(np.array_equal(run.sums[k], plain.sums[k]) for k in run.sums)


# --- damaged checkpoints and SIGTERM -------------------------------------------------

def _corrupt_member(path):
    """Flip one byte of the kernel's array ``x`` (a stored zip member: its CRC fails)."""
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("x.npy")
    data = bytearray(path.read_bytes())
    name_len, extra_len = struct.unpack("<HH", data[info.header_offset + 26:info.header_offset + 30])
    data[info.header_offset + 30 + name_len + extra_len + info.file_size - 1] ^= 0xFF
    path.write_bytes(bytes(data))


def _wrong_shape(path):
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["x"] = np.zeros(4)
    np.savez(path, **arrays)


class FitAR1(AR1):
    """AR1 whose restore checks its state's shape (as the chains' kernels do)."""

    def restore(self, arrays):
        fit(arrays, {"x": ((3,), np.float64)})
        return arrays["x"]


@pytest.mark.parametrize("damage", [truncate, random_bytes, _corrupt_member, _wrong_shape])
def test_a_damaged_checkpoint_is_set_aside_and_the_chain_starts_afresh(tmp_path, damage):
    whole = run_chain(FitAR1(0), TEN, Checkpoint(None, "a"))
    ck = Checkpoint(tmp_path / "ck.npz", "a", every=2)
    assert run_chain(FitAR1(0), TEN, ck, stop_after=5) is None
    (tmp_path / "ck.npz.damaged").write_text("an older damaged checkpoint")
    damage(tmp_path / "ck.npz")
    said = []
    again = run_chain(FitAR1(0), TEN, ck, say=said.append)
    assert again.steps_here == 10 and again.rows == whole.rows
    np.testing.assert_array_equal(again.state, whole.state)
    aside = tmp_path / "ck.npz.damaged"
    assert aside.read_bytes() != b"an older damaged checkpoint"  # replaced
    assert any(f"checkpoint {tmp_path / 'ck.npz'} is damaged (" in m
               and f"renamed to {aside}; starting afresh" in m for m in said), said
    # the data's reader says what the bytes are, never numpy's advice to unpickle them
    assert not any("unsafely" in m or "allow_pickle" in m for m in said), said
    if damage is random_bytes:
        assert any("is damaged (not an .npz archive (its first bytes" in m for m in said), said
    assert run_chain(FitAR1(0), TEN, ck).steps_here == 0  # the new checkpoint resumes


def test_a_checkpoint_whose_step_does_not_fit_its_trace_is_set_aside(tmp_path):
    ck = Checkpoint(tmp_path / "ck.npz", "a", every=2)
    run_chain(AR1(0), TEN, ck, stop_after=4)
    with np.load(tmp_path / "ck.npz") as z:
        arrays = {k: z[k] for k in z.files}
    np.savez(tmp_path / "ck.npz", **{**arrays, "sweep": np.array(7)})
    said = []
    assert run_chain(AR1(0), TEN, ck, say=said.append).steps_here == 10
    assert any("sweep 7 of 10 with 4 trace rows" in m for m in said), said
    assert (tmp_path / "ck.npz.damaged").exists()


class SigtermAt(AR1):
    """AR1 that sends this process SIGTERM during step ``when``."""

    def __init__(self, when):
        super().__init__(0)
        self.when = when

    def step(self, state, at):
        if at.t == self.when:
            os.kill(os.getpid(), signal.SIGTERM)
        return super().step(state, at)


def test_sigterm_finishes_the_step_writes_the_checkpoint_and_exits_143(tmp_path):
    before = signal.getsignal(signal.SIGTERM)
    ck = Checkpoint(tmp_path / "ck.npz", "a", every=4)
    said = []
    with pytest.raises(SystemExit) as stop:
        run_chain(SigtermAt(5), TEN, ck, say=said.append)
    assert isinstance(stop.value, Terminated) and stop.value.code == EXIT_TERMINATED == 143
    assert signal.getsignal(signal.SIGTERM) is before  # the handler is put back
    with np.load(tmp_path / "ck.npz") as z:
        assert int(z["sweep"]) == 6  # step 5 finished (not a multiple of every)
    assert any("SIGTERM: stopped after sweep 6/10" in m and "exit status 143" in m
               for m in said), said
    resumed = run_chain(AR1(0), TEN, ck)
    whole = run_chain(AR1(0), TEN, Checkpoint(None, "a"))
    np.testing.assert_array_equal(resumed.state, whole.state)
    assert resumed.rows == whole.rows and resumed.steps_here == 4


def test_a_chain_outside_the_main_thread_runs_and_says_sigterm_is_not_caught(tmp_path):
    out, said = [], []
    th = threading.Thread(target=lambda: out.append(
        run_chain(AR1(0), TEN, Checkpoint(tmp_path / "ck.npz", "a"), say=said.append)))
    th.start()
    th.join()
    assert out[0].steps_here == 10
    assert any("outside the main thread: SIGTERM is not caught" in m for m in said)


# --- the schedule ----------------------------------------------------------------------

def test_schedule_places_burn_in_anneal_draws_and_adaptation():
    """burn_in 4 (2 of them tempered), 3 draws one every 2: steps 5, 7 and 9 (1-based)
    are the draws, step 4 ends the warm-up, the step sizes adapt over the burn-in."""
    s = Schedule(burn_in=4, collect=3, thin=2, anneal=2)
    steps = [s.at(t) for t in range(s.total)]
    assert s.total == 10
    assert [a.phase for a in steps] == ["anneal"] * 2 + ["burn-in"] * 2 + ["collect"] * 6
    assert [a.draw for a in steps] == [None] * 5 + [0, None, 1, None, 2]
    assert [a.t for a in steps if a.collected] == [5, 7, 9]
    assert [a.warmup_ends for a in steps] == [False] * 3 + [True] + [False] * 6
    assert [a.adapting for a in steps] == [True] * 4 + [False] * 6
    assert [a.since for a in steps] == [None] * 4 + [1, 2, 1, 2, 1, 2]
    assert all(a.n_draws == 3 and a.total == 10 and a.anneal == 2 for a in steps)
    assert [a.adapting for a in map(Schedule(collect=2, thin=3, adapt=3).at, range(6))] == \
        [True] * 3 + [False] * 3
    assert Schedule.steps(5).total == 5 and not any(
        Schedule.steps(5).at(t).collected for t in range(5))


@pytest.mark.parametrize("kwargs, says", [
    ({"thin": 0}, "thin must be at least 1"),
    ({"burn_in": -1}, "burn_in must be an integer >= 0"),
    ({"collect": 2.5}, "collect must be an integer >= 0"),
    ({"burn_in": 2, "anneal": 3}, "anneal (3) must lie within the burn-in (2)"),
])
def test_schedule_refuses_what_cannot_be_a_schedule(kwargs, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        Schedule(**kwargs)


def test_run_chain_refuses_a_bare_step_count():
    with pytest.raises(TypeError, match=r"Schedule.steps\(n\)"):
        run_chain(AR1(0), 10, Checkpoint(None, "a"))


class DrawsEveryStep(AR1):
    """A kernel that decides collection for itself (what the driver forbids)."""

    def step(self, state, at):
        x, row, _ = super().step(state, at)
        return x, row, {"x": x}


def test_a_draw_at_a_step_the_schedule_does_not_collect_is_refused():
    with pytest.raises(RuntimeError, match="does not collect"):
        run_in_memory(DrawsEveryStep(0), TEN, np.zeros(3))


class NoArrays(AR1):
    def arrays(self, state):
        raise AssertionError("arrays() called by a chain that writes no checkpoint")


def test_run_in_memory_is_run_chain_without_a_checkpoint(tmp_path):
    """The same draws, sums and rows as a checkpointed run; the state is never asked
    for as arrays, and nothing is written."""
    whole, _ = _run(tmp_path / "a")
    mem = run_in_memory(NoArrays(0), TEN, np.zeros(3))
    np.testing.assert_array_equal(mem.state, whole.state)
    assert mem.rows == whole.rows and all(np.array_equal(mem.sums[k], whole.sums[k])
                                          for k in whole.sums)
    assert run_chain(NoArrays(0), TEN, Checkpoint(None, "x")).steps_here == 10
