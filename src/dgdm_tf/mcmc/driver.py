"""One driver for every chain: start or resume, step, collect, trace, checkpoint, stop.

A chain supplies only its kernel (:class:`Kernel`: its start, one step, its state as
arrays and back, its progress line and trace file), as ``tfp.mcmc.sample_chain`` takes a
kernel. The driver owns what every chain shares: resuming from the newest checkpoint
whose fingerprint matches (the inputs and settings), the loop with its timing, the sums
of the collected draws, atomic checkpoints every ``every`` steps and at the end, and the
early stop that tests resumption. Randomness is the kernel's: it draws step ``t`` from
its seed folded with ``t``, so a resumed chain ends bit for bit where an uninterrupted
one ends (same machine, same TF build).

Checkpoint layout (one ``.npz``, uncompressed): ``fingerprint``, ``<step_key>`` (steps
done), ``trace`` (the rows as JSON), the kernel's arrays, and ``acc_<name>`` for each sum
of collected draws. Every checkpoint file is read by :func:`read_npz`: a file that cannot
be read, or whose arrays do not fit the chain (the kernel's ``restore`` raises
:class:`CheckpointMismatch`), is renamed to ``<name>.damaged`` and the chain starts
afresh, so a damaged checkpoint never fails every rerun nor resumes from garbage.

SIGTERM (Slurm's ``scancel``, Snakemake's kill, a node's shutdown): the chain finishes
its step, writes its checkpoint and raises :class:`Terminated`, so the process exits with
status :data:`EXIT_TERMINATED` (143 = 128 + SIGTERM, a failure that Snakemake and Slurm
resubmit) and its rerun resumes from that step.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from dgdm_tf.io import atomic as atomic_io, npz_files

#: the exit status of a chain stopped by SIGTERM (the shell's 128 + signal number)
EXIT_TERMINATED = 128 + signal.SIGTERM


class CheckpointDamaged(Exception):
    """A checkpoint file that cannot be read (truncated, not an npz, a corrupt member)."""

    def __init__(self, path, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = Path(path), reason


class CheckpointMismatch(ValueError):
    """Raised by :meth:`Kernel.restore`: the checkpoint's arrays do not fit the chain."""


class Terminated(SystemExit):
    """A chain stopped by SIGTERM after a whole step, its checkpoint written; exits the
    process with :data:`EXIT_TERMINATED` unless caught."""

    def __init__(self):
        super().__init__(EXIT_TERMINATED)


def read_npz(path) -> dict:
    """Every array of the checkpoint file ``path``, read in full (a member read to its end
    has its CRC checked) by the data's reader (:func:`dgdm_tf.io.npz_files.read_npz`, which
    says what a file that is not an npz is instead); :class:`CheckpointDamaged` when it
    cannot be read."""
    try:
        return npz_files.read_npz(path)
    except (FileNotFoundError, PermissionError):  # the file system's fault, not the file's
        raise
    except npz_files.NpzFormatError as err:
        raise CheckpointDamaged(path, err.problem.removeprefix("is ")) from err
    except Exception as err:  # noqa: BLE001 -- whatever else the bytes make np.load raise
        raise CheckpointDamaged(path, f"{type(err).__name__}: {err}") from err


def fit(arrays: dict, expected: dict) -> None:
    """:class:`CheckpointMismatch` unless each ``arrays[name]`` has the shape (a tuple)
    and dtype of ``expected[name] = (shape, dtype)``; for a kernel's ``restore``."""
    for name, (shape, dtype) in expected.items():
        a = arrays[name]
        if a.shape != tuple(shape) or a.dtype != np.dtype(dtype):
            raise CheckpointMismatch(f"the array {name} is {a.dtype}{list(a.shape)}, the "
                                     f"chain's is {np.dtype(dtype)}{list(shape)}")


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


@dataclasses.dataclass(frozen=True)
class CheckpointDir:
    """Where an entry point's chain keeps its checkpoint (``dir``/checkpoint.npz) and its
    live trace (``dir``/``trace``; None: none), and ``stop_after``: leave after that many
    steps of this run, checkpoint written (a rerun resumes: the tests of resumption)."""
    dir: str | Path
    stop_after: int | None = None
    trace: str | None = "trace.csv"

    @property
    def trace_path(self) -> Path | None:
        return None if self.trace is None else Path(self.dir) / self.trace


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """Where and how often a chain saves itself. ``path`` None: never (no resumption).
    ``resumed`` / ``stale`` are the log lines on resuming and on a checkpoint of other
    inputs (``{done}``, ``{total}``, ``{path}`` filled in). ``save_start``: write the
    first state before the first step (a chain whose state also lives in files).
    ``write`` False: read the checkpoint but never write it (the workers of a
    data-parallel chain other than its chief, which hold the same state)."""
    path: Path | None
    fingerprint: str
    every: int = 10
    step_key: str = "sweep"
    resumed: str = "resuming from checkpoint at sweep {done}/{total} ({path})"
    stale: str = "checkpoint {path} is from different inputs or settings; starting afresh"
    save_start: bool = False
    write: bool = True

    def load(self, total: int, say: Callable[[str], None]) -> dict | None:
        """The checkpoint's arrays (every key), or None when there is none that fits (a
        damaged one is set aside)."""
        if self.path is None or not Path(self.path).exists():
            return None
        try:
            arrays = read_npz(self.path)
        except CheckpointDamaged as err:
            self.set_aside(err.reason, say)
            return None
        missing = {"fingerprint", self.step_key, "trace"} - set(arrays)
        if missing:  # written before this driver's layout (an older dgdm)
            say(f"checkpoint {self.path} lacks {sorted(missing)}: it was written by an "
                f"older version of dgdm; starting afresh")
            return None
        if str(arrays["fingerprint"]) != self.fingerprint:
            say(self.stale.format(path=self.path, done=0, total=total))
            return None
        try:
            done, rows = int(arrays[self.step_key]), json.loads(str(arrays["trace"]))
            if not 0 <= done <= total or not isinstance(rows, list) or len(rows) != done:
                raise ValueError(f"{self.step_key} {done} of {total} with {len(rows)} trace rows")
        except (TypeError, ValueError) as err:
            self.set_aside(f"{type(err).__name__}: {err}", say)
            return None
        say(self.resumed.format(path=self.path, done=done, total=total))
        return arrays

    def set_aside(self, reason: str, say: Callable[[str], None]) -> None:
        """Rename the damaged checkpoint to ``<name>.damaged`` (replacing an older one) and
        say so; a worker that does not write leaves the renaming to the chief."""
        path = Path(self.path)
        aside = path.with_name(path.name + ".damaged")
        if self.write and path.exists():
            os.replace(path, aside)
            say(f"checkpoint {path} is damaged ({reason}): renamed to {aside}; "
                f"starting afresh")
        else:
            say(f"checkpoint {path} is damaged ({reason}); starting afresh")

    def save(self, done: int, rows: list[dict], arrays: dict, sums: dict | None) -> None:
        if self.path is None or not self.write:
            return
        # uncompressed: compressing the float state every few steps costs seconds
        atomic_io.save_npz(self.path, compressed=False, fingerprint=np.array(self.fingerprint),
                           **{self.step_key: np.array(done)}, trace=np.array(json.dumps(rows)),
                           **arrays, **{f"acc_{k}": v for k, v in (sums or {}).items()})


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
