"""One driver for every chain: start or resume, step, collect, trace, checkpoint, stop.

A chain supplies only its kernel (:class:`Kernel`: its start, one step, its state as
arrays and back, its progress line and trace file), as ``tfp.mcmc.sample_chain`` takes a
kernel. The driver owns what every chain shares: resuming from the newest checkpoint
whose fingerprint matches (the inputs and settings), the loop with its timing, the sums
of the collected draws, atomic checkpoints every ``every`` steps and at the end, and the
early stop that tests resumption. Randomness is the kernel's: it draws step ``t`` from
its seed folded with ``t``, so a resumed chain ends bit for bit where an uninterrupted
one ends (same machine, same TF build).

The checkpoint's layout, and what becomes of a damaged one, are
:mod:`dgdm_tf.mcmc.checkpoint`'s, the one module that reads or writes chain state.

SIGTERM (Slurm's ``scancel``, Snakemake's kill, a node's shutdown): the chain finishes
its step, writes its checkpoint and raises :class:`Terminated`, so the process exits with
status :data:`EXIT_TERMINATED` (143 = 128 + SIGTERM, a failure that Snakemake and Slurm
resubmit) and its rerun resumes from that step.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import signal
import threading
import time
from typing import Any, Callable

from dgdm_tf.mcmc.checkpoint import Checkpoint, CheckpointDamaged, CheckpointMismatch

#: the exit status of a chain stopped by SIGTERM (the shell's 128 + signal number)
EXIT_TERMINATED = 128 + signal.SIGTERM


class Terminated(SystemExit):
    """A chain stopped by SIGTERM after a whole step, its checkpoint written; exits the
    process with :data:`EXIT_TERMINATED` unless caught."""

    def __init__(self):
        super().__init__(EXIT_TERMINATED)


class Kernel:
    """What a chain supplies to :func:`run_chain`. Override every method but ``begin``."""

    def start(self) -> Any:
        """The chain's first state (no step taken)."""
        raise NotImplementedError

    def restore(self, arrays: dict) -> Any:
        """The state saved by :meth:`arrays` in a checkpoint; :class:`CheckpointMismatch`
        (e.g. by :func:`fit`) when the arrays do not fit the chain."""
        raise NotImplementedError

    def arrays(self, state) -> dict:
        """The state as named numpy arrays for a checkpoint."""
        raise NotImplementedError

    def begin(self, state, done: int) -> None:
        """Called once before the first step (``done`` steps already taken): compile the
        step, open the data stream, ..."""

    def step(self, state, t: int) -> tuple[Any, dict, dict | None]:
        """Step ``t`` (0-based): (new state, its trace row, the draw to add to the
        collection sums or None)."""
        raise NotImplementedError

    def report(self, rows: list[dict], total: int, sec_per_step: float) -> None:
        """The progress line of ``rows[-1]`` and the trace file."""

    def agree(self, stop: bool) -> bool:
        """Whether any worker of a data-parallel chain asks to stop after this step (each
        worker calls it after every step, so they leave at the same one); ``stop`` alone
        for a chain of one process."""
        return stop


@dataclasses.dataclass
class ChainRun:
    """A finished chain: its last state, the sums of its collected draws (``count`` among
    them when the kernel counts), the trace rows and the steps taken by this process."""
    state: Any
    sums: dict
    rows: list[dict]
    steps_here: int


@contextlib.contextmanager
def _sigterm(say: Callable[[str], None]):
    """A list that SIGTERM appends its time to while the block runs; the process's own
    handler is put back after. Outside the main thread Python cannot catch signals: the
    list stays empty and SIGTERM does what the process's handler does."""
    caught: list[float] = []
    if threading.current_thread() is not threading.main_thread():
        say("the chain runs outside the main thread: SIGTERM is not caught, so it stops "
            "the chain only at its last checkpoint")
        yield caught
        return
    previous = signal.signal(signal.SIGTERM, lambda _sig, _frame: caught.append(time.time()))
    try:
        yield caught
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


def run_chain(kernel: Kernel, total: int, checkpoint: Checkpoint, *,
              say: Callable[[str], None] | None = None,
              stop_after: int | None = None,
              on_step: Callable[[int, Any], None] | None = None) -> ChainRun | None:
    """Run ``kernel`` to ``total`` steps, from the checkpoint when it fits. Returns None
    when ``stop_after`` steps (in all) end the run before ``total`` (used to test
    resumption). ``on_step(t, state)``: called after step ``t`` (0-based) with its new
    state, before that step's checkpoint is written (so what it records of the steps
    since the last checkpoint is written again, the same, when a killed chain resumes);
    it only reads the state, so the draws are unchanged. On SIGTERM: the step, its
    checkpoint, then :class:`Terminated`."""
    say = say or (lambda _m: None)
    with _sigterm(say) as caught:
        return _run(kernel, total, checkpoint, say, stop_after, on_step, caught)


def _run(kernel, total, checkpoint, say, stop_after, on_step, caught) -> ChainRun | None:
    saved = checkpoint.load(total, say)
    if saved is not None:
        try:
            state = kernel.restore(saved)
        except KeyError as err:  # the kernel's arrays of an older version of its chain
            say(f"checkpoint {checkpoint.path} lacks the array {err}: it was written by an "
                f"older version of this chain; starting afresh")
            saved = None
        except CheckpointMismatch as err:
            checkpoint.set_aside(str(err), say)
            saved = None
        except CheckpointDamaged as err:  # a file the checkpoint points to (batched state)
            checkpoint.set_aside(f"{err.path}: {err.reason}", say)
            saved = None
    if saved is None:
        done, rows, sums = 0, [], {}
        state = kernel.start()
        if checkpoint.save_start:
            checkpoint.save(0, rows, kernel.arrays(state), sums)
    else:
        done = int(saved[checkpoint.step_key])
        rows = json.loads(str(saved["trace"]))
        sums = {k[4:]: v for k, v in saved.items() if k.startswith("acc_")}
    kernel.begin(state, done)
    t_start = time.time()
    for t in range(done, total):
        state, row, draw = kernel.step(state, t)
        if on_step is not None:
            on_step(t, state)
        rows.append(row)
        if draw is not None:
            sums = draw if not sums else {k: sums[k] + draw[k] for k in sums}
        kernel.report(rows, total, (time.time() - t_start) / (t + 1 - done))
        stop = kernel.agree(bool(caught)) and t + 1 < total
        if stop or (t + 1) % checkpoint.every == 0 or t + 1 == total:
            checkpoint.save(t + 1, rows, kernel.arrays(state), sums)
        if stop:
            late = f", {time.time() - caught[0]:.1f} s after the signal" if caught else ""
            say(f"SIGTERM: stopped after {checkpoint.step_key} {t + 1}/{total}{late}; "
                f"checkpoint {checkpoint.path}; exit status {EXIT_TERMINATED}")
            raise Terminated()
        if stop_after is not None and t + 1 >= stop_after and t + 1 < total:
            return None
    return ChainRun(state=state, sums=sums, rows=rows, steps_here=total - done)
