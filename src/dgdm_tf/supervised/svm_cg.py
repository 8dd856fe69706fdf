r"""EM steps for wide features by matrix-free conjugate gradients (the dense step:
:mod:`dgdm_tf.supervised.svm_em`).

**Wide features: EM steps by conjugate gradients (``em_solver``).**  A dense step costs
``2 C N F1^2`` flops and an ``F1 x F1`` factor per class.  With ``em_solver="cg"`` (or
``"auto"`` when :func:`dgdm_tf.supervised.svm_linalg.classwise` holds:
:func:`em_solver_for`) each class's M-step ``A_l beta = b_l`` is solved by
preconditioned CG from the previous iterate, with products through ``S`` alone (:func:`em_step_cg`: ``4 C N F1`` flops an iteration,
memory ``O((N + C rows) F1)``, no ``F1 x F1`` or ``N x N``).  Same objective, priors,
``em_iters`` / ``em_tol``, and the same fixed points and monotone descent: CG's iterates
lower the quadratic ``Q(. | beta)`` that majorises ``J`` and touches it at ``beta`` (up
to the ``eps`` floors), so ``J(beta') <= Q(beta' | beta) <= Q(beta | beta) = J(beta)``
however early CG stops, and from the warm start the residual ``b - A beta`` is
``-grad J(beta)``, so CG leaves ``beta`` in place exactly when the dense step would.
``em_cg_tol`` is relative to that warm-start residual, not to ``||b||``, which grows
with the weights ``1/|c|`` (up to ``1/eps``), so a tolerance on it would be met ever
sooner as EM goes on.  The first step (the ridge start from ``beta = 0``) has its own,
tighter ``em_cg_start_tol``: where EM starts decides which weights the ``1/|beta|``
prior shrinks away within ``em_iters`` steps, and a loose start costs test error and
later CG iterations.  The preconditioner is :func:`cg_preconditioner`.  The CG
arithmetic is NumPy float64: its BLAS runs the two ``C``-column products of an
iteration faster than TF's float64 kernels.  Measurements against dense steps:
docs/findings/svm_em_cg.md.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import tensorflow as tf

from dgdm_tf.supervised.options import EM_SOLVERS
from dgdm_tf.supervised.svm_linalg import DTYPE, classwise, f64

#: heavy rows per class solved exactly in the CG preconditioner (:func:`cg_preconditioner`)
CG_PRECOND_ROWS = 512
#: the largest ``C x rows x F1`` float64 stack of those rows the preconditioner keeps;
#: above it, its products go through ``S`` (:func:`cg_preconditioner`)
CG_PRECOND_BYTES = 1024 * 2**20

__all__ = [
    "em_solver_for",
    "cg_preconditioner",
    "conjugate_gradients",
    "em_step_cg",
]


def em_solver_for(n_classes: int, n_coef: int, em_solver: str = "auto") -> str:
    """``"dense"`` or ``"cg"``: how :class:`dgdm_tf.supervised.svm_classifier.BayesianSVM`
    solves its EM steps.

    ``"auto"`` takes CG exactly when the dense solves would go one class at a time
    (:func:`dgdm_tf.supervised.svm_linalg.classwise`: the ``C`` stacked ``F1 x F1``
    float64 precisions exceed ``CLASS_BATCH_BYTES``); below that a dense step is cheap
    and exact.
    """
    if em_solver not in EM_SOLVERS:
        raise ValueError(f"em_solver must be one of {EM_SOLVERS}, got {em_solver!r}")
    if em_solver != "auto":
        return em_solver
    return "cg" if classwise(n_classes, n_coef) else "dense"


def _sq_colsums(s: np.ndarray, w: np.ndarray, chunk_rows: int = 2048) -> np.ndarray:
    """``(C, F1)``: ``sum_n w[l, n] s[n, i]^2``, chunked over rows (no ``N x F1`` square)."""
    out = np.zeros((w.shape[0], s.shape[1]))
    for j in range(0, s.shape[0], chunk_rows):
        out += w[:, j:j + chunk_rows] @ np.square(s[j:j + chunk_rows])
    return out


def cg_preconditioner(s: np.ndarray, w: np.ndarray, prior: np.ndarray,
                      rows: int | None = None) -> Callable[[np.ndarray], np.ndarray]:
    """``r -> M^-1 r`` for all classes: ``M_l = D_l + S_B^T diag(w_lB) S_B`` (SPD).

    For ``A_l = S^T diag(w_l) S + diag(prior_l)``: ``B`` = the ``rows`` rows of largest
    weight (EM: ``1/|c|``, up to ``1/eps`` for examples pinned to the margin), ``D_l`` the
    diagonal of ``A_l`` without them.  Why not plain Jacobi: standardised ``S`` is dense,
    so one pinned row adds ``~w s_ni^2`` to every diagonal entry and Jacobi then shrinks
    every other direction by as much; exact on the heavy rows (Woodbury, a ``rows x
    rows`` Cholesky per class) and Jacobi on the rest, a late EM step converges in ~100
    CG iterations where Jacobi does not in 1500 (docs/findings/svm_em_cg.md).  ``rows`` defaults to
    :data:`CG_PRECOND_ROWS`; 0 is Jacobi; ``>= N`` makes ``M = A``.  Memory: the heavy
    rows' ``C x rows x F1`` float64 stack when it fits :data:`CG_PRECOND_BYTES` (an
    application then costs ``4 C rows F1`` flops); above it (many classes, wide
    features: 102 classes x 512 x 92257 doubles, 38 GB, for encoder_svm on Caltech-101
    in config/paper.yaml) none, each application multiplying through ``S`` instead
    (``4 C N F1`` flops, as one product with ``A``).
    """
    k = min(CG_PRECOND_ROWS if rows is None else int(rows), s.shape[0])
    if k == 0:
        d = _sq_colsums(s, w) + prior
        return lambda r: r / d
    c = w.shape[0]
    idx = np.argpartition(-w, k - 1, axis=1)[:, :k]  # (C, k)
    w_rest = w.copy()
    np.put_along_axis(w_rest, idx, 0.0, axis=1)
    d = _sq_colsums(s, w_rest) + prior
    # S_B D^-1 S_B^T, one class's rows at a time (no stack, nor its scaled copy)
    cap = np.stack([(s[i] / dl) @ s[i].T for i, dl in zip(idx, d)])
    cap = 0.5 * (cap + np.swapaxes(cap, 1, 2))
    diag = np.arange(k)
    cap[:, diag, diag] += 1.0 / np.take_along_axis(w, idx, axis=1)
    # cap^-1 = L^-T L^-1 keeps M^-1 symmetric to round-off, which CG relies on (TF's
    # batched triangular solve: NumPy has none, and its batched solve is slower)
    l_inv = tf.linalg.triangular_solve(tf.linalg.cholesky(f64(cap)),
                                       tf.eye(k, batch_shape=[c], dtype=DTYPE)).numpy()
    l_inv_t = np.swapaxes(l_inv, 1, 2)
    s_b = s[idx] if 8 * c * k * s.shape[1] <= CG_PRECOND_BYTES else None  # (C, k, F1)

    def apply(r: np.ndarray) -> np.ndarray:
        rd = r / d
        if s_b is not None:
            t_b = (s_b @ rd[:, :, None])[:, :, 0]  # (C, k): S_B D^-1 r
        else:
            t_b = np.take_along_axis(rd @ s.T, idx, axis=1)
        u = (l_inv_t @ (l_inv @ t_b[:, :, None]))[:, :, 0]  # (C, k)
        if s_b is not None:
            back = (u[:, None, :] @ s_b)[:, 0, :]  # S_B^T u
        else:
            u_n = np.zeros_like(w)
            np.put_along_axis(u_n, idx, u, axis=1)
            back = u_n @ s
        return rd - back / d

    return apply


def conjugate_gradients(apply_a, apply_m, rhs, x0, tol: float, max_iter: int):
    """Preconditioned CG on every class at once (rows of ``rhs`` / ``x0`` ``(C, F1)``).

    Class ``l`` stops when ``||r_l|| <= tol ||r_l(x0)||`` (its residual relative to the
    one at the start) or after ``max_iter`` iterations; the others go on.  Returns
    ``(x, iterations, ||r(x0)||)``.  From ``x0`` every iterate lowers
    ``1/2 x^T A x - rhs^T x``.
    """
    x = np.array(x0, dtype=np.float64)
    r = rhs - apply_a(x)
    r0 = np.linalg.norm(r, axis=1)
    stop = tol * r0
    z = apply_m(r)
    p = z.copy()
    rz = np.sum(r * z, axis=1)
    it = 0
    while it < max_iter:
        active = np.linalg.norm(r, axis=1) > stop
        if not active.any():
            break
        q = apply_a(p)
        alpha = np.where(active, rz / np.where(active, np.sum(p * q, axis=1), 1.0), 0.0)
        x += alpha[:, None] * p
        r -= alpha[:, None] * q
        z = apply_m(r)
        rz_new = np.sum(r * z, axis=1)
        ratio = np.where(active, rz_new / np.where(active, rz, 1.0), 0.0)
        p = np.where(active[:, None], z + ratio[:, None] * p, p)
        rz = np.where(active, rz_new, rz)
        it += 1
    return x, it, r0


def em_step_cg(beta, s, y, gamma, l1, l2, *, tol: float, start: bool = False,
               eps: float = 1e-7, rows: int | None = None, max_iter: int | None = None):
    """One EM step of :func:`dgdm_tf.supervised.svm_em.em_update_beta` (or, ``start=True``,
    of the ridge start :func:`dgdm_tf.supervised.svm_em.em_first_step` from ``beta = 0``),
    its linear solve by CG: NumPy float64.

    Each class's ``A_l beta = b_l`` (``A_l = gamma S^T diag(1/|c|) S + diag(l2 + l1/|beta|)``,
    supplement eq. ``UpdateBeta``) by :func:`conjugate_gradients` with products through
    ``S`` ``(N, F1)`` only, preconditioned by :func:`cg_preconditioner`, warm-started at
    the current ``beta``, until ``||b - A beta'|| <= tol ||b - A beta||``; ``max_iter``
    defaults to ``F1``.  From the warm start ``b - A beta = -grad J(beta)``
    (:func:`dgdm_tf.supervised.svm_em.hinge_objective`, where differentiable), and CG lowers the quadratic that
    majorises ``J``: every step still decreases ``J``, and CG leaves ``beta`` exactly where
    the dense step would (``grad J = 0``), so both have the same fixed points.  Returns
    ``(beta', {"cg_iterations", "cg_residual"})``, the latter the largest over classes of
    the recomputed ``||b - A beta'|| / ||b - A beta||``.
    """
    s = np.asarray(s, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    beta = np.asarray(beta, dtype=np.float64)
    if start:  # |c| = 1 everywhere, |beta| taken as 1, from beta = 0
        w = np.full(y.shape, float(gamma))
        prior = l2 + l1 + np.zeros_like(beta)
        rhs = (2.0 * gamma * y) @ s
        x0 = np.zeros_like(beta)
    else:
        inv_c = 1.0 / np.maximum(np.abs(1.0 - y * (beta @ s.T)), eps)
        w = gamma * inv_c
        prior = l2 + l1 / np.maximum(np.abs(beta), eps)
        rhs = (gamma * y * (1.0 + inv_c)) @ s
        x0 = beta

    def apply_a(v):
        return ((v @ s.T) * w) @ s + prior * v

    limit = s.shape[1] if max_iter is None else int(max_iter)
    out, its, r0 = conjugate_gradients(apply_a, cg_preconditioner(s, w, prior, rows), rhs,
                                       x0, tol, limit)
    res = np.linalg.norm(rhs - apply_a(out), axis=1)
    rel = np.where(r0 > 0, res / np.where(r0 > 0, r0, 1.0), 0.0)
    return out, {"cg_iterations": its, "cg_residual": float(rel.max())}
