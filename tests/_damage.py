"""Ways to damage a checkpoint file, for the tests of damaged checkpoints."""

import numpy as np


def truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def random_bytes(path):
    path.write_bytes(np.random.default_rng(0).bytes(path.stat().st_size))
