"""Tests of the SVM inside stochastic MCEM (dgdm_tf.mcem.svm_step) and of model averaging's
beta draw (dgdm_tf.mcem.averaging): the B x B push-through form equals the F x F
closed form; the Robbins-Monro step; beta's scaled conditional (drawn over split seeds)
has the batch maximiser as its mean."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from dgdm_tf.supervised import joint_svm as deep_svm

from dgdm_tf.mcem import svm_step as smcem_svm
from dgdm_tf.supervised import svm_gibbs as S


def _problem(c=3, b=7, f=10, seed=0):
    rng = np.random.default_rng(seed)
    # float32-representable features: update_beta takes S[L] as the model's float32
    s = np.concatenate([rng.normal(size=(b, f)).astype(np.float32), np.ones((b, 1))], 1)
    y = np.where(rng.random((c, b)) < 0.5, -1.0, 1.0)
    lam = rng.gamma(2.0, 0.5, size=(c, b)) + 0.05
    omega = rng.gamma(2.0, 0.5, size=(c, f + 1)) + 0.1
    return s, y, lam, omega


def test_batch_beta_equals_the_primal_closed_form():
    """Omega S^T (Lambda/(gamma r) + S Omega S^T)^-1 v == (Omega^-1 + gamma r S^T Lambda^-1 S)^-1 gamma r S^T Lambda^-1 v,
    with fewer images than features (the push-through form's use) and with more."""
    for b, f in ((7, 10), (30, 4)):
        s, y, lam, omega = _problem(b=b, f=f)
        gamma, r = 0.7, 13.0
        got = smcem_svm.batch_beta(lam, omega, s, y, gamma, r).numpy()
        v = y * (1.0 + lam)
        for c in range(y.shape[0]):
            prec = np.diag(1.0 / omega[c]) + gamma * r * (s.T * (1.0 / lam[c])) @ s
            want = np.linalg.solve(prec, gamma * r * s.T @ (v[c] / lam[c]))
            np.testing.assert_allclose(got[c], want, rtol=1e-8, atol=1e-10)


def test_paper_update_is_the_special_case_r1_rho1():
    """At kappa = 1/2, r = 1 and the first step (rho = 1), the update is the supplement's
    eq. (UpdateBeta): [diag(1/|beta|) + s~^T Lambda^-1 s~]^-1 s~^T (1 + Lambda^-1), s~ = y s
    (beta from an earlier update, so Omega = |beta|)."""
    s, y, lam, _ = _problem(c=2, b=9, f=5, seed=3)
    hyper = deep_svm.SvmHyper(kappa=0.5, gamma=1.0, bias_var=100.0)
    beta0 = np.random.default_rng(4).normal(size=(2, 6))
    g = smcem_svm.SvmGlobals(beta=tf.constant(beta0), mean=tf.zeros(5), std=tf.ones(5), updates=0)
    out = smcem_svm.update_beta(g, [tf.constant(lam)], [tf.constant(s[:, :5], tf.float32)],
                                tf.constant(y), hyper, n_total=9, step_power=0.7)
    assert out.updates == 1
    for c in range(2):
        om = np.abs(beta0[c]).copy()
        om[-1] = 100.0
        st = y[c][:, None] * s
        want = np.linalg.solve(np.diag(1.0 / om) + (st.T / lam[c]) @ st, st.T @ (1.0 + 1.0 / lam[c]))
        np.testing.assert_allclose(out.beta.numpy()[c], want, rtol=1e-6)


def test_robbins_monro_step():
    s, y, lam, _ = _problem(c=2, b=6, f=4, seed=1)
    hyper = deep_svm.SvmHyper()
    g = smcem_svm.SvmGlobals(beta=tf.constant(np.ones((2, 5))), mean=tf.zeros(4), std=tf.ones(4), updates=3)
    target = smcem_svm.batch_beta(lam, smcem_svm.omega_em(g.beta, hyper), s,
                                  y, hyper.gamma, 60 / 6).numpy()
    out = smcem_svm.update_beta(g, [tf.constant(lam)], [tf.constant(s[:, :4], tf.float32)],
                                tf.constant(y), hyper, n_total=60, step_power=0.5 + 1e-9)
    rho = 4.0 ** -(0.5 + 1e-9)
    np.testing.assert_allclose(out.beta.numpy(), (1 - rho) * 1.0 + rho * target, rtol=1e-8)


def test_scaled_beta_conditional_has_the_batch_maximiser_as_mean():
    """Model averaging draws beta | lambda, omega from S.resample_beta with gamma r: over
    10000 draws (the classes replicated 10000 times in one batched call: each row is an
    independent draw) its mean matches batch_beta (the M-step's maximiser under the same
    omega) within 4 standard errors, and its variances the inverse precision's (10%)."""
    s, y, lam, omega = _problem(c=2, b=5, f=3, seed=2)
    gamma, r, m = 1.0, 4.0, 10000
    flat = S.resample_beta(np.tile(lam, (m, 1)), np.tile(omega, (m, 1)), s, np.tile(y, (m, 1)),
                           gamma * r, tf.constant([5, 6], tf.int64)).numpy()
    draws = flat.reshape(m, 2, -1)
    want = smcem_svm.batch_beta(lam, omega, s, y, gamma, r).numpy()
    se = draws.std(0) / np.sqrt(len(draws))
    assert np.all(np.abs(draws.mean(0) - want) < 4 * se + 1e-12)
    for c in range(2):
        prec = np.diag(1.0 / omega[c]) + gamma * r * (s.T / lam[c]) @ s
        cov = np.cov(draws[:, c].T)
        np.testing.assert_allclose(np.diag(cov), np.diag(np.linalg.inv(prec)), rtol=0.1)


def test_omega_em_starts_at_the_prior_mean():
    hyper = deep_svm.SvmHyper(kappa=2.0, bias_var=50.0)
    om = smcem_svm.omega_em(tf.zeros([2, 4], tf.float64), hyper).numpy()
    np.testing.assert_allclose(om[:, :-1], 0.5)
    np.testing.assert_allclose(om[:, -1], 50.0)
    beta = tf.constant([[0.4, -2.0, 0.0, 1.0]], tf.float64)
    om = smcem_svm.omega_em(beta, hyper).numpy()
    np.testing.assert_allclose(om[0, :2], [0.2, 1.0])
    assert om[0, 2] == S.OMEGA_MIN
