"""Mixing diagnostics of the blocked Gibbs samplers: does the inferred activity follow
the image, or the order in which the sampler visits the blocks?

A chain at a high noise precision freezes into whatever decomposition its first sweep
builds; with a fixed colour order that decomposition favours the colour visited first,
and the features then encode the scan order, not the image. These figures catch it:

* :func:`activity_ink_correlation`: the mean |pooled feature| per pooled cell (over
  images and maps) against the mean ink under that cell's receptive field. A sampler
  that follows the image tracks the ink; one that follows its colour grid does not.
* :func:`map_distance`: how far two mean activity maps are apart (scan-order and
  translation checks compare it with the seed-to-seed spread of the same chain).
* :func:`half_distance`: how far the averages of the even and the odd chains lie apart;
  for chains that differ by their scan order, how much the order decides the features.
* :func:`ridge_probe`: a fixed linear read-out (one-vs-all ridge on standardised
  features), the figure that decides whether features carry the class.

Axis layout as in :mod:`dgdm_tf.core.layout`: images (N, H, W, C), pooled features
(N, nbh, nbw, K).
"""

from __future__ import annotations

import math

import numpy as np


def ink_per_cell(x: np.ndarray, dict_size: int, pool: int) -> np.ndarray:
    """(nbh, nbw): mean |x| under each feature position's dh x dw receptive field,
    averaged over the images and over the positions of each pooling block."""
    x = np.abs(np.asarray(x, np.float64)).mean(axis=(0, 3))  # H, W
    h, w = x.shape
    hs, ws = h - dict_size + 1, w - dict_size + 1
    c = np.pad(np.cumsum(np.cumsum(x, 0), 1), [[1, 0], [1, 0]])
    d = dict_size
    win = (c[d:, d:] - c[:-d, d:] - c[d:, :-d] + c[:-d, :-d])[:hs, :ws] / (d * d)
    return _block_mean(win, pool)


def _block_mean(m: np.ndarray, pool: int) -> np.ndarray:
    hs, ws = m.shape
    nbh, nbw = math.ceil(hs / pool), math.ceil(ws / pool)
    total = np.zeros((nbh, nbw))
    count = np.zeros((nbh, nbw))
    ii, jj = np.arange(hs) // pool, np.arange(ws) // pool
    np.add.at(total, (ii[:, None], jj[None, :]), m)
    np.add.at(count, (ii[:, None], jj[None, :]), 1.0)
    return total / count


def activity_map(pooled: np.ndarray) -> np.ndarray:
    """(nbh, nbw): mean |pooled feature| over images and maps."""
    return np.abs(np.asarray(pooled, np.float64)).mean(axis=(0, 3))


def activity_ink_correlation(pooled: np.ndarray, x: np.ndarray, dict_size: int,
                             pool: int) -> float:
    """Pearson correlation, over pooled cells, of :func:`activity_map` with
    :func:`ink_per_cell` (1.0: activity exactly where the ink is)."""
    a = activity_map(pooled).ravel()
    b = ink_per_cell(x, dict_size, pool).ravel()
    if a.shape != b.shape:
        raise ValueError(f"pooled grid {activity_map(pooled).shape} does not match the "
                         f"images' grid {ink_per_cell(x, dict_size, pool).shape}")
    if a.std() == 0 or b.std() == 0:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


def layer1_diagnostics(pooled: np.ndarray, x: np.ndarray, dict_size: int, pool: int) -> dict:
    """What a run records of layer 1's pooled output: the activity-ink correlation,
    both maps (for the figure) and the number of images, JSON-ready."""
    return {"activity_ink_layer1": activity_ink_correlation(pooled, x, dict_size, pool),
            "images": int(len(x)),
            "activity_map_layer1": activity_map(pooled).round(6).tolist(),
            "ink_map_layer1": ink_per_cell(x, dict_size, pool).round(6).tolist()}


def map_distance(a: np.ndarray, b: np.ndarray) -> float:
    """Relative distance ||a - b|| / ((||a|| + ||b||) / 2) of two activity maps."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(0.5 * (np.linalg.norm(a) + np.linalg.norm(b)), 1e-30))


def half_distance(chain_features: np.ndarray) -> float:
    """:func:`map_distance` of the mean of the even-numbered and the odd-numbered chains'
    features, ``chain_features`` (chains >= 2, ...): about 1.4 when they are unrelated,
    0 when they agree."""
    f = np.asarray(chain_features, np.float64)
    if len(f) < 2:
        raise ValueError(f"half_distance needs two or more chains, got {len(f)}")
    return map_distance(f[0::2].mean(axis=0).ravel(), f[1::2].mean(axis=0).ravel())


def polarity_split(f: np.ndarray) -> np.ndarray:
    """(N, ...) signed features -> (N, 2F): positive and negative parts."""
    f = np.asarray(f).reshape(len(f), -1)
    return np.concatenate([np.maximum(f, 0), np.maximum(-f, 0)], axis=1)


def ridge_probe(f_train: np.ndarray, y_train: np.ndarray, f_test: np.ndarray,
                y_test: np.ndarray, alpha: float = 1.0) -> float:
    """Test error (%) of a one-vs-all ridge classifier on standardised features, with
    penalty alpha * n_train / 100 (a fixed read-out: only the features differ)."""
    a = np.asarray(f_train, np.float64).reshape(len(f_train), -1)
    b = np.asarray(f_test, np.float64).reshape(len(f_test), -1)
    mu, sd = a.mean(0), a.std(0)
    sd[sd == 0] = 1.0
    a, b = (a - mu) / sd, (b - mu) / sd
    classes = np.unique(y_train)
    t = np.where(np.asarray(y_train)[:, None] == classes[None], 1.0, -1.0)
    a1 = np.hstack([a, np.ones((len(a), 1))])
    b1 = np.hstack([b, np.ones((len(b), 1))])
    reg = alpha * len(a) / 100.0 * np.eye(a1.shape[1])
    reg[-1, -1] = 0.0  # the intercept is not penalised
    w = np.linalg.solve(a1.T @ a1 + reg, a1.T @ t)
    pred = classes[np.argmax(b1 @ w, axis=1)]
    return float(100.0 * np.mean(pred != np.asarray(y_test)))
