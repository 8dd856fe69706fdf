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
of collected draws.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from dgdm_tf.io import atomic as atomic_io


class Kernel:
    """What a chain supplies to :func:`run_chain`. Override every method but ``begin``."""

    def start(self) -> Any:
        """The chain's first state (no step taken)."""
        raise NotImplementedError

    def restore(self, arrays: dict) -> Any:
        """The state saved by :meth:`arrays` in a checkpoint."""
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
        """The checkpoint's arrays (every key), or None when there is none that fits."""
        if self.path is None or not Path(self.path).exists():
            return None
        with np.load(self.path, allow_pickle=False) as z:
            missing = {"fingerprint", self.step_key, "trace"} - set(z.files)
            if missing:  # written before this driver's layout (an older dgdm)
                say(f"checkpoint {self.path} lacks {sorted(missing)}: it was written by an "
                    f"older version of dgdm; starting afresh")
                return None
            if str(z["fingerprint"]) != self.fingerprint:
                say(self.stale.format(path=self.path, done=0, total=total))
                return None
            arrays = {k: z[k] for k in z.files}
        say(self.resumed.format(path=self.path, done=int(arrays[self.step_key]), total=total))
        return arrays

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


def run_chain(kernel: Kernel, total: int, checkpoint: Checkpoint, *,
              say: Callable[[str], None] | None = None,
              stop_after: int | None = None,
              on_step: Callable[[int, Any], None] | None = None) -> ChainRun | None:
    """Run ``kernel`` to ``total`` steps, from the checkpoint when it fits. Returns None
    when ``stop_after`` steps (in all) end the run before ``total`` (used to test
    resumption). ``on_step(t, state)``: called after step ``t`` (0-based) with its new
    state, before that step's checkpoint is written (so what it records of the steps
    since the last checkpoint is written again, the same, when a killed chain resumes);
    it only reads the state, so the draws are unchanged."""
    say = say or (lambda _m: None)
    saved = checkpoint.load(total, say)
    if saved is not None:
        try:
            state = kernel.restore(saved)
        except KeyError as err:  # the kernel's arrays of an older version of its chain
            say(f"checkpoint {checkpoint.path} lacks the array {err}: it was written by an "
                f"older version of this chain; starting afresh")
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
        if (t + 1) % checkpoint.every == 0 or t + 1 == total:
            checkpoint.save(t + 1, rows, kernel.arrays(state), sums)
        if stop_after is not None and t + 1 >= stop_after and t + 1 < total:
            return None
    return ChainRun(state=state, sums=sums, rows=rows, steps_here=total - done)
