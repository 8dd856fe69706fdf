"""The runs a dataset's table reads: which methods it has rows for, which images each of
our rows trains and tests on, which CNN run is its peer, and their ``metrics.json``.

Light (no TensorFlow): the workflow's wiring imports it (``workflow/lib/dgdm_workflow.py``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

from dgdm_tf.report.paper import PAPER_TABLES

#: methods the workflow has rules for (keep in sync with the config schema's enum)
IMPLEMENTED_METHODS: tuple[str, ...] = ("pretrained_svm", "pretrained_block_svm", "encoder_svm",
                                         "unsupervised_svm", "supervised", "cnn", "mcem_map",
                                         "model_averaging", "imagenet_transfer")

#: our rows whose features come from the Gibbs samplers: each gets a "CNN, same images" cell
GIBBS_METHODS: tuple[str, ...] = ("pretrained_svm", "unsupervised_svm", "supervised")
#: the row each other row of a dataset's table is paired with, on the same test images
PAIRED_REFERENCE = "pretrained_svm"
#: the reference row shown under pretrained_svm (dgdm_tf.baselines.encoder)
ENCODER_METHOD = "encoder_svm"
#: the pretrained model's block posteriors given the image alone (dgdm_tf.pretrain.block_posterior)
BLOCK_METHOD = "pretrained_block_svm"
#: the rows of a features rule and the svm rule: the rows a learning curve can refit
#: (dgdm_tf.report.learning_curves; keep in sync with the schema's learning_curve.methods)
CURVE_METHODS: tuple[str, ...] = ("pretrained_svm", BLOCK_METHOD, ENCODER_METHOD, "unsupervised_svm")


def curve_methods(block: Mapping[str, Any]) -> list[str]:
    """The rows on a dataset's learning curve: those of its ``learning_curve.methods``
    that it runs, in that order; none when ``learning_curve.sizes`` is empty."""
    curve = block.get("learning_curve") or {}
    if not curve.get("sizes"):
        return []
    enabled = set(block.get("methods", []) or [])
    return [m for m in curve.get("methods", CURVE_METHODS) if m in enabled]


def row_subsets(block: Mapping[str, Any], method: str) -> dict[str, int | None] | None:
    """Which images a row of ours trains and tests on, as the workflow's scripts pick
    them: the dataset's seeded, stratified ``n_train`` / ``n_test`` subsets of each split
    (``dgdm_tf.data.subsets.shared_subset``), then their first ``own`` images; returned as
    ``{"train": own, "test": own}`` (None = the whole subset). ``pretrained_svm``,
    ``encoder_svm`` and ``cnn``: the whole subsets; ``unsupervised_svm``:
    ``topdown_features.n_train`` / ``n_test``; ``supervised``: ``supervised.n_train`` /
    ``n_test``. None for the other methods (their own data paths)."""
    if method in ("pretrained_svm", BLOCK_METHOD, ENCODER_METHOD, "cnn"):
        return {"train": None, "test": None}
    key = {"unsupervised_svm": "topdown_features", "supervised": "supervised"}.get(method)
    if key is None:
        return None
    sub = block.get(key) or {}
    return {"train": sub.get("n_train"), "test": sub.get("n_test")}


def _whole(own: int | None, size: int | None) -> bool:
    """Is the first ``own`` of a subset of ``size`` (None: all) the whole subset?"""
    return own is None or (size is not None and int(own) >= int(size))


def _peer_run(block: Mapping[str, Any], method: str, peer: str, at: str) -> str | None:
    """The run directory, under ``results/<dataset>/``, of method ``peer`` trained and
    tested on the same images as our Gibbs row ``method``: ``peer`` itself when the row
    uses the dataset's whole ``n_train`` / ``n_test`` subsets (the peer's own images), else
    ``"<at>/<method>"``. None when there is none: the dataset does not run ``peer`` or
    ``method``, or ``method`` is not a Gibbs row."""
    enabled = list(block.get("methods", []) or [])
    if method not in GIBBS_METHODS or method not in enabled or peer not in enabled:
        return None
    own = row_subsets(block, method) or {}
    if all(_whole(own.get(s), block.get(f"n_{s}")) for s in ("train", "test")):
        return peer
    return f"{at}/{method}"


def _peer_runs(block: Mapping[str, Any], peer: str, at: str) -> dict[str, str]:
    out = {}
    for method in GIBBS_METHODS:
        run = _peer_run(block, method, peer, at)
        if run is not None:
            out[method] = run
    return out


def cnn_peer_run(block: Mapping[str, Any], method: str) -> str | None:
    """The same-shape CNN on the images of Gibbs row ``method`` (:func:`_peer_run`):
    ``"cnn"`` or ``"cnn_at/<method>"`` (rule ``cnn_at``), or None."""
    return _peer_run(block, method, "cnn", "cnn_at")


def cnn_peer_runs(block: Mapping[str, Any]) -> dict[str, str]:
    """Gibbs row -> :func:`cnn_peer_run` of every row of ``block`` that has one."""
    return _peer_runs(block, "cnn", "cnn_at")


def reference_peer_run(block: Mapping[str, Any], method: str) -> str | None:
    """The reference row (layer-1 dictionary + soft-threshold encoder + SVM) on the
    images of Gibbs row ``method`` (:func:`_peer_run`): ``"encoder_svm"`` or
    ``"encoder_at/<method>"`` (rules ``encoder_features`` and ``svm`` at the row's
    images), or None where the dataset does not run ``encoder_svm``."""
    return _peer_run(block, method, ENCODER_METHOD, "encoder_at")


def reference_peer_runs(block: Mapping[str, Any]) -> dict[str, str]:
    """Gibbs row -> :func:`reference_peer_run` of every row of ``block`` that has one."""
    return _peer_runs(block, ENCODER_METHOD, "encoder_at")


def metrics_path(results_dir: str | os.PathLike, dataset: str, method: str) -> Path:
    return Path(results_dir) / dataset / method / "metrics.json"


def load_metrics(results_dir: str | os.PathLike, datasets: Mapping[str, Mapping[str, Any]]
                 ) -> dict[tuple[str, str], dict]:
    """The metrics.json of every enabled (dataset, method) that exists."""
    out: dict[tuple[str, str], dict] = {}
    for ds, block in datasets.items():
        for method in block.get("methods", []) or []:
            p = metrics_path(results_dir, ds, method)
            if p.exists():
                out[(ds, method)] = json.loads(p.read_text())
        # the CNN and the reference row at the Gibbs rows' sizes
        for run in [*cnn_peer_runs(block).values(), *reference_peer_runs(block).values()]:
            p = Path(results_dir) / ds / run / "metrics.json"
            if "/" in run and p.exists():
                out[(ds, run)] = json.loads(p.read_text())
        p = Path(results_dir) / ds / "inpainting" / "metrics.json"
        if p.exists():  # missing-data interpolation: a table of its own under the dataset's
            out[(ds, "inpainting")] = json.loads(p.read_text())
    return out


def dataset_methods(block: Mapping[str, Any],
                    implemented: Iterable[str] = IMPLEMENTED_METHODS) -> list[str]:
    """The methods a dataset's table has rows for (its paper table's rows of ours, in
    order), then its enabled and the implemented methods not among them."""
    table = PAPER_TABLES.get(block.get("paper_table") or "")
    rows = [r.method for r in table.rows if r.method] if table is not None else []
    return list(dict.fromkeys(rows + list(block.get("methods", []) or []) + list(implemented)))


def runs_of_dataset(results_dir: str | os.PathLike, ds: str, block: Mapping[str, Any], *,
                    implemented: Iterable[str] = IMPLEMENTED_METHODS
                    ) -> tuple[dict[str, dict], dict[str, str]]:
    """(method -> metrics.json of every enabled run that exists, method -> why there is
    none) over :func:`dataset_methods`, for figures that show what has run."""
    implemented = tuple(implemented)
    enabled = list(block.get("methods", []) or [])
    runs: dict[str, dict] = {}
    missing: dict[str, str] = {}
    for method in dataset_methods(block, implemented):
        p = metrics_path(results_dir, ds, method)
        if method in enabled and p.exists():
            runs[method] = json.loads(p.read_text())
        elif method in enabled:
            missing[method] = f"no {p}"
        elif method in implemented:
            missing[method] = f"not enabled in datasets.{ds}.methods"
        else:
            missing[method] = "not implemented yet"
    return runs, missing
