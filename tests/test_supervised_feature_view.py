"""The SVM's view of a row's features (dgdm_tf.supervised.feature_view)."""

from __future__ import annotations

import numpy as np
import pytest

from dgdm_tf.supervised.feature_view import svm_view


def test_signed_is_the_features_and_split_their_two_polarities():
    f = np.array([[1.5, -2.0, 0.0], [-0.5, 0.25, 3.0]], np.float32)
    np.testing.assert_array_equal(svm_view(f, "signed"), f)
    s = svm_view(f, "split")
    assert s.shape == (2, 6) and (s >= 0).all()
    np.testing.assert_array_equal(s[:, :3] - s[:, 3:], f)  # the signed value comes back
    np.testing.assert_array_equal(s[:, :3] * s[:, 3:], 0.0)  # at most one polarity is on


def test_unknown_view_names_the_choices():
    with pytest.raises(ValueError, match="signed.*split"):
        svm_view(np.zeros((1, 2)), "abs")
