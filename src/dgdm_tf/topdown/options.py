"""Options of the top-down chains: the config blocks ``refine`` and ``supervised``
(:func:`dgdm_tf.topdown.refine.run_refine`), ``topdown_features`` and ``inpaint``
(:func:`dgdm_tf.topdown.chain.infer_topdown`) (:mod:`dgdm_tf.core.options`), and the
model a chain starts from."""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from dgdm_tf.core.options import options
from dgdm_tf.mcmc.diagnostics import SETTLE_TOLERANCE
from dgdm_tf.mcmc.driver import Schedule
from dgdm_tf.pretrain.ridge_start import RidgeStart
from dgdm_tf.supervised.joint_svm import SvmHyper
from dgdm_tf.topdown.dictionaries import N_LEAPFROG, POWER_ITERATIONS


@dataclasses.dataclass(frozen=True)
class Start:
    """The model a top-down chain starts from: each layer's dictionary (bottom first,
    (dh, dw, C, K)), the layers' settings (config `model.layers`), the hyperparameters
    (config `hyper`; None: the defaults), the start values of the noise precisions
    gamma_e (None: the model's own start) and of the top weights' precision gamma_s (the
    test-time chains hold it, or draw it per image from there), and with labels the number
    of classes of the SVM (Sec. 2.3)."""
    dictionaries: Sequence[np.ndarray]
    layers: Sequence[dict]
    hyper: dict | None = None
    gamma_e_init: float | None = None
    gamma_s_init: float = 1.0
    n_classes: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Chain:
    """The settings both blocks share (defaults: refine's), their checks and what they
    derive."""
    chunk: int | None = 250
    burn_in: int = 10
    collect: int = 5
    thin: int = 1
    n_leapfrog: int = N_LEAPFROG
    power_iterations: int = POWER_ITERATIONS
    checkpoint_every: int = 5
    workers: int = 1
    scan: str = "random"
    chains: int = 1
    settle_tolerance: float = SETTLE_TOLERANCE

    supervised = False  # the SVM's options are SupervisedOptions'

    def __post_init__(self):
        if self.burn_in < 0 or self.collect < 1 or self.thin < 1:
            raise ValueError("need burn_in >= 0, collect >= 1 and thin >= 1, got "
                             f"{self.burn_in}, {self.collect}, {self.thin}")
        if int(self.chains) < 1:
            raise ValueError(f"chains must be at least 1, got {self.chains}")
        if int(self.workers) < 1:
            raise ValueError(f"workers must be at least 1, got {self.workers}")

    @property
    def schedule(self) -> Schedule:
        """A chain's schedule: burn-in (the HMC step sizes adapt over it), then
        ``collect`` draws one every ``thin`` sweeps."""
        return Schedule(burn_in=self.burn_in, collect=self.collect, thin=self.thin)

    @property
    def sweeps(self) -> int:
        """Sweeps of a chain: burn-in, then one every ``thin`` for each collected draw."""
        return self.schedule.total

    @property
    def distribute(self) -> bool:
        """Data-parallel over the cluster's workers (more than one worker)."""
        return int(self.workers) > 1


@options("dataset.refine", other={
    "n_images": "the rule script picks the images", "keep_checkpoints": "the rule script removes the folder"})
class RefineOptions(_Chain):
    """``sweeps``: burn_in + collect x thin; ``distribute``: workers > 1."""


@options("dataset.supervised", other={
    "start_from": "the rule script picks the start", "n_train": "the rule script picks the images",
    "n_test": "the test route's", "keep_checkpoints": "the rule script removes the folder",
    "predict": "the test route's block (dgdm_tf.mcem.test_time); the chain reads its `models`"},
    nested={"keep_models": "predict.models"},
    library_only={"workers": "worker processes of a data-parallel chain, as refine.workers"})
class SupervisedOptions(_Chain):
    """``svm_hyper``: the SVM's settings (:class:`dgdm_tf.supervised.joint_svm.SvmHyper`);
    ``keep_models`` None keeps every collected draw; ``share_images``: the images whose
    labels' share of the top units' conditionals is traced (0: none); ``gamma_mode``
    "balanced": the hinge weight is re-set every ``balance_every`` sweeps so that the
    traced median share is ``balance_share`` (:func:`dgdm_tf.topdown.refine.balanced_gamma`)."""
    burn_in: int = 1
    collect: int = 2
    scan: str = "fixed"
    gamma: float = 1.0
    a_kappa: float = 1.0
    b_kappa: float = 1.0
    kappa: float = 0.5
    bias_var: float = 100.0
    scale: str = "global"
    svm_steps: int = 5
    svm_warmup: int = 100
    svm_average: int = 100
    keep_models: int | None = 2
    share_images: int = 256
    gamma_mode: str = "fixed"
    balance_share: float = 0.5
    balance_every: int = 5

    supervised = True

    def __post_init__(self):
        super().__post_init__()
        if self.gamma_mode not in ("fixed", "balanced"):
            raise ValueError(f"gamma_mode must be 'fixed' or 'balanced', got {self.gamma_mode!r}")
        if self.gamma_mode == "balanced":
            if not 0.0 < float(self.balance_share) < 1.0:
                raise ValueError(f"balance_share must lie in (0, 1), got {self.balance_share}")
            if int(self.share_images) < 1 or int(self.balance_every) < 1:
                raise ValueError("gamma_mode balanced reads the traced labels' share: it needs "
                                 f"share_images >= 1 and balance_every >= 1, got "
                                 f"{self.share_images} and {self.balance_every}")

    @property
    def svm_hyper(self) -> SvmHyper:
        return SvmHyper.from_dict({"gamma": self.gamma, "a_kappa": self.a_kappa,
                                   "b_kappa": self.b_kappa, "kappa": self.kappa,
                                   "bias_var": self.bias_var, "scale": self.scale,
                                   "steps": self.svm_steps})


@options("dataset.topdown_features", other={
    "n_train": "the rule script picks the images", "n_test": "the rule script picks the images",
    "route": "the rule script's choice of entry point (dgdm_tf.mcem.options.topdown_route)",
    "alg2": "route alg2's block (dgdm_tf.mcem.options.Alg2Options)",
    "posterior_check": "the rule script's check (dgdm_tf.topdown.evidence.posterior_gain)"},
    library_only={"chain_orders": "permuted (each chain c > 0 in its own map order) or same",
                  "keep_chains": "also return each chain's own mean",
                  "keep_draws": "also return every collected sweep's features"})
class TopdownOptions:
    """``start`` is the config's block (or a
    :class:`dgdm_tf.pretrain.ridge_start.RidgeStart`, or None: every top unit off);
    ``ridge_start`` its settings. ``sweeps``: burn_in + collect per chain."""
    burn_in: int = 0
    collect: int = 1
    chains: int = 2
    batch_size: int = 256
    scan: str = "fixed"
    start: dict | RidgeStart | None = dataclasses.field(default_factory=lambda: {
        "kind": "off", "threshold": 0.5, "ridge": 0.01, "iterations": 20})
    chain_orders: str = "permuted"
    keep_chains: bool = False
    keep_draws: bool = False

    def __post_init__(self):
        if int(self.chains) < 1:
            raise ValueError(f"chains must be >= 1, got {self.chains}")
        if self.chain_orders not in ("permuted", "same"):
            raise ValueError(f"chain_orders must be 'permuted' or 'same', got {self.chain_orders!r}")

    @property
    def ridge_start(self) -> RidgeStart | None:
        return RidgeStart.from_config(self.start) if isinstance(self.start, dict) else self.start

    @property
    def schedule(self) -> Schedule:
        """Each chain's schedule: burn-in, then one draw a sweep."""
        return Schedule(burn_in=int(self.burn_in), collect=int(self.collect))

    @property
    def sweeps(self) -> int:
        return self.schedule.total


@options("dataset.inpaint", other={
    "n_images": "the rule script picks the images",
    "mask": "the rule script draws the mask (dgdm_tf.topdown.chain.missing_mask)",
    "fraction": "the mask's (missing_mask)", "block": "the mask's (missing_mask)"},
    library_only={"chains": "one chain reconstructs (TopdownOptions.chains)",
                  "chain_orders": "as TopdownOptions'", "keep_chains": "as TopdownOptions'",
                  "keep_draws": "as TopdownOptions'"})
class InpaintOptions(TopdownOptions):
    """The options of :class:`TopdownOptions` with the inpainting block's defaults."""
    burn_in: int = 8
    collect: int = 8
    chains: int = 1
    batch_size: int = 100
    scan: str = "random"
    start: dict | RidgeStart | None = dataclasses.field(default_factory=lambda: {
        "kind": "ridge", "threshold": 0.1, "ridge": 0.01, "iterations": 20})
