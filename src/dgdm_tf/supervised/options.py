"""Options of the Bayesian SVM (:class:`dgdm_tf.supervised.svm_classifier.BayesianSVM`):
the config block ``svm`` (:mod:`dgdm_tf.core.options`); no TensorFlow, so a report
reads a row's SVM settings without it."""

from __future__ import annotations

import numpy as np

from dgdm_tf.mcmc.driver import Schedule
from dgdm_tf.core.options import options

#: how EM's linear solves are done (:func:`dgdm_tf.supervised.svm_cg.em_solver_for`)
EM_SOLVERS = ("auto", "dense", "cg")


@options("dataset.svm")
class SvmOptions:
    """Derived: ``sweeps``, burn_in + collect x thin (Gibbs; every ``thin``-th sweep after
    burn-in is kept)."""
    method: str = "gibbs"
    burn_in: int = 100
    collect: int = 100
    thin: int = 1
    gamma: float = 1.0
    sample_gamma: bool = False
    a_gamma: float = 1e-6
    b_gamma: float = 1e-6
    a_kappa: float = 1.0
    b_kappa: float = 1.0
    kappa: float = 0.5
    prior: str = "laplace"
    ridge: float = 1.0
    bias_var: float = 100.0
    em_iters: int = 50
    em_tol: float = 1e-9
    em_solver: str = "auto"
    em_cg_tol: float = 0.1
    em_cg_start_tol: float = 1e-3

    _INTS = ("burn_in", "collect", "thin", "em_iters")  # not fields: held as int, as float
    _POSITIVE = ("gamma", "a_gamma", "b_gamma", "a_kappa", "b_kappa", "kappa", "ridge",
                 "bias_var")
    _FRACTIONS = ("em_cg_tol", "em_cg_start_tol")

    def __post_init__(self):
        if self.method not in ("gibbs", "em"):
            raise ValueError(f"method must be 'gibbs' or 'em', got {self.method!r}")
        if self.prior not in ("laplace", "gaussian"):
            raise ValueError(f"prior must be 'laplace' or 'gaussian', got {self.prior!r}")
        for name, lo in zip(self._INTS, (0, 1, 1, 1)):
            val = getattr(self, name)
            if not isinstance(val, (int, np.integer)) or val < lo:
                raise ValueError(f"{name} must be an int >= {lo}, got {val!r}")
        for name in self._POSITIVE:
            val = getattr(self, name)
            if not (np.isfinite(val) and val > 0):
                raise ValueError(f"{name} must be a positive finite number, got {val!r}")
        if self.em_solver not in EM_SOLVERS:
            raise ValueError(f"em_solver must be one of {EM_SOLVERS}, got {self.em_solver!r}")
        for name in self._FRACTIONS:
            val = getattr(self, name)
            if not (np.isfinite(val) and 0 < val < 1):
                raise ValueError(f"{name} must lie in (0, 1), got {val!r}")
        if self.sample_gamma and self.method == "em":
            raise ValueError("sample_gamma=True needs method='gibbs' (EM keeps gamma fixed)")
        # the numbers as the SVM took them before the options (the same bits)
        for name in self._INTS:
            object.__setattr__(self, name, int(getattr(self, name)))
        for name in self._POSITIVE + self._FRACTIONS + ("em_tol",):
            object.__setattr__(self, name, float(getattr(self, name)))
        object.__setattr__(self, "sample_gamma", bool(self.sample_gamma))

    @property
    def schedule(self) -> Schedule:
        """The Gibbs sampler's schedule: burn-in, then ``collect`` samples one every ``thin``."""
        return Schedule(burn_in=self.burn_in, collect=self.collect, thin=self.thin)

    @property
    def sweeps(self) -> int:
        """Gibbs sweeps: burn-in, then one every ``thin`` per collected sample."""
        return self.schedule.total
