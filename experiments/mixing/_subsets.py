"""The probes' shared images: seeded random train / test subsets of a prepared data set
(seed 0, the same images in every probe)."""
import numpy as np


def subsets(prepared: str, n_train: int, n_test: int):
    """(x_train, y_train, x_test, y_test) as float32 images and integer labels."""
    prep = np.load(prepared)
    rng = np.random.default_rng(0)
    itr = rng.choice(len(prep["x_train"]), n_train, replace=False)
    ite = rng.choice(len(prep["x_test"]), n_test, replace=False)
    return (prep["x_train"][itr].astype(np.float32), prep["y_train"][itr],
            prep["x_test"][ite].astype(np.float32), prep["y_test"][ite])
