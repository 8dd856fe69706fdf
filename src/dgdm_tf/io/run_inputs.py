"""A finished run's inputs as a probe (``experiments/``) reads them back: the config block
of the run's data set and its pretrained model, given the run's ``results/<dataset>``
folder.

A probe reruns part of a rule on the rule's own inputs, so it must read the same config
block and the same pretrained layers the rule read; reading them in one place keeps every
probe's "the run's model" the same model.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from dgdm_tf.io import artifacts


@dataclass(frozen=True, eq=False)
class RunConfig:
    """The config a run's ``results/<dataset>`` was made with.

    results: the folder; dataset: its name (the folder's, a key of ``datasets``); config:
    the whole config; block: ``config["datasets"][dataset]``; seed: the run's seed.
    """

    results: Path
    dataset: str
    config: dict[str, Any]
    block: dict[str, Any]
    seed: int

    @property
    def layers(self) -> list[dict[str, Any]]:
        """The block's ``model.layers``, bottom up."""
        return self.block["model"]["layers"]


def read_run_config(results: str | os.PathLike, config: str | os.PathLike | None = None) -> RunConfig:
    """The :class:`RunConfig` of ``results`` (``results/<dataset>``) under ``config``.

    ``config`` None: ``<results>/../../config/config.yaml``, the repository's default
    config when ``results`` is the workflow's own ``results/<dataset>``. A data set the
    config does not define raises ``KeyError`` naming the config's data sets.
    """
    root = Path(results)
    path = Path(config) if config is not None else root.resolve().parents[1] / "config" / "config.yaml"
    full = yaml.safe_load(path.read_text())
    datasets = full.get("datasets") or {}
    if root.name not in datasets:
        raise KeyError(f"{root}: data set {root.name!r} is not in {path} (it has {sorted(datasets)})")
    return RunConfig(results=root, dataset=root.name, config=full, block=datasets[root.name],
                     seed=int(full["seed"]))


@dataclass(frozen=True, eq=False)
class PretrainedModel:
    """A run's pretrained layers as the top-down rules start from them.

    dictionaries: L arrays (p, p, C, K) float32, bottom up; gamma_s: the top layer's slab
    precision gamma_w, the start of gamma_s (the top layer's spike-and-slab prior: a
    unit on has its weight from N(0, 1 / gamma_s)); gamma_e: layer 1's mean noise
    precision, the start of gamma_e (the precision of Eq. 1's noise on the image).
    """

    dictionaries: list[np.ndarray]
    gamma_s: float
    gamma_e: float


def read_pretrained_model(results: str | os.PathLike, n_layers: int) -> PretrainedModel:
    """The :class:`PretrainedModel` of ``<results>/pretrain/layer{1..n_layers}.npz``
    (rule ``pretrain_layer``), read as the rules that start from it read it."""
    root = Path(results)
    layers = [artifacts.read_pretrained_layer(root / "pretrain" / f"layer{l + 1}.npz")
              for l in range(n_layers)]
    return PretrainedModel(dictionaries=[z.D for z in layers], gamma_s=float(layers[-1].gamma_w),
                           gamma_e=float(layers[0].gamma_e_mean))
