"""Tests of dgdm_tf.supervised.svm_*: the Bayesian SVM's conditionals, its MAP, and the classifier.

Every statistical check uses fixed seeds and a tolerance stated next to it (a number of
Monte-Carlo standard errors, or a DKW bound with failure probability <= 1e-6).
"""

from __future__ import annotations

import math
import os
import sys

import numpy as np
import pytest

try:
    import dgdm_tf  # noqa: F401
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "src"))

import tensorflow as tf  # noqa: E402

from dgdm_tf.supervised import svm_cg, svm_em, svm_gibbs, svm_linalg  # noqa: E402
from dgdm_tf.core.compiled import compiled  # noqa: E402
from dgdm_tf.supervised.options import SvmOptions  # noqa: E402
from dgdm_tf.supervised.svm_classifier import BayesianSVM  # noqa: E402

N_SEEDS = 10_000


# ----------------------------------------------------------------------------- helpers
def _phi(x):
    return 0.5 * (1.0 + np.vectorize(math.erf)(np.asarray(x) / math.sqrt(2.0)))


def _ig_cdf(x, mu, shape):
    """Exact inverse-Gaussian CDF (mu may be inf: the Levy CDF)."""
    x = np.asarray(x, dtype=np.float64)
    if np.isinf(mu):
        return 1.0 - np.vectorize(math.erf)(np.sqrt(shape / (2.0 * x)))
    r = np.sqrt(shape / x)
    return _phi(r * (x / mu - 1.0)) + math.exp(2.0 * shape / mu) * _phi(-r * (x / mu + 1.0))


def _dkw(n, alpha=1e-6):
    """Dvoretzky-Kiefer-Wolfowitz: P(sup|F_n - F| > eps) <= alpha."""
    return math.sqrt(math.log(2.0 / alpha) / (2.0 * n))


def _draws_over_split_seeds(fn, n_seeds=N_SEEDS, base=(2016, 5)):
    """Stack ``fn(seed)`` over ``n_seeds`` seeds split from one base seed -> (n_seeds, ...)."""
    seeds = tf.random.experimental.stateless_split(tf.constant(base, tf.int64), n_seeds)
    out = compiled(lambda sd: tf.map_fn(fn, sd, fn_output_signature=tf.float64))(seeds)
    return out.numpy()


def _clusters(rng, centers, n_per_class, sd=1.0):
    lab = np.repeat(np.arange(len(centers)), n_per_class)
    x = centers[lab] + sd * rng.standard_normal((lab.size, centers.shape[1]))
    perm = rng.permutation(lab.size)
    return x[perm], lab[perm]


# ------------------------------------------------------------- 1. the lambda conditional
def test_mixture_identity_behind_lambda():
    """The Polson-Scott identity: int N-kernel dlambda = exp(-2 gamma max(c, 0)) (quadrature, rel 1e-6)."""
    lam = np.logspace(-12, 8, 400_001)
    for gamma in (0.7, 2.0):
        for c in (-1.3, -0.2, 0.4, 1.5):
            f = np.sqrt(gamma / (2 * np.pi * lam)) * np.exp(-gamma * (c + lam) ** 2 / (2 * lam))
            integral = np.trapezoid(f * lam, np.log(lam))
            assert integral == pytest.approx(math.exp(-2 * gamma * max(c, 0.0)), rel=1e-6)


@pytest.mark.parametrize("gamma", [1.0, 2.5])
def test_lambda_conditional_is_inverse_gaussian(gamma):
    """1/lambda ~ IG(1/|c|, gamma): 10k split seeds x 20 copies of 4 residuals c.

    Tolerances: mean within 5 standard errors (sd mu^3/shape / n); variance within
    5 standard errors of the sample variance (uses the IG excess kurtosis 15 mu/shape);
    CDF at 60 points within the DKW bound for failure probability 1e-6.
    c = 0 is the Levy limit (infinite mean): CDF check only.
    """
    cs = np.array([0.5, -1.5, 2.0, 0.0])
    reps = 20
    c = tf.constant(np.tile(cs, reps), tf.float64)
    # resample_lambda with s = margins, beta = 1, y = +1 gives c = 1 - margin
    s = tf.reshape(1.0 - c, (-1, 1))
    beta = tf.ones((1, 1), tf.float64)
    y = tf.ones((1, cs.size * reps), tf.float64)
    lam = _draws_over_split_seeds(lambda sd: svm_gibbs.resample_lambda(beta, s, y, gamma, sd)[0])
    inv = (1.0 / lam).reshape(N_SEEDS * reps, cs.size)  # columns follow cs
    n = inv.shape[0]
    for j, cj in enumerate(cs):
        u = inv[:, j]
        assert np.all(np.isfinite(u)) and np.all(u > 0)
        mu = math.inf if cj == 0 else 1.0 / abs(cj)
        if np.isfinite(mu):
            var = mu**3 / gamma
            assert abs(u.mean() - mu) < 5 * math.sqrt(var / n), (cj, u.mean(), mu)
            sd_var = var * math.sqrt((15 * mu / gamma + 2) / n)
            assert abs(u.var() - var) < 5 * sd_var, (cj, u.var(), var)
        grid = np.quantile(u, np.linspace(0.01, 0.99, 60))
        ecdf = np.searchsorted(np.sort(u), grid, side="right") / n
        assert np.max(np.abs(ecdf - _ig_cdf(grid, mu, gamma))) < _dkw(n), cj


def test_inverse_gaussian_sampler_extreme_means():
    """sample_inverse_gaussian for mu in {1e-3, 1e4}: means within 5 s.e., no NaN/Inf/0."""
    for mu, shape in ((1e-3, 1.0), (1e4, 3.0)):
        x = svm_gibbs.sample_inverse_gaussian(tf.fill([200_000], tf.constant(mu, tf.float64)), shape, 3).numpy()
        assert np.all(np.isfinite(x)) and np.all(x > 0)
        if mu < 1:
            assert abs(x.mean() - mu) < 5 * math.sqrt(mu**3 / shape / x.size)
        else:  # heavy right tail: check the CDF instead of the mean
            grid = np.quantile(x, np.linspace(0.02, 0.98, 40))
            ecdf = np.searchsorted(np.sort(x), grid, side="right") / x.size
            assert np.max(np.abs(ecdf - _ig_cdf(grid, mu, shape))) < _dkw(x.size)


def test_omega_and_kappa_conditionals():
    """1/omega ~ IG(sqrt(2 kappa)/|beta|, 2 kappa); kappa ~ Gamma(a+F, b+sum omega) (5 s.e.)."""
    beta = tf.constant([[0.3, -1.2, 0.05]], tf.float64)
    kappa = tf.constant([0.8], tf.float64)
    om = _draws_over_split_seeds(lambda sd: svm_gibbs.resample_omega(beta, kappa, sd)[0])
    inv = 1.0 / om
    n = inv.shape[0]
    mu = np.sqrt(2 * 0.8) / np.abs(beta.numpy()[0])
    var = mu**3 / (2 * 0.8)
    assert np.all(np.abs(inv.mean(0) - mu) < 5 * np.sqrt(var / n)), (inv.mean(0), mu)

    omega = tf.constant([[0.5, 2.0, 1.0, 0.25]], tf.float64)
    a, b = 1.5, 0.5
    k = _draws_over_split_seeds(lambda sd: svm_gibbs.resample_kappa(omega, a, b, sd))[:, 0]
    shape, rate = a + 4, b + 3.75
    assert abs(k.mean() - shape / rate) < 5 * math.sqrt(shape / rate**2 / k.size)
    assert abs(k.var() - shape / rate**2) < 5 * (shape / rate**2) * math.sqrt((6 / shape + 2) / k.size)


def test_gamma_conditional():
    """gamma | lambda, beta ~ Gamma(a + CN/2, b + sum (c+lambda)^2/(2 lambda)): mean and var (5 s.e.)."""
    rng = np.random.default_rng(5)
    s = np.c_[rng.standard_normal((6, 2)), np.ones(6)]
    beta = rng.standard_normal((2, 3))
    y = np.where(rng.random((2, 6)) < 0.5, 1.0, -1.0)
    lam = rng.uniform(0.2, 2.0, (2, 6))
    a, b = 2.0, 0.5
    c = 1 - y * (beta @ s.T)
    shape, rate = a + 6.0, b + np.sum((c + lam) ** 2 / (2 * lam))
    g = _draws_over_split_seeds(lambda sd: tf.reshape(svm_gibbs.resample_gamma(lam, beta, s, y, a, b, sd), [1]))[:, 0]
    assert abs(g.mean() - shape / rate) < 5 * math.sqrt(shape / rate**2 / g.size)
    assert abs(g.var() - shape / rate**2) < 5 * (shape / rate**2) * math.sqrt((6 / shape + 2) / g.size)


# --------------------------------------------------------------- 2. the beta conditional
def _beta_problem():
    rng = np.random.default_rng(42)
    n, f1 = 15, 3
    s = np.c_[rng.standard_normal((n, f1 - 1)), np.ones(n)]
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    lam = rng.uniform(0.1, 3.0, n)
    omega = np.array([0.7, 2.0, 100.0])
    gamma = 1.7
    return s, y, lam, omega, gamma


def test_beta_conditional_formula_matches_augmented_joint():
    """log p(beta | lambda) from the augmented joint minus the Gaussian we sample is constant in beta (1e-9)."""
    s, y, lam, omega, gamma = _beta_problem()
    prec, rhs = svm_gibbs.beta_conditional(lam[None], omega, s, y[None], gamma)
    prec, rhs = prec.numpy()[0], rhs.numpy()[0]
    mean = np.linalg.solve(prec, rhs)
    rng = np.random.default_rng(0)
    diffs = []
    for _ in range(6):
        b = 3 * rng.standard_normal(s.shape[1])
        joint = (-gamma * np.sum((1 + lam - y * (s @ b)) ** 2 / (2 * lam))
                 - np.sum(b**2 / (2 * omega)))
        gauss = -0.5 * (b - mean) @ prec @ (b - mean)
        diffs.append(joint - gauss)
    assert np.ptp(diffs) < 1e-9 * max(1.0, abs(np.mean(diffs)))


def test_beta_conditional_moments():
    """resample_beta over 50 split seeds x 400 batched copies = 20k draws vs the exact Gaussian.

    Exact moments in NumPy: P = gamma S^T diag(1/lambda) S + diag(1/omega),
    mean = P^-1 gamma S^T (y (1+lambda)/lambda), cov = P^-1.  Tolerance 5 standard errors
    per mean entry and per covariance entry (sd of a sample covariance:
    sqrt((S_ii S_jj + S_ij^2)/n)).
    """
    s, y, lam, omega, gamma = _beta_problem()
    prec = gamma * (s.T * (1 / lam)) @ s + np.diag(1 / omega)
    cov = np.linalg.inv(prec)
    mean = cov @ (gamma * s.T @ (y * (1 + lam) / lam))

    copies = 400
    lam_b = tf.constant(np.tile(lam, (copies, 1)))
    y_b = tf.constant(np.tile(y, (copies, 1)))
    s_t = tf.constant(s)
    draws = _draws_over_split_seeds(
        lambda sd: svm_gibbs.resample_beta(lam_b, omega, s_t, y_b, gamma, sd), n_seeds=50)
    draws = draws.reshape(-1, s.shape[1])
    n = draws.shape[0]
    se_mean = np.sqrt(np.diag(cov) / n)
    assert np.all(np.abs(draws.mean(0) - mean) < 5 * se_mean), (draws.mean(0), mean)
    emp = np.cov(draws, rowvar=False)
    se_cov = np.sqrt((np.outer(np.diag(cov), np.diag(cov)) + cov**2) / n)
    assert np.all(np.abs(emp - cov) < 5 * se_cov), (emp, cov)


def test_weighted_gram_matches_numpy():
    """The block-triangular batched Gram (used at F >= 96) equals the direct product (rel 1e-12)."""
    rng = np.random.default_rng(3)
    s = rng.standard_normal((9000, 101))  # > one chunk of rows, odd width
    w = rng.random((3, 9000))
    g = svm_linalg.weighted_gram(s, w).numpy()
    ref = np.einsum("nf,cn,ng->cfg", s, w, s)
    assert np.max(np.abs(g - ref)) < 1e-12 * np.max(np.abs(ref))


def test_classwise_solves_match_the_batched_ones(monkeypatch):
    """Above CLASS_BATCH_BYTES the beta solves loop over classes (bounded memory): the same
    draws (same z) and EM steps as the batched solve up to round-off (rel 1e-10)."""
    rng = np.random.default_rng(4)
    n, f, c = 700, 120, 3  # F >= 96: the block-triangular Gram
    s = np.concatenate([rng.standard_normal((n, f)), np.ones((n, 1))], axis=1)
    y = np.where(rng.random((c, n)) < 0.4, 1.0, -1.0)
    lam = rng.uniform(0.05, 3.0, (c, n))
    omega = rng.uniform(0.1, 5.0, (c, f + 1))
    beta0 = 0.1 * rng.standard_normal((c, f + 1))
    l1 = np.full((c, f + 1), 1.0)
    l1[:, -1] = 0.0
    l2 = np.zeros((c, f + 1))
    l2[:, -1] = 0.01

    def run():
        draw = svm_gibbs.resample_beta(lam, omega, s, y, 1.3, 11).numpy()
        step = svm_em.em_update_beta(beta0, s, y, 1.0, l1, l2).numpy()
        return draw, step

    assert not svm_linalg.classwise(c, f + 1)
    batched = run()
    monkeypatch.setattr(svm_linalg, "CLASS_BATCH_BYTES", 0)
    assert svm_linalg.classwise(c, f + 1)
    for a, b in zip(batched, run()):
        assert np.max(np.abs(a - b)) < 1e-10 * np.max(np.abs(a))


def _wide_problem(seed=8, n=500, f=300, c=3, zero_cols=20):
    """3 Gaussian classes in 300-D (centres 0.15 N(0, I), unit noise), 500 points, the
    first ``zero_cols`` features constant (their columns of S are all zero)."""
    rng = np.random.default_rng(seed)
    lab = rng.integers(0, c, n)
    x = 0.15 * rng.standard_normal((c, f))[lab] + rng.standard_normal((n, f))
    x[:, :zero_cols] = 0.0
    return x, lab


def _em_system(beta, s, y, l1, l2, eps=1e-7):
    """The dense EM step's (A (C, F1, F1), b (C, F1)), written out in NumPy (gamma = 1)."""
    inv_c = 1.0 / np.maximum(np.abs(1.0 - y * (beta @ s.T)), eps)
    a = np.einsum("nf,cn,ng->cfg", s, inv_c, s)
    a[:, np.arange(s.shape[1]), np.arange(s.shape[1])] += l2 + l1 / np.maximum(np.abs(beta), eps)
    return a, (y * (1.0 + inv_c)) @ s


@pytest.fixture
def few_precond_rows(monkeypatch):
    """32 heavy rows in the CG preconditioner (default 512 >= N = 500 would make it exact
    and CG converge in one iteration: these tests want CG to iterate)."""
    monkeypatch.setattr(svm_cg, "CG_PRECOND_ROWS", 32)


def test_cg_em_matches_dense_em(few_precond_rows):
    """em_solver cg (relative residual 1e-9, start 1e-9) follows the dense EM path
    step by step: the objective within rel 1e-8 at each of 8 steps, beta within 1e-6 of
    max |beta|, the same held-out predictions; the constant columns' beta exactly 0."""
    x, lab = _wide_problem()
    xt, _ = _wide_problem(seed=9)
    kw = dict(method="em", em_iters=8, em_tol=0.0)
    dense = BayesianSVM(3, SvmOptions(em_solver="dense", **kw)).fit(x, lab)
    cg = BayesianSVM(3, SvmOptions(em_solver="cg", em_cg_tol=1e-9, em_cg_start_tol=1e-9, **kw))
    cg.fit(x, lab)
    assert (dense.em_solver_, cg.em_solver_) == ("dense", "cg")
    assert len(cg.trace) == len(dense.trace) == 8
    for a, b in zip(dense.trace, cg.trace):
        assert b["objective"] == pytest.approx(a["objective"], rel=1e-8)
        assert b["cg_iterations"] > 1 and b["cg_residual"] < 1e-8  # CG iterated, converged
    scale = np.max(np.abs(dense.betas))
    assert np.max(np.abs(cg.betas - dense.betas)) < 1e-6 * scale
    assert np.all(cg.betas[..., :20] == 0.0) and np.all(dense.betas[..., :20] == 0.0)
    assert np.array_equal(cg.predict(xt), dense.predict(xt))


def test_cg_step_meets_its_tolerance(few_precond_rows):
    """One CG EM step from a mid-run beta: the residual recomputed from the dense A, b
    is below tol x its value at the warm start (so the test fails if CG stops early, as
    one iteration does), tighter tol -> more iterations and closer to A^-1 b."""
    x, lab = _wide_problem()
    m = BayesianSVM(3, SvmOptions(method="em", em_iters=3, em_tol=0.0, em_solver="dense")).fit(x, lab)
    s = np.c_[(x - m.mean_) / m.std_, np.ones(len(x))]
    y = svm_linalg.one_vs_all_targets(lab, 3)
    l1, l2 = m._penalties(x.shape[1], np.full(3, m.options.kappa))
    beta = m.betas[0]
    a, b = _em_system(beta, s, y, l1, l2)
    exact = np.linalg.solve(a, b[..., None])[..., 0]

    def rel_residual(out):
        res = np.linalg.norm(b - np.einsum("cfg,cg->cf", a, out), axis=1)
        return res / np.linalg.norm(b - np.einsum("cfg,cg->cf", a, beta), axis=1)

    errors, iterations = [], []
    for tol in (1e-2, 1e-6):
        out, info = svm_cg.em_step_cg(beta, s, y, 1.0, l1, l2, tol=tol)
        assert np.all(rel_residual(out) <= tol * (1 + 1e-6)), (tol, rel_residual(out))
        assert info["cg_residual"] == pytest.approx(rel_residual(out).max(), rel=1e-6)
        errors.append(np.max(np.abs(out - exact)))
        iterations.append(info["cg_iterations"])
    assert iterations[1] > iterations[0] > 1 and errors[1] < 1e-3 * errors[0]
    early, _ = svm_cg.em_step_cg(beta, s, y, 1.0, l1, l2, tol=1e-2, max_iter=1)
    assert np.max(rel_residual(early)) > 1e-2  # what the assertion above would catch


def test_cg_em_decreases_the_objective_at_any_tolerance(few_precond_rows):
    """Warm-started CG lowers the majorising quadratic, so even em_cg_tol 0.5 never
    raises the objective (MM), and its last objective is within 5% of the dense path's."""
    x, lab = _wide_problem()
    kw = dict(method="em", em_iters=15, em_tol=0.0)
    loose = BayesianSVM(3, SvmOptions(em_solver="cg", em_cg_tol=0.5, em_cg_start_tol=0.5, **kw))
    loose.fit(x, lab)
    obj = np.array([r["objective"] for r in loose.trace])
    assert np.all(np.diff(obj) <= 1e-12 * obj[:-1])
    dense = BayesianSVM(3, SvmOptions(em_solver="dense", **kw)).fit(x, lab)
    assert obj[-1] < 1.05 * dense.trace[-1]["objective"]


@pytest.mark.parametrize("stack_bytes", [svm_cg.CG_PRECOND_BYTES, 0])
def test_cg_preconditioner_is_the_stated_inverse(monkeypatch, stack_bytes):
    """cg_preconditioner applies (D + S_B^T diag(w_B) S_B)^-1 (D = diagonal of the other
    rows' part of A) to rel 1e-10; with rows >= N it is A^-1 itself, and 0 rows is Jacobi;
    the same whether it keeps the heavy rows' stack or (above CG_PRECOND_BYTES, here 0)
    multiplies through S."""
    monkeypatch.setattr(svm_cg, "CG_PRECOND_BYTES", stack_bytes)
    rng = np.random.default_rng(12)
    n, f, c, k = 60, 25, 2, 7
    s = rng.standard_normal((n, f))
    w = np.exp(rng.uniform(-2.0, 12.0, (c, n)))  # weights up to ~1.6e5, as late in EM
    prior = rng.uniform(0.1, 1e4, (c, f))
    r = rng.standard_normal((c, f))
    a = np.einsum("nf,cn,ng->cfg", s, w, s) + np.stack([np.diag(p) for p in prior])
    heavy = np.argsort(-w, axis=1)[:, :k]
    for rows, which in ((k, heavy), (n, None), (0, np.zeros((c, 0), int))):
        if which is None:
            m = a
        else:
            rest = w.copy()
            np.put_along_axis(rest, which, 0.0, axis=1)
            d = np.einsum("nf,cn->cf", s * s, rest) + prior
            wb = np.take_along_axis(w, which, axis=1)
            m = np.stack([np.diag(d[l]) + (s[which[l]].T * wb[l]) @ s[which[l]] for l in range(c)])
        got = svm_cg.cg_preconditioner(s, w, prior, rows)(r)
        want = np.linalg.solve(m, r[..., None])[..., 0]
        assert np.max(np.abs(got - want)) < 1e-10 * np.max(np.abs(want)), rows


@pytest.mark.retrace  # the Gibbs fit traces its beta solves under the patched size
def test_em_solver_auto_follows_classwise(monkeypatch):
    """auto: CG exactly when the dense solves would go class by class (classwise)."""
    assert svm_cg.em_solver_for(10, 801) == "dense"  # MNIST's pretrained features
    assert svm_cg.em_solver_for(10, 4901) == "cg"  # the soft-threshold encoder's
    assert svm_cg.em_solver_for(10, 4901, "dense") == "dense"
    monkeypatch.setattr(svm_linalg, "CLASS_BATCH_BYTES", 0)
    assert svm_cg.em_solver_for(3, 5) == "cg"
    x, lab = _wide_problem(n=40, f=6, zero_cols=0)
    assert BayesianSVM(3, SvmOptions(method="em", em_iters=2)).fit(x, lab).em_solver_ == "cg"
    assert BayesianSVM(3, SvmOptions(burn_in=1, collect=1)).fit(x, lab).em_solver_ is None


# ------------------------------------------------------------ 3. the hinge-loss optimum
def _dual_cd_l2_svm(t, y, cost, tol=1e-10, max_epochs=5000):
    """LIBLINEAR-style dual coordinate descent for min 1/2 |u|^2 + cost sum hinge(y u.t).

    Returns (u, primal, dual); stops when the duality gap is below tol * primal.
    """
    n = t.shape[0]
    alpha = np.zeros(n)
    u = np.zeros(t.shape[1])
    qd = np.sum(t * t, axis=1)
    rng = np.random.default_rng(0)
    primal = dual = None
    for _ in range(max_epochs):
        for i in rng.permutation(n):
            g = y[i] * (u @ t[i]) - 1.0
            new = min(max(alpha[i] - g / qd[i], 0.0), cost)
            if new != alpha[i]:
                u += (new - alpha[i]) * y[i] * t[i]
                alpha[i] = new
        primal = cost * np.maximum(1 - y * (t @ u), 0).sum() + 0.5 * u @ u
        dual = alpha.sum() - 0.5 * u @ u
        if primal - dual < tol * primal:
            break
    return u, primal, dual


def _two_class_problem(seed, n):
    rng = np.random.default_rng(seed)
    lab = rng.integers(0, 2, n)
    shift = np.array([0.8, 0.5, 0.0, 0.0, 0.3])
    x = rng.standard_normal((n, 5)) + (2 * lab[:, None] - 1) * shift + 3.0
    return x, lab


def test_em_reaches_the_l2_hinge_optimum_and_gibbs_classifies_as_well():
    """EM (Gaussian prior fixed) vs an independent dual-CD solver on the same objective.

    J(beta) = 2 gamma sum hinge + ridge/2 |w|^2 + b^2/(2 bias_var), standardised features.
    EM after 100 steps: J within 1e-4 (relative) of the certified optimum (CD duality
    gap < 1e-10).  Gibbs posterior mean: held-out error within 2 points of the MAP's
    (2000 test points: s.e. of one error rate ~0.8 points).
    """
    x, lab = _two_class_problem(1, 300)
    xt, labt = _two_class_problem(2, 2000)
    ridge, bias_var, gamma = 1.0, 1.0, 1.0
    em = BayesianSVM(2, SvmOptions(method="em", prior="gaussian", ridge=ridge, bias_var=bias_var,
                                   gamma=gamma, em_iters=100, em_tol=0.0)).fit(x, lab)

    mu, sd = x.mean(0), x.std(0)
    np.testing.assert_allclose(em.mean_, mu, rtol=1e-12)
    np.testing.assert_allclose(em.std_, sd, rtol=1e-12)
    s = np.c_[(x - mu) / sd, np.ones(len(x))]
    root_prec = np.sqrt(np.r_[np.full(5, ridge), 1 / bias_var])
    y = np.where(lab == 0, 1.0, -1.0)  # the class-0 SVM
    u, primal, dual = _dual_cd_l2_svm(s / root_prec, y, cost=2 * gamma)
    assert primal - dual < 1e-9 * primal

    beta0 = em.betas[0, 0]
    j_em = 2 * gamma * np.maximum(1 - y * (s @ beta0), 0).sum() + 0.5 * np.sum((root_prec * beta0) ** 2)
    assert j_em >= dual * (1 - 1e-12)
    assert (j_em - primal) / primal < 1e-4, (j_em, primal)
    # the library's objective agrees with the one written here
    l2 = np.r_[np.full(5, ridge), 1 / bias_var]
    j_lib = svm_em.hinge_objective(em.betas[0], s, np.stack([y, -y]), gamma, l2=l2).numpy()
    np.testing.assert_allclose(j_lib, [j_em, j_em], rtol=1e-6)
    # and so does the last trace row (sum over both classes)
    assert em.trace[-1]["objective"] == pytest.approx(j_lib.sum(), rel=1e-12)

    gibbs = BayesianSVM(2, SvmOptions(method="gibbs", prior="gaussian", ridge=ridge,
                                      bias_var=bias_var, gamma=gamma, burn_in=100, collect=200),
                        seed=3).fit(x, lab)
    err_em = np.mean(em.predict(xt) != labt)
    err_gibbs = np.mean(gibbs.predict(xt) != labt)
    assert err_em < 0.25  # Bayes error of this problem is about 0.16
    assert abs(err_gibbs - err_em) <= 0.02, (err_gibbs, err_em)


# --------------------------------------------------------- 4. separable multi-class data
@pytest.mark.parametrize("method", ["em", "gibbs"])
def test_separable_clusters_are_classified_perfectly(method):
    """4 Gaussian clusters in 5-D (sd 1, centres +-8 e1, +-8 e2: each one 4 sd from its
    one-vs-all boundary), raw features offset and scaled; 1000 held-out points."""
    rng = np.random.default_rng(7)
    centers = 8.0 * np.array([[1, 0, 0, 0, 0], [-1, 0, 0, 0, 0], [0, 1, 0, 0, 0], [0, -1, 0, 0, 0]], float)
    x, lab = _clusters(rng, centers, 60)
    xt, labt = _clusters(rng, centers, 250)
    scale = np.array([1.0, 10.0, 0.1, 5.0, 1.0])  # standardisation must make this harmless
    m = BayesianSVM(4, SvmOptions(method=method, burn_in=50, collect=50, em_iters=50), seed=1)
    m.fit(x * scale + 100.0, lab)
    pred = m.predict(xt * scale + 100.0)
    assert pred.dtype == np.int64 and pred.shape == labt.shape
    assert np.array_equal(pred, labt), f"{np.sum(pred != labt)} held-out errors"
    assert m.decision_function(xt * scale + 100.0).shape == (len(xt), 4)
    assert m.trace[-1]["train_error"] == 0.0
    # raw-unit coefficients reproduce the decision values
    w, b = m.raw_coefficients()
    np.testing.assert_allclose((xt * scale + 100.0) @ w.T + b,
                               m.decision_function(xt * scale + 100.0), rtol=1e-8, atol=1e-8)


# ---------------------------------------------------------------- 5. seeds, determinism
def test_same_seed_same_output_different_seed_different_samples():
    rng = np.random.default_rng(11)
    centers = 2.0 * rng.standard_normal((3, 4))
    x, lab = _clusters(rng, centers, 40)
    kw = dict(burn_in=10, collect=10)
    a = BayesianSVM(3, SvmOptions(**kw), seed=5).fit(x, lab)
    b = BayesianSVM(3, SvmOptions(**kw), seed=5).fit(x, lab)
    c = BayesianSVM(3, SvmOptions(**kw), seed=6).fit(x, lab)
    assert np.array_equal(a.decision_function(x), b.decision_function(x))
    assert np.array_equal(a.betas, b.betas)
    assert a.betas.shape == (10, 3, 5)
    assert not np.allclose(a.betas, c.betas)
    # the pure conditionals are deterministic functions of their seed too
    beta = tf.constant(a.betas[-1])
    s = tf.constant(np.c_[(x - a.mean_) / a.std_, np.ones(len(x))])
    y = tf.constant(svm_linalg.one_vs_all_targets(lab, 3))
    l1 = svm_gibbs.resample_lambda(beta, s, y, 1.0, tf.constant([1, 2]))
    l2 = svm_gibbs.resample_lambda(beta, s, y, 1.0, tf.constant([1, 2]))
    l3 = svm_gibbs.resample_lambda(beta, s, y, 1.0, tf.constant([1, 3]))
    assert np.array_equal(l1.numpy(), l2.numpy()) and not np.allclose(l1.numpy(), l3.numpy())


def test_sampled_gamma_drifts_to_zero_under_diffuse_prior():
    """Documented pathology: gamma | lambda with Gamma(1e-6, 1e-6) collapses (1/gamma grows ~linearly).

    From beta = 0 the first draw is ~0.2 (= (CN/2) / (CN (4 + 1)/2)); after 150 sweeps it
    must be below 0.05 and below its value at sweep 20; fixed gamma keeps it at 1.
    """
    rng = np.random.default_rng(0)
    centers = 1.2 * rng.standard_normal((4, 10))
    x, lab = _clusters(rng, centers, 100)
    m = BayesianSVM(4, SvmOptions(burn_in=149, collect=1, sample_gamma=True), seed=0).fit(x, lab)
    g = np.array([r["gamma"] for r in m.trace])
    h = np.array([r["hinge"] for r in m.trace])  # H / (C N) after each sweep
    assert 0.15 < g[0] < 0.25
    assert g[-1] < 0.05 and g[-1] < g[19]
    # E[1/gamma_{t+1}] ~ 1/gamma_t + 4 H(beta_t)/(CN); the Gamma draws make log(1/gamma) a
    # random walk (sd ~0.035/sweep), so the accumulated rise is only checked to a factor 2
    rise, predicted = 1 / g[149] - 1 / g[19], 4 * h[19:149].sum()
    assert 0.5 * predicted < rise < 2 * predicted, (rise, predicted)


# -------------------------------------------------------------------------- 6. bad input
def test_bad_input_raises_clear_value_errors():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((20, 3))
    lab = np.arange(20) % 3
    m = BayesianSVM(3, SvmOptions(method="em", em_iters=2))
    bad = x.copy()
    bad[4, 1] = np.nan
    with pytest.raises(ValueError, match="NaN or Inf"):
        m.fit(bad, lab)
    bad[4, 1] = np.inf
    with pytest.raises(ValueError, match="NaN or Inf.*row 4, column 1"):
        m.fit(bad, lab)
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 3\)"):
        m.fit(x, np.where(lab == 2, 3, lab))
    with pytest.raises(ValueError, match=r"labels must lie in"):
        m.fit(x, lab - 1)
    with pytest.raises(ValueError, match="different lengths"):
        m.fit(x, lab[:-1])
    with pytest.raises(ValueError, match="labels must be integers"):
        m.fit(x, lab + 0.5)
    with pytest.raises(ValueError, match="2-D"):
        m.fit(x[:, 0], lab)
    with pytest.raises(ValueError, match="not fitted"):
        m.predict(x)
    m.fit(x, lab)
    with pytest.raises(ValueError, match="3 columns|fitted on 3"):
        m.decision_function(x[:, :2])
    with pytest.raises(ValueError, match="NaN or Inf"):
        m.predict(bad)
    with pytest.raises(ValueError, match="method"):
        SvmOptions(method="vb")
    with pytest.raises(ValueError, match="n_classes"):
        BayesianSVM(1)
    with pytest.raises(ValueError, match="sample_gamma"):
        SvmOptions(method="em", sample_gamma=True)
    with pytest.raises(ValueError, match="em_solver"):
        SvmOptions(method="em", em_solver="lu")
    for key in ("em_cg_tol", "em_cg_start_tol"):
        for bad in (0.0, 1.0, float("nan")):
            with pytest.raises(ValueError, match=key):
                SvmOptions(method="em", **{key: bad})
    with pytest.raises(TypeError, match=r"options must be an SvmOptions \(SvmOptions.from_config"):
        BayesianSVM(3, {"method": "em"})  # a config block, not yet its options


def _features(f_train, y_train, idx_train, f_test, y_test, idx_test):
    from dgdm_tf.io.artifacts import FeatureSplit, Features
    return Features(train=FeatureSplit(f_train, y_train, idx_train),
                    test=FeatureSplit(f_test, y_test, idx_test), n_classes=2, wall_seconds=0.0,
                    config={})


def test_same_images_error_reuses_refits_or_declines():
    """The same images in the same order: the other row's own error, not a second fit;
    a superset: a fit on the other row's rows of exactly these images (the same as fitting
    those rows by hand); missing images: None."""
    from dgdm_tf.supervised.same_images import same_images_error

    rng = np.random.default_rng(2)
    y = rng.integers(0, 2, 60)
    f = (rng.standard_normal((60, 5)) + 1.5 * y[:, None]).astype(np.float32)
    svm = SvmOptions(method="em", em_iters=5)
    mine = _features(f[:30], y[:30], np.arange(30), f[40:50], y[40:50], np.arange(40, 50))
    other_same = _features(f[:30] * 2, y[:30], np.arange(30), f[40:50] * 2, y[40:50], np.arange(40, 50))
    assert same_images_error(mine, other_same, 12.5, view="signed", n_classes=2, svm=svm, seed=1) == 12.5
    # the other row holds every image in another order, among more
    perm = rng.permutation(40)
    g = -f  # other features of the same images
    other_more = _features(g[perm], y[perm], perm, g[40:60][::-1], y[40:60][::-1], np.arange(40, 60)[::-1])
    got = same_images_error(mine, other_more, 99.0, view="signed", n_classes=2, svm=svm, seed=1)
    ref = BayesianSVM(2, svm, seed=1).fit(g[:30], y[:30])
    assert got == 100.0 * float(np.mean(np.asarray(ref.predict(g[40:50])) != y[40:50]))
    other_less = _features(g[:20], y[:20], np.arange(20), g[40:50], y[40:50], np.arange(40, 50))
    assert same_images_error(mine, other_less, 0.0, view="signed", n_classes=2, svm=svm, seed=1) is None


def test_em_last_rel_decrease_and_cg_iterations():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 3, 40)
    f = (rng.standard_normal((40, 4)) + y[:, None]).astype(np.float32)
    em = BayesianSVM(3, SvmOptions(method="em", em_iters=4, em_tol=0.0, em_solver="cg"), seed=0)
    em.fit(f, y)
    obj = [r["objective"] for r in em.trace]
    assert em.em_last_rel_decrease() == (obj[-2] - obj[-1]) / abs(obj[-2])
    assert em.cg_iterations() == sum(r["cg_iterations"] for r in em.trace) > 0
    gibbs = BayesianSVM(3, SvmOptions(method="gibbs", burn_in=2, collect=2), seed=0).fit(f, y)
    assert gibbs.em_last_rel_decrease() is None and gibbs.cg_iterations() is None
    with pytest.raises(ValueError, match="not fitted"):
        BayesianSVM(3).em_last_rel_decrease()
