r"""The SVM's float64 linear algebra: one-vs-all targets, decision values, the
per-class weighted Gram matrices and Gaussian solves (Gibbs and dense EM).

**Precision.**  All SVM arithmetic is float64.  The cost centre is the ``C`` weighted
Gram matrices ``S^T diag(w_l) S`` (``C x F1 x F1``, ``2 C N F1^2`` flops); float32 is
~2.7x faster there but its accumulation error (~1e-5 of ``||P||`` ~ 1e6-1e8 at MNIST size,
weights up to 1e8) exceeds the prior precision (~1), which would make the Cholesky fail
or the draws wrong in weakly-determined directions.  We cut the float64 cost by a
quarter by computing only the lower block-triangle (two row blocks), chunked over ``N``
(bounded memory: ~150 MB of temporaries at MNIST size).  Measured at N=60000, F1=469,
C=10 on the 2-core dev machine (shared with other jobs, load 3-11): the Gram matrices
take 5.1-5.5 CPU-seconds and a whole Gibbs sweep 5.2-7 CPU-seconds (best wall time seen
3.3 s at load ~3; expect ~3 s on two idle cores), peak RSS 2.6 GB including the float64
copy of the features; an EM step costs about the same.  Wide features (``C F1^2``
doubles above :data:`CLASS_BATCH_BYTES`, 256 MB) solve one class at a time
(:func:`solve_classes`), from the lower triangle only (what the Cholesky reads): the
batched solve held several ``(C, F1, F1)`` float64 stacks at once.  Measured at
N = 2000, F1 = 4901, C = 10 (soft-threshold features of MNIST), 1 thread, 3 Gibbs
sweeps: peak RSS 8.7 GB -> 1.7 GB, 23-26 s a sweep either way; at N = 10000 a dense EM
step takes 72-87 s and the fit peaks at 3.4 GB (EM there takes the CG path of
:mod:`dgdm_tf.supervised.svm_cg`).  Smaller problems (MNIST's 800 pretrained features:
51 MB) stay batched, bit for bit as before.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

DTYPE = tf.float64
#: the largest ``C x F1 x F1`` float64 stack solved batched (:func:`solve_classes`)
CLASS_BATCH_BYTES = 256 * 2**20

__all__ = [
    "f64",
    "one_vs_all_targets",
    "margins",
    "weighted_gram",
    "beta_precision",
    "classwise",
    "solve_classes",
]


def f64(x) -> tf.Tensor:
    """``x`` as a float64 tensor."""
    return tf.convert_to_tensor(x, dtype=DTYPE)


def one_vs_all_targets(labels, n_classes: int) -> np.ndarray:
    """``(C, N)`` float64 array: ``+1`` where ``labels == l`` else ``-1``."""
    labels = np.asarray(labels)
    return np.where(labels[None, :] == np.arange(n_classes)[:, None], 1.0, -1.0)


def margins(beta, s) -> tf.Tensor:
    """``(C, N)`` decision values ``beta_l^T s_n``; beta ``(C, F1)``, s ``(N, F1)``."""
    return tf.matmul(f64(beta), f64(s), transpose_b=True)


def weighted_gram(s, w, *, chunk_rows: int = 8192) -> tf.Tensor:
    """``G[l] = S^T diag(w[l]) S`` for all ``l`` at once: s ``(N, F)``, w ``(C, N)`` -> ``(C, F, F)``.

    Float64.  Computes the lower block-triangle only (two row blocks: 3/4 of the
    flops) as one wide GEMM per block and chunk of ``chunk_rows`` rows of ``S`` (so
    memory stays at ~``chunk_rows * C * F/2`` doubles), then mirrors it.
    """
    low = _gram_lower(s, w, chunk_rows=chunk_rows)
    if low.shape[-1] < 96 or f64(s).shape[0] is None:
        return low  # the einsum: already the whole matrix
    low = tf.linalg.band_part(low, -1, 0)
    return low + tf.linalg.matrix_transpose(low) - tf.linalg.diag(tf.linalg.diag_part(low))


def _gram_lower(s, w, *, chunk_rows: int = 8192) -> tf.Tensor:
    """``(C, F, F)`` whose lower triangle (diagonal included) is that of
    :func:`weighted_gram`; above the diagonal it holds zeros and part of the Gram.
    Enough for ``tf.linalg.cholesky``, which reads the lower triangle only, and
    without the three more ``(C, F, F)`` temporaries that mirroring costs."""
    s = f64(s)
    w = f64(w)
    n_static = s.shape[0]
    f = s.shape[1]
    c = w.shape[0]
    if f is None or c is None:
        raise ValueError("weighted_gram needs static feature and class dimensions")
    if f < 96 or n_static is None:
        return tf.einsum("nf,cn,ng->cfg", s, w, s)
    edges = [0, (f + 1) // 2, f]
    blocks = [None, None]
    for j in range(0, n_static, chunk_rows):
        sc = s[j:j + chunk_rows]
        wc = tf.transpose(w[:, j:j + chunk_rows])  # (n, C)
        for i in range(2):
            a, b = edges[i], edges[i + 1]
            ws = tf.reshape(wc[:, :, None] * sc[:, None, a:b], (-1, c * (b - a)))
            g = tf.reshape(tf.matmul(ws, sc[:, :b], transpose_a=True), (c, b - a, b))
            blocks[i] = g if blocks[i] is None else blocks[i] + g
    rows = [tf.pad(blk, [[0, 0], [0, 0], [0, f - edges[i + 1]]]) for i, blk in enumerate(blocks)]
    return tf.concat(rows, axis=1)


def _add_diag(gram, diag):
    """``gram + diag(diag)`` without a dense ``diag`` matrix (the same values)."""
    diag = tf.broadcast_to(f64(diag), tf.shape(gram)[:-1])
    return tf.linalg.set_diag(gram, tf.linalg.diag_part(gram) + diag)


def beta_precision(lam_inv_w, omega, s):
    """Precision ``gram(s, w) + diag(1/omega)`` with ``omega`` ``(C, F1)`` or ``(F1,)``."""
    return _add_diag(weighted_gram(s, lam_inv_w), 1.0 / f64(omega))


def classwise(n_classes: int, n_coef: int) -> bool:
    """Do the ``beta`` solves go one class at a time?  When the ``C`` stacked ``F1 x F1``
    float64 matrices would exceed :data:`CLASS_BATCH_BYTES` (see :func:`solve_classes`)."""
    return 8 * int(n_classes) * int(n_coef) ** 2 > CLASS_BATCH_BYTES


def solve_classes(s, w, prior_prec, rhs, z=None) -> tf.Tensor:
    """The Gaussian solve of every class: ``(C, F1)`` rows ``P_l^-1 rhs_l`` (``+ L_l^-T z_l``).

    ``P_l = S^T diag(w_l) S + diag(prior_prec_l) = L_l L_l^T``; s ``(N, F1)``, w ``(C, N)``,
    prior_prec ``(C, F1)`` or ``(F1,)``, rhs ``(C, F1)``, z ``(C, F1, 1)`` standard normal
    (a draw from ``N(P^-1 rhs, P^-1)``) or None (the mean alone, for EM).

    Small problems (:func:`classwise` false: ``C F1^2`` doubles <= :data:`CLASS_BATCH_BYTES`)
    batch all classes in one ``(C, F1, F1)`` stack.  Large ones loop over the classes
    (``tf.map_fn`` with ``parallel_iterations=1``: one class's matrices live at a time),
    because the batched solve holds several ``(C, F1, F1)`` float64 temporaries at once
    (the Gram's blocks, its mirrored copy, the precision, the Cholesky factor; each
    1.9 GB at F1 = 4901, C = 10): 3 Gibbs sweeps at N = 2000 peaked at 8.7 GB batched,
    1.7 GB class by class (whole process), at the same 23-26 s a sweep.  Either way the
    Cholesky reads the lower triangle only, so the Gram is not mirrored.  The same
    arithmetic either way (a class's Gram comes from a narrower GEMM: round-off-level
    differences only); the random numbers ``z`` are the caller's, drawn for all classes.
    """
    s = f64(s)
    w = f64(w)
    rhs = f64(rhs)
    c, f1 = int(w.shape[0]), int(s.shape[1])
    prior_prec = tf.broadcast_to(f64(prior_prec), [c, f1])

    by_class = classwise(c, f1)

    def solve(w_b, p_b, r_b, z_b):
        # class by class: chunks of 2048 rows of S (~0.2 GB of temporaries at F1 = 4901)
        gram = _gram_lower(s, w_b, chunk_rows=2048 if by_class else 8192)
        chol = tf.linalg.cholesky(_add_diag(gram, p_b))
        out = tf.linalg.cholesky_solve(chol, r_b[..., None])
        if z_b is not None:
            out = out + tf.linalg.triangular_solve(chol, z_b, lower=True, adjoint=True)
        return out[..., 0]

    if not by_class:
        return solve(w, prior_prec, rhs, z)
    elems = (w, prior_prec, rhs) + (() if z is None else (f64(z),))

    def one(e):
        z_l = None if z is None else e[3][None]
        return solve(e[0][None], e[1][None], e[2][None], z_l)[0]

    return tf.map_fn(one, elems, parallel_iterations=1, fn_output_signature=DTYPE)
