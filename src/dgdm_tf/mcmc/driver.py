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

import numpy as np

from dgdm_tf.mcmc.checkpoint import Checkpoint, CheckpointDamaged, CheckpointMismatch

#: the exit status of a chain stopped by SIGTERM (the shell's 128 + signal number)
EXIT_TERMINATED = 128 + signal.SIGTERM
#: parts a step needs before it reports its progress inside the step, a tenth at a time
#: (a refinement sweep at MNIST's chunks of 250 images: from 2500 images on)
PROGRESS_PARTS = 10


class Terminated(SystemExit):
    """A chain stopped by SIGTERM after a whole step, its checkpoint written; exits the
    process with :data:`EXIT_TERMINATED` unless caught."""

    def __init__(self):
        super().__init__(EXIT_TERMINATED)


@dataclasses.dataclass(frozen=True)
class Step:
    """Where step ``t`` (0-based) of ``total`` falls in its chain's :class:`Schedule`:
    ``phase`` ("anneal", "burn-in" or "collect"), ``adapting`` (a kernel with tuned step
    sizes adapts them), ``warmup_ends`` (the last burn-in step: pretraining prunes its
    maps here), ``draw`` (the index of the collected draw this step gives, None for a
    step between draws) of ``n_draws``, and ``anneal`` (the tempered window's length,
    for :func:`dgdm_tf.mcmc.anneal.gamma_e_cap`); ``since``: the steps since the
    previous draw (the end of burn-in for the first), this one included, during
    collection (None before it)."""
    t: int
    total: int
    phase: str
    adapting: bool
    warmup_ends: bool
    draw: int | None
    n_draws: int
    anneal: int
    since: int | None = None

    @property
    def collected(self) -> bool:
        """This step's state is a collected draw."""
        return self.draw is not None


@dataclasses.dataclass(frozen=True)
class Schedule:
    """A chain's schedule, owned by the driver, as ``tfp.mcmc.sample_chain`` owns
    ``num_burnin_steps`` and ``num_steps_between_results``: ``burn_in`` steps, then
    ``collect`` draws one every ``thin`` steps (the draw is the last step of each
    ``thin``); the first ``anneal`` burn-in steps run at a tempered likelihood, and a
    kernel's step sizes adapt over the first ``adapt`` steps (None: the burn-in)."""
    burn_in: int = 0
    collect: int = 0
    thin: int = 1
    anneal: int = 0
    adapt: int | None = None

    def __post_init__(self):
        for name in ("burn_in", "collect", "thin", "anneal", "adapt"):
            v = getattr(self, name)
            if v is None and name == "adapt":
                continue
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
                raise ValueError(f"Schedule.{name} must be an integer >= 0, got {v!r}")
            object.__setattr__(self, name, int(v))
        if self.thin < 1:
            raise ValueError(f"Schedule.thin must be at least 1, got {self.thin}")
        if self.anneal > self.burn_in:
            raise ValueError(f"Schedule.anneal ({self.anneal}) must lie within the burn-in "
                             f"({self.burn_in}): the tempered steps are burn-in steps")

    @classmethod
    def steps(cls, n: int) -> "Schedule":
        """``n`` steps, none collected (an optimiser's iterations, a chain whose kernel
        keeps what it needs in its state)."""
        return cls(burn_in=n)

    @property
    def total(self) -> int:
        """Steps in all: burn-in, then ``thin`` per collected draw."""
        return self.burn_in + self.collect * self.thin

    def at(self, t: int) -> Step:
        """Step ``t`` (0-based) of this schedule."""
        after = t + 1 - self.burn_in
        draw = after // self.thin - 1 if after > 0 and after % self.thin == 0 else None
        phase = "anneal" if t < self.anneal else "burn-in" if t < self.burn_in else "collect"
        adapt = self.burn_in if self.adapt is None else self.adapt
        return Step(t=t, total=self.total, phase=phase, adapting=t < adapt,
                    warmup_ends=t + 1 == self.burn_in, draw=draw, n_draws=self.collect,
                    anneal=self.anneal, since=(after - 1) % self.thin + 1 if after > 0 else None)


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

    def step(self, state, at: Step) -> tuple[Any, dict, dict | None]:
        """Step ``at.t`` (its place in the schedule: :class:`Step`): (new state, its trace
        row, the draw to add to the collection sums, None unless ``at.collected``)."""
        raise NotImplementedError

    def report(self, rows: list[dict], at: Step, sec_per_step: float) -> None:
        """The progress line of ``rows[-1]`` (step ``at``) and the trace file."""

    def finished(self, state) -> bool:
        """Whether the chain has reached its end before the schedule's (an optimiser that
        converged); the driver stops after this step. Never, by default."""
        return False

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


def part_progress(say: Callable[[str], None], what: str, t0: float,
                  parts_name: str = "parts") -> Callable[[int, int], None]:
    """``on_part(done, parts)`` for a step done in parts (a chunked sweep): the line
    "<what>: done/parts <parts_name>, s, about s to go" at each tenth of the parts, where
    the step has at least :data:`PROGRESS_PARTS`, so that a step of tens of minutes is not
    silent; ``t0``: the step's start (``time.time()``)."""
    def tick(done: int, parts: int) -> None:
        if parts >= PROGRESS_PARTS and (10 * done) // parts > (10 * (done - 1)) // parts:
            spent = time.time() - t0
            say(f"{what}: {done}/{parts} {parts_name}, {spent:.0f} s, "
                f"about {spent * (parts - done) / done:.0f} s to go")
    return tick


def run_chain(kernel: Kernel, schedule: Schedule, checkpoint: Checkpoint, *,
              say: Callable[[str], None] | None = None,
              stop_after: int | None = None,
              on_step: Callable[[int, Any], None] | None = None) -> ChainRun | None:
    """Run ``kernel`` through ``schedule`` (:class:`Schedule`: burn-in, collection,
    thinning, annealing), from the checkpoint when it fits; each step's place in the
    schedule reaches the kernel as a :class:`Step`, and the draws it gives at the
    collected steps are summed here. Returns None when ``stop_after`` steps (in all) end
    the run before its end (used to test resumption). ``on_step(t, state)``: called after
    step ``t`` (0-based) with its new state, before that step's checkpoint is written (so
    what it records of the steps since the last checkpoint is written again, the same,
    when a killed chain resumes); it only reads the state, so the draws are unchanged. On
    SIGTERM: the step, its checkpoint, then :class:`Terminated`."""
    if not isinstance(schedule, Schedule):
        raise TypeError(f"run_chain takes a Schedule (burn-in, collect, thin), not "
                        f"{type(schedule).__name__} {schedule!r}: for n steps with nothing "
                        f"collected pass Schedule.steps(n)")
    say = say or (lambda _m: None)
    with _sigterm(say) as caught:
        return _run(kernel, schedule, checkpoint, say, stop_after, on_step, caught)


def run_in_memory(kernel: Kernel, schedule: Schedule, start, *,
                  say: Callable[[str], None] | None = None) -> ChainRun:
    """:func:`run_chain` without a checkpoint (a test-time chain, whose state is worth
    nothing once the features are out), from the state ``start`` (the caller's, so the
    kernel needs no ``start``): no file, no SIGTERM handling of its own (the process's
    applies), ``kernel.arrays`` never called."""
    if not isinstance(schedule, Schedule):
        raise TypeError(f"run_in_memory takes a Schedule, not {type(schedule).__name__}")
    return _run(kernel, schedule, Checkpoint(None, ""), say or (lambda _m: None), None, None, [],
                first=(start,))


def _run(kernel, schedule, checkpoint, say, stop_after, on_step, caught, first=()) -> ChainRun | None:
    total = schedule.total
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
        state = first[0] if first else kernel.start()
        if checkpoint.save_start and checkpoint.writes:
            checkpoint.save(0, rows, kernel.arrays(state), sums)
    else:
        done = int(saved[checkpoint.step_key])
        rows = json.loads(str(saved["trace"]))
        sums = {k[4:]: v for k, v in saved.items() if k.startswith("acc_")}
    kernel.begin(state, done)
    t_start = time.time()
    for t in range(done, total):
        at = schedule.at(t)
        state, row, draw = kernel.step(state, at)
        if on_step is not None:
            on_step(t, state)
        rows.append(row)
        if draw is not None:
            if not at.collected:
                raise RuntimeError(f"{type(kernel).__name__} gave a draw at step {t + 1}, which "
                                   f"its schedule does not collect ({schedule})")
            sums = draw if not sums else {k: sums[k] + draw[k] for k in sums}
        kernel.report(rows, at, (time.time() - t_start) / (t + 1 - done))
        end = t + 1 == total or kernel.finished(state)
        stop = kernel.agree(bool(caught)) and not end
        if checkpoint.writes and (stop or end or (t + 1) % checkpoint.every == 0):
            checkpoint.save(t + 1, rows, kernel.arrays(state), sums)
        if stop:
            late = f", {time.time() - caught[0]:.1f} s after the signal" if caught else ""
            say(f"SIGTERM: stopped after {checkpoint.step_key} {t + 1}/{total}{late}; "
                f"checkpoint {checkpoint.path}; exit status {EXIT_TERMINATED}")
            raise Terminated()
        if end:
            break
        if stop_after is not None and t + 1 >= stop_after:
            return None
    return ChainRun(state=state, sums=sums, rows=rows, steps_here=len(rows) - done)
