"""The files one workflow rule hands to another: their npz keys, shapes and dtypes.

Each kind of file has a writer ``write_<kind>(path, ...)`` and a reader
``read_<kind>(path)`` returning a frozen dataclass; the workflow scripts call these and
never spell out an npz key. The writers keep exactly the ``save_npz`` calls the scripts
made before (keys in the same order, the same dtypes, compressed), written atomically
(:mod:`dgdm_tf.io.atomic`); numpy's npz carries no time stamps, so equal arrays give
equal bytes. ``numpy.savez`` converts each value with ``np.asanyarray``; where a writer
below gives no dtype, the caller's array is stored as it is.

A reader of a missing or malformed file raises :class:`ArtifactError` naming the file
and the rule that writes it. The prepared data set (``results/{ds}/data/prepared.npz``)
is :func:`dgdm_tf.data.load_prepared`'s, not this module's.

Shapes: ``p`` a layer's dictionary size, ``C`` its input channels, ``K`` its elements,
``N`` images, ``F`` top-layer features, ``L`` layers, ``S`` kept samples, ``n_cls`` classes.
"""

from __future__ import annotations

import contextlib
import json
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from dgdm_tf.io import atomic as atomic_io
from dgdm_tf.io.npz_files import NpzFormatError, open_npz

#: the rule that writes each method's features.npz (its folder's name)
FEATURE_RULES = {"pretrained_svm": "features", "pretrained_block_svm": "block_features",
                 "encoder_svm": "encoder_features", "unsupervised_svm": "topdown_features",
                 "imagenet_transfer": "transfer"}


class ArtifactError(ValueError):
    """A file one rule hands to another is malformed (or, as the subclass, missing)."""


class MissingArtifactError(ArtifactError, FileNotFoundError):
    """A file one rule hands to another does not exist."""


class _ChainOutput:
    """What a chain's output file derives from its fields ``gamma_e``, ``wall_seconds``
    and ``chain_seconds``."""

    @property
    def gamma_e_mean(self) -> float:
        """Mean noise precision over the images (where the next chains start)."""
        return float(np.mean(self.gamma_e))

    @property
    def seconds(self) -> float:
        """The step's time: the script's, or the chain's own clock over resumptions."""
        return max(self.wall_seconds, self.chain_seconds)


class _ModelOutput(_ChainOutput):
    """A top-down model's file: its dictionaries ``D``, one per layer."""

    @property
    def n_layers(self) -> int:
        return len(self.D)


class _Npz:
    """An open npz whose missing or unreadable key is an :class:`ArtifactError`."""

    def __init__(self, z, path: str, rule: str):
        self.z, self.path, self.rule = z, path, rule

    def fail(self, what: str) -> ArtifactError:
        return ArtifactError(f"{self.path} {what}: rerun `snakemake --force {self.path}` "
                             f"(rule {self.rule} writes it)")

    def __contains__(self, key: str) -> bool:
        return key in self.z.files

    def __getitem__(self, key: str) -> np.ndarray:
        if key not in self.z.files:
            raise self.fail(f"has no '{key}'")
        try:
            return self.z[key]
        except (ValueError, OSError, EOFError, zlib.error, zipfile.BadZipFile) as exc:
            raise self.fail(f"has an unreadable '{key}' ({exc})") from exc

    def text(self, key: str, *absent) -> Any:
        """A JSON string stored as a 0-d array, decoded (``absent[0]`` if given and no key)."""
        if absent and key not in self:
            return absent[0]
        try:
            return json.loads(self[key].item())
        except (ValueError, AttributeError) as exc:
            raise self.fail(f"has no JSON in '{key}' ({exc})") from exc

    def arrays(self, prefix: str, n: int, dtype=None) -> list[np.ndarray]:
        """``prefix1`` .. ``prefix{n}`` (as ``dtype`` if given)."""
        keys = [f"{prefix}{l + 1}" for l in range(n)]
        return [self[k] if dtype is None else np.asarray(self[k], dtype) for k in keys]


@contextlib.contextmanager
def _open(path, rule: str) -> Iterator[_Npz]:
    path = str(path)
    if not Path(path).is_file():
        raise MissingArtifactError(f"{path} is missing: run `snakemake {path}` "
                                   f"(rule {rule} writes it)")
    try:
        z = open_npz(path)
    except NpzFormatError as exc:
        raise ArtifactError(f"{path} {exc.problem}: rerun `snakemake --force {path}` "
                            f"(rule {rule} writes it)") from exc
    except OSError as exc:
        raise ArtifactError(f"{path} cannot be read ({exc}): rerun `snakemake --force {path}` "
                            f"(rule {rule} writes it)") from exc
    with z:
        yield _Npz(z, path, rule)


def _json(obj: Any) -> np.ndarray:
    return np.array(json.dumps(obj))


# --- a pretrained layer: results/{ds}/pretrain/layer{l}.npz, rule pretrain_layer ----------

@dataclass(frozen=True, eq=False)
class PretrainedLayer(_ChainOutput):
    """One layer's pretraining (rule ``pretrain_layer``), as read back.

    D: (p, p, C, K) float32, the collection average of the kept dictionary elements;
    kept: (K,) int64, which of the ``n_dict`` elements were kept; usage: (K,) float32,
    each kept element's share of active blocks; gamma_e: (N,) float32, each input's noise
    precision; gamma_w: float (stored 0-d float32); x_next: (N, H', W', K) float32, the
    pooled posterior-mean features (the next layer's input; None unless asked for);
    image_indices: (N,) int64, layer 1's rows of x_train (None for l > 1); activity_ink:
    float64 correlation of x_next's activity with its input's ink; sweeps, n_input: int;
    chain_seconds, wall_seconds: float; layer_config, pretrain_config: the configs (JSON).
    """

    D: np.ndarray
    kept: np.ndarray
    usage: np.ndarray
    gamma_e: np.ndarray
    gamma_w: float
    activity_ink: float
    sweeps: int
    chain_seconds: float
    wall_seconds: float
    n_input: int
    layer_config: dict
    pretrain_config: dict
    image_indices: np.ndarray | None = None
    x_next: np.ndarray | None = None


def write_pretrained_layer(path, layer: PretrainedLayer) -> None:
    """Write a :class:`PretrainedLayer` (its ``x_next`` required; ``image_indices`` for
    layer 1 only)."""
    if layer.x_next is None:
        raise ValueError(f"{path}: a pretrained layer is written with its x_next (the next "
                         "layer's input)")
    extra = {} if layer.image_indices is None else {"image_indices": layer.image_indices}
    atomic_io.save_npz(
        path,
        activity_ink=np.float64(layer.activity_ink),
        D=np.asarray(layer.D, dtype=np.float32),
        kept=np.asarray(layer.kept),
        usage=np.asarray(layer.usage),
        x_next=np.asarray(layer.x_next, dtype=np.float32),
        gamma_e=np.asarray(layer.gamma_e),
        gamma_w=np.asarray(layer.gamma_w),
        sweeps=np.int64(layer.sweeps),
        chain_seconds=np.float64(layer.chain_seconds),
        wall_seconds=np.float64(layer.wall_seconds),
        n_input=np.int64(layer.n_input),
        layer_config=_json(layer.layer_config),
        pretrain_config=_json(layer.pretrain_config),
        **extra,
    )


def read_pretrained_layer(path, *, x_next: bool = False) -> PretrainedLayer:
    """A :class:`PretrainedLayer`; its (large) ``x_next`` only with ``x_next=True``."""
    with _open(path, "pretrain_layer") as z:
        return PretrainedLayer(
            D=np.asarray(z["D"], np.float32), kept=z["kept"], usage=z["usage"],
            gamma_e=z["gamma_e"], gamma_w=float(z["gamma_w"]),
            activity_ink=float(z["activity_ink"]), sweeps=int(z["sweeps"]),
            chain_seconds=float(z["chain_seconds"]), wall_seconds=float(z["wall_seconds"]),
            n_input=int(z["n_input"]), layer_config=z.text("layer_config"),
            pretrain_config=z.text("pretrain_config"),
            image_indices=z["image_indices"] if "image_indices" in z else None,
            x_next=z["x_next"] if x_next else None)


# --- features of a train / test subset: results/{ds}/{method}/features.npz ----------------

@dataclass(frozen=True, eq=False)
class FeatureSplit:
    """One split's features: f (N, F) (float32 from features / topdown_features; as the
    encoder / block posterior give them otherwise), y (N,) int64 labels, idx (N,) int64
    rows of the prepared split (None in the transfer features)."""

    f: np.ndarray
    y: np.ndarray
    idx: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class Features:
    """A method's features.npz (rules features, block_features, encoder_features,
    topdown_features): the train and test splits, n_classes (int; stored int64),
    wall_seconds (float; stored float64) and the rule's config (JSON)."""

    train: FeatureSplit
    test: FeatureSplit
    n_classes: int
    wall_seconds: float
    config: dict


def write_features(path, train: FeatureSplit, test: FeatureSplit, *, n_classes: int,
                   wall_seconds: float, config: dict) -> None:
    """Write a :class:`Features` (keys f_train, y_train, idx_train, f_test, y_test,
    idx_test, n_classes, wall_seconds, features_config)."""
    if train.idx is None or test.idx is None:
        raise ValueError(f"{path}: a features file keeps each split's idx (rows of the split)")
    atomic_io.save_npz(path, f_train=train.f, y_train=train.y, idx_train=train.idx,
                       f_test=test.f, y_test=test.y, idx_test=test.idx,
                       n_classes=np.int64(n_classes), wall_seconds=np.float64(wall_seconds),
                       features_config=_json(config))


def _rule_of_features(path) -> str:
    return FEATURE_RULES.get(Path(path).parent.name, "the method's features rule")


def read_features(path) -> Features:
    """A :class:`Features`, the arrays as stored."""
    with _open(path, _rule_of_features(path)) as z:
        split = {s: FeatureSplit(z[f"f_{s}"], z[f"y_{s}"], z[f"idx_{s}"]) for s in ("train", "test")}
        return Features(**split, n_classes=int(z["n_classes"]),
                        wall_seconds=float(z["wall_seconds"]), config=z.text("features_config"))


def write_transfer_features(path, train: FeatureSplit, test: FeatureSplit) -> None:
    """Rule transfer's features.npz: f_train, y_train, f_test, y_test, as given (the
    subsets are the splits' first images, so no idx)."""
    atomic_io.save_npz(path, f_train=train.f, y_train=train.y, f_test=test.f, y_test=test.y)


def read_transfer_features(path) -> tuple[FeatureSplit, FeatureSplit]:
    """(train, test) of :func:`write_transfer_features`, idx None."""
    with _open(path, "transfer") as z:
        return tuple(FeatureSplit(z[f"f_{s}"], z[f"y_{s}"]) for s in ("train", "test"))


# --- the refined top-down model: results/{ds}/refine/model.npz, rule refine ---------------

@dataclass(frozen=True, eq=False)
class RefinedModel(_ModelOutput):
    """The jointly refined model (rule ``refine``).

    D: L arrays (p, p, C, K) float32; theta: L-1 arrays (K, p*p+1) float32, the lower
    layers' state frequencies; gamma_s: float (stored float64); gamma_e: (N,) float32;
    on_rate: (K_top,) float32; image_indices: (N,) int64 rows of x_train; sweeps: int;
    chain_seconds, wall_seconds: float; config: the refine config; layers: the layer
    configs (JSON); settlement: the chains' diagnostics (JSON; None in an older file).
    """

    D: list
    theta: list
    gamma_s: float
    gamma_e: np.ndarray
    on_rate: np.ndarray
    image_indices: np.ndarray
    sweeps: int
    chain_seconds: float
    wall_seconds: float
    config: dict
    layers: list
    settlement: dict | None = None


def write_refined_model(path, model: RefinedModel) -> None:
    """Write a :class:`RefinedModel` (keys D1.., theta1.., n_layers, gamma_s, gamma_e,
    on_rate, image_indices, sweeps, chain_seconds, wall_seconds, refine_config, layers,
    settlement); D, theta, gamma_e, on_rate, image_indices as given."""
    m = model
    arrs = {f"D{l + 1}": d for l, d in enumerate(m.D)}
    arrs.update({f"theta{l + 1}": t for l, t in enumerate(m.theta)})
    atomic_io.save_npz(
        path, **arrs, n_layers=np.int64(len(m.D)), gamma_s=np.float64(m.gamma_s),
        gamma_e=m.gamma_e, on_rate=m.on_rate, image_indices=m.image_indices,
        sweeps=np.int64(m.sweeps), chain_seconds=np.float64(m.chain_seconds),
        wall_seconds=np.float64(m.wall_seconds), refine_config=_json(m.config),
        layers=_json(m.layers), settlement=_json(m.settlement))


def read_refined_model(path) -> RefinedModel:
    """A :class:`RefinedModel`; D as float32."""
    with _open(path, "refine") as z:
        n = int(z["n_layers"])
        return RefinedModel(
            D=z.arrays("D", n, np.float32), theta=z.arrays("theta", n - 1, None),
            gamma_s=float(z["gamma_s"]), gamma_e=z["gamma_e"], on_rate=z["on_rate"],
            image_indices=z["image_indices"], sweeps=int(z["sweeps"]),
            chain_seconds=float(z["chain_seconds"]), wall_seconds=float(z["wall_seconds"]),
            config=z.text("refine_config"), layers=z.text("layers"), settlement=z.text("settlement", None))


# --- the supervised model: results/{ds}/supervised/model.npz, rule supervised -------------

@dataclass(frozen=True, eq=False)
class SupervisedModel(_ModelOutput):
    """The supervised model (rule ``supervised``): the refined model's fields plus the
    collected models and the SVM.

    D: L arrays (p, p, C, K) float32 (collection average); samples_D: L arrays
    (S, p, p, C, K) float32, the kept models' dictionaries; theta: L-1 arrays;
    samples_beta: (S, n_cls, F+1) the kept models' SVM weights; svm_mean, svm_std: (F,)
    the features' standardisation; n_classes: int; gamma_s: float; gamma_e: (N,);
    on_rate: (K_top,); image_indices: (N,) int64; labels: (N,) int64;
    train_error_pct, chain_seconds, wall_seconds: float; sweeps: int; config, layers, settlement (JSON).
    """

    D: list
    samples_D: list
    theta: list
    samples_beta: np.ndarray
    svm_mean: np.ndarray
    svm_std: np.ndarray
    n_classes: int
    gamma_s: float
    gamma_e: np.ndarray
    on_rate: np.ndarray
    image_indices: np.ndarray
    labels: np.ndarray
    train_error_pct: float
    sweeps: int
    chain_seconds: float
    wall_seconds: float
    config: dict
    layers: list
    settlement: dict | None = None


def write_supervised_model(path, model: SupervisedModel) -> None:
    """Write a :class:`SupervisedModel` (keys D1.., samples_D1.., theta1.., n_layers,
    samples_beta, svm_mean, svm_std, n_classes, gamma_s, gamma_e, on_rate, image_indices,
    labels, train_error_pct, sweeps, chain_seconds, wall_seconds, supervised_config,
    layers, settlement); the arrays as given."""
    m = model
    arrs = {f"D{l + 1}": v for l, v in enumerate(m.D)}
    arrs.update({f"samples_D{l + 1}": v for l, v in enumerate(m.samples_D)})
    arrs.update({f"theta{l + 1}": t for l, t in enumerate(m.theta)})
    atomic_io.save_npz(
        path, **arrs, n_layers=np.int64(len(m.D)),
        samples_beta=m.samples_beta, svm_mean=m.svm_mean, svm_std=m.svm_std,
        n_classes=np.int64(m.n_classes), gamma_s=np.float64(m.gamma_s), gamma_e=m.gamma_e,
        on_rate=m.on_rate, image_indices=m.image_indices, labels=m.labels,
        train_error_pct=np.float64(m.train_error_pct), sweeps=np.int64(m.sweeps),
        chain_seconds=np.float64(m.chain_seconds), wall_seconds=np.float64(m.wall_seconds),
        supervised_config=_json(m.config), layers=_json(m.layers),
        settlement=_json(m.settlement))


def read_supervised_model(path) -> SupervisedModel:
    """A :class:`SupervisedModel`; D and samples_D as float32."""
    with _open(path, "supervised") as z:
        n = int(z["n_layers"])
        return SupervisedModel(
            D=z.arrays("D", n, np.float32), samples_D=z.arrays("samples_D", n, np.float32),
            theta=z.arrays("theta", n - 1, None), samples_beta=z["samples_beta"],
            svm_mean=z["svm_mean"], svm_std=z["svm_std"], n_classes=int(z["n_classes"]),
            gamma_s=float(z["gamma_s"]), gamma_e=z["gamma_e"], on_rate=z["on_rate"],
            image_indices=z["image_indices"], labels=z["labels"],
            train_error_pct=float(z["train_error_pct"]), sweeps=int(z["sweeps"]),
            chain_seconds=float(z["chain_seconds"]), wall_seconds=float(z["wall_seconds"]),
            config=z.text("supervised_config"), layers=z.text("layers"), settlement=z.text("settlement", None))


# --- the MCEM estimate: results/{ds}/mcem/model.npz, rule mcem_train ----------------------

@dataclass(frozen=True, eq=False)
class McemModel:
    """Stochastic MCEM's estimate of the supervised model (rule ``mcem_train``).

    D: L arrays (p, p, C, K) as trained (float32); beta: (n_cls, F+1); mean, std: (F,)
    the features' standardisation; n_total: training images; n_classes: int;
    image_shape: (H, W, C); train_seconds, wall_seconds: float. The scalars are stored
    as ``np.array`` of the Python value (int64 / float64).
    """

    D: list
    beta: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    n_total: int
    n_classes: int
    image_shape: tuple
    train_seconds: float
    wall_seconds: float

    @property
    def n_layers(self) -> int:
        return len(self.D)


def write_mcem_model(path, model: McemModel) -> None:
    """Write a :class:`McemModel` (keys D1.., beta, mean, std, n_layers, n_total,
    n_classes, image_shape, train_seconds, wall_seconds)."""
    m = model
    atomic_io.save_npz(path, **{f"D{l + 1}": d for l, d in enumerate(m.D)},
                       beta=m.beta, mean=m.mean, std=m.std,
                       n_layers=np.array(len(m.D)), n_total=np.array(m.n_total),
                       n_classes=np.array(m.n_classes), image_shape=np.array(m.image_shape),
                       train_seconds=np.array(m.train_seconds),
                       wall_seconds=np.array(m.wall_seconds))


def read_mcem_model(path) -> McemModel:
    """A :class:`McemModel`, the arrays as stored."""
    with _open(path, "mcem_train") as z:
        return McemModel(
            D=z.arrays("D", int(z["n_layers"])), beta=z["beta"], mean=z["mean"], std=z["std"],
            n_total=int(z["n_total"]), n_classes=int(z["n_classes"]),
            image_shape=tuple(int(v) for v in z["image_shape"]),
            train_seconds=float(z["train_seconds"]), wall_seconds=float(z["wall_seconds"]))


# --- model averaging's samples: results/{ds}/mcem/averaging_samples.npz, rule mcem_average

@dataclass(frozen=True, eq=False)
class McemSamples:
    """Posterior samples of (D, beta) from the MCEM estimate (rule ``mcem_average``).

    D: S lists of L arrays (p, p, C, K); beta: (S, n_cls, F+1); mean, std: (F,) the MCEM
    estimate's standardisation; n_layers: int; hmc_accept_mean: (L,) mean HMC acceptance
    per layer; wall_seconds: float.
    """

    D: list
    beta: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    n_layers: int
    hmc_accept_mean: np.ndarray
    wall_seconds: float

    @property
    def n_samples(self) -> int:
        return len(self.D)

    def models(self) -> list[tuple[list, np.ndarray]]:
        """[(sample k's dictionaries, its beta)] for every sample k."""
        return [(self.D[k], self.beta[k]) for k in range(self.n_samples)]


def write_mcem_samples(path, *, D: Sequence[Sequence], beta, mean, std, n_layers: int,
                       hmc_accept_mean, wall_seconds: float) -> None:
    """Write a :class:`McemSamples` (keys sample{k}_D{l}.., beta, mean, std, n_samples,
    n_layers, hmc_accept_mean, wall_seconds)."""
    atomic_io.save_npz(path,
                       **{f"sample{k}_D{l + 1}": d
                          for k, ds_ in enumerate(D) for l, d in enumerate(ds_)},
                       beta=beta, mean=mean, std=std,
                       n_samples=np.array(len(D)), n_layers=np.array(n_layers),
                       hmc_accept_mean=hmc_accept_mean, wall_seconds=np.array(wall_seconds))


def read_mcem_samples(path) -> McemSamples:
    """A :class:`McemSamples`, the arrays as stored."""
    with _open(path, "mcem_average") as z:
        n_layers = int(z["n_layers"])
        return McemSamples(
            D=[z.arrays(f"sample{k}_D", n_layers) for k in range(int(z["n_samples"]))],
            beta=z["beta"], mean=z["mean"], std=z["std"], n_layers=n_layers,
            hmc_accept_mean=z["hmc_accept_mean"], wall_seconds=float(z["wall_seconds"]))


def upstream_seconds(summary, layers: Sequence[PretrainedLayer] = (),
                     refine: RefinedModel | None = None) -> dict[str, float]:
    """The wall seconds of the rules a row's metrics.json counts before its own, by rule:
    'prepare' (the data summary.json ``summary``), 'pretrain_layer<i>' for each pretrained
    layer (as read: the caller reads them once for its other fields too), and 'refine'
    when a refined model is given. A resumed chain's seconds are its own clock's where
    that covers more than the last attempt's script time."""
    with open(summary) as f:
        by_step = {"prepare": float(json.load(f).get("seconds", 0.0))}
    for i, layer in enumerate(layers, start=1):
        by_step[f"pretrain_layer{i}"] = layer.seconds
    if refine is not None:
        by_step["refine"] = refine.seconds
    return by_step
