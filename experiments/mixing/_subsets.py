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


def read_out(features, y_train, y_test, split: bool) -> float:
    """Test error (%) of the fixed ridge read-out (``mixing.ridge_probe``) on a (train,
    test) pair of feature arrays, flattened per image; ``split``: polarity-split first."""
    from dgdm_tf.mcmc import diagnostics as mixing

    f = [v.reshape(len(v), -1) for v in features]
    if split:
        f = [mixing.polarity_split(v) for v in f]
    return mixing.ridge_probe(f[0], y_train, f[1], y_test)
