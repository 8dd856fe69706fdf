"""Checkpoint files: the one module that reads or writes a chain's saved state.

A chain's checkpoint is one ``.npz`` (uncompressed), written atomically by
:class:`Checkpoint` for :func:`dgdm_tf.mcmc.driver.run_chain`: ``fingerprint`` (the
chain's inputs and settings), ``<step_key>`` (steps done), ``trace`` (the rows as JSON),
the kernel's arrays, and ``acc_<name>`` for each sum of collected draws. A chain whose
state is too big for memory keeps it in :class:`StateFiles` beside the checkpoint. Every
file is read by :func:`read_npz`: a file that cannot be read, or whose arrays do not fit
the chain (the kernel's ``restore`` raises :class:`CheckpointMismatch`, e.g. through
:func:`fit`), is renamed to ``<name>.damaged`` and the chain starts afresh, so a damaged
checkpoint never fails every rerun nor resumes from garbage.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path
from typing import Callable

import numpy as np

from dgdm_tf.io import atomic as atomic_io, npz_files


class CheckpointDamaged(Exception):
    """A checkpoint file that cannot be read (truncated, not an npz, a corrupt member)."""

    def __init__(self, path, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = Path(path), reason


class CheckpointMismatch(ValueError):
    """Raised by :meth:`Kernel.restore`: the checkpoint's arrays do not fit the chain."""


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

    @property
    def writes(self) -> bool:
        """Whether :meth:`save` writes anything (a path, and this process writes)."""
        return self.path is not None and self.write

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


class StateFiles:
    """A chain's state kept in files beside its checkpoint: two buffers of per-batch npz
    files under ``root`` (``buffer<i>/batch<b>.npz``), sweep t reading one buffer and
    writing the other, the checkpoint naming the buffer of its sweep
    (:mod:`dgdm_tf.pretrain.batched_chain`)."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def path(self, buffer: int, b: int) -> Path:
        return self.root / f"buffer{buffer}" / f"batch{b:05d}.npz"

    def read(self, buffer: int, b: int) -> dict:
        """Batch ``b``'s arrays (:func:`read_npz`: a damaged file raises
        :class:`CheckpointDamaged`)."""
        return read_npz(self.path(buffer, b))

    def write(self, buffer: int, b: int, arrays: dict) -> None:
        atomic_io.save_npz(self.path(buffer, b), compressed=False,
                           **{k: np.asarray(v) for k, v in arrays.items()})

    def clear(self) -> None:
        """Remove both buffers (a chain starting afresh)."""
        for buffer in (0, 1):
            shutil.rmtree(self.root / f"buffer{buffer}", ignore_errors=True)
