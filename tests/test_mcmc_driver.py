"""mcmc.driver: one driver for every chain. A toy kernel (a Gaussian AR(1) chain, its
step t drawn from the seed folded with t) checks what every chain relies on: a run
stopped and resumed from its checkpoint ends bit for bit where an uninterrupted run
ends; the sums hold exactly the collected draws; a checkpoint of other settings is not
resumed; an early stop returns None; a damaged checkpoint is set aside and the chain
starts afresh; SIGTERM ends the chain after its step, with its checkpoint, status 143."""

from __future__ import annotations

import os
import signal
import struct
import threading
import zipfile

import numpy as np
import pytest
import tensorflow as tf

from _damage import random_bytes, truncate
from dgdm_tf.mcmc.checkpoint import Checkpoint, fit
from dgdm_tf.mcmc.driver import EXIT_TERMINATED, Kernel, Terminated, run_chain


class AR1(Kernel):
    """x_{t+1} = 0.5 x_t + N(0, 1); the draws of steps >= burn_in are collected."""

    def __init__(self, seed: int, burn_in: int):
        self.seed, self.burn_in, self.reports = seed, burn_in, 0

    def start(self):
        return np.zeros(3, np.float64)

    def restore(self, arrays):
        return arrays["x"]

    def arrays(self, state):
        return {"x": np.asarray(state)}

    def step(self, state, t):
        seed = tf.random.experimental.stateless_fold_in(tf.constant([self.seed, 7], tf.int64), t)
        x = 0.5 * state + tf.random.stateless_normal([3], seed, dtype=tf.float64).numpy()
        draw = {"x": x, "count": np.array(1.0)} if t >= self.burn_in else None
        return x, {"step": t + 1, "x0": float(x[0])}, draw

    def report(self, rows, total, sec_per_step):
        self.reports += 1


def _run(tmp_path, stop_after=None, seed=0, fingerprint="a", every=2):
    ck = Checkpoint(tmp_path / "ck.npz", fingerprint, every=every)
    said = []
    return run_chain(AR1(seed, burn_in=3), 10, ck, say=said.append, stop_after=stop_after), said


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
    k = AR1(0, burn_in=3)
    for t in range(10):
        x, _, draw = k.step(x, t)
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
    run = run_chain(AR1(0, 3), 4, Checkpoint(None, "x"), stop_after=None)
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
    run = run_chain(AR1(0, burn_in=3), 10, ck, on_step=lambda t, s: seen.append((t, s.copy())))
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
    whole = run_chain(FitAR1(0, 3), 10, Checkpoint(None, "a"))
    ck = Checkpoint(tmp_path / "ck.npz", "a", every=2)
    assert run_chain(FitAR1(0, 3), 10, ck, stop_after=5) is None
    (tmp_path / "ck.npz.damaged").write_text("an older damaged checkpoint")
    damage(tmp_path / "ck.npz")
    said = []
    again = run_chain(FitAR1(0, 3), 10, ck, say=said.append)
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
    assert run_chain(FitAR1(0, 3), 10, ck).steps_here == 0  # the new checkpoint resumes


def test_a_checkpoint_whose_step_does_not_fit_its_trace_is_set_aside(tmp_path):
    ck = Checkpoint(tmp_path / "ck.npz", "a", every=2)
    run_chain(AR1(0, 3), 10, ck, stop_after=4)
    with np.load(tmp_path / "ck.npz") as z:
        arrays = {k: z[k] for k in z.files}
    np.savez(tmp_path / "ck.npz", **{**arrays, "sweep": np.array(7)})
    said = []
    assert run_chain(AR1(0, 3), 10, ck, say=said.append).steps_here == 10
    assert any("sweep 7 of 10 with 4 trace rows" in m for m in said), said
    assert (tmp_path / "ck.npz.damaged").exists()


class SigtermAt(AR1):
    """AR1 that sends this process SIGTERM during step ``at``."""

    def __init__(self, at):
        super().__init__(0, 3)
        self.at = at

    def step(self, state, t):
        if t == self.at:
            os.kill(os.getpid(), signal.SIGTERM)
        return super().step(state, t)


def test_sigterm_finishes_the_step_writes_the_checkpoint_and_exits_143(tmp_path):
    before = signal.getsignal(signal.SIGTERM)
    ck = Checkpoint(tmp_path / "ck.npz", "a", every=4)
    said = []
    with pytest.raises(SystemExit) as stop:
        run_chain(SigtermAt(5), 10, ck, say=said.append)
    assert isinstance(stop.value, Terminated) and stop.value.code == EXIT_TERMINATED == 143
    assert signal.getsignal(signal.SIGTERM) is before  # the handler is put back
    with np.load(tmp_path / "ck.npz") as z:
        assert int(z["sweep"]) == 6  # step 5 finished (not a multiple of every)
    assert any("SIGTERM: stopped after sweep 6/10" in m and "exit status 143" in m
               for m in said), said
    resumed = run_chain(AR1(0, 3), 10, ck)
    whole = run_chain(AR1(0, 3), 10, Checkpoint(None, "a"))
    np.testing.assert_array_equal(resumed.state, whole.state)
    assert resumed.rows == whole.rows and resumed.steps_here == 4


def test_a_chain_outside_the_main_thread_runs_and_says_sigterm_is_not_caught(tmp_path):
    out, said = [], []
    th = threading.Thread(target=lambda: out.append(
        run_chain(AR1(0, 3), 10, Checkpoint(tmp_path / "ck.npz", "a"), say=said.append)))
    th.start()
    th.join()
    assert out[0].steps_here == 10
    assert any("outside the main thread: SIGTERM is not caught" in m for m in said)
