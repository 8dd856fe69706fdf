"""The Bayesian SVM coupled to the top layer of the top-down model (Sec. 2.3; supplement,
conditionals of S[L], beta_l and lambda_n): the supervised model.

The C one-vs-all SVMs see the vectorised top layer ``s_n = vec(S[L]_n)`` (NHWC order,
as :mod:`dgdm_tf.core.layout`), standardised with a *fixed* per-unit mean and scale
(``mean``, ``std``; fixed when supervision starts, so they are a reparametrisation of
beta's prior, not a function of the chain's later state), plus a bias:

    margin_nl = beta_l^T [(s_n - mean) / std, 1] = sum_u coef_lu s_nu + offset_l,
    coef_lu = beta_lu / std_u,  offset_l = beta_l,bias - sum_u beta_lu mean_u / std_u.

Augmented pseudo-likelihood (paper eq. lik_mix), per image n and class l:
``q(lambda, c) = sqrt(gamma / (2 pi lambda)) exp(-gamma (c + lambda)^2 / (2 lambda))``,
``c = 1 - y margin``. It is Gaussian in each top unit ``s_nu``, which gives the extra
terms of the S[L] conditional (supplement eq. SampleS; its ``y_n`` inside the
precision is ``y_n^2 = 1``): precision ``+ gamma sum_l coef_lu^2 / lambda_nl`` and
precision-times-mean ``+ gamma sum_l coef_lu (y_nl (1 + lambda_nl) - a_nlu) / lambda_nl``,
``a_nlu`` the margin without unit u. Every top unit of an image is coupled to every
other through the margin, so with supervision the top layer is drawn one unit per image
at a time (a singleton colouring, :class:`dgdm_tf.core.model.DeepModel` ``supervised``).

beta, lambda, omega, kappa are drawn with the exact conditionals of :mod:`dgdm_tf.supervised.svm_gibbs`
(tested there); this module wires them to the deep model's state.
"""

from __future__ import annotations

import collections
import dataclasses

import numpy as np
import tensorflow as tf

from dgdm_tf.core import random
from dgdm_tf.core.compiled import cached_builder, compiled
from dgdm_tf.supervised import svm_gibbs as S
from dgdm_tf.supervised import svm_linalg

SvmState = collections.namedtuple("SvmState", ["beta", "omega", "kappa", "lam", "mean", "std"])
SvmState.__doc__ = """beta (C, F+1) float64 on the standardised features, bias last;
omega (C, F) Laplace mixing variances; kappa (C,) Laplace rates; lam (C, N) augmentation
variables; mean, std (F,) the fixed standardisation of the top layer."""


@dataclasses.dataclass(frozen=True)
class SvmHyper:
    """gamma: hinge weight (fixed; :mod:`dgdm_tf.supervised.svm_gibbs` explains why it is not sampled);
    (a_kappa, b_kappa): Gamma prior of kappa; bias_var: prior variance of the bias;
    scale: ``"global"`` (one scale for every unit, the paper's raw features up to a
    constant) or ``"unit"`` (per-unit sd: a unit on in few images gets a large
    coefficient, which lets the SVM move it at little cost to the likelihood; measured in
    docs/findings/supervised_first_version.md); steps: SVM Gibbs scans (lambda, beta, omega, kappa) per sweep of the
    top-down model (repeating an exact block is exact; it lets beta keep up with S)."""

    gamma: float = 1.0
    a_kappa: float = 1.0
    b_kappa: float = 1.0
    bias_var: float = 100.0
    kappa: float = 0.5  # start value
    scale: str = "global"
    steps: int = 1

    def __post_init__(self):
        if self.scale not in ("global", "unit"):
            raise ValueError(f"svm scale must be 'global' or 'unit', got {self.scale!r}")
        if int(self.steps) < 1:
            raise ValueError(f"svm steps must be >= 1, got {self.steps!r}")

    @classmethod
    def from_dict(cls, d: dict | None) -> "SvmHyper":
        d = dict(d or {})
        cast = {"scale": str, "steps": int}
        return cls(**{f.name: cast.get(f.name, float)(d[f.name])
                      for f in dataclasses.fields(cls) if f.name in d})


def flat(s_top) -> tf.Tensor:
    """(N, hs, ws, K) -> (N, F): the SVM's feature order."""
    s_top = tf.convert_to_tensor(s_top)
    return tf.reshape(s_top, [tf.shape(s_top)[0], -1])


def standardisation(s_top, *, scale: str = "global", min_std: float = 1e-12):
    """(mean, sd), both (F,): ``"unit"``: per-unit mean and sd over the images (sd of a
    unit never on: 1); ``"global"``: mean 0 and one sd, the root mean square of every
    entry, for all units (the paper's raw features, rescaled so that beta's prior needs no
    retuning across data sets)."""
    f = np.asarray(flat(s_top), np.float64)
    if scale == "global":
        rms = float(np.sqrt(np.mean(f * f)))
        return (np.zeros(f.shape[1], np.float32),
                np.full(f.shape[1], rms if rms > min_std else 1.0, np.float32))
    if scale != "unit":
        raise ValueError(f"scale must be 'global' or 'unit', got {scale!r}")
    mean = f.mean(0)
    sd = f.std(0)
    return mean.astype(np.float32), np.where(sd > 1e-6, sd, 1.0).astype(np.float32)


def design(s_top, mean, std) -> tf.Tensor:
    """(N, F+1) float64: standardised features and a bias column."""
    f = (tf.cast(flat(s_top), tf.float64) - tf.cast(mean, tf.float64)) / tf.cast(std, tf.float64)
    return tf.concat([f, tf.ones([tf.shape(f)[0], 1], tf.float64)], axis=1)


def init_svm(n_classes: int, mean, std, n_images: int, hyper: SvmHyper) -> SvmState:
    """beta = 0, omega at its prior mean 1/kappa, lambda = 1 (drawn before first use)."""
    f = int(np.size(mean))
    return SvmState(beta=tf.zeros([n_classes, f + 1], tf.float64),
                    omega=tf.fill([n_classes, f], tf.constant(1.0 / hyper.kappa, tf.float64)),
                    kappa=tf.fill([n_classes], tf.constant(hyper.kappa, tf.float64)),
                    lam=tf.ones([n_classes, n_images], tf.float64),
                    mean=tf.constant(np.asarray(mean, np.float32)),
                    std=tf.constant(np.asarray(std, np.float32)))


def unit_terms(svm: SvmState, y, top_shape, hyper: SvmHyper) -> dict:
    """What the S[L] conditional needs (float32): coef (C, hs, ws, K); offset (C,);
    target y (1 + lambda) and weight gamma / lambda, both (N, C)."""
    c = int(svm.beta.shape[0])
    beta_w = tf.cast(svm.beta[:, :-1], tf.float32)
    coef = beta_w / svm.std
    offset = tf.cast(svm.beta[:, -1], tf.float32) - tf.reduce_sum(coef * svm.mean, axis=1)
    lam = tf.cast(tf.transpose(svm.lam), tf.float32)
    y = tf.cast(tf.transpose(y), tf.float32)
    return {"coef": tf.reshape(coef, [c, *top_shape]), "offset": offset,
            "target": y * (1.0 + lam), "weight": hyper.gamma / lam}


def margins(svm: SvmState, s_top) -> tf.Tensor:
    """(N, C) decision values beta_l^T [standardised s_n, 1]."""
    return tf.matmul(design(s_top, svm.mean, svm.std), svm.beta, transpose_b=True)


def resample_svm(svm: SvmState, s_top, y, hyper: SvmHyper, seed, steps: int | None = None) -> SvmState:
    """lambda | beta, s; beta | lambda, omega, s; omega | beta, kappa; kappa | omega
    (supplement eqs. Samplelambda and the beta conditional; exact, :mod:`dgdm_tf.supervised.svm_gibbs`),
    ``steps`` scans (default ``hyper.steps``) with S fixed; scan j > 0 is seeded by fold-in."""
    s = design(s_top, svm.mean, svm.std)
    f = int(svm.omega.shape[1])
    c = int(svm.beta.shape[0])
    y = tf.cast(y, tf.float64)
    seed = tf.cast(seed, tf.int64)
    for j in range(int(hyper.steps if steps is None else steps)):
        sj = seed if j == 0 else tf.cast(tf.random.experimental.stateless_fold_in(seed, j), tf.int64)
        seeds = random.split(sj, ("lam", "beta", "omega", "kappa"))
        lam = S.resample_lambda(svm.beta, s, y, hyper.gamma, seeds.lam)
        omega_all = tf.concat([svm.omega, tf.fill([c, 1], tf.constant(hyper.bias_var, tf.float64))], 1)
        beta = S.resample_beta(lam, omega_all, s, y, hyper.gamma, seeds.beta)
        omega = S.resample_omega(beta[:, :f], svm.kappa, seeds.omega)
        kappa = S.resample_kappa(omega, hyper.a_kappa, hyper.b_kappa, seeds.kappa)
        svm = svm._replace(beta=beta, omega=omega, kappa=kappa, lam=lam)
    return svm


@cached_builder()
def make_svm_scan(hyper: SvmHyper, steps: int | None = None):
    """A compiled :func:`resample_svm` ``f(svm, s_top, y, seed) -> svm`` of ``steps``
    scans, shared by every chain with equal ``hyper``
    (:func:`dgdm_tf.core.compiled.cached_builder`)."""
    return compiled(lambda svm, s_top, y, seed: resample_svm(svm, s_top, y, hyper, seed, steps=steps))


def log_density(svm: SvmState, s_top, y, hyper: SvmHyper) -> tf.Tensor:
    """log of the SVM's factors of the joint: prod_nl q(lambda_nl, c_nl), beta | omega
    (bias: N(0, bias_var)), omega | kappa ~ Exp(kappa), kappa ~ Gamma (constants dropped)."""
    y = tf.cast(y, tf.float64)
    g = hyper.gamma
    c = 1.0 - y * tf.transpose(margins(svm, s_top))
    lam = svm.lam
    lp = tf.reduce_sum(0.5 * tf.math.log(g / lam) - g * tf.square(c + lam) / (2.0 * lam))
    bw, bb = svm.beta[:, :-1], svm.beta[:, -1]
    lp += tf.reduce_sum(-0.5 * tf.math.log(svm.omega) - 0.5 * tf.square(bw) / svm.omega)
    lp += tf.reduce_sum(-0.5 * tf.square(bb) / hyper.bias_var)
    lp += tf.reduce_sum(tf.math.log(svm.kappa)[:, None] - svm.kappa[:, None] * svm.omega)
    lp += tf.reduce_sum((hyper.a_kappa - 1.0) * tf.math.log(svm.kappa) - hyper.b_kappa * svm.kappa)
    return tf.cast(lp, tf.float32)


def targets(labels, n_classes: int) -> tf.Tensor:
    """(C, N) float64 one-vs-all targets in {-1, +1}."""
    return tf.constant(svm_linalg.one_vs_all_targets(np.asarray(labels), n_classes), tf.float64)


def decision_values(betas, mean, std, s_top) -> np.ndarray:
    """(N, C) decision values averaged over beta samples (S, C, F+1): the paper's
    averaging of the collected samples' decision values."""
    s = np.asarray(design(s_top, mean, std))
    return np.mean([s @ np.asarray(b).T for b in betas], axis=0)
