"""Opening a file that must be an ``.npz``: what it is instead, said without guessing.

``np.load`` takes any file that is neither a zip nor an ``.npy`` for a pickle, so random
bytes get numpy's advice to load them "unsafely" with ``allow_pickle``: a misdiagnosis
that invites unpickling an untrusted file. :func:`open_npz` looks at the first bytes and
the zip's members before ``np.load``; :func:`read_npz` also refuses object arrays by
their header's dtype, before numpy would unpickle them. Both raise
:class:`NpzFormatError`, whose ``problem`` the caller completes with what to do (the
rule that writes the file, or the config key that names it).
"""

from __future__ import annotations

import os
import zipfile
import zlib

import numpy as np

_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")  # a zip's first local header / an empty zip
_NPY_MAGIC = b"\x93NUMPY"
#: the remedy for object arrays
SAVE_ADVICE = ("save them as numeric arrays, and strings as str arrays (e.g. "
               "np.asarray(class_names, dtype=str)), with np.savez or np.savez_compressed")


class NpzFormatError(ValueError):
    """``path`` is not an ``.npz`` of plain arrays; ``problem`` says what it is instead
    (a phrase that follows the path: "is not an .npz archive (...)"); ``objects`` the
    names of its object arrays (empty unless that is the problem)."""

    def __init__(self, path, problem: str, objects: tuple[str, ...] = ()):
        self.path, self.problem, self.objects = str(path), problem, tuple(objects)
        super().__init__(f"{self.path} {problem}")


def _what_else(head: bytes) -> str:
    if not head:
        return "an empty file"
    if head.startswith(_NPY_MAGIC):
        return "a single .npy array (np.save), not an archive of named arrays"
    return f"its first bytes {head[:8]!r} are not a zip header"


def open_npz(path: str | os.PathLike) -> np.lib.npyio.NpzFile:
    """``np.load(path, allow_pickle=False)`` of a file checked to be a zip archive of
    ``.npy`` members; else :class:`NpzFormatError`. ``OSError`` (missing, unreadable)
    passes through."""
    with open(path, "rb") as fh:
        head = fh.read(8)
    if not head.startswith(_ZIP_MAGIC):
        raise NpzFormatError(path, f"is not an .npz archive ({_what_else(head)})")
    try:
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise NpzFormatError(path, f"is not a readable .npz archive (a damaged or truncated "
                                   f"zip: {exc})") from exc
    other = [n for n in names if not n.endswith(".npy")]
    if len(other) == len(names):
        raise NpzFormatError(path, f"is not an .npz archive (a zip archive without .npy "
                                   f"members: it holds {_short(names) or 'nothing'})")
    if other:
        raise NpzFormatError(path, f"is not an .npz archive of arrays only (its members "
                                   f"{_short(other)} are not .npy arrays)")
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise NpzFormatError(path, f"is not a readable .npz archive ({exc})") from exc


def read_npz(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` at ``path`` (:func:`open_npz`); object arrays are
    refused from their headers, unread (:class:`NpzFormatError`)."""
    with open_npz(path) as z:
        objects = [k for k in z.files if _dtype(z, k).hasobject]
        if objects:
            raise NpzFormatError(path, f"holds object arrays ({_short(objects)}), which are "
                                       f"not loaded (allow_pickle=False)", objects)
        out = {}
        for k in z.files:
            try:
                out[k] = z[k]
            except (ValueError, OSError, EOFError, zlib.error, zipfile.BadZipFile) as exc:
                raise NpzFormatError(path, f"is not a readable .npz archive (array '{k}': "
                                           f"{exc})") from exc
    return out


def _dtype(z: np.lib.npyio.NpzFile, key: str) -> np.dtype:
    """The dtype in member ``key``'s ``.npy`` header (the data are not read)."""
    try:
        with z.zip.open(f"{key}.npy") as fh:
            version = np.lib.format.read_magic(fh)
            read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                    else np.lib.format.read_array_header_2_0)
            return read(fh)[2]
    except (ValueError, OSError, EOFError, zlib.error, zipfile.BadZipFile) as exc:
        raise NpzFormatError(z.zip.filename, f"is not a readable .npz archive (array "
                                             f"'{key}': {exc})") from exc


def _short(names: list[str], n: int = 5) -> str:
    more = f" and {len(names) - n} more" if len(names) > n else ""
    return ", ".join(repr(s) for s in names[:n]) + more
