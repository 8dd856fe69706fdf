"""dgdm_tf.report.element_classes: each top-layer element's share of usage by class."""

import numpy as np
import pytest

from dgdm_tf.report.element_classes import class_purity, class_shares


def test_elements_unique_to_a_class_read_pure_and_class_blind_ones_read_the_class_shares():
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(4), [10, 20, 30, 40])  # class shares 0.1 .. 0.4
    own = (labels[:, None] == np.arange(4)[None]) * rng.uniform(1, 2, (100, 4))  # element k: class k only
    r = class_purity(own, labels, 4)
    np.testing.assert_allclose(r["purity"], 1.0)
    np.testing.assert_allclose(r["entropy"], 0.0, atol=1e-12)
    assert r["weighted_purity"] == pytest.approx(1.0) and r["n_elements"] == 4
    # the shuffled labels spread each element over the classes
    assert r["shuffled_weighted_purity"] < 0.8
    blind = np.ones((100, 3))  # every image uses every element alike
    b = class_purity(blind, labels, 4)
    np.testing.assert_allclose(b["purity"], 0.4)
    h = -(np.array([0.1, 0.2, 0.3, 0.4]) * np.log([0.1, 0.2, 0.3, 0.4])).sum() / np.log(4)
    np.testing.assert_allclose(b["entropy"], h)
    assert b["shuffled_weighted_purity"] == pytest.approx(0.4)  # a permutation keeps the shares


def test_usage_weights_and_unused_elements():
    labels = np.array([0, 0, 1, 1])
    usage = np.array([[9.0, 1, 0], [9, 0, 0], [0, 1, 0], [0, 0, 0]])  # element 2 unused
    p = class_shares(usage, labels, 2)
    np.testing.assert_allclose(p[:2], [[1, 0], [0.5, 0.5]])
    assert np.isnan(p[2]).all()
    r = class_purity(usage, labels, 2)
    assert r["n_elements"] == 2
    assert r["weighted_purity"] == pytest.approx((18 * 1.0 + 2 * 0.5) / 20)


def test_bad_usage_is_refused_with_what_to_do():
    labels = np.array([0, 1])
    with pytest.raises(ValueError, match="nonnegative"):
        class_purity(np.array([[1.0], [-1.0]]), labels, 2)
    with pytest.raises(ValueError, match=r"\(N, K\) with N = 2"):
        class_purity(np.ones((3, 2)), labels, 2)
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 2\)"):
        class_purity(np.ones((2, 2)), np.array([0, 2]), 2)
