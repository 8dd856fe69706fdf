"""dgdm_tf.report.learning_curves: a row's SVM refitted at each training size, on small
synthetic features (three classes, one informative feature each among 40)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dgdm_tf.data.subsets import subset_indices
from dgdm_tf.report import learning_curves as lc
from dgdm_tf.supervised.options import SvmOptions

SVM = SvmOptions(method="em", em_iters=20)


def _features(n: int, rng, classes: int = 3, width: int = 40):
    """Class c shifts feature c by 1.5 sd: learnable, with noise enough that 12 images
    leave a large test error."""
    y = rng.integers(0, classes, n)
    f = rng.standard_normal((n, width)).astype(np.float32)
    f[np.arange(n), y] += 1.5
    return f, y


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    return (*_features(400, rng), *_features(600, rng))


def test_standard_error_is_the_binomial_one():
    assert lc.standard_error_pct(10.0, 100) == pytest.approx(3.0)
    assert lc.standard_error_pct(50.0, 10000) == pytest.approx(0.5)
    assert lc.standard_error_pct(0.0, 50) == 0.0


def test_errors_fall_with_training_images_and_too_large_sizes_are_skipped(data):
    f_tr, y_tr, f_te, y_te = data
    said = []
    rows = lc.learning_curve(f_tr, y_tr, f_te, y_te, method="pretrained_svm", n_classes=3,
                             sizes=[400, 12, 50, 1000], svm=SVM, seed=1, progress=said.append)
    assert [r["n_train"] for r in rows] == [12, 50, 400, 1000]
    assert [r["source"] for r in rows] == ["fit", "fit", "fit", "skipped"]
    assert all(set(r) == set(lc.COLUMNS) for r in rows)
    fit = rows[:3]
    for r in fit:
        p = r["test_error_pct"] / 100
        assert r["n_test"] == 600
        assert r["se_pct"] == pytest.approx(100 * math.sqrt(p * (1 - p) / 600))
        assert r["seconds"] > 0 and 0 <= r["train_error_pct"] <= 100
    # measured 51.5, 38.8, 27.0 %: each step falls by far more than two standard errors
    for small, large in zip(fit, fit[1:]):
        assert small["test_error_pct"] - large["test_error_pct"] > 2 * (small["se_pct"] + large["se_pct"])
    assert rows[3]["test_error_pct"] is None and rows[3]["note"] == "skipped: the row has 400 training images"
    assert len(said) == 4 and "skipped" in said[-1]


def test_the_rows_own_fit_is_its_point_and_is_not_fitted_again(data):
    f_tr, y_tr, f_te, y_te = data
    m = {"n_train": 400, "n_test": 600, "svm_view": "signed", "test_error_pct": 12.5,
         "train_error_pct": 3.0, "wall_seconds_by_step": {"svm": 42.0}}
    rows = lc.learning_curve(f_tr, y_tr, f_te, y_te, method="encoder_svm", n_classes=3,
                             sizes=[50, 400], svm=SVM, seed=1, row_metrics=m)
    assert [(r["n_train"], r["source"]) for r in rows] == [(50, "fit"), (400, "row")]
    assert rows[1]["test_error_pct"] == 12.5 and rows[1]["seconds"] == 42.0
    assert rows[1]["se_pct"] == pytest.approx(lc.standard_error_pct(12.5, 600))
    # metrics of other images (another n_test) are not this row's fit: 400 is fitted
    said = []
    rows = lc.learning_curve(f_tr, y_tr, f_te, y_te, method="encoder_svm", n_classes=3,
                             sizes=[400], svm=SVM, seed=1, row_metrics={**m, "n_test": 500},
                             progress=said.append)
    assert [(r["n_train"], r["source"]) for r in rows] == [(400, "fit")]
    assert "not used" in said[0]


def test_training_rows_prefix_of_a_seeded_subset_or_a_stratified_draw_from_file_order():
    rng = np.random.default_rng(3)
    y = np.repeat(np.arange(4), 50)  # a split in file order, sorted by class
    # a seeded subset in its permutation's order: the first n, as rows on fewer images
    idx = rng.permutation(1000)[:200]
    assert np.array_equal(lc.training_rows(idx, y, 20, seed=5), np.arange(20))
    # the whole split in file order: the stratified seeded subset n_train: n would draw
    rows = lc.training_rows(np.arange(200), y, 20, seed=5)
    assert np.array_equal(rows, subset_indices(200, 20, 5, labels=y))
    assert np.array_equal(np.bincount(y[rows], minlength=4), [5, 5, 5, 5])
    assert np.array_equal(lc.training_rows(np.arange(200), y, 500, seed=5), np.arange(200))


def test_paper_errors_per_row():
    assert lc.paper_test_errors("mnist") == {"pretrained_svm": 1.42, "unsupervised_svm": 0.52,
                                             "supervised": 0.37}
    cal = lc.paper_test_errors("caltech101_30")
    assert cal["pretrained_svm"] == pytest.approx(100 - 53.57)  # 100 - class-mean accuracy
    assert lc.paper_test_errors("imagenet2012") == {} == lc.paper_test_errors(None)


def test_plot_writes_a_png(tmp_path):
    rows = [{"method": "pretrained_svm", "n_train": n, "n_test": 200, "test_error_pct": e,
             "se_pct": lc.standard_error_pct(e, 200), "train_error_pct": 0.0, "seconds": 1.0,
             "source": s, "note": ""} for n, e, s in ((20, 40.0, "fit"), (60, 20.0, "fit"), (300, 9.0, "row"))]
    rows.append({"method": "pretrained_svm", "n_train": 1000, "n_test": 200, "test_error_pct": None,
                 "se_pct": None, "train_error_pct": None, "seconds": None, "source": "skipped",
                 "note": "skipped: the row has 300 training images"})
    png = tmp_path / "curve.png"
    lc.plot_learning_curves(rows, png, "test", paper=lc.paper_test_errors("mnist"),
                            notes=["Not drawn: unsupervised_svm."])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    lc.plot_learning_curves(rows[-1:], tmp_path / "none.png", "nothing fitted")
    assert (tmp_path / "none.png").stat().st_size > 0


def _images(n: int, rng, classes: int = 3, side: int = 12):
    """Class c brightens its own third of the rows, in noise."""
    y = rng.integers(0, classes, n)
    x = rng.normal(0.0, 0.5, (n, side, side, 1)).astype(np.float32)
    for c in range(classes):
        x[y == c, c * side // classes:(c + 1) * side // classes] += 1.0
    return x, y


def test_the_cnn_curve_trains_afresh_on_the_svm_rows_images_at_each_size(monkeypatch):
    """At each size below its own the CNN trains on exactly training_rows' images (those
    the SVM rows' curves take) with the cnn rule's options and seed, and is scored on every
    test image; its own run is the point at its size, not trained again."""
    from dgdm_tf.baselines import cnn

    rng = np.random.default_rng(4)
    x_tr, y_tr = _images(90, rng)
    x_te, y_te = _images(60, rng)
    idx = np.arange(90)  # the whole split in file order: the stratified seeded draw
    opts = cnn.CnnOptions(epochs=1, batch_size=16, fc_units=8)
    layers = [{"dict_size": 3, "n_dict": 4, "pool": 2}]
    seen = []
    real = cnn.train_cnn

    def spy(train, test, options, **kw):
        seen.append((train[0], train[1], test[0], options, kw["seed"]))
        return real(train, test, options, **kw)

    monkeypatch.setattr(cnn, "train_cnn", spy)
    own = {"n_train": 90, "n_test": 60, "test_error_pct": 7.5, "train_error_pct": 1.0,
           "wall_seconds_by_step": {"prepare": 1.0, "cnn": 9.0}}
    kw = dict(n_classes=3, sizes=[20, 45, 90, 200], options=opts, layers=layers, seed=11,
              idx_train=idx, subset_seed=5)
    rows = lc.cnn_learning_curve(x_tr, y_tr, x_te, y_te, row_metrics=own, **kw)
    assert [(r["method"], r["n_train"], r["source"]) for r in rows] == [
        ("cnn", 20, "fit"), ("cnn", 45, "fit"), ("cnn", 90, "row"), ("cnn", 200, "skipped")]
    assert rows[2]["test_error_pct"] == 7.5 and rows[2]["seconds"] == 9.0
    assert len(seen) == 2
    for (x, y, xt, o, seed), n in zip(seen, (20, 45)):
        sel = lc.training_rows(idx, y_tr, n, 5)
        assert np.array_equal(x, x_tr[sel]) and np.array_equal(y, y_tr[sel])
        assert xt is x_te or np.array_equal(xt, x_te)
        assert o == opts and seed == 11
    for r in rows[:2]:
        assert 0 <= r["test_error_pct"] <= 100 and r["n_test"] == 60
    # the same seed twice: the same curve
    again = lc.cnn_learning_curve(x_tr, y_tr, x_te, y_te, row_metrics=own, **kw)
    assert [r["test_error_pct"] for r in again[:2]] == [r["test_error_pct"] for r in rows[:2]]
