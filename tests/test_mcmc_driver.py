"""mcmc.driver: one driver for every chain. A toy kernel (a Gaussian AR(1) chain, its
step t drawn from the seed folded with t) checks what every chain relies on: a run
stopped and resumed from its checkpoint ends bit for bit where an uninterrupted run
ends; the sums hold exactly the collected draws; a checkpoint of other settings is not
resumed; an early stop returns None."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from dgdm_tf.mcmc.driver import Checkpoint, Kernel, run_chain


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
