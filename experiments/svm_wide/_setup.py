"""The svm_wide probes' shared start: one thread count for NumPy's BLAS and TF (set
before NumPy is first imported, so call :func:`start` before importing it), and the
reference row's MNIST features as rule encoder_features makes them (the workflow's
seeded subsets, pretraining's layer-1 dictionary, ``encoder.encode`` with the default
config's alpha 0.25 and layer 1's pool 3), or their cache.
"""
from __future__ import annotations

import os
import time


def start(threads: int) -> None:
    """One thread count for NumPy's BLAS (read at its import) and for TF."""
    os.environ["OMP_NUM_THREADS"] = str(threads)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)


def encoder_features(prepared: str, layer1: str, n_train: int = 10000, n_test: int = 5000,
                     cache: str | None = None):
    """``(f_train, y_train, f_test, y_test)`` of rule encoder_features on the default
    config (seed 0); read from ``cache`` (.npz) if it exists, else encoded and written
    there (keeps the encoder out of a later run's peak RSS)."""
    import numpy as np

    keys = ("f_train", "y_train", "f_test", "y_test")
    if cache and os.path.exists(cache):
        with np.load(cache) as z:
            return tuple(z[k] for k in keys)
    from dgdm_tf import data
    from dgdm_tf.data.subsets import shared_subset

    from dgdm_tf.baselines import encoder

    d = data.load_prepared(prepared)
    with np.load(layer1) as z:
        dictionary = np.asarray(z["D"], dtype=np.float32)
    t0 = time.perf_counter()
    out = []
    for split, size in (("train", n_train), ("test", n_test)):
        x, y, _ = shared_subset(d, split, size, None, 0, "mnist")
        out += [encoder.encode(x, dictionary, 3, alpha=0.25), y]
    print(f"encoded in {time.perf_counter() - t0:.1f} s", flush=True)
    if cache:
        np.savez(cache, **dict(zip(keys, out)))
    return tuple(out)


def nonconstant(x):
    """The columns of ``x`` not constant over its rows (the CG path's columns)."""
    return x.std(axis=0) > 0
