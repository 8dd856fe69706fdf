"""Raw files: sha256 and size checks, a network probe with a hard timeout, a prepared TFDS
folder's version."""

from __future__ import annotations

import hashlib
import os
import socket
import threading
from pathlib import Path
from typing import Any

from dgdm_tf.data.errors import ChecksumMismatchError


NETWORK_PROBE_TIMEOUT_S = 5.0


def file_sha256(path: Path | str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def network_reachable(host: str, port: int = 443,
                       timeout: float = NETWORK_PROBE_TIMEOUT_S) -> tuple[bool, str]:
    """Can a TCP connection to ``host:port`` be opened within ``timeout`` seconds?

    DNS resolution is inside the timeout too (it runs in a daemon thread). With an
    HTTPS proxy configured the probe is skipped (answer: yes), as a direct connection
    would say nothing about the proxy.
    """
    for var in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        if os.environ.get(var):
            return True, f"not probed ({var} is set)"
    result: dict[str, Any] = {}

    def probe() -> None:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                result["ok"] = True
        except OSError as exc:
            result["err"] = f"{type(exc).__name__}: {exc}"

    t = threading.Thread(target=probe, daemon=True)
    t.start()
    t.join(timeout + 1.0)
    if result.get("ok"):
        return True, "reachable"
    return False, result.get("err", f"no answer within {timeout:.0f} s")


def tfds_prepared_version(data_dir: Path, tfds_name: str, prefer: str) -> str | None:
    """Version of a prepared TFDS folder ``data_dir/tfds_name/<version>`` (``prefer`` first)."""
    base = data_dir / tfds_name
    if (base / prefer / "dataset_info.json").is_file():
        return prefer
    found = sorted((p.parent.name for p in base.glob("*/dataset_info.json")),
                   key=lambda v: tuple(int(s) if s.isdigit() else -1 for s in v.split(".")))
    return found[-1] if found else None


def check_file(path: Path, size: int | None, sha256: str | None = None) -> None:
    if size is not None and path.stat().st_size != size:
        raise ChecksumMismatchError(
            f"{path} has {path.stat().st_size} bytes but the expected file has {size}: it "
            f"is incomplete or not the right file. Delete it and download it again.")
    if sha256 is not None:
        got = file_sha256(path)
        if got != sha256:
            raise ChecksumMismatchError(
                f"{path} has sha256 {got} but {sha256} was expected: the file is corrupt "
                f"or not the right one. Delete it and download it again.")
