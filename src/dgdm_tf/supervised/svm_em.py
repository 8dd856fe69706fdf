r"""The SVM's MAP by EM: its objective and the dense EM step (the model:
:mod:`dgdm_tf.supervised.svm_gibbs`; wide features: :mod:`dgdm_tf.supervised.svm_cg`).

**EM / MAP (``method="em"``, supplement eq. ``UpdateBeta``).**  With ``1/lambda``
replaced by ``E[1/lambda_n | beta] = 1/|c_n|`` and ``1/omega_i`` by
``E[1/omega_i | beta] = sqrt(2 kappa)/|beta_i|`` the M-step is the linear solve
``beta <- [gamma S^T diag(1/|c|) S + Omega^-1]^-1 gamma S^T (y (1 + 1/|c|))``,
the paper's formula with ``gamma = 1`` and ``Omega^-1 = diag(1/|beta|)``, i.e.
``sqrt(2 kappa) = 1`` (``kappa = 1/2``, our default).  It is an MM algorithm that
decreases monotonically the negative log pseudo-posterior

``J(beta) = 2 gamma sum_n max(1 - y_n beta^T s_n, 0) + sqrt(2 kappa) sum_{i<F} |beta_i|
+ beta_bias^2 / (2 bias_var)``  (Laplace; ``+ ridge/2 sum_{i<F} beta_i^2`` for Gaussian),

i.e. the L1-regularised hinge loss with cost ``2 gamma / sqrt(2 kappa)``
(:func:`hinge_objective` evaluates it; ``trace`` records it).  ``kappa`` and ``gamma`` are
held fixed in EM (a joint MAP over ``kappa`` is degenerate at ``beta = 0``).
``|c|`` and ``|beta|`` are floored at ``eps = 1e-7`` (:func:`em_update_beta`).
"""

from __future__ import annotations

import tensorflow as tf

from dgdm_tf.supervised.svm_linalg import f64, margins, solve_classes

__all__ = [
    "hinge_loss",
    "hinge_objective",
    "em_update_beta",
    "em_first_step",
]


def hinge_loss(beta, s, y) -> tf.Tensor:
    """``(C,)`` total hinge loss ``sum_n max(1 - y_n beta^T s_n, 0)``."""
    c = 1.0 - f64(y) * margins(beta, s)
    return tf.reduce_sum(tf.nn.relu(c), axis=-1)


def hinge_objective(beta, s, y, gamma=1.0, *, l1=0.0, l2=0.0) -> tf.Tensor:
    """``(C,)`` negative log pseudo-posterior (up to constants) that the MAP minimises.

    ``J_l = 2 gamma sum_n max(1 - y_ln beta_l^T s_n, 0) + sum_i l1_i |beta_li|
    + 1/2 sum_i l2_i beta_li^2``; ``l1``/``l2`` scalars or ``(F1,)``/``(C, F1)``
    per-coefficient weights (Laplace: ``l1 = sqrt(2 kappa)`` on the weights; Gaussian:
    ``l2 = 1/variance``).
    """
    beta = f64(beta)
    pen = tf.reduce_sum(f64(l1) * tf.abs(beta) + 0.5 * f64(l2) * tf.square(beta), axis=-1)
    return 2.0 * f64(gamma) * hinge_loss(beta, s, y) + pen


def em_update_beta(beta, s, y, gamma, l1, l2, *, eps: float = 1e-7) -> tf.Tensor:
    """One EM / MM step of eq. ``UpdateBeta`` for all classes: returns the new ``(C, F1)``.

    ``beta <- [gamma S^T diag(1/|c|) S + diag(l2 + l1/|beta|)]^-1 gamma S^T (y (1 + 1/|c|))``
    with ``|c|``, ``|beta|`` floored at ``eps``.  Monotonically decreases
    :func:`hinge_objective` (``l1``, ``l2`` as there).
    """
    beta = f64(beta)
    gamma = f64(gamma)
    y = f64(y)
    c = 1.0 - y * margins(beta, s)
    inv_c = 1.0 / tf.maximum(tf.abs(c), eps)
    prior_prec = f64(l2) + f64(l1) / tf.maximum(tf.abs(beta), eps)
    rhs = gamma * tf.matmul(y * (1.0 + inv_c), f64(s))
    return solve_classes(s, gamma * inv_c, prior_prec, rhs)


def em_first_step(s, y, gamma, l1, l2):
    """EM step from ``beta = 0`` with ``|c| = 1`` and ``|beta|`` taken as 1 (a ridge solve)."""
    gamma = f64(gamma)
    rhs = gamma * tf.matmul(2.0 * y, f64(s))
    return solve_classes(s, gamma * tf.ones_like(y), l2 + l1, rhs)
