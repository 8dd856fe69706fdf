"""A shard's file: one per-image job's part of a test-time function's result
(:mod:`dgdm_tf.core.shards`), handed to the rule that gathers the shards.

The file holds the result's entries as they are (arrays; numbers as 0-d arrays; None
left out) and ``shard_images``, the [start, stop) of the images it covers, so the
gather can check that its shards tile the images in order. Written atomically and
uncompressed: a shard is read once, soon after.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from dgdm_tf.io import atomic as atomic_io
from dgdm_tf.io.artifacts import ArtifactError, MissingArtifactError
from dgdm_tf.io.npz_files import NpzFormatError, read_npz

IMAGES_KEY = "shard_images"


def write_shard(path, result: Mapping, images: Sequence[int]) -> None:
    """``result``'s entries and the shard's image range [start, stop) to ``path``."""
    if IMAGES_KEY in result:
        raise ValueError(f"a result entry is named {IMAGES_KEY!r}, the shard's own key")
    arrays = {k: np.asarray(v) for k, v in result.items() if v is not None}
    atomic_io.save_npz(path, compressed=False, **arrays,
                       **{IMAGES_KEY: np.asarray(images, np.int64)})


def read_shard(path, rule: str) -> tuple[tuple[int, int], dict]:
    """(the shard's image range, its entries: arrays, 0-d ones as Python numbers). A
    missing or unreadable file names itself and ``rule``, which writes it."""
    path = str(path)
    if not Path(path).is_file():
        raise MissingArtifactError(f"{path} is missing: run `snakemake {path}` (rule {rule} writes it)")
    try:
        entries = read_npz(path)
    except (NpzFormatError, OSError) as exc:
        problem = exc.problem if isinstance(exc, NpzFormatError) else f"cannot be read ({exc})"
        raise ArtifactError(f"{path} {problem}: rerun `snakemake --force {path}` (rule {rule} "
                            f"writes it)") from exc
    if IMAGES_KEY not in entries:
        raise ArtifactError(f"{path} has no {IMAGES_KEY!r}: rerun `snakemake --force {path}` "
                            f"(rule {rule} writes it)")
    lo, hi = (int(v) for v in entries.pop(IMAGES_KEY))
    return (lo, hi), {k: (v.item() if v.ndim == 0 else v) for k, v in entries.items()}


def read_shards(paths: Sequence, n_images: int, rule: str) -> list[dict]:
    """The entries of the shards at ``paths``, checked to tile images [0, ``n_images``)
    in order; empty shards (more shards than batches) left out."""
    parts, at = [], 0
    for path in paths:
        (lo, hi), entries = read_shard(path, rule)
        if lo != at:
            raise ArtifactError(f"{path} covers images {lo}:{hi}, expected to start at {at}: "
                                f"rerun `snakemake --force {path}` (rule {rule} writes it)")
        at = hi
        if hi > lo:
            parts.append(entries)
    if at != n_images:
        raise ArtifactError(f"the shards {[str(p) for p in paths]} cover images 0:{at} of "
                            f"{n_images}: rerun rule {rule} for them")
    return parts
