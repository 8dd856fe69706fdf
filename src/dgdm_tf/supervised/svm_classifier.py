r"""The one-vs-all Bayesian SVM classifier (Polson & Scott 2011; paper Sec. 2.3):
:class:`BayesianSVM` fits by Gibbs sampling (the model and its conditionals:
:mod:`dgdm_tf.supervised.svm_gibbs`) or EM / MAP (:mod:`dgdm_tf.supervised.svm_em`;
wide features by CG, :mod:`dgdm_tf.supervised.svm_cg`) and predicts.

**Features** are standardised internally (training mean / sd stored as ``mean_`` /
``std_``; constant columns get sd 1) so that a unit-scale prior and ``kappa`` are
sensible whatever the units of the features.  ``betas`` are in standardised
coordinates; :meth:`BayesianSVM.raw_coefficients` maps them back.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np
import tensorflow as tf

from dgdm_tf.core import random
from dgdm_tf.core.compiled import cached_builder, compiled
from dgdm_tf.mcmc.driver import Kernel, run_in_memory
from dgdm_tf.supervised.options import SvmOptions
from dgdm_tf.supervised.svm_cg import em_solver_for, em_step_cg
from dgdm_tf.supervised.svm_em import em_first_step, em_update_beta
from dgdm_tf.supervised.svm_gibbs import (resample_beta, resample_gamma, resample_kappa,
                                          resample_lambda, resample_omega)
from dgdm_tf.supervised.svm_linalg import DTYPE, f64, margins, one_vs_all_targets

__all__ = ["BayesianSVM", "SvmOptions"]


@cached_builder()
def _em_step(gamma: float):
    """A compiled EM step ``f(beta, s, y, l1, l2) -> beta`` (:func:`em_update_beta`)."""
    return compiled(lambda b, s, y, l1, l2: em_update_beta(b, s, y, gamma, l1, l2))


@cached_builder()
def gibbs_sweep(c: int, f: int, *, laplace: bool, sample_gamma: bool, bias_var: float,
                 a_kappa: float, b_kappa: float, a_gamma: float, b_gamma: float):
    """A compiled Gibbs scan ``f(beta, omega_w, kappa, gamma, it, base, s, y) -> (beta,
    omega_w, kappa, gamma)`` of the C one-vs-all SVMs on F features (eqs. Samplelambda,
    the beta conditional; omega and kappa with the Laplace prior); scan ``it`` is seeded
    by fold-in of ``it`` into ``base``."""
    bias_var, a_k, b_k, a_g, b_g = (f64(v) for v in (bias_var, a_kappa, b_kappa, a_gamma, b_gamma))

    @compiled
    def sweep(beta, omega_w, kappa, gamma, it, base, s, y):
        seeds = random.split(random.fold(base, it), ("lam", "gamma", "beta", "omega", "kappa"))
        lam = resample_lambda(beta, s, y, gamma, seeds.lam)
        if sample_gamma:
            gamma = resample_gamma(lam, beta, s, y, a_g, b_g, seeds.gamma)
        omega = tf.concat([omega_w, tf.fill([c, 1], bias_var)], axis=1)
        beta = resample_beta(lam, omega, s, y, gamma, seeds.beta)
        if laplace:
            omega_w = resample_omega(beta[:, :f], kappa, seeds.omega)
            kappa = resample_kappa(omega_w, a_k, b_k, seeds.kappa)
        return beta, omega_w, kappa, gamma

    return sweep


class _GibbsFit(Kernel):
    """The SVM's Gibbs sampler (:func:`gibbs_sweep`) for
    :func:`dgdm_tf.mcmc.driver.run_in_memory`. State: (beta, omega_w, kappa, gamma, the
    collected betas, gammas and kappas); each sweep is recorded in ``svm.trace``."""

    def __init__(self, svm, sweep, base, data):
        self.svm, self.sweep, self.base, self.data = svm, sweep, base, data

    def step(self, state, at):
        beta, omega_w, kappa, gamma, kept_b, kept_g, kept_k = state
        s, y, lab = self.data
        t0, it = time.perf_counter(), at.t + 1
        beta, omega_w, kappa, gamma = self.sweep(beta, omega_w, kappa, gamma,
                                                 tf.constant(it, tf.int64), self.base, s, y)
        # the SVM's trace spells its phases as identifiers
        self.svm._record(it, at.phase.replace("-", "_"), beta, s, y, lab, float(gamma), kappa.numpy(), t0)
        if at.collected:
            kept_b, kept_g, kept_k = (kept_b + [beta.numpy()], kept_g + [float(gamma)],
                                      kept_k + [kappa.numpy()])
        return (beta, omega_w, kappa, gamma, kept_b, kept_g, kept_k), {}, None


class BayesianSVM:
    """One-vs-all Bayesian SVM with Laplace (or Gaussian) prior; Gibbs or EM/MAP.

    Parameters
    ----------
    n_classes : number of classes ``C`` (labels are ints in ``[0, C)``).
    options : :class:`dgdm_tf.supervised.options.SvmOptions` (config block ``svm``; None:
        the schema's defaults): ``method`` ``"gibbs"`` (posterior samples; decision values
        averaged over them, as the paper does) or ``"em"`` (the supplement's closed-form
        MAP update), the Gibbs schedule, the prior and hinge settings, EM's solver.
    seed : int; same seed, same chain (bit for bit on the same machine/thread count).
    progress : optional ``callable(str)`` called once per sweep / EM step.

    Attributes after ``fit``: ``betas`` ``(samples, C, F+1)`` (standardised coordinates;
    EM: one sample, the MAP), ``beta_mean_`` ``(C, F+1)``, ``mean_``, ``std_``,
    ``trace`` (list of dicts: iteration, phase, hinge (mean per-class hinge per
    example), objective (sum over classes of :func:`dgdm_tf.supervised.svm_em.hinge_objective`),
    train_error, gamma, kappa (mean over classes), seconds; CG EM also cg_iterations,
    cg_residual),
    ``gammas``/``kappas`` of collected samples, ``em_solver_`` (EM: ``"dense"`` or
    ``"cg"``; Gibbs: None).
    """

    def __init__(self, n_classes: int, options: SvmOptions | None = None, *, seed: int = 0,
                 progress: Callable[[str], None] | None = None):
        if not isinstance(n_classes, (int, np.integer)) or n_classes < 2:
            raise ValueError(f"n_classes must be an int >= 2, got {n_classes!r}")
        if options is not None and not isinstance(options, SvmOptions):
            raise TypeError(f"options must be an SvmOptions (SvmOptions.from_config(block) of "
                            f"a config's svm block), got {type(options).__name__}")
        self.n_classes = int(n_classes)
        self.options = SvmOptions() if options is None else options
        self.seed = int(seed)
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
        """(l1, l2) per coefficient ``(C, F1)`` for :func:`dgdm_tf.supervised.svm_em.hinge_objective`."""
        c = self.n_classes
        l1 = np.zeros((c, f + 1))
        l2 = np.zeros((c, f + 1))
        l2[:, f] = 1.0 / self.options.bias_var
        if self.options.prior == "laplace":
            l1[:, :f] = np.sqrt(2.0 * np.asarray(kappa, dtype=np.float64)).reshape(-1, 1)
        else:
            l2[:, :f] = self.options.ridge
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
        self.em_solver_ = (em_solver_for(self.n_classes, design.shape[1], self.options.em_solver)
                           if self.options.method == "em" else None)
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
            if self.options.method == "em":
                self._fit_em(s, y, lab_t)
            else:
                self._fit_gibbs(s, y, lab_t)
        self.beta_mean_ = self.betas.mean(axis=0)
        return self

    def _record(self, it, phase, beta, s, y, lab, gamma, kappa, t0, *, m=None,
                extra: dict | None = None) -> dict:
        f = self.n_features_
        m = margins(beta, s) if m is None else f64(m)
        hinge = tf.reduce_sum(tf.nn.relu(1.0 - f64(y) * m), axis=-1).numpy()
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
        o = self.options
        f = self.n_features_
        c = self.n_classes
        l1, l2 = self._penalties(f, np.full(c, o.kappa))
        l1_t, l2_t = f64(l1), f64(l2)
        gamma = o.gamma
        step = _em_step(gamma)
        prev = None
        for it in range(1, o.em_iters + 1):
            t0 = time.perf_counter()
            if it == 1:
                # first step from beta = 0: |c| = 1 for all rows, |beta| taken as 1
                beta = em_first_step(s, y, gamma, l1_t, l2_t)
            else:
                beta = step(beta, s, y, l1_t, l2_t)
            row = self._record(it, "em", beta, s, y, lab, o.gamma, np.full(c, o.kappa), t0)
            if prev is not None and prev - row["objective"] <= o.em_tol * abs(prev):
                break
            prev = row["objective"]
        self.betas = beta.numpy()[None]
        self.gammas = np.array([o.gamma])
        self.kappas = np.full((1, c), o.kappa)

    def _fit_em_cg(self, s, cols, y, lab):
        """EM with every step's solve by :func:`em_step_cg`; ``s`` holds the columns
        ``cols`` of the design (the others are all zero), the same stopping rule as
        :meth:`_fit_em`."""
        o = self.options
        f = self.n_features_
        c = self.n_classes
        kappa = np.full(c, o.kappa)
        l1, l2 = self._penalties(f, kappa)
        l1, l2 = l1[:, cols], l2[:, cols]
        beta = np.zeros((c, s.shape[1]))
        full = np.zeros((c, f + 1))
        prev = None
        for it in range(1, o.em_iters + 1):
            t0 = time.perf_counter()
            tol = o.em_cg_start_tol if it == 1 else o.em_cg_tol
            beta, info = em_step_cg(beta, s, y, o.gamma, l1, l2, tol=tol, start=it == 1)
            full[:, cols] = beta
            row = self._record(it, "em", full, None, y, lab, o.gamma, kappa, t0,
                               m=beta @ s.T, extra=info)
            if prev is not None and prev - row["objective"] <= o.em_tol * abs(prev):
                break
            prev = row["objective"]
        self.betas = full[None].copy()
        self.gammas = np.array([o.gamma])
        self.kappas = np.full((1, c), o.kappa)

    def _fit_gibbs(self, s, y, lab):
        o = self.options
        f = self.n_features_
        c = self.n_classes
        laplace = o.prior == "laplace"
        base = random.salted(self.seed, "svm")
        sweep = gibbs_sweep(c, f, laplace=laplace, sample_gamma=o.sample_gamma,
                             bias_var=o.bias_var, a_kappa=o.a_kappa, b_kappa=o.b_kappa,
                             a_gamma=o.a_gamma, b_gamma=o.b_gamma)
        first = (tf.zeros((c, f + 1), DTYPE), tf.fill([c, f], f64(1.0 / o.kappa if laplace else 1.0 / o.ridge)),
                 tf.fill([c], f64(o.kappa)), f64(o.gamma), [], [], [])
        kernel = _GibbsFit(self, sweep, base, (s, y, lab))
        _b, _w, _k, _g, kept_b, kept_g, kept_k = run_in_memory(kernel, o.schedule, first).state
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

    def em_last_rel_decrease(self) -> float | None:
        """EM: the objective's relative decrease at the last step, which says how far
        from converged the MAP is; None for Gibbs, or after one EM step."""
        self._require_fit()
        obj = [row["objective"] for row in self.trace]
        if self.options.method != "em" or len(obj) < 2:
            return None
        return float((obj[-2] - obj[-1]) / abs(obj[-2]))

    def cg_iterations(self) -> int | None:
        """EM by CG: its iterations summed over the EM steps; None otherwise."""
        self._require_fit()
        if self.em_solver_ != "cg":
            return None
        return sum(row["cg_iterations"] for row in self.trace)

    def raw_coefficients(self) -> tuple[np.ndarray, np.ndarray]:
        """Posterior-mean weights ``(C, F)`` and biases ``(C,)`` in the raw feature units."""
        self._require_fit()
        w = self.beta_mean_[:, :-1] / self.std_
        b = self.beta_mean_[:, -1] - w @ self.mean_
        return w, b
