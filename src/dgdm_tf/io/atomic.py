"""Atomic output writing: a crash never leaves a half-written result behind.

Every file is written to a temporary sibling and moved into place with
``os.replace``, which is atomic on POSIX file systems. A writer killed outright (SIGKILL,
a lost node) runs no cleanup and leaves its hidden temporary behind; the next write of the
same path removes such leftovers, so a rerun leaves the folder as an uninterrupted run.
"""

from __future__ import annotations

import contextlib
import errno
import json
import glob
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

import numpy as np


class DiskFullError(OSError):
    """Writing ``path`` ran out of space (``ENOSPC``) or quota (``EDQUOT``); nothing was
    left behind. Still an ``OSError`` with the original ``errno``; ``free_bytes`` is what
    the file system had free once the partial file was removed."""

    def __init__(self, path: Path, cause: OSError):
        self.path = Path(path)
        try:
            self.free_bytes: int | None = shutil.disk_usage(self.path.parent).free
            free = f"{self.free_bytes} bytes ({_human(self.free_bytes)}) are free there"
        except OSError:
            self.free_bytes, free = None, "its free space could not be read"
        what = ("the disk quota is exceeded" if cause.errno == errno.EDQUOT
                else "its file system is full")
        self.message = (
            f"{self.path} could not be written: {what} ({cause.strerror}); {free} "
            f"({self.path.parent}) now that the partial file is removed. Free space there "
            f"(or raise the quota, or point the results elsewhere) and rerun the step.")
        super().__init__(cause.errno, self.message, str(self.path))

    def __str__(self) -> str:
        return self.message


_FULL = (errno.ENOSPC, errno.EDQUOT)


def _human(n: float) -> str:
    if n < 1024:
        return f"{n:.0f} B"
    for unit in ("KiB", "MiB"):
        n /= 1024
        if n < 1024:
            return f"{n:.1f} {unit}"
    return f"{n / 1024:.1f} GiB"


def _remove_leftovers(path: Path) -> None:
    """Remove the temporaries of earlier writers of ``path`` that were killed before they
    could (mkstemp's names: ``.<name>.<8 characters>.tmp``)."""
    pattern = re.compile(re.escape(f".{path.name}.") + r"[a-z0-9_]{8}\.tmp")
    for old in glob.glob(glob.escape(str(path.parent / f".{path.name}.")) + "*.tmp"):
        if pattern.fullmatch(os.path.basename(old)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(old)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path in the same folder; move it onto ``path`` on success. A
    full file system (or quota) raises :class:`DiskFullError`, the temporary removed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:  # no inode left
        if exc.errno in _FULL:
            raise DiskFullError(path, exc) from exc
        raise
    os.close(fd)
    tmp = Path(tmp)
    try:
        yield tmp
        # mkstemp creates 0600; give the result the permissions a plain open() would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
        _remove_leftovers(path)
    except OSError as exc:
        if exc.errno not in _FULL:
            raise
        tmp.unlink(missing_ok=True)  # before measuring: its blocks are free again
        raise DiskFullError(path, exc) from exc
    finally:
        if tmp.exists():
            tmp.unlink()


def save_npz(path: str | os.PathLike, compressed: bool = True, **arrays: Any) -> None:
    """``np.savez_compressed`` (or ``np.savez``) written atomically (the name is kept exactly)."""
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            (np.savez_compressed if compressed else np.savez)(fh, **arrays)


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_json(path: str | os.PathLike, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n")


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
