"""The images each row uses: seeded subsets of a prepared data set's splits, shared by
every method, so two rows that name the same size see the same images."""

from __future__ import annotations

import numpy as np

from dgdm_tf.core.random import seed_for
from dgdm_tf.data.arrays import select_subset


def subset_indices(n: int, size: int | None, seed: int, labels=None) -> np.ndarray:
    """Indices of a seeded subset of ``size`` of ``n`` items (all if None), chosen by
    :func:`dgdm_tf.data.arrays.select_subset` (stratified by class when ``labels`` are
    given)."""
    idx, _ = select_subset(np.arange(n), labels, size, seed)
    return np.asarray(idx, dtype=np.int64)


def subset_seeds(seed: int, ds: str) -> dict:
    """The seeds of the methods' shared subsets of each split (:func:`shared_subset`)."""
    return {split: seed_for(seed, ds, "subset", split) for split in ("train", "test")}


def shared_subset(d, split: str, size, own, seed: int, ds: str) -> tuple:
    """(x float32, labels int64, indices) of the methods' shared seeded subset of
    ``split`` of the prepared data ``d`` (``size`` images, stratified), then its first
    ``own`` (None: all of it): a row that trains on fewer images than the table's
    subset takes a prefix of it."""
    x_all, y_all = d[f"x_{split}"], d[f"y_{split}"]
    idx = subset_indices(len(x_all), size, subset_seeds(seed, ds)[split], labels=y_all)
    if own is not None:
        idx = idx[: int(own)]
    return (np.ascontiguousarray(x_all[idx], np.float32), np.asarray(y_all[idx], np.int64), idx)
