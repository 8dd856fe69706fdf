"""core.random: seeds by name. A sweep's split is a namedtuple whose i-th seed is the
i-th of ``stateless_split`` (so results stay what they were), a name appended leaves
the others' seeds unchanged, every salt is named once in ``SALTS`` (no bare salt
elsewhere in the library), and a rule's seed depends on its names only."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import tensorflow as tf

from dgdm_tf.core import random

SRC = Path(__file__).resolve().parents[1] / "src" / "dgdm_tf"


def test_split_is_the_positional_split_by_name():
    seed = tf.constant([3, 7], tf.int64)
    seeds = random.split(seed, ("carry", "zw", "d"))
    rows = tf.random.experimental.stateless_split(seed, 3).numpy()
    assert seeds._fields == ("carry", "zw", "d")
    for i, name in enumerate(seeds._fields):
        np.testing.assert_array_equal(getattr(seeds, name).numpy(), rows[i])


def test_a_name_appended_leaves_the_other_seeds_unchanged():
    for seed in (tf.constant([0, 1], tf.int64), tf.constant([5, -2], tf.int32)):
        short = random.split(seed, ("a", "b"))
        longer = random.split(seed, ("a", "b", "c", "d"))
        np.testing.assert_array_equal(short.a.numpy(), longer.a.numpy())
        np.testing.assert_array_equal(short.b.numpy(), longer.b.numpy())
        assert not np.array_equal(longer.c.numpy(), longer.d.numpy())


def test_every_salt_is_named_once_in_SALTS():
    """A bare hex salt anywhere else in the library is a stream nobody can find; two
    names with one value are allowed only where listed (streams that never share a seed)."""
    bare = []
    for path in sorted(SRC.rglob("*.py")):
        if path.name == "random.py" and path.parent.name == "core":
            continue
        for no, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#")[0]
            if re.search(r"\b0x[0-9A-Fa-f]{2,}\b", code) and "0x7FFFFFFF" not in code:
                bare.append(f"{path.relative_to(SRC)}:{no}: {line.strip()}")
    assert not bare, "salts outside dgdm_tf.core.random.SALTS:\n" + "\n".join(bare)
    by_value = {}
    for name, value in random.SALTS.items():
        by_value.setdefault(value, []).append(name)
    shared = sorted(sorted(v) for v in by_value.values() if len(v) > 1)
    assert shared == [["feature_chains", "pretrain_init"], ["model_averaging", "refine_svm_average"],
                      ["svm", "svm_in_sweep"]]


def test_fold_by_name_is_fold_by_value():
    seed = tf.constant([4, 9], tf.int64)
    np.testing.assert_array_equal(
        random.fold(seed, "scan_order", 3).numpy(),
        tf.random.experimental.stateless_fold_in(
            tf.random.experimental.stateless_fold_in(seed, 0x5CA9), 3).numpy())
    np.testing.assert_array_equal(random.salted(11, "svm").numpy(), [11, 0x5F3])


def test_seed_for_depends_on_the_names_only():
    """The integers pinned here are the seeds every earlier run drew its subsets and
    chains from: a change to the derivation would silently change every result."""
    assert random.seed_for(0, "mnist", "subset", "train") == 341004984
    assert random.seed_for(7, "cifar10", "pretrain", 1) == 1640039435
    assert random.seed_for(0, "mnist", "subset", "test") != random.seed_for(0, "mnist", "subset", "train")
    assert random.seed_for(1, "mnist", "subset", "train") != random.seed_for(0, "mnist", "subset", "train")
    assert all(0 <= random.seed_for(s, "x") < 2 ** 31 for s in range(50))


def test_numpy_rng_is_the_named_stream():
    a = random.numpy_rng(3, "cifar_augment").random(4)
    np.testing.assert_array_equal(a, np.random.default_rng([3, 0xC1FA]).random(4))
    b = random.numpy_rng(None, "topdown_chain_orders", 2).permutation(5)
    np.testing.assert_array_equal(b, np.random.default_rng([0xC4A1, 2]).permutation(5))


def test_chain_seed_keeps_chain_0_and_salts_the_others():
    assert random.chain_seed(1234, "refine_chains", 0) == 1234
    seeds = [random.chain_seed(1234, "refine_chains", c) for c in range(1, 4)]
    assert len(set(seeds + [1234])) == 4 and all(0 <= s < 2 ** 31 for s in seeds)
    assert seeds[0] == int(tf.random.stateless_uniform(
        (), random.fold(random.salted(1234, "refine_chains"), 1), minval=0, maxval=2 ** 31 - 1,
        dtype=tf.int64))
    assert random.chain_seed(1234, "refine_chains", 2) == seeds[1]  # by name and index only
