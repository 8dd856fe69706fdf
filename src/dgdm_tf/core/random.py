"""Named seeds: every random draw's seed derives from the config seed by name.

* :func:`seed_for`: an integer seed from the config seed and names (data set, rule,
  split, ...): each rule's own stream, the same for the same names whatever else runs.
* :func:`split`: one step's seed split into one stream per named conditional, returned
  as a namedtuple (``seeds.gamma_e``, not ``seeds[7]``). Philox's split is
  prefix-stable, so a name appended at the end leaves the seeds of the others as they
  were (``tests/test_core_random.py``).
* :data:`SALTS` / :func:`salted` / :func:`fold`: the salts that keep one stream apart
  from another, each named once here; :func:`chain_seed`: the seed of a rule's further
  chains.

All of it is stateless (``tf.random.experimental.stateless_*``, NumPy's
``SeedSequence``): the same config seed and names give the same draws.
"""

from __future__ import annotations

import collections
import functools
import zlib
from typing import Sequence

import numpy as np
import tensorflow as tf

# A salt keeps one stream apart from another drawn from the same seed. Shared values
# are shared on purpose, by streams that never meet the same seed (kept so that results
# stay bitwise what they were).
SALTS = {
    "svm_in_sweep": 0x5F3,  # the SVM's draws of a supervised sweep, from its gamma_s stream
    "mcem_init": 0xD1C7,  # stochastic MCEM's D drawn from the prior
    "mcem_iteration": 0x5C3,  # stochastic MCEM: one iteration's E- and M-step
    "map_batch": 0x3C3,  # Algorithm 2: one batch of test images
    "model_averaging": 0xA7E,  # averaging's per-step draws
    "refine_svm_average": 0xA7E,  # the supervised chain's averaged beta at a kept sample
    "refine_start": 0xDEE9,  # the refinement chain's start
    "refine_svm_start": 0x5A3,  # the supervised chain's SVM start
    "topdown_batch": 0x1F,  # the test-time top-down chains: one batch of images
    "pretrain_init": 0x5EED,  # a pretraining chain's initial D and seed; feature chains' batches
    "pretrain_start": 0x57A7,  # the start's theta draw, apart from the chain's own seed
    "scan_order": 0x5CA9,  # a sweep's visiting order, apart from its draws
    "matched": 0x3A7C,  # the top units' draws under the matched scan (one table per step)
    "imagenet_epoch": 0x1A6E,  # ImageNet's augmentation, per epoch and image
    "cifar_augment": 0xC1FA,  # CIFAR's flips and shifts (NumPy)
    "caltech_split": 0xCA17EC,  # Caltech's per-class train/test split (NumPy)
    "topdown_chain_orders": 0xC4A1,  # the map orders of the test-time chains after the first (NumPy)
    "svm": 0x5F3,  # the Bayesian SVM's stream from an integer seed
    "feature_chains": 0x5EED,  # layer-wise feature chains after the first (plus the chain's index)
    "posterior_check": 0xC4EC,  # the top-down features' posterior check (topdown.evidence)
    "refine_chains": 0xC4A2,  # the refinement / supervised chains after the first
}


def seed_for(seed: int, *names: object) -> int:
    """A non-negative int32 seed from the config ``seed`` and ``names`` (rule, data set,
    split, ...): ``SeedSequence([seed, crc32('/'.join(names))])``."""
    tag = zlib.crc32("/".join(map(str, names)).encode())
    return int(np.random.SeedSequence([int(seed), tag]).generate_state(1)[0] & 0x7FFFFFFF)


@functools.lru_cache(maxsize=None)
def _seeds_type(names: tuple[str, ...]):
    return collections.namedtuple("Seeds", names)


def split(seed, names: Sequence[str]):
    """``seed`` (shape (2,)) split into one seed per name, a namedtuple in ``names``'
    order: ``stateless_split(seed, len(names))``, the i-th seed for the i-th name."""
    names = tuple(names)
    return _seeds_type(names)(*tf.unstack(tf.random.experimental.stateless_split(seed, len(names))))


def salted(seed, name: str, dtype=tf.int64) -> tf.Tensor:
    """The two-word seed ``[seed, SALTS[name]]`` of an integer ``seed``."""
    return tf.constant([int(seed), SALTS[name]], dtype)


def fold(seed, *salts):
    """``seed`` folded with each salt in turn (a salt: an int, or a name of :data:`SALTS`)."""
    for s in salts:
        seed = tf.random.experimental.stateless_fold_in(seed, SALTS[s] if isinstance(s, str) else s)
    return seed


def chain_seed(seed: int, name: str, chain: int) -> int:
    """The integer seed of chain ``chain`` of a rule whose seed is ``seed``: chain 0 keeps
    ``seed`` (one chain draws what it drew alone); chain c > 0 takes a uniform int in
    [0, 2^31 - 1) drawn from ``fold(salted(seed, name), c)``."""
    if chain == 0:
        return int(seed)
    return int(tf.random.stateless_uniform((), fold(salted(seed, name), int(chain)), minval=0,
                                           maxval=2 ** 31 - 1, dtype=tf.int64))


def numpy_rng(seed, name: str, *more: int) -> np.random.Generator:
    """NumPy's generator of the stream ``name`` (for host-side draws: augmentation, splits)."""
    return np.random.default_rng([*([] if seed is None else [int(seed)]), SALTS[name], *map(int, more)])
