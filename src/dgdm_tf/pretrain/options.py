"""Options of the layer-wise chains (:func:`dgdm_tf.pretrain.chain.run_pretrain_layer`,
:func:`dgdm_tf.pretrain.features.infer_features`): the config blocks ``pretrain`` and
``features`` (:mod:`dgdm_tf.core.options`), and the model each chain fits or holds."""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

import numpy as np

from dgdm_tf.core.compiled import per_layer
from dgdm_tf.core.options import options
from dgdm_tf.mcmc.driver import Schedule
from dgdm_tf.pretrain.ridge_start import RidgeStart


@dataclasses.dataclass(frozen=True)
class Layer:
    """The layer a pretraining chain fits: the side of its square dictionary elements,
    the number K of elements to start with and the pooling size (config
    `model.layers[l]`; pool 1: the top layer, whose prior is the spike-and-slab), the
    hyperparameters (config `hyper`; None: the defaults), and where it sits, ``index``
    (0: layer 1) of ``n_layers``, which picks its per-layer switch ``jit_compile``."""
    dict_size: int
    n_dict: int
    pool: int
    hyper: dict | None = None
    index: int = 0
    n_layers: int = 1

    def __post_init__(self):
        for name in ("dict_size", "n_dict", "pool", "index", "n_layers"):
            object.__setattr__(self, name, int(getattr(self, name)))
        if not 0 <= self.index < self.n_layers:
            raise ValueError(f"layer index {self.index} is not one of the {self.n_layers} layers")


@dataclasses.dataclass(frozen=True)
class Pretrained:
    """The pretrained layers a feature chain holds fixed, bottom up: each layer's
    dictionary D (dh, dw, C, K), pooling size and slab precision gamma_w
    (:func:`dgdm_tf.pretrain.chain.run_pretrain_layer`'s 'gamma_w'), the start of its
    chains' gamma_e (e.g. the layer's mean pretrained noise precision: a chain started at
    1 / Var(x_n) turns blocks on only slowly, which short chains cannot afford; None:
    1 / Var(x_n) for every layer), and the hyperparameters (config `hyper`; None: the
    defaults)."""
    dictionaries: Sequence[np.ndarray]
    pools: Sequence[int]
    gamma_ws: Sequence[float]
    gamma_e_inits: Sequence[float | None] | None = None
    hyper: dict | None = None

    def __post_init__(self):
        inits = self.gamma_e_inits
        # zip() would silently drop layers on a short list
        if not (len(self.dictionaries) == len(self.pools) == len(self.gamma_ws)
                == (len(self.dictionaries) if inits is None else len(inits))):
            raise ValueError("one pooling size, gamma_w and gamma_e start per dictionary are "
                             f"needed; got {len(self.dictionaries)} dictionaries, "
                             f"{len(self.pools)} pools, {len(self.gamma_ws)} gamma_w and "
                             f"{'no' if inits is None else len(inits)} gamma_e starts")

    def __len__(self) -> int:
        return len(self.dictionaries)

    def gamma_e_init(self, layer: int) -> float | None:
        return None if self.gamma_e_inits is None else self.gamma_e_inits[layer]


@dataclasses.dataclass(frozen=True, kw_only=True)
class _LayerChain:
    """The settings both blocks share (defaults: pretrain's), their checks and what they
    derive: ``anneal_sweeps``, round(anneal_fraction x burn_in); ``jit_for(l, L)``, layer
    l's flag of the per-layer jit_compile; ``batch_bounds(n)``, the batches of
    ``batch_size`` images."""
    burn_in: int = 15
    collect: int = 20
    batch_size: int | None = None
    jit_compile: bool | str | tuple = "top"
    anneal_fraction: float = 0.0
    anneal_ratio: float = 3000.0
    anneal_start: float = 0.05
    scan: str = "random"
    start: RidgeStart | None = RidgeStart(threshold=0.5, ridge=0.01, iterations=40)

    _INTS = ("burn_in", "collect")  # not fields: the settings held as int, as float
    _FLOATS = ("anneal_fraction", "anneal_ratio", "anneal_start")

    def __post_init__(self):
        def put(name, value):
            object.__setattr__(self, name, value)

        # the config's numbers as the chains took them before the options (the same bits)
        for name in self._INTS:
            put(name, int(getattr(self, name)))
        for name in self._FLOATS:
            put(name, float(getattr(self, name)))
        if self.batch_size is not None:
            put("batch_size", int(self.batch_size))
        if isinstance(self.jit_compile, list):
            put("jit_compile", tuple(self.jit_compile))
        if isinstance(self.start, Mapping):  # the config's block {kind, threshold, ...}
            put("start", RidgeStart.from_config(self.start))
        if self.burn_in < 0 or self.collect < 1:
            raise ValueError(f"need burn_in >= 0 and collect >= 1, got {self.burn_in}, "
                             f"{self.collect}")
        if not 0.0 <= self.anneal_fraction <= 1.0:
            raise ValueError(f"anneal_fraction must be in [0, 1], got {self.anneal_fraction}: "
                             "only burn-in sweeps may run at a tempered likelihood")
        if self.batch_size is not None and self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1 or None, got {self.batch_size}")
        if self.scan not in ("random", "fixed"):
            raise ValueError(f"scan must be 'random' or 'fixed', got {self.scan!r}")

    @property
    def anneal_sweeps(self) -> int:
        """The tempered burn-in sweeps: round(anneal_fraction x burn_in)."""
        return int(round(self.anneal_fraction * self.burn_in))

    def jit_for(self, layer: int, n_layers: int) -> bool:
        """``jit_compile`` of layer ``layer`` (0: layer 1) of ``n_layers``
        (:func:`dgdm_tf.core.compiled.per_layer`)."""
        return per_layer(self.jit_compile, n_layers)[layer]

    def batch_bounds(self, n: int) -> list[tuple[int, int]]:
        """The (first, end) images of each batch of ``n`` (None: one batch)."""
        size = n if self.batch_size is None else self.batch_size
        return [(i, min(i + size, n)) for i in range(0, n, max(size, 1))]


@options("dataset.pretrain", other={
    "n_images": "the rule script picks the images", "keep_checkpoints": "the rule script removes the folder"},
    library_only={"dict_init": "how D starts: 'patches' of the images (the rules'), or "
                               "'prior' draws (the sampler's tests)"})
class PretrainOptions(_LayerChain):
    """Derived: ``sweeps``, burn_in + collect x thin, and those of every layer-wise chain
    (``anneal_sweeps``, ``jit_for``, ``batch_bounds``)."""
    thin: int = 1
    prune_min_usage: float = 0.025
    checkpoint_every: int = 10
    dict_init: str = "patches"

    _INTS = _LayerChain._INTS + ("thin", "checkpoint_every")
    _FLOATS = _LayerChain._FLOATS + ("prune_min_usage",)

    def __post_init__(self):
        super().__post_init__()
        if self.thin < 1:
            raise ValueError(f"need thin >= 1, got {self.thin}")
        if self.prune_min_usage > 0 and self.burn_in == 0:
            raise ValueError("pruning happens at the end of burn-in: with prune_min_usage > 0 "
                             "set burn_in >= 1 (or prune_min_usage: 0)")

    @property
    def schedule(self) -> Schedule:
        """The chain's schedule for the driver: burn-in (its first ``anneal_sweeps``
        tempered), then ``collect`` draws one every ``thin``."""
        return Schedule(burn_in=self.burn_in, collect=self.collect, thin=self.thin,
                        anneal=self.anneal_sweeps)

    @property
    def sweeps(self) -> int:
        """Sweeps of a layer's chain: burn-in, then one every ``thin`` per collected draw."""
        return self.schedule.total


@options("dataset.features", other={
    "route": "the rule script picks the route; these chains are route layerwise's"},
    library_only={"colour_order": "the fixed scan's order of the colours (a, b) of chain 0 "
                                  "of one layer (None: row-major; the tests of the scan order)"})
class FeatureOptions(_LayerChain):
    """Derived: ``sweeps``, burn_in + collect (each chain's), and those of every
    layer-wise chain (``anneal_sweeps``, ``jit_for``, ``batch_bounds``)."""
    burn_in: int = 5
    collect: int = 5
    batch_size: int = 2500
    chains: int = 1
    start: RidgeStart | None = RidgeStart(threshold=0.5, ridge=0.01, iterations=20)
    colour_order: tuple | None = None

    _INTS = _LayerChain._INTS + ("chains",)

    def __post_init__(self):
        super().__post_init__()
        if self.colour_order is not None:
            object.__setattr__(self, "colour_order",
                               tuple((int(a), int(b)) for a, b in self.colour_order))
        if self.batch_size is None:
            raise ValueError("batch_size must be an integer >= 1 for the feature chains")
        if self.chains < 1:
            raise ValueError(f"chains must be at least 1, got {self.chains}")
        if self.scan == "random" and self.colour_order is not None:
            raise ValueError("colour_order is the fixed scan's order: pass scan='fixed' with it")

    @property
    def schedule(self) -> Schedule:
        """Each chain's schedule: burn-in (its first ``anneal_sweeps`` tempered), then
        one draw a sweep."""
        return Schedule(burn_in=self.burn_in, collect=self.collect, anneal=self.anneal_sweeps)

    @property
    def sweeps(self) -> int:
        """Sweeps of each chain: burn-in, then one per collected draw."""
        return self.schedule.total
