"""io.atomic on a real full file system: an output or a chain checkpoint that does not fit
fails with :class:`DiskFullError` (an ``OSError``) naming the path and the free space, and
leaves neither the file nor its temporary behind (an older checkpoint stays whole).

The small file systems are mounted for the test (root and ``mount``, as here and in CI):
a 64 KiB tmpfs and a 1 MiB ext4 image on a loop device; where one cannot be mounted its
tests are skipped, saying why."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess

import numpy as np
import pytest

from dgdm_tf.io import atomic
from dgdm_tf.mcmc.checkpoint import Checkpoint


def _run(*cmd) -> str | None:
    """None when ``cmd`` succeeded, else why not."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{cmd[0]}: {exc}"
    return None if r.returncode == 0 else f"{' '.join(map(str, cmd))}: {r.stderr.strip()}"


@pytest.fixture(params=["tmpfs", "loop"])
def full_fs(request, tmp_path):
    """A mounted file system of 64 KiB (tmpfs) or 1 MiB (ext4 on a loop device)."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if request.param == "tmpfs":
        why = _run("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt))
    else:
        img = tmp_path / "small.img"
        with open(img, "wb") as fh:
            fh.truncate(1 << 20)
        why = (_run("mkfs.ext4", "-q", "-F", str(img))
               or _run("mount", "-o", "loop", str(img), str(mnt)))
    if why is not None:
        pytest.skip(f"no small {request.param} file system to fill (needs root and mount): {why}")
    try:
        yield mnt
    finally:
        _run("umount", str(mnt))


def _files(folder) -> list[str]:
    return sorted(set(os.listdir(folder)) - {"lost+found"})  # ext4's own


def _assert_disk_full(exc: pytest.ExceptionInfo, path) -> str:
    err, msg = exc.value, str(exc.value)
    assert isinstance(err, OSError) and err.errno == errno.ENOSPC
    assert err.path == path and err.free_bytes == shutil.disk_usage(path.parent).free
    assert msg.startswith(f"{path} could not be written: its file system is full "
                          f"(No space left on device); {err.free_bytes} bytes ("), msg
    assert "now that the partial file is removed" in msg and "Free space there" in msg
    return msg


def test_an_output_too_big_for_the_disk(full_fs):
    path = full_fs / "out" / "features.npz"
    big = np.random.default_rng(0).random(200_000)  # 1.6 MB, incompressible
    with pytest.raises(atomic.DiskFullError) as exc:
        atomic.save_npz(path, features=big)
    msg = _assert_disk_full(exc, path)
    print(msg)
    assert _files(path.parent) == []  # no file, no temporary
    with pytest.raises(OSError, match="could not be written"):
        atomic.write_text(full_fs / "notes.txt", "x" * 2_000_000)
    assert _files(full_fs) == ["out"]
    atomic.write_text(full_fs / "notes.txt", "fits\n")  # the space is free again
    assert (full_fs / "notes.txt").read_text() == "fits\n"


def test_a_checkpoint_too_big_for_the_disk_keeps_the_last_one(full_fs):
    ck = Checkpoint(full_fs / "ck.npz", "abc")
    ck.save(2, [{"sweep": 1}, {"sweep": 2}], {"x": np.zeros(3)}, {"x": np.ones(3)})
    before = (full_fs / "ck.npz").read_bytes()
    big = {"x": np.random.default_rng(1).random(200_000)}
    with pytest.raises(atomic.DiskFullError) as exc:
        ck.save(4, [{"sweep": s} for s in range(1, 5)], big, None)
    print(_assert_disk_full(exc, full_fs / "ck.npz"))
    assert _files(full_fs) == ["ck.npz"] and (full_fs / "ck.npz").read_bytes() == before
    with np.load(full_fs / "ck.npz") as z:
        assert int(z["sweep"]) == 2


def test_a_quota_and_other_errors(tmp_path):
    # EDQUOT needs a quota-enabled file system: the error is raised where the write would
    with pytest.raises(atomic.DiskFullError, match="the disk quota is exceeded") as exc:
        with atomic.atomic_path(tmp_path / "a.txt") as tmp:
            tmp.write_text("partial")
            raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT))
    assert exc.value.errno == errno.EDQUOT and os.listdir(tmp_path) == []
    with pytest.raises(OSError) as exc:  # not a full disk: passed on as it is
        with atomic.atomic_path(tmp_path / "b.txt"):
            raise OSError(errno.EIO, "I/O error")
    assert type(exc.value) is OSError and os.listdir(tmp_path) == []


def test_a_killed_writers_temporary_is_removed_by_the_next_write(tmp_path):
    """SIGKILL runs no cleanup: the temporary of a writer killed mid-write stays until the
    next write of the same path removes it; other files, and another path's temporary,
    stay."""
    out = tmp_path / "layer1.npz"
    killed = tmp_path / ".layer1.npz.ab3_x9qz.tmp"  # mkstemp's name for out's temporary
    other = tmp_path / ".layer2.npz.ab3_x9qz.tmp"
    near = tmp_path / ".layer1.npz.notmine.tmp"  # not a name mkstemp gives
    for p in (killed, other, near):
        p.write_bytes(b"half")
    atomic.write_text(out, "done")
    assert out.read_text() == "done"
    assert not killed.exists() and other.exists() and near.exists()
