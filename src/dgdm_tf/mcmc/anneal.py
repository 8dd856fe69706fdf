"""Tempered burn-in: the noise precision gamma_e capped by a rising schedule.

Why: at the noise precision a layer settles at (MNIST layer 1: gamma_e ~ 2000), moving
a stroke's explanation from one unpooling block to a neighbour of another colour passes
through a state whose likelihood is lower by exp(-gamma_e ||stroke||^2 / 2). A chain
started at that precision freezes within its first sweep into the decomposition its scan
order builds (the colour visited first takes the strokes), and its features then encode
the scan order, not the image (docs/findings/tempered_burn_in.md).

How: during the first ``sweeps`` sweeps of burn-in the local updates run at
gamma_e = min(gamma_e, cap_t), a likelihood tempered by cap_t / gamma_e, with

    cap_t = start_n * ratio ** (t / (sweeps - 1)),   t = 0 .. sweeps - 1,

start_n = 1 / Var(x_n) (the image's own scale). Near the precision at which a stroke
first pays for an atom, blocks turn on and off freely, so the atom that explains the
stroke best wins whatever the scan order; as the cap rises those explanations are kept
and the finer ones are added. gamma_e is still drawn from its exact conditional each
sweep, and the cap is lifted after ``sweeps`` sweeps: every collected sweep is an exact
Gibbs sweep of the model, so the annealing only moves where the chain starts collecting.
"""

from __future__ import annotations

import numpy as np


def start_precision(x: np.ndarray) -> np.ndarray:
    """(N,) 1 / Var(x_n): the schedule's first cap, per image."""
    x = np.asarray(x, np.float64).reshape(len(x), -1)
    return (1.0 / np.maximum(x.var(axis=1), 1e-6)).astype(np.float32)


def gamma_e_cap(start: np.ndarray, t: int, sweeps: int, ratio: float) -> np.ndarray | None:
    """The cap of sweep ``t`` (0-based), or None once the annealing is over."""
    if sweeps <= 0 or t >= sweeps:
        return None
    if ratio < 1.0:
        raise ValueError(f"anneal ratio must be >= 1 (the cap only rises), got {ratio}")
    frac = t / (sweeps - 1) if sweeps > 1 else 1.0
    return (np.asarray(start, np.float32) * np.float32(ratio) ** np.float32(frac)).astype(np.float32)
