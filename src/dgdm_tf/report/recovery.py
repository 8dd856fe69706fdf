"""How close a learnt model is to the model that drew the data: atoms and codes.

A convolutional dictionary is identified only up to the order and sign of its atoms and
a small shift of each (an atom moved by a pixel, with its code moved back, explains the
images almost as well), so an atom's recovery is its best |normalised
cross-correlation| with any learnt atom over shifts of up to ``max_shift`` pixels:

    ncc(t, e) = max over |dy|, |dx| <= max_shift of |<shift(t), e>| / (||shift(t)|| ||e||),

``shift(t)`` the true atom moved by (dy, dx) inside its own window, zero-filled (the
part that leaves the window is dropped), so a learnt atom that is the true one moved
inside the window scores 1. :func:`atom_recovery` averages each true atom's best score
over the learnt atoms (each true atom matched to its best, not one to one: a dictionary
that learns one atom twice and misses another scores the miss).

The score of a dictionary that learnt nothing is far from 0 (a random 8 x 8 atom
correlates about 0.3 with its best of a few dozen random atoms up to a 3-pixel shift):
:func:`random_atom_score` gives that floor for the same shapes and counts, the number a
recovery reads against.

Codes: :func:`code_recovery` scores how well learnt features (N, F_est) carry the true
code (N, F_true): each true unit's best |Pearson correlation| over images with any
learnt feature, averaged over the true units that vary; :func:`shuffled_code_score` is
the same with the learnt features' images shuffled (what chance reads).

Atoms are laid out as dictionaries are (:mod:`dgdm_tf.core.layout`): (h, w, C, K).
"""

from __future__ import annotations

import numpy as np


def _unit_rows(a: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(a, axis=1, keepdims=True)
    return np.where(n > 0, a / np.where(n > 0, n, 1.0), 0.0)


def _shifted(atoms: np.ndarray, dy: int, dx: int) -> np.ndarray:
    """(K, h, w, C) atoms moved by (dy, dx) inside their window, zero-filled."""
    out = np.zeros_like(atoms)
    h, w = atoms.shape[1:3]
    src = atoms[:, max(0, -dy): h - max(0, dy), max(0, -dx): w - max(0, dx)]
    out[:, max(0, dy): max(0, dy) + src.shape[1], max(0, dx): max(0, dx) + src.shape[2]] = src
    return out


def ncc_matrix(d_true: np.ndarray, d_est: np.ndarray, max_shift: int = 3) -> np.ndarray:
    """(K_true, K_est): each pair's best |normalised cross-correlation| over shifts of the
    true atom of up to ``max_shift`` pixels (the module docstring). Both (h, w, C, K),
    the same h, w, C."""
    t = np.moveaxis(np.asarray(d_true, np.float64), -1, 0)
    e = np.moveaxis(np.asarray(d_est, np.float64), -1, 0)
    if t.shape[1:] != e.shape[1:]:
        raise ValueError(f"atoms of different shapes: true {t.shape[1:]}, learnt {e.shape[1:]}")
    if t.ndim != 4:
        raise ValueError(f"dictionaries are (h, w, C, K), got {np.shape(d_true)}")
    e = _unit_rows(e.reshape(len(e), -1))
    best = np.zeros((len(t), len(e)))
    s = int(max_shift)
    for dy in range(-s, s + 1):
        for dx in range(-s, s + 1):
            ts = _unit_rows(_shifted(t, dy, dx).reshape(len(t), -1))
            best = np.maximum(best, np.abs(ts @ e.T))
    return best


def atom_recovery(d_true: np.ndarray, d_est: np.ndarray, max_shift: int = 3) -> dict:
    """{'mean': each true atom's best score over the learnt atoms, averaged; 'per_atom':
    those best scores (K_true,); 'matched': the learnt atom each took}."""
    m = ncc_matrix(d_true, d_est, max_shift)
    per = m.max(axis=1)
    return {"mean": float(per.mean()), "per_atom": per, "matched": m.argmax(axis=1)}


def random_atom_score(d_true: np.ndarray, k: int, max_shift: int = 3, *, draws: int = 5,
                      seed: int = 0) -> float:
    """:func:`atom_recovery`'s mean for ``k`` atoms drawn N(0, I) of the true atoms'
    shape, averaged over ``draws`` dictionaries: what a dictionary that learnt nothing
    scores."""
    rng = np.random.default_rng(seed)
    shape = np.shape(d_true)[:3] + (int(k),)
    return float(np.mean([atom_recovery(d_true, rng.normal(size=shape), max_shift)["mean"]
                          for _ in range(int(draws))]))


def _corr_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = np.asarray(a, np.float64).reshape(len(a), -1)
    b = np.asarray(b, np.float64).reshape(len(b), -1)
    if len(a) != len(b):
        raise ValueError(f"codes of {len(a)} and {len(b)} images")
    a = a - a.mean(0)
    b = b - b.mean(0)
    na, nb = np.linalg.norm(a, axis=0), np.linalg.norm(b, axis=0)
    a = a[:, na > 1e-12] / na[na > 1e-12]
    b = b / np.where(nb > 1e-12, nb, np.inf)
    return np.abs(a.T @ b)


def code_recovery(s_true: np.ndarray, s_est: np.ndarray) -> float:
    """Each true code unit's best |correlation| over the images with any learnt feature,
    averaged over the true units that vary (one code a row: (N, ...) each)."""
    return float(_corr_matrix(s_true, s_est).max(axis=1).mean())


def shuffled_code_score(s_true: np.ndarray, s_est: np.ndarray, *, seed: int = 0) -> float:
    """:func:`code_recovery` with the learnt features' images in a random order: chance."""
    perm = np.random.default_rng(seed).permutation(len(s_est))
    return code_recovery(s_true, np.asarray(s_est)[perm])
