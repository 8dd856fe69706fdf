"""The Bayesian SVM inside stochastic MCEM (supplement Algorithm 1, supervised model):
lambda is a local variable drawn in the E-step, beta a global one updated in closed form
in the M-step.

E-step, per image n and class c: ``1/lambda_nc ~ IG(1/|1 - y_nc beta_c^T s_n|, gamma)``
(supplement eq. Samplelambda), drawn between the Gibbs sweeps of the deep model whose top
units see the SVM's terms (:func:`dgdm_tf.supervised.joint_svm.unit_terms`).

M-step for beta: the maximiser of the sampled Q's SVM part on the mini-batch, scaled to
N images (r = N / (B N_s), the N_s samples stacked as rows),

    beta_c* = argmax -gamma r / 2 sum_n (beta_c^T s_n - y_nc (1 + lambda_nc))^2 / lambda_nc
              - 1/2 sum_f beta_cf^2 / omega_cf
            = Omega_c S^T (Lambda_c / (gamma r) + S Omega_c S^T)^-1 y_c (1 + lambda_c),

the second line by the push-through identity: a B x B solve per class, never F x F
(ImageNet: F = 4609, B = 256). omega is the Laplace prior's mixing variance at its EM
value ``1/E[1/omega | beta] = |beta| / sqrt(2 kappa)`` (the bias: ``bias_var``); kappa is
held at its config value. As the batch maximiser is a noisy estimate of the full-data
one, beta moves towards it by a Robbins-Monro step ``rho_t = (1 + t)^-power``
(``beta_step_power`` in (0.5, 1]), as stochastic EM does (Cappe & Moulines 2009). The supplement's eq. (UpdateBeta) is this
batch maximiser with r = 1 and rho = 1 (its Omega^-1 = diag(1 / |beta|) is ours at the
default kappa = 1/2); r = N / B keeps the prior's weight against N images, and the
averaging keeps beta from jumping with every batch.
"""

from __future__ import annotations

import collections

import numpy as np
import tensorflow as tf

from dgdm_tf.supervised import joint_svm as deep_svm
from dgdm_tf.supervised import svm_gibbs as S

SvmGlobals = collections.namedtuple("SvmGlobals", ["beta", "mean", "std", "updates"])
SvmGlobals.__doc__ = """beta (C, F+1) float64 on the standardised top layer, bias last;
mean, std (F,) float32, the standardisation fixed when supervision starts; updates: the
number of M-steps done (the Robbins-Monro clock)."""


def init(n_classes: int, mean, std) -> SvmGlobals:
    f = int(np.size(mean))
    return SvmGlobals(beta=tf.zeros([n_classes, f + 1], tf.float64),
                      mean=tf.constant(np.asarray(mean, np.float32)),
                      std=tf.constant(np.asarray(std, np.float32)), updates=0)


def as_state(g: SvmGlobals, lam) -> deep_svm.SvmState:
    """The :class:`dgdm_tf.supervised.joint_svm.SvmState` that the top-unit step
    (:func:`dgdm_tf.supervised.joint_svm.unit_terms`) and :func:`dgdm_tf.supervised.joint_svm.margins` read: beta,
    lambda and the standardisation. omega and kappa are left None: neither reads them, and
    this runs inside every compiled E-step sweep."""
    return deep_svm.SvmState(beta=g.beta, omega=None, kappa=None, lam=lam, mean=g.mean, std=g.std)


def resample_lambda(g: SvmGlobals, s_top, y, hyper: deep_svm.SvmHyper, seed) -> tf.Tensor:
    """lambda (C, B) | beta, S[L] (exact conditional, :func:`dgdm_tf.supervised.svm_gibbs.resample_lambda`)."""
    return S.resample_lambda(g.beta, deep_svm.design(s_top, g.mean, g.std),
                             tf.cast(y, tf.float64), hyper.gamma, seed)


def omega_em(beta, hyper: deep_svm.SvmHyper) -> tf.Tensor:
    """(C, F+1) prior variances for the M-step: ``|beta| / sqrt(2 kappa)`` (floored),
    the prior mean ``1 / kappa`` while beta is still all zero, ``bias_var`` for the bias."""
    c = beta.shape[0]
    w = tf.abs(beta[:, :-1])
    em = tf.maximum(w / np.sqrt(2.0 * hyper.kappa), S.OMEGA_MIN)
    first = tf.reduce_all(tf.equal(beta, 0.0))
    om = tf.where(first, tf.fill(tf.shape(w), tf.constant(1.0 / hyper.kappa, tf.float64)), em)
    return tf.concat([om, tf.fill([c, 1], tf.constant(hyper.bias_var, tf.float64))], 1)


def batch_beta(lam, omega, s, y, gamma: float, r: float) -> tf.Tensor:
    """The M-step's maximiser on a batch: ``Omega S^T (Lambda / (gamma r) + S Omega S^T)^-1
    y (1 + lambda)``. lam, y (C, B); omega (C, F1) variances; s (B, F1). Returns (C, F1)."""
    s = tf.cast(s, tf.float64)
    lam = tf.cast(lam, tf.float64)
    y = tf.cast(y, tf.float64)
    k = tf.einsum("bf,cf,df->cbd", s, omega, s) + tf.linalg.diag(lam / (gamma * r))
    v = y * (1.0 + lam)
    a = tf.linalg.cholesky_solve(tf.linalg.cholesky(k), v[..., None])[..., 0]  # (C, B)
    return omega * tf.matmul(a, s)


def update_beta(g: SvmGlobals, lams, s_tops, y, hyper: deep_svm.SvmHyper, *, n_total: int,
                step_power: float) -> SvmGlobals:
    """One M-step of beta from the E-step's samples (lists of lambda (C, B) and S[L])."""
    s = tf.concat([deep_svm.design(st, g.mean, g.std) for st in s_tops], 0)
    lam = tf.concat(list(lams), 1)
    yy = tf.concat([tf.cast(y, tf.float64)] * len(s_tops), 1)
    r = float(n_total) / float(s.shape[0])
    target = batch_beta(lam, omega_em(g.beta, hyper), s, yy, hyper.gamma, r)
    rho = (1.0 + g.updates) ** (-float(step_power))
    return g._replace(beta=(1.0 - rho) * g.beta + rho * target, updates=g.updates + 1)
