"""Options of the MCEM entry points (:mod:`dgdm_tf.core.options`): test-time Algorithm 2
(:func:`dgdm_tf.mcem.test_time.infer_map`; config blocks ``mcem_predict``,
``topdown_features.alg2``, ``supervised.predict``), stochastic MCEM
(:func:`dgdm_tf.mcem.stochastic.train`, block ``mcem``) and model averaging
(:func:`dgdm_tf.mcem.averaging.run_averaging`, block ``averaging``), and the model they
train or sample from."""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

import numpy as np

from dgdm_tf.core.options import options
from dgdm_tf.mcmc.driver import Schedule
from dgdm_tf.supervised.joint_svm import SvmHyper
from dgdm_tf.topdown.options import TopdownOptions


@options("dataset.mcem_predict", other={
    "n_test": "the rule script picks the images", "chunk": "the rule script's chunks of test images"},
    library_only={"tol": "stop an image once its Q changes by at most tol of itself; 0: run every iteration",
                  "scan": "the sweeps' and E-steps' visiting order: the mcem block's scan"})
class MapOptions:
    """The test-time MCEM of :func:`dgdm_tf.mcem.test_time.infer_map` (Algorithm 2)."""
    burn_in: int = 2
    iterations: int = 4
    batch_size: int = 64
    rmsprop_lr: float = 0.001
    rmsprop_decay: float = 0.95
    rmsprop_steps: int = 1
    tol: float = 0.0
    scan: str = "random"

    def __post_init__(self):
        if self.burn_in < 0 or self.iterations < 1 or self.batch_size < 1 or self.tol < 0:
            raise ValueError("need burn_in >= 0, iterations >= 1, batch_size >= 1 and tol >= 0, got "
                             f"{self.burn_in}, {self.iterations}, {self.batch_size}, {self.tol}")


def _map_options(block, iterations: int) -> MapOptions:
    """:class:`MapOptions` of another block's Algorithm 2 settings (burn_in, batch_size,
    tol, rmsprop_*, scan), at most ``iterations`` an image."""
    return MapOptions(burn_in=int(block.burn_in), iterations=int(iterations),
                      batch_size=int(block.batch_size), rmsprop_lr=float(block.rmsprop_lr),
                      rmsprop_decay=float(block.rmsprop_decay), rmsprop_steps=int(block.rmsprop_steps),
                      tol=float(block.tol), scan=block.scan)


@options("dataset.transfer", other={
    "source": "the rule reads that dataset's MCEM model", "image_size": "the rule script prepares "
    "the target images at this size", "n_train": "the rule script picks the images",
    "n_test": "the rule script picks the images"},
    library_only={"scan": "the source's mcem block's scan (the rule passes it)"})
class TransferOptions:
    """``map``: these as :class:`MapOptions` (Algorithm 2's other settings its defaults)."""
    burn_in: int = 2
    iterations: int = 4
    batch_size: int = 32
    scan: str = "random"

    @property
    def map(self) -> MapOptions:
        return MapOptions(burn_in=self.burn_in, iterations=self.iterations,
                          batch_size=self.batch_size, scan=self.scan)


@options("dataset.topdown_features.alg2", library_only={
    "scan": "the topdown_features block's scan (topdown_route sets it)"})
class Alg2Options:
    """``map``: these as :class:`MapOptions` (``max_iterations`` its ``iterations``)."""
    burn_in: int = 1
    max_iterations: int = 1
    tol: float = 0.01
    batch_size: int = 256
    rmsprop_lr: float = 0.001
    rmsprop_decay: float = 0.95
    rmsprop_steps: int = 1
    scan: str = "fixed"

    @property
    def map(self) -> MapOptions:
        return _map_options(self, self.max_iterations)


def topdown_route(block: Mapping | None) -> MapOptions | TopdownOptions:
    """The options of a `topdown_features` block's route (every key checked): route alg2,
    Algorithm 2 (:class:`MapOptions` of its `alg2` block, the block's scan); route chain,
    the chain (:class:`dgdm_tf.topdown.options.TopdownOptions`)."""
    block = dict(block or {})
    chain = TopdownOptions.from_config(block)
    route = block.get("route", "alg2")
    if route == "chain":
        return chain
    if route != "alg2":
        raise ValueError(f"topdown_features.route must be 'alg2' or 'chain', got {route!r}")
    return dataclasses.replace(Alg2Options.from_config(block.get("alg2")), scan=chain.scan).map


@options("dataset.supervised.predict", name="supervised.predict", other={
    "models": "the supervised chain's (dgdm_tf.topdown.options.SupervisedOptions.keep_models)",
    "mismatch_images": "the rule script's check"},
    library_only={"scan": "the supervised block's scan (from_supervised sets it)"})
class PredictOptions:
    """``route``: the test route's own options, :class:`MapOptions` (``features`` mcem)
    or :class:`dgdm_tf.topdown.options.TopdownOptions` (gibbs: every top unit starts off)."""
    features: str = "mcem"
    burn_in: int = 1
    collect: int = 1
    chains: int = 1
    iterations: int = 1
    tol: float = 0.01
    batch_size: int = 128
    rmsprop_lr: float = 0.001
    rmsprop_decay: float = 0.95
    rmsprop_steps: int = 1
    scan: str = "fixed"

    def __post_init__(self):
        if self.features not in ("mcem", "gibbs"):
            raise ValueError(f"supervised.predict.features must be 'mcem' or 'gibbs', got {self.features!r}")

    @classmethod
    def from_supervised(cls, block: Mapping) -> "PredictOptions":
        """The options of a `supervised` block's `predict`, with the block's scan."""
        return dataclasses.replace(cls.from_config(block.get("predict")), scan=block["scan"])

    @property
    def route(self) -> MapOptions | TopdownOptions:
        if self.features == "mcem":
            return _map_options(self, self.iterations)
        return TopdownOptions(burn_in=int(self.burn_in), collect=int(self.collect),
                              chains=int(self.chains), batch_size=int(self.batch_size),
                              scan=self.scan, start=None)


@dataclasses.dataclass(frozen=True)
class McemStart:
    """The model stochastic MCEM trains or model averaging samples: the layers' settings
    (config `model.layers`), the hyperparameters (config `hyper`; None: the defaults), and
    where it starts: ``dictionaries`` (bottom first; None: a draw from the prior, times
    ``prior_scale``), with the SVM's ``beta`` (C, F+1) and its standardisation ``mean``,
    ``std`` of the top layer (model averaging starts from a supervised MCEM result)."""
    layers: Sequence[dict]
    hyper: dict | None = None
    dictionaries: Sequence[np.ndarray] | None = None
    beta: np.ndarray | None = None
    mean: np.ndarray | None = None
    std: np.ndarray | None = None

    @property
    def model_layers(self) -> list[dict]:
        """``layers`` with each ``n_dict`` taken from its starting dictionary's atoms (K,
        the last axis), where one is given: pretraining prunes unused atoms, so a
        pretrained layer may hold fewer than its config's ``n_dict``."""
        if self.dictionaries is None:
            return [dict(lay) for lay in self.layers]
        if len(self.dictionaries) != len(self.layers):
            raise ValueError(f"{len(self.dictionaries)} starting dictionaries for "
                             f"{len(self.layers)} layers: give one a layer, bottom first")
        return [dict(lay, n_dict=int(np.shape(d)[-1])) for lay, d in zip(self.layers, self.dictionaries)]


@options("dataset.mcem", other={
    "keep_checkpoints": "the rule script removes the folder",
    "distribute": "the rule script picks the devices"})
class McemOptions:
    """``batch_size`` is the mini-batch source's (the rule's
    :class:`dgdm_tf.data.minibatches.McemData`, :func:`dgdm_tf.mcem.stochastic.run_mcem`'s
    own); ``svm_hyper``: ``svm`` as :class:`dgdm_tf.supervised.joint_svm.SvmHyper`. The SVM
    is trained when the mini-batches have labels."""
    batch_size: int = 64
    iterations: int = 200
    sweeps: int = 3
    n_samples: int = 1
    lr: float = 0.01
    decay: float = 0.95
    gamma_s: float = 1.0
    prior_scale: float = 1.0
    supervise_from: int = 0
    beta_step_power: float = 0.7
    checkpoint_every: int = 50
    jit_compile: bool = False
    local_state: str = "restart"
    scan: str = "fixed"
    svm: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if self.local_state not in ("restart", "persist"):
            raise ValueError(f"mcem.local_state must be 'restart' or 'persist', got {self.local_state!r}")
        if not 0.5 < float(self.beta_step_power) <= 1.0:
            raise ValueError(f"beta's Robbins-Monro exponent must be in (0.5, 1], got {self.beta_step_power}")

    @property
    def svm_hyper(self) -> SvmHyper:
        return SvmHyper.from_dict(self.svm)


@options("dataset.averaging", other={"keep_checkpoints": "the rule script removes the folder"},
         library_only={"gamma_s": "the mcem block's gamma_s (from_blocks sets it)",
                       "svm": "the mcem block's svm", "scan": "the mcem block's scan"})
class AveragingOptions:
    """``batch_size`` (None: mcem.batch_size) is the mini-batch source's; ``total``:
    keep x thin iterations; ``svm_hyper``: ``svm`` as
    :class:`dgdm_tf.supervised.joint_svm.SvmHyper`."""
    keep: int = 20
    thin: int = 10
    sweeps: int = 3
    batch_size: int | None = None
    n_leapfrog: int = 10
    power_iterations: int = 3
    checkpoint_every: int = 50
    gamma_s: float = 1.0
    svm: dict = dataclasses.field(default_factory=dict)
    scan: str = "fixed"

    def __post_init__(self):
        if int(self.keep) < 1 or int(self.thin) < 1:
            raise ValueError(f"need keep >= 1 and thin >= 1, got {self.keep}, {self.thin}")

    @classmethod
    def from_blocks(cls, averaging: Mapping | None, mcem: Mapping) -> "AveragingOptions":
        """The options of an `averaging` block, with the `mcem` block's gamma_s, svm and scan."""
        return dataclasses.replace(cls.from_config(averaging), gamma_s=mcem["gamma_s"],
                                   svm=dict(mcem["svm"]), scan=mcem["scan"])

    @property
    def schedule(self) -> Schedule:
        """``keep`` samples one every ``thin`` iterations, no burn-in (the chain starts
        at MCEM's estimate); HMC's step sizes adapt over the first ``thin``."""
        return Schedule(collect=int(self.keep), thin=int(self.thin), adapt=int(self.thin))

    @property
    def total(self) -> int:
        return self.schedule.total

    @property
    def svm_hyper(self) -> SvmHyper:
        return SvmHyper.from_dict(self.svm)
