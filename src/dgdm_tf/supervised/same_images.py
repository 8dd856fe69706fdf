"""The same SVM on another row's features of the same images: what a row's own features
add over another's (unsupervised_svm against the pretrained layers' features), with
nothing else changed."""

from __future__ import annotations

import numpy as np

from dgdm_tf.supervised.feature_view import svm_view
from dgdm_tf.supervised.options import SvmOptions
from dgdm_tf.supervised.svm_classifier import BayesianSVM


def same_images_error(features, other, other_error_pct: float, *, view: str, n_classes: int,
                      svm: SvmOptions, seed: int, progress=None) -> float | None:
    """Test error (%) of the SVM fitted on ``other``'s features of exactly the images of
    ``features`` (both :class:`dgdm_tf.io.artifacts.Features`), read by the same ``view``.

    Where both hold the same images in the same order, that fit is the other row itself
    (same images, same SVM settings): its error ``other_error_pct`` is returned, not a
    second fit of the same model. Where ``other`` holds every image of ``features`` among
    more, their rows are taken in ``features``' order and a fresh SVM (options ``svm``,
    ``seed``) is fitted and tested. None where ``other`` lacks some of the images.
    """
    tr, te = features.train.idx, features.test.idx
    if np.array_equal(other.train.idx, tr) and np.array_equal(other.test.idx, te):
        return float(other_error_pct)
    rows = {int(i): r for r, i in enumerate(other.train.idx)}
    rows_t = {int(i): r for r, i in enumerate(other.test.idx)}
    if not (all(int(i) in rows for i in tr) and all(int(i) in rows_t for i in te)):
        return None
    f_tr = svm_view(other.train.f[[rows[int(i)] for i in tr]], view)
    f_te = svm_view(other.test.f[[rows_t[int(i)] for i in te]], view)
    ref = BayesianSVM(n_classes, svm, seed=seed, progress=progress).fit(f_tr, features.train.y)
    return 100.0 * float(np.mean(np.asarray(ref.predict(f_te)) != features.test.y))
