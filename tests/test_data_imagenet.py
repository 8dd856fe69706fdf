"""Tests of ImageNet's input pipeline (dgdm_tf.data.imagenet) on TFDS's mock data and on a tiny
image folder made here: views (shapes, the centre crop against NumPy, colour alteration's
covariance, seeding), batches (shapes, labels, epochs), resume from any iteration."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from dgdm_tf.data import imagenet as I

VIEW = I.View(resize_short=12, crop=8, colour_std=0.1, flip=True)


def test_test_view_is_the_centre_crop_of_the_resized_image():
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, size=(12, 18, 3), dtype=np.uint8)  # short side already 12
    out = I.test_view(img, VIEW).numpy()
    want = (img[2:10, 5:13].astype(np.float32) / 255.0 - I.CHANNEL_MEAN) / I.CHANNEL_STD
    np.testing.assert_allclose(out, want, atol=1e-5)


def test_resize_short_side_keeps_the_aspect_ratio():
    out = I.resize_short_side(np.zeros((30, 60, 3), np.uint8), 12)
    assert tuple(out.shape) == (12, 24, 3)


def test_train_view_is_seeded():
    img = np.random.default_rng(1).integers(0, 256, size=(20, 15, 3), dtype=np.uint8)
    a = I.train_view(img, tf.constant([1, 2], tf.int64), VIEW).numpy()
    b = I.train_view(img, tf.constant([1, 2], tf.int64), VIEW).numpy()
    c = I.train_view(img, tf.constant([1, 3], tf.int64), VIEW).numpy()
    assert a.shape == (8, 8, 3)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


@pytest.mark.slow
def test_colour_alteration_has_alexnets_covariance():
    """The RGB shift V (a * e), a ~ N(0, s^2 I), has covariance s^2 V diag(e^2) V^T
    (4000 split seeds; 10% on the diagonal)."""
    seeds = tf.random.experimental.stateless_split(tf.constant([3, 4], tf.int64), 4000)
    shifts = tf.map_fn(lambda sd: I.colour_alteration(tf.zeros([1, 1, 3]), sd, 0.1)[0, 0],
                       seeds, fn_output_signature=tf.float32).numpy()
    v, e = np.array(I.PCA_EIGVEC), np.array(I.PCA_EIGVAL)
    want = 0.01 * v @ np.diag(e ** 2) @ v.T
    np.testing.assert_allclose(np.diag(np.cov(shifts.T)), np.diag(want), rtol=0.1)


def _image_folder(root, classes=3, train=5, val=2, seed=0):
    rng = np.random.default_rng(seed)
    for split, n in (("train", train), ("val", val)):
        for c in range(classes):
            d = root / split / f"n0{c}"
            d.mkdir(parents=True)
            for i in range(n):
                h, w = rng.integers(10, 20, size=2)
                img = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
                (d / f"{i}.JPEG").write_bytes(tf.io.encode_jpeg(img).numpy())
    return root


def test_folder_stream_batches_and_resume(tmp_path):
    s = I.ImageStream("folder", path=_image_folder(tmp_path / "imnet"), view=VIEW)
    assert (s.count("train"), s.count("test"), s.n_classes) == (15, 6, 3)
    it = s.train_batches(seed=7, batch_size=4)
    first = [next(it) for _ in range(7)]  # 3 full batches per epoch: crosses 2 epochs
    assert [t for t, _, _ in first] == list(range(7))
    assert all(x.shape == (4, 8, 8, 3) and y.shape == (4,) for _, x, y in first)
    # epochs are reshuffled: epoch 2's first batch is not epoch 1's
    assert not np.array_equal(first[3][1], first[0][1])
    resumed = list(zip(range(3), s.train_batches(seed=7, batch_size=4, start=4)))
    for (_, (t, x, y)), (t0, x0, y0) in zip(resumed, first[4:]):
        assert t == t0
        np.testing.assert_array_equal(x, x0)
        np.testing.assert_array_equal(y, y0)
    xs = list(s.eval_batches(4))
    assert [len(y) for _, y in xs] == [4, 2]
    assert np.concatenate([y for _, y in xs]).tolist() == [0, 0, 1, 1, 2, 2]


def test_folder_stream_says_what_is_missing(tmp_path):
    (tmp_path / "train" / "n01").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="val"):
        I.ImageStream("folder", path=tmp_path, view=VIEW)


def test_tfds_stream_on_mock_data(tmp_path):
    import tensorflow_datasets as tfds

    with tfds.testing.mock_data(num_examples=9):
        s = I.ImageStream("tfds", data_dir=tmp_path, view=VIEW, shuffle_buffer=4)
        assert s.count("train") == 9 and s.n_classes == 1000
        it = s.train_batches(seed=1, batch_size=4)
        batches = [next(it) for _ in range(3)]
        assert all(x.shape == (4, 8, 8, 3) and np.all(np.isfinite(x)) for _, x, _ in batches)
        assert all(np.all((y >= 0) & (y < 1000)) for _, _, y in batches)
        t, x, y = next(s.train_batches(seed=1, batch_size=4, start=2))
        assert t == 2
        np.testing.assert_array_equal(x, batches[2][1])
        assert sum(len(y) for _, y in s.eval_batches(4, limit=6)) == 6
