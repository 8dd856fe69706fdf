"""A per-image computation split into shards, jobs of their own, and gathered back.

The test-time functions (:func:`dgdm_tf.mcem.test_time.infer_map`,
:func:`dgdm_tf.topdown.chain.infer_topdown`, the block posteriors) take the images a batch
at a time and seed batch b by its index b alone, so a shard that holds whole batches and
keeps their global indices draws what the unsplit call draws: its images' outputs are
the same bits. :func:`shard_bounds` cuts at batch boundaries; each function's ``images``
argument runs one shard of the call on all of ``x``; :func:`concat_parts` joins the
shards' outputs.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np


def shard_bounds(n_images: int, shards: int, batch: int) -> list[tuple[int, int]]:
    """``shards`` image ranges [start, stop) covering ``range(n_images)`` in order, each a
    run of whole batches of ``batch`` (a batch of ``n_images`` or more is one batch, as
    the functions clamp it), the batches spread as evenly as they go. With more shards
    than batches some ranges are empty."""
    if n_images < 0 or shards < 1 or batch < 1:
        raise ValueError(f"need n_images >= 0, shards >= 1 and batch >= 1, got {n_images}, "
                         f"{shards}, {batch}")
    batch = max(1, min(int(batch), int(n_images)))
    n_batches = -(-int(n_images) // batch)
    return [(min(i * n_batches // shards * batch, n_images),
             min((i + 1) * n_batches // shards * batch, n_images)) for i in range(shards)]


def image_range(images: Sequence[int] | None, n_images: int, batch: int) -> tuple[int, int]:
    """The images [start, stop) a call runs: all for None, else ``images`` checked to be
    whole batches of ``batch`` (start and stop each on a batch boundary or at the end), so
    that every batch is the one the unsplit call forms."""
    if images is None:
        return 0, int(n_images)
    lo, hi = (int(v) for v in images)
    if not (0 <= lo <= hi <= n_images) or any(v % batch and v != n_images for v in (lo, hi)):
        raise ValueError(f"images {lo}:{hi} of {n_images} are not whole batches of {batch} "
                         "(dgdm_tf.core.shards.shard_bounds gives ranges that are)")
    return lo, hi


def concat_parts(parts: Sequence[Mapping], axes: Mapping[str, int] | None = None) -> dict:
    """The shards' outputs (dicts, in image order) joined: each array along its image axis
    (``axes[key]``, 0 by default), 'seconds' summed, every other value (the same in each
    shard) kept from the first. Concatenation copies bits, so the joined arrays are the
    unsplit call's."""
    if not parts:
        raise ValueError("no shard to gather")
    axes = dict(axes or {})
    out = {}
    for key, first in parts[0].items():
        if key == "seconds":
            out[key] = float(sum(float(p[key]) for p in parts))
        elif isinstance(first, np.ndarray) and first.ndim > 0:
            out[key] = np.concatenate([np.asarray(p[key]) for p in parts], axis=axes.get(key, 0))
        else:
            out[key] = first
    return out
