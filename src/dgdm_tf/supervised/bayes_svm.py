r"""Multi-class one-vs-all Bayesian SVM (Polson & Scott 2011), paper Sec. 2.3 + supplement.

Model (one binary SVM per class ``l`` of ``C``; ``y_n = +1`` if ``label_n == l`` else
``-1``; ``s_n`` the *standardised* feature vector with a bias 1 appended, length
``F1 = F + 1``; ``c_n = 1 - y_n beta^T s_n``):

* pseudo-likelihood ``exp(-2 gamma max(c_n, 0))``, written (Polson & Scott 2011, eq. 3;
  paper eq. ``lik_mix``) as the mixture over ``lambda_n > 0`` of
  ``sqrt(gamma / (2 pi lambda_n)) exp(-gamma (c_n + lambda_n)^2 / (2 lambda_n))``.
  Check: ``(c + lambda)^2 / lambda = c^2/lambda + 2c + lambda`` and
  ``int lambda^-1/2 exp(-A/lambda - B lambda) = sqrt(pi/B) exp(-2 sqrt(AB))`` with
  ``A = gamma c^2 / 2``, ``B = gamma / 2`` give ``exp(-gamma c - gamma |c|)``
  ``= exp(-2 gamma max(c, 0))``.
* prior on the ``F`` weights (Laplace by scale mixture, paper eq. ``beta``):
  ``beta_i ~ N(0, omega_i)``, ``omega_i ~ Exp(rate kappa)``, ``kappa ~ Gamma(a_kappa, b_kappa)``
  (one ``kappa`` per binary SVM).  Marginally ``p(beta_i | kappa) = sqrt(2 kappa)/2
  exp(-sqrt(2 kappa) |beta_i|)``.  ``prior="gaussian"`` instead fixes
  ``beta_i ~ N(0, 1/ridge)`` (used by the tests against an independent L2-SVM solver).
* **Bias.**  The bias is *not* shrunk: shrinking it towards 0 would bias the one-vs-all
  decision thresholds (a class with 10 % positives wants a bias near -1).  It gets a
  wide, fixed Gaussian ``N(0, bias_var)``, ``bias_var = 100`` (sd 10, i.e. flat on the
  O(1) scale of decision values of standardised features, yet proper, so every
  conditional stays well defined even for a class with no positives).
* ``gamma``: fixed (default 1) or, with ``sample_gamma=True``, ``gamma ~ Gamma(a_gamma,
  b_gamma)`` shared by all ``C`` SVMs, as the paper says.

Gibbs conditionals (the pure functions below; every one checked in ``tests/test_svm.py``):

* ``lambda_n``: ``p(lambda | .) ∝ lambda^-1/2 exp(-gamma c^2/(2 lambda) - gamma lambda/2)``
  = GIG(1/2, gamma, gamma c^2); with ``u = 1/lambda`` this is
  ``u^-3/2 exp(-gamma c^2 u / 2 - gamma / (2u))``, i.e.
  ``1/lambda ~ IG(mean 1/|c|, shape gamma)`` (supplement eq. ``Samplelambda``, gamma = 1).
  Drawn with Michael, Schucany & Haas (1976) in the cancellation-free form of
  :func:`sample_inverse_gaussian`; ``c = 0`` is the Levy limit ``1/lambda = gamma/nu^2``
  (exact, no division by zero).  ``lambda`` is floored at ``lam_min = 1e-8`` so that
  no row of the precision gets a weight above ``1e8 gamma`` (keeps the float64
  Cholesky well conditioned; such a row is then pinned to the margin to ~1e-8 anyway).
* ``beta`` (each class, jointly over all ``F1`` coefficients):
  ``log p = -gamma/2 sum_n (y_n(1+lambda_n) - beta^T s_n)^2 / lambda_n - 1/2 beta^T
  diag(1/omega) beta`` (using ``y_n^2 = 1``), hence Gaussian with
  precision ``P = gamma S^T diag(1/lambda) S + diag(1/omega)`` and
  precision-times-mean ``b = gamma S^T (y (1 + lambda) / lambda)``;
  ``beta = P^-1 b + L^-T z`` with ``P = L L^T``.  (The supplement writes the same
  conditional coordinate-wise; its ``y_n`` inside the precision sum is a typo for
  ``y_n^2 = 1``.  We draw the block jointly: valid, and it mixes far better.)
* ``omega_i``: ``p ∝ omega^-1/2 exp(-beta^2/(2 omega) - kappa omega)`` = GIG(1/2, 2 kappa,
  beta^2); ``1/omega_i ~ IG(mean sqrt(2 kappa)/|beta_i|, shape 2 kappa)``.
* ``kappa``: ``p ∝ kappa^(a-1) e^(-b kappa) prod_i kappa e^(-kappa omega_i)``
  = ``Gamma(a_kappa + F, b_kappa + sum_i omega_i)`` (shape, rate).  Its fixed point is
  ``sqrt(2 kappa) ≈ F / sum|beta_i|``, the Laplace scale's MLE: no drift.
* ``gamma`` (optional): ``p ∝ p(gamma) prod_{l,n} sqrt(gamma) exp(-gamma (c+lambda)^2 /
  (2 lambda))`` = ``Gamma(a_gamma + C N / 2, b_gamma + sum (c+lambda)^2/(2 lambda))``.

**Why ``gamma`` is fixed by default (``sample_gamma=False``, ``gamma=1``).**  The
pseudo-likelihood is not normalised in ``y``; integrating ``lambda`` out leaves
``p(gamma | beta) ∝ p(gamma) exp(-2 gamma H)`` (``H`` = total hinge loss), which for the
diffuse ``Gamma(1e-6, 1e-6)`` has mean ``~1e-6 / (2H)``.  In the augmented chain
``E[(c+lambda)^2/lambda | c] = 4 max(c,0) + 1/gamma``, so each sweep does
``1/gamma <- 1/gamma + 4 H/(C N)`` in expectation: ``gamma`` drifts to 0 at least like
``1/t``, the prior takes over, the hinge grows, and the drift accelerates.  Measured (4 Gaussian
classes in 10-D, centres 1.2 x N(0, I), unit noise, 2000 training and 5000 test points,
``Gamma(1e-6, 1e-6)``, seed 0): gamma = 0.20 after sweep 1 (from beta = 0 it is
~``(CN/2) / (CN (4 + 1)/2)``), 0.064 after 20, 0.020 after 100, 0.008 after 300,
0.0015 after 1000, while the training error rose 5.7 % -> 8.6 % -> 14 % -> 41 % and
the test error of the last sample was 30 %.  With gamma fixed at 0.1, 1 or 10 (kappa
learned) the same data give 5.1 %, 5.1 %, 5.0 % test error (EM: 5.1 %).
``tests/test_svm.py`` checks the drift.  The regularisation that *should* adapt is the Laplace rate ``kappa``, whose prior is
normalised, and the MAP depends only on the ratio ``sqrt(2 kappa)/gamma`` — so fixing
``gamma = 1`` and learning ``kappa`` loses nothing and is sound.  ``sample_gamma=True``
is kept as an option for the paper's literal model (use it only with an informative
``Gamma(a_gamma, b_gamma)`` prior).

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

**Wide features: EM steps by conjugate gradients (``em_solver``).**  A dense step costs
``2 C N F1^2`` flops and an ``F1 x F1`` factor per class.  With ``em_solver="cg"`` (or
``"auto"`` when :func:`classwise` holds: :func:`em_solver_for`) each class's M-step
``A_l beta = b_l`` is solved by preconditioned CG from the previous iterate, with
products through ``S`` alone (:func:`em_step_cg`: ``4 C N F1`` flops an iteration,
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
iteration faster than TF's float64 kernels.  Measurements (the default config's
MNIST encoder_svm: 50 CG steps in 373 s against ~100 s a dense step, one thread):
docs/design.md, "The SVM's EM on wide features".

**Features** are standardised internally (training mean / sd stored as ``mean_`` /
``std_``; constant columns get sd 1) so that a unit-scale prior and ``kappa`` are
sensible whatever the units of the features.  ``betas`` are in standardised
coordinates; :meth:`BayesianSVM.raw_coefficients` maps them back.

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
step takes 72-87 s and the fit peaks at 3.4 GB (EM there takes the CG path above).
Smaller problems (MNIST's 800 pretrained features: 51 MB) stay batched, bit for bit as
before.

**Randomness.**  Every draw is a ``tf.random.stateless_*`` op.  Sweep ``t`` uses
``stateless_fold_in([seed, SALT], t)`` split into one seed per conditional, so the
same ``seed`` reproduces the same chain bit for bit.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np
import tensorflow as tf

from dgdm_tf.core.compiled import compiled

DTYPE = tf.float64
_SALT = 0x5F3  # fixed salt mixed into the user seed for the SVM's random stream
LAM_MIN = 1e-8
OMEGA_MIN = 1e-12
#: the largest ``C x F1 x F1`` float64 stack solved batched (:func:`solve_classes`)
CLASS_BATCH_BYTES = 256 * 2**20
#: heavy rows per class solved exactly in the CG preconditioner (:func:`cg_preconditioner`)
CG_PRECOND_ROWS = 512
#: the largest ``C x rows x F1`` float64 stack of those rows the preconditioner keeps;
#: above it, its products go through ``S`` (:func:`cg_preconditioner`)
CG_PRECOND_BYTES = 1024 * 2**20
EM_SOLVERS = ("auto", "dense", "cg")

__all__ = [
    "BayesianSVM",
    "one_vs_all_targets",
    "margins",
    "beta_conditional",
    "sample_inverse_gaussian",
    "resample_lambda",
    "lambda_from_residual",
    "resample_beta",
    "resample_omega",
    "resample_kappa",
    "resample_gamma",
    "weighted_gram",
    "solve_classes",
    "classwise",
    "em_update_beta",
    "em_solver_for",
    "cg_preconditioner",
    "conjugate_gradients",
    "em_step_cg",
    "hinge_loss",
    "hinge_objective",
]


# ----------------------------------------------------------------------------- helpers
def _t(x) -> tf.Tensor:
    return tf.convert_to_tensor(x, dtype=DTYPE)


def _seed(seed) -> tf.Tensor:
    """A shape-[2] int64 stateless seed from an int or a shape-[2] tensor."""
    if isinstance(seed, (int, np.integer)):
        return tf.constant([int(seed), _SALT], dtype=tf.int64)
    seed = tf.convert_to_tensor(seed)
    return tf.cast(seed, tf.int64)


def one_vs_all_targets(labels, n_classes: int) -> np.ndarray:
    """``(C, N)`` float64 array: ``+1`` where ``labels == l`` else ``-1``."""
    labels = np.asarray(labels)
    return np.where(labels[None, :] == np.arange(n_classes)[:, None], 1.0, -1.0)


def margins(beta, s) -> tf.Tensor:
    """``(C, N)`` decision values ``beta_l^T s_n``; beta ``(C, F1)``, s ``(N, F1)``."""
    return tf.matmul(_t(beta), _t(s), transpose_b=True)


# --------------------------------------------------------------- inverse Gaussian draws
def _ig_from_inv_mean(inv_mu, shape, seed) -> tf.Tensor:
    """IG draws parameterised by ``1/mean`` (0 allowed: the Levy limit).

    Michael, Schucany & Haas (1976): with ``nu ~ N(0,1)``, ``q = nu^2 / shape``, the
    smaller root ``x = mu + mu^2 nu^2/(2 shape) - mu/(2 shape) sqrt(4 mu shape nu^2 +
    mu^2 nu^4)`` equals ``4 / (sqrt(q) + sqrt(q + 4/mu))^2`` (rationalised: no
    cancellation for large ``mu``, and ``-> shape/nu^2`` as ``mu -> inf``); keep it with
    probability ``mu/(mu+x) = 1/(1 + x/mu)``, else return ``mu^2/x``.
    """
    inv_mu = _t(inv_mu)
    shape = _t(shape)
    seeds = tf.random.experimental.stateless_split(_seed(seed), 2)
    dims = tf.shape(inv_mu)
    nu = tf.random.stateless_normal(dims, seed=seeds[0], dtype=DTYPE)
    u = tf.random.stateless_uniform(dims, seed=seeds[1], dtype=DTYPE)
    q = nu * nu / shape
    x = 4.0 / tf.square(tf.sqrt(q) + tf.sqrt(q + 4.0 * inv_mu))
    accept = u * (1.0 + inv_mu * x) <= 1.0
    safe = tf.where(accept, tf.ones_like(inv_mu), inv_mu)  # avoid 1/0 in the unused branch
    return tf.where(accept, x, 1.0 / (safe * safe * x))


def sample_inverse_gaussian(mean, shape, seed) -> tf.Tensor:
    """Inverse-Gaussian draws ``IG(mean, shape)`` (mean ``mu``, variance ``mu^3/shape``).

    ``mean`` may be ``inf`` (Levy distribution with scale ``shape``).  Stateless:
    ``seed`` is an int or a shape-[2] integer tensor.
    """
    return _ig_from_inv_mean(1.0 / _t(mean), shape, seed)


# ------------------------------------------------------------------- Gibbs conditionals
def lambda_from_residual(c, gamma, seed, *, lam_min: float = LAM_MIN) -> tf.Tensor:
    """``lambda`` given ``c = 1 - y beta^T s``: ``1/lambda ~ IG(1/|c|, gamma)``, floored."""
    inv_lam = _ig_from_inv_mean(tf.abs(_t(c)), gamma, seed)
    return tf.maximum(1.0 / inv_lam, lam_min)


def resample_lambda(beta, s, y, gamma, seed, *, lam_min: float = LAM_MIN) -> tf.Tensor:
    """Draw the augmentation variables ``lambda`` ``(C, N)`` given ``beta``.

    beta ``(C, F1)``; s ``(N, F1)`` (bias column included); y ``(C, N)`` in ``{-1, +1}``;
    gamma scalar.  ``1/lambda_n ~ IG(mean 1/|1 - y_n beta^T s_n|, shape gamma)``.
    """
    c = 1.0 - _t(y) * margins(beta, s)
    return lambda_from_residual(c, gamma, seed, lam_min=lam_min)


def weighted_gram(s, w, *, chunk_rows: int = 8192) -> tf.Tensor:
    """``G[l] = S^T diag(w[l]) S`` for all ``l`` at once: s ``(N, F)``, w ``(C, N)`` -> ``(C, F, F)``.

    Float64.  Computes the lower block-triangle only (two row blocks: 3/4 of the
    flops) as one wide GEMM per block and chunk of ``chunk_rows`` rows of ``S`` (so
    memory stays at ~``chunk_rows * C * F/2`` doubles), then mirrors it.
    """
    low = _gram_lower(s, w, chunk_rows=chunk_rows)
    if low.shape[-1] < 96 or _t(s).shape[0] is None:
        return low  # the einsum: already the whole matrix
    low = tf.linalg.band_part(low, -1, 0)
    return low + tf.linalg.matrix_transpose(low) - tf.linalg.diag(tf.linalg.diag_part(low))


def _gram_lower(s, w, *, chunk_rows: int = 8192) -> tf.Tensor:
    """``(C, F, F)`` whose lower triangle (diagonal included) is that of
    :func:`weighted_gram`; above the diagonal it holds zeros and part of the Gram.
    Enough for ``tf.linalg.cholesky``, which reads the lower triangle only, and
    without the three more ``(C, F, F)`` temporaries that mirroring costs."""
    s = _t(s)
    w = _t(w)
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
    diag = tf.broadcast_to(_t(diag), tf.shape(gram)[:-1])
    return tf.linalg.set_diag(gram, tf.linalg.diag_part(gram) + diag)


def _beta_precision(lam_inv_w, omega, s):
    """Precision ``gram(s, w) + diag(1/omega)`` with ``omega`` ``(C, F1)`` or ``(F1,)``."""
    return _add_diag(weighted_gram(s, lam_inv_w), 1.0 / _t(omega))


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
    s = _t(s)
    w = _t(w)
    rhs = _t(rhs)
    c, f1 = int(w.shape[0]), int(s.shape[1])
    prior_prec = tf.broadcast_to(_t(prior_prec), [c, f1])

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
    elems = (w, prior_prec, rhs) + (() if z is None else (_t(z),))

    def one(e):
        z_l = None if z is None else e[3][None]
        return solve(e[0][None], e[1][None], e[2][None], z_l)[0]

    return tf.map_fn(one, elems, parallel_iterations=1, fn_output_signature=DTYPE)


def beta_conditional(lam, omega, s, y, gamma):
    """Parameters of ``beta | lambda, omega, gamma``: ``(precision (C,F1,F1), P mean (C,F1))``.

    precision ``P = gamma S^T diag(1/lambda) S + diag(1/omega)``,
    ``b = P mean = gamma S^T (y (1 + lambda) / lambda)``.
    """
    lam = _t(lam)
    y = _t(y)
    gamma = _t(gamma)
    prec = _beta_precision(gamma / lam, omega, s)
    rhs = gamma * tf.matmul(y * (1.0 + lam) / lam, _t(s))
    return prec, rhs


def resample_beta(lam, omega, s, y, gamma, seed) -> tf.Tensor:
    """Draw ``beta`` ``(C, F1)`` from its Gaussian conditional (all classes batched).

    lam ``(C, N)``; omega ``(C, F1)`` or ``(F1,)`` prior *variances* (the bias entry
    included: the caller decides the bias prior); s ``(N, F1)``; y ``(C, N)``.
    ``beta = P^-1 b + L^-T z``, ``P = L L^T``, ``z ~ N(0, I)``.
    """
    lam = _t(lam)
    y = _t(y)
    gamma = _t(gamma)
    rhs = gamma * tf.matmul(y * (1.0 + lam) / lam, _t(s))  # as beta_conditional
    z = tf.random.stateless_normal(tf.concat([tf.shape(rhs), [1]], 0), seed=_seed(seed),
                                   dtype=DTYPE)
    return solve_classes(s, gamma / lam, 1.0 / _t(omega), rhs, z)


def resample_omega(beta, kappa, seed, *, omega_min: float = OMEGA_MIN) -> tf.Tensor:
    """Laplace mixing variances given the (shrunk) weights ``beta`` ``(C, F)`` and ``kappa`` ``(C,)``.

    ``1/omega_i ~ IG(mean sqrt(2 kappa)/|beta_i|, shape 2 kappa)``.  Pass the weights
    without the bias (the bias is not shrunk).
    """
    beta = _t(beta)
    kappa = _t(kappa)
    if kappa.shape.rank == 1:
        kappa = kappa[:, None]
    inv_mu = tf.abs(beta) / tf.sqrt(2.0 * kappa)
    inv_omega = _ig_from_inv_mean(inv_mu, 2.0 * kappa, seed)
    return tf.maximum(1.0 / inv_omega, omega_min)


def resample_kappa(omega, a, b, seed) -> tf.Tensor:
    """``kappa_l ~ Gamma(a + F, b + sum_i omega_li)`` (shape, rate); omega ``(C, F)`` -> ``(C,)``."""
    omega = _t(omega)
    f = tf.cast(tf.shape(omega)[-1], DTYPE)
    alpha = _t(a) + f
    rate = _t(b) + tf.reduce_sum(omega, axis=-1)
    g = tf.random.stateless_gamma(tf.shape(rate), seed=_seed(seed), alpha=alpha, dtype=DTYPE)
    return g / rate


def resample_gamma(lam, beta, s, y, a, b, seed) -> tf.Tensor:
    """Shared ``gamma ~ Gamma(a + C N/2, b + sum_{l,n} (c + lambda)^2 / (2 lambda))`` (scalar).

    Drifts towards 0 under a diffuse prior (see the module docstring).
    """
    lam = _t(lam)
    c = 1.0 - _t(y) * margins(beta, s)
    alpha = _t(a) + tf.cast(tf.size(lam), DTYPE) / 2.0
    rate = _t(b) + tf.reduce_sum(tf.square(c + lam) / (2.0 * lam))
    g = tf.random.stateless_gamma([], seed=_seed(seed), alpha=alpha, dtype=DTYPE)
    return g / rate


# ------------------------------------------------------------------- objective and EM
def hinge_loss(beta, s, y) -> tf.Tensor:
    """``(C,)`` total hinge loss ``sum_n max(1 - y_n beta^T s_n, 0)``."""
    c = 1.0 - _t(y) * margins(beta, s)
    return tf.reduce_sum(tf.nn.relu(c), axis=-1)


def hinge_objective(beta, s, y, gamma=1.0, *, l1=0.0, l2=0.0) -> tf.Tensor:
    """``(C,)`` negative log pseudo-posterior (up to constants) that the MAP minimises.

    ``J_l = 2 gamma sum_n max(1 - y_ln beta_l^T s_n, 0) + sum_i l1_i |beta_li|
    + 1/2 sum_i l2_i beta_li^2``; ``l1``/``l2`` scalars or ``(F1,)``/``(C, F1)``
    per-coefficient weights (Laplace: ``l1 = sqrt(2 kappa)`` on the weights; Gaussian:
    ``l2 = 1/variance``).
    """
    beta = _t(beta)
    pen = tf.reduce_sum(_t(l1) * tf.abs(beta) + 0.5 * _t(l2) * tf.square(beta), axis=-1)
    return 2.0 * _t(gamma) * hinge_loss(beta, s, y) + pen


def em_update_beta(beta, s, y, gamma, l1, l2, *, eps: float = 1e-7) -> tf.Tensor:
    """One EM / MM step of eq. ``UpdateBeta`` for all classes: returns the new ``(C, F1)``.

    ``beta <- [gamma S^T diag(1/|c|) S + diag(l2 + l1/|beta|)]^-1 gamma S^T (y (1 + 1/|c|))``
    with ``|c|``, ``|beta|`` floored at ``eps``.  Monotonically decreases
    :func:`hinge_objective` (``l1``, ``l2`` as there).
    """
    beta = _t(beta)
    gamma = _t(gamma)
    y = _t(y)
    c = 1.0 - y * margins(beta, s)
    inv_c = 1.0 / tf.maximum(tf.abs(c), eps)
    prior_prec = _t(l2) + _t(l1) / tf.maximum(tf.abs(beta), eps)
    rhs = gamma * tf.matmul(y * (1.0 + inv_c), _t(s))
    return solve_classes(s, gamma * inv_c, prior_prec, rhs)


# ------------------------------------------------------ EM for wide features: matrix-free
def em_solver_for(n_classes: int, n_coef: int, em_solver: str = "auto") -> str:
    """``"dense"`` or ``"cg"``: how :class:`BayesianSVM` solves its EM steps.

    ``"auto"`` takes CG exactly when the dense solves would go one class at a time
    (:func:`classwise`: the ``C`` stacked ``F1 x F1`` float64 precisions exceed
    :data:`CLASS_BATCH_BYTES`); below that a dense step is cheap and exact.
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
    CG iterations where Jacobi does not in 1500 (docs/design.md).  ``rows`` defaults to
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
    l_inv = tf.linalg.triangular_solve(tf.linalg.cholesky(_t(cap)),
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
    """One EM step of :func:`em_update_beta` (or, ``start=True``, of the ridge start
    :func:`_em_first_step` from ``beta = 0``), its linear solve by CG: NumPy float64.

    Each class's ``A_l beta = b_l`` (``A_l = gamma S^T diag(1/|c|) S + diag(l2 + l1/|beta|)``,
    supplement eq. ``UpdateBeta``) by :func:`conjugate_gradients` with products through
    ``S`` ``(N, F1)`` only, preconditioned by :func:`cg_preconditioner`, warm-started at
    the current ``beta``, until ``||b - A beta'|| <= tol ||b - A beta||``; ``max_iter``
    defaults to ``F1``.  From the warm start ``b - A beta = -grad J(beta)``
    (:func:`hinge_objective`, where differentiable), and CG lowers the quadratic that
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


# --------------------------------------------------------------------------- the class
class BayesianSVM:
    """One-vs-all Bayesian SVM with Laplace (or Gaussian) prior; Gibbs or EM/MAP.

    Parameters
    ----------
    n_classes : number of classes ``C`` (labels are ints in ``[0, C)``).
    method : ``"gibbs"`` (posterior samples; decision values averaged over them, as the
        paper does) or ``"em"`` (the supplement's closed-form MAP update).
    burn_in, collect, thin : Gibbs schedule; ``burn_in + collect * thin`` sweeps,
        keeping every ``thin``-th after burn-in.
    seed : int; same seed, same chain (bit for bit on the same machine/thread count).
    gamma : the hinge weight (fixed unless ``sample_gamma``; also the start value).
    sample_gamma : sample ``gamma`` under ``Gamma(a_gamma, b_gamma)``.  Off by default:
        with a diffuse prior ``gamma`` collapses to 0 (module docstring, measured).
    a_kappa, b_kappa : ``Gamma`` (shape, rate) prior of the Laplace rate ``kappa``.
    kappa : Laplace rate used by EM (fixed) and the Gibbs start value; 0.5 makes
        ``sqrt(2 kappa) = 1``, the paper's ``Omega^-1 = diag(1/|beta|)``.
    prior : ``"laplace"`` (paper) or ``"gaussian"`` (``beta_i ~ N(0, 1/ridge)``, fixed).
    ridge : prior precision of the weights for ``prior="gaussian"``.
    bias_var : prior variance of the (unshrunk) bias.
    em_iters, em_tol : EM stops after ``em_iters`` steps or when the relative decrease of
        the objective is below ``em_tol``.
    em_solver : how EM's linear solves are done: ``"dense"`` (Cholesky of each class's
        ``F1 x F1`` precision), ``"cg"`` (:func:`em_step_cg`: matrix-free conjugate
        gradients) or ``"auto"`` (:func:`em_solver_for`: CG for wide features).
    em_cg_tol, em_cg_start_tol : CG's relative residual (to the warm start's) in each EM
        step after the first, and in the first (the ridge start from ``beta = 0``).
    progress : optional ``callable(str)`` called once per sweep / EM step.

    Attributes after ``fit``: ``betas`` ``(samples, C, F+1)`` (standardised coordinates;
    EM: one sample, the MAP), ``beta_mean_`` ``(C, F+1)``, ``mean_``, ``std_``,
    ``trace`` (list of dicts: iteration, phase, hinge (mean per-class hinge per
    example), objective (sum over classes of :func:`hinge_objective`), train_error,
    gamma, kappa (mean over classes), seconds; CG EM also cg_iterations, cg_residual),
    ``gammas``/``kappas`` of collected samples, ``em_solver_`` (EM: ``"dense"`` or
    ``"cg"``; Gibbs: None).
    """

    def __init__(self, n_classes: int, *, method: str = "gibbs", burn_in: int = 100,
                 collect: int = 100, thin: int = 1, seed: int = 0, gamma: float = 1.0,
                 sample_gamma: bool = False, a_gamma: float = 1e-6, b_gamma: float = 1e-6,
                 a_kappa: float = 1.0, b_kappa: float = 1.0, kappa: float = 0.5,
                 prior: str = "laplace", ridge: float = 1.0, bias_var: float = 100.0,
                 em_iters: int = 50, em_tol: float = 1e-9, em_solver: str = "auto",
                 em_cg_tol: float = 0.1, em_cg_start_tol: float = 1e-3,
                 progress: Callable[[str], None] | None = None):
        if not isinstance(n_classes, (int, np.integer)) or n_classes < 2:
            raise ValueError(f"n_classes must be an int >= 2, got {n_classes!r}")
        if method not in ("gibbs", "em"):
            raise ValueError(f"method must be 'gibbs' or 'em', got {method!r}")
        if prior not in ("laplace", "gaussian"):
            raise ValueError(f"prior must be 'laplace' or 'gaussian', got {prior!r}")
        for name, val, lo in (("burn_in", burn_in, 0), ("collect", collect, 1), ("thin", thin, 1),
                              ("em_iters", em_iters, 1)):
            if not isinstance(val, (int, np.integer)) or val < lo:
                raise ValueError(f"{name} must be an int >= {lo}, got {val!r}")
        for name, val in (("gamma", gamma), ("a_gamma", a_gamma), ("b_gamma", b_gamma),
                          ("a_kappa", a_kappa), ("b_kappa", b_kappa), ("kappa", kappa),
                          ("ridge", ridge), ("bias_var", bias_var)):
            if not (np.isfinite(val) and val > 0):
                raise ValueError(f"{name} must be a positive finite number, got {val!r}")
        if em_solver not in EM_SOLVERS:
            raise ValueError(f"em_solver must be one of {EM_SOLVERS}, got {em_solver!r}")
        for name, val in (("em_cg_tol", em_cg_tol), ("em_cg_start_tol", em_cg_start_tol)):
            if not (np.isfinite(val) and 0 < val < 1):
                raise ValueError(f"{name} must lie in (0, 1), got {val!r}")
        if sample_gamma and method == "em":
            raise ValueError("sample_gamma=True needs method='gibbs' (EM keeps gamma fixed)")
        self.n_classes = int(n_classes)
        self.method = method
        self.burn_in, self.collect, self.thin = int(burn_in), int(collect), int(thin)
        self.seed = int(seed)
        self.gamma = float(gamma)
        self.sample_gamma = bool(sample_gamma)
        self.a_gamma, self.b_gamma = float(a_gamma), float(b_gamma)
        self.a_kappa, self.b_kappa = float(a_kappa), float(b_kappa)
        self.kappa = float(kappa)
        self.prior = prior
        self.ridge = float(ridge)
        self.bias_var = float(bias_var)
        self.em_iters = int(em_iters)
        self.em_tol = float(em_tol)
        self.em_solver = em_solver
        self.em_cg_tol = float(em_cg_tol)
        self.em_cg_start_tol = float(em_cg_start_tol)
        self.progress = progress
        self.betas: np.ndarray | None = None
        self.trace: list[dict] = []

    # ---------------------------------------------------------------- validation / prep
    def _check_features(self, features, *, fitted: bool) -> np.ndarray:
        x = np.asarray(features)
        if x.ndim != 2:
            raise ValueError(f"features must be a 2-D array (N, F), got shape {x.shape}")
        if x.shape[0] == 0 or x.shape[1] == 0:
            raise ValueError(f"features must be non-empty, got shape {x.shape}")
        if not np.issubdtype(x.dtype, np.number) or np.issubdtype(x.dtype, np.complexfloating):
            raise ValueError(f"features must be real numbers, got dtype {x.dtype}")
        x = x.astype(np.float64, copy=False)
        if not np.all(np.isfinite(x)):
            bad = np.argwhere(~np.isfinite(x))[0]
            raise ValueError(f"features contain NaN or Inf (first at row {bad[0]}, column {bad[1]})")
        if fitted and x.shape[1] != self.mean_.shape[0]:
            raise ValueError(f"features have {x.shape[1]} columns but the SVM was fitted on "
                             f"{self.mean_.shape[0]}")
        return x

    def _check_labels(self, labels, n: int) -> np.ndarray:
        lab = np.asarray(labels)
        if lab.ndim != 1:
            raise ValueError(f"labels must be 1-D, got shape {lab.shape}")
        if lab.shape[0] != n:
            raise ValueError(f"features and labels have different lengths: {n} rows of features "
                             f"vs {lab.shape[0]} labels")
        if np.issubdtype(lab.dtype, np.floating):
            if not np.all(np.isfinite(lab)) or np.any(lab != np.round(lab)):
                raise ValueError("labels must be integers (found non-integer or NaN values)")
        elif not np.issubdtype(lab.dtype, np.integer):
            raise ValueError(f"labels must be integers, got dtype {lab.dtype}")
        lab = lab.astype(np.int64)
        if lab.min() < 0 or lab.max() >= self.n_classes:
            raise ValueError(f"labels must lie in [0, {self.n_classes}) (n_classes={self.n_classes}); "
                             f"found values from {lab.min()} to {lab.max()}")
        return lab

    def _design(self, x: np.ndarray) -> np.ndarray:
        out = np.empty((x.shape[0], x.shape[1] + 1))  # (x - mean) / sd, then the bias 1
        np.subtract(x, self.mean_, out=out[:, :-1])
        out[:, :-1] /= self.std_
        out[:, -1] = 1.0
        return out

    def _penalties(self, f: int, kappa) -> tuple[np.ndarray, np.ndarray]:
        """(l1, l2) per coefficient ``(C, F1)`` for :func:`hinge_objective`."""
        c = self.n_classes
        l1 = np.zeros((c, f + 1))
        l2 = np.zeros((c, f + 1))
        l2[:, f] = 1.0 / self.bias_var
        if self.prior == "laplace":
            l1[:, :f] = np.sqrt(2.0 * np.asarray(kappa, dtype=np.float64)).reshape(-1, 1)
        else:
            l2[:, :f] = self.ridge
        return l1, l2

    def _say(self, msg: str) -> None:
        if self.progress is not None:
            self.progress(msg)

    # ------------------------------------------------------------------------------ fit
    def fit(self, features: np.ndarray, labels: np.ndarray) -> "BayesianSVM":
        x = self._check_features(features, fitted=False)
        lab = self._check_labels(labels, x.shape[0])
        self.mean_ = x.mean(axis=0)
        sd = x.std(axis=0)
        self.std_ = np.where(sd > 1e-12 * np.maximum(1.0, np.abs(self.mean_)), sd, 1.0)
        self.n_features_ = x.shape[1]
        design = self._design(x)
        del x  # (a float64 copy of float32 features: 0.4 GB at 10000 x 4900) not needed now
        y = one_vs_all_targets(lab, self.n_classes)
        lab_t = tf.constant(lab)
        self.trace = []
        self.em_solver_ = (em_solver_for(self.n_classes, design.shape[1], self.em_solver)
                           if self.method == "em" else None)
        if self.em_solver_ == "cg":
            # all-zero columns (features constant on the training set) get beta = 0
            # exactly from either solver (no data, prior 1/eps): left out of every product
            cols = np.flatnonzero(np.any(design != 0.0, axis=0))
            if len(cols) < design.shape[1]:
                design = design[:, cols]
            self._fit_em_cg(design, cols, y, lab_t)
        else:
            s = tf.constant(design, dtype=DTYPE)
            del design
            y = tf.constant(y, dtype=DTYPE)
            if self.method == "em":
                self._fit_em(s, y, lab_t)
            else:
                self._fit_gibbs(s, y, lab_t)
        self.beta_mean_ = self.betas.mean(axis=0)
        return self

    def _record(self, it, phase, beta, s, y, lab, gamma, kappa, t0, *, m=None,
                extra: dict | None = None) -> dict:
        f = self.n_features_
        m = margins(beta, s) if m is None else _t(m)
        hinge = tf.reduce_sum(tf.nn.relu(1.0 - _t(y) * m), axis=-1).numpy()
        err = float(np.mean(tf.argmax(m, axis=0).numpy() != lab.numpy()))
        l1, l2 = self._penalties(f, kappa)
        b = np.asarray(beta)
        # = hinge_objective(beta, s, y, gamma, l1=l1, l2=l2), reusing the margins
        obj = 2.0 * float(gamma) * hinge + np.sum(l1 * np.abs(b) + 0.5 * l2 * b * b, axis=-1)
        n = int(m.shape[1])
        row = {"iteration": it, "phase": phase, "hinge": float(hinge.mean() / n),
               "objective": float(obj.sum()), "train_error": err, "gamma": float(gamma),
               "kappa": float(np.mean(kappa)), "seconds": time.perf_counter() - t0,
               **(extra or {})}
        self.trace.append(row)
        cg = (f" cg {extra['cg_iterations']} its, rel res {extra['cg_residual']:.2g}"
              if extra else "")
        self._say(f"svm {phase} it {it}: hinge/N={row['hinge']:.4g} obj={row['objective']:.6g} "
                  f"train_err={err:.4f} gamma={row['gamma']:.4g} kappa={row['kappa']:.4g}{cg} "
                  f"({row['seconds']:.2f}s)")
        return row

    def _fit_em(self, s, y, lab):
        f = self.n_features_
        c = self.n_classes
        l1, l2 = self._penalties(f, np.full(c, self.kappa))
        l1_t, l2_t = _t(l1), _t(l2)
        gamma = self.gamma
        step = compiled(lambda b: em_update_beta(b, s, y, gamma, l1_t, l2_t))
        prev = None
        for it in range(1, self.em_iters + 1):
            t0 = time.perf_counter()
            if it == 1:
                # first step from beta = 0: |c| = 1 for all rows, |beta| taken as 1
                beta = _em_first_step(s, y, gamma, l1_t, l2_t)
            else:
                beta = step(beta)
            row = self._record(it, "em", beta, s, y, lab, self.gamma, np.full(c, self.kappa), t0)
            if prev is not None and prev - row["objective"] <= self.em_tol * abs(prev):
                break
            prev = row["objective"]
        self.betas = beta.numpy()[None]
        self.gammas = np.array([self.gamma])
        self.kappas = np.full((1, c), self.kappa)

    def _fit_em_cg(self, s, cols, y, lab):
        """EM with every step's solve by :func:`em_step_cg`; ``s`` holds the columns
        ``cols`` of the design (the others are all zero), the same stopping rule as
        :meth:`_fit_em`."""
        f = self.n_features_
        c = self.n_classes
        kappa = np.full(c, self.kappa)
        l1, l2 = self._penalties(f, kappa)
        l1, l2 = l1[:, cols], l2[:, cols]
        beta = np.zeros((c, s.shape[1]))
        full = np.zeros((c, f + 1))
        prev = None
        for it in range(1, self.em_iters + 1):
            t0 = time.perf_counter()
            tol = self.em_cg_start_tol if it == 1 else self.em_cg_tol
            beta, info = em_step_cg(beta, s, y, self.gamma, l1, l2, tol=tol, start=it == 1)
            full[:, cols] = beta
            row = self._record(it, "em", full, None, y, lab, self.gamma, kappa, t0,
                               m=beta @ s.T, extra=info)
            if prev is not None and prev - row["objective"] <= self.em_tol * abs(prev):
                break
            prev = row["objective"]
        self.betas = full[None].copy()
        self.gammas = np.array([self.gamma])
        self.kappas = np.full((1, c), self.kappa)

    def _fit_gibbs(self, s, y, lab):
        f = self.n_features_
        c = self.n_classes
        laplace = self.prior == "laplace"
        base = tf.constant([self.seed, _SALT], dtype=tf.int64)
        bias_var = _t(self.bias_var)
        a_k, b_k, a_g, b_g = (_t(v) for v in (self.a_kappa, self.b_kappa, self.a_gamma, self.b_gamma))
        sample_gamma = self.sample_gamma

        @compiled
        def sweep(beta, omega_w, kappa, gamma, it):
            seeds = tf.random.experimental.stateless_split(
                tf.random.experimental.stateless_fold_in(base, it), 5)
            lam = resample_lambda(beta, s, y, gamma, seeds[0])
            if sample_gamma:
                gamma = resample_gamma(lam, beta, s, y, a_g, b_g, seeds[1])
            omega = tf.concat([omega_w, tf.fill([c, 1], bias_var)], axis=1)
            beta = resample_beta(lam, omega, s, y, gamma, seeds[2])
            if laplace:
                omega_w = resample_omega(beta[:, :f], kappa, seeds[3])
                kappa = resample_kappa(omega_w, a_k, b_k, seeds[4])
            return beta, omega_w, kappa, gamma

        beta = tf.zeros((c, f + 1), DTYPE)
        kappa = tf.fill([c], _t(self.kappa))
        omega_w = tf.fill([c, f], _t(1.0 / self.kappa if laplace else 1.0 / self.ridge))
        gamma = _t(self.gamma)
        total = self.burn_in + self.collect * self.thin
        kept_b, kept_g, kept_k = [], [], []
        for it in range(1, total + 1):
            t0 = time.perf_counter()
            beta, omega_w, kappa, gamma = sweep(beta, omega_w, kappa, gamma,
                                                tf.constant(it, tf.int64))
            phase = "burn_in" if it <= self.burn_in else "collect"
            self._record(it, phase, beta, s, y, lab, float(gamma), kappa.numpy(), t0)
            if it > self.burn_in and (it - self.burn_in) % self.thin == 0:
                kept_b.append(beta.numpy())
                kept_g.append(float(gamma))
                kept_k.append(kappa.numpy())
        self.betas = np.stack(kept_b)
        self.gammas = np.array(kept_g)
        self.kappas = np.stack(kept_k)

    # -------------------------------------------------------------------------- predict
    def _require_fit(self):
        if self.betas is None:
            raise ValueError("this BayesianSVM is not fitted yet: call fit(features, labels) first")

    def decision_function(self, features) -> np.ndarray:
        """``(N, C)`` decision values averaged over the collected ``beta`` samples.

        (Averaging ``beta_l^T s`` over samples equals using the posterior-mean ``beta``:
        the decision values are linear in ``beta``.)
        """
        self._require_fit()
        x = self._check_features(features, fitted=True)
        return self._design(x) @ self.beta_mean_.T

    def predict(self, features) -> np.ndarray:
        """``(N,)`` int64 labels: ``argmax_l`` of :meth:`decision_function`."""
        return np.argmax(self.decision_function(features), axis=1).astype(np.int64)

    def raw_coefficients(self) -> tuple[np.ndarray, np.ndarray]:
        """Posterior-mean weights ``(C, F)`` and biases ``(C,)`` in the raw feature units."""
        self._require_fit()
        w = self.beta_mean_[:, :-1] / self.std_
        b = self.beta_mean_[:, -1] - w @ self.mean_
        return w, b


def _em_first_step(s, y, gamma, l1, l2):
    """EM step from ``beta = 0`` with ``|c| = 1`` and ``|beta|`` taken as 1 (a ridge solve)."""
    gamma = _t(gamma)
    rhs = gamma * tf.matmul(2.0 * y, _t(s))
    return solve_classes(s, gamma * tf.ones_like(y), l2 + l1, rhs)
