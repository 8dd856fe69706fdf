"""How the Bayesian SVM reads a row's features (config ``svm_view``).

``signed``: the features as inferred, the paper's s_n (eq. 1's posterior-mean top layer).
``split``: each feature f as the pair max(f, 0), max(-f, 0), so a linear SVM can weigh a
map's positive and negative activity apart (Coates & Ng 2011's polarity split); 2F
features, F of them zero wherever the other is not.
"""

from __future__ import annotations

import numpy as np

VIEWS = ("signed", "split")


def svm_view(f: np.ndarray, view: str) -> np.ndarray:
    """The (N, F) features ``f`` as the SVM reads them under ``view`` (:data:`VIEWS`):
    (N, F) for signed, (N, 2F) for split (positive parts first, then negative parts)."""
    if view not in VIEWS:
        raise ValueError(f"svm_view must be one of {VIEWS}, got {view!r}")
    f = np.asarray(f, np.float32)
    if view == "signed":
        return f
    return np.concatenate([np.maximum(f, 0.0), np.maximum(-f, 0.0)], axis=1)
