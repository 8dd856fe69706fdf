"""McemData on a prepared .npz: n_train / n_test are the seeded, class-stratified subsets
that the Gibbs methods use (not the first images of a class-ordered file)."""

from __future__ import annotations

import numpy as np

from dgdm_tf.data import select_subset
from dgdm_tf.data.minibatches import McemData


def test_npz_subsets_are_the_stratified_seeded_ones(tmp_path):
    y = np.repeat(np.arange(3), 10)  # class-ordered, as a Caltech preparation writes it
    x = np.arange(30, dtype=np.float32)[:, None, None, None] * np.ones((1, 4, 4, 1), np.float32)
    path = tmp_path / "prepared.npz"
    np.savez(path, x_train=x, y_train=y, x_test=x[:12], y_test=y[:12],
             class_names=np.array(["a", "b", "c"]))
    data = McemData(str(path), seed=0, batch_size=4, n_train=6, n_test=3,
                    subset_seeds={"train": 11, "test": 12})
    assert data.n_total == 6 and data.n_classes == 3 and data.image_shape == (4, 4, 1)
    xs, ys = select_subset(x, y, 6, 11)
    np.testing.assert_array_equal(data._x, xs)
    assert sorted(np.bincount(data._y)) == [2, 2, 2]
    (xt, yt), = list(data.test_chunks(8))
    xe, ye = select_subset(x[:12], y[:12], 3, 12)
    np.testing.assert_array_equal(xt, xe)
    np.testing.assert_array_equal(yt, ye)
    everything = McemData(str(path), seed=0, batch_size=4)
    assert everything.n_total == 30 and everything.n_test == 12
