"""Classify images with collected supervised models (D, beta): each model's top-layer
features of every image given the image alone, then beta_l^T s averaged over the models,
label argmax_l (Sec. 2.3's one-vs-all rule, the decision values averaged over the
collected samples).

The top layer's features come by one of two routes:

* ``mcem``: its MAP by supplement Algorithm 2 (:func:`dgdm_tf.mcem.test_time.infer_map`),
  the paper's test-time procedure;
* ``gibbs``: the Rao-Blackwellised posterior mean E[S[L] | x, D]
  (:func:`dgdm_tf.topdown.chain.infer_topdown`), so beta_l^T E[s | x] is the decision
  value averaged over the posterior of s.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import numpy as np

from dgdm_tf.mcem.options import MapOptions, PredictOptions
from dgdm_tf.mcem.test_time import infer_map, q_trace
from dgdm_tf.supervised.joint_svm import decision_values
from dgdm_tf.topdown.chain import infer_topdown
from dgdm_tf.topdown.options import Start, TopdownOptions


@dataclasses.dataclass
class Classified:
    """``scores`` (N, C): decision values averaged over the models; ``per_model`` each
    model's (N, C); ``q_traces`` each model's mean Q per MCEM iteration (route ``mcem``);
    ``layer1_pooled`` the first model's layer-1 pooled posterior mean (route ``gibbs``:
    the mixing diagnostics read it); ``seconds`` spent inferring features; ``q_sums``,
    ``q_counts`` each model's per-batch Q sums and image counts (route ``mcem``), from
    which :func:`gather_classified` rebuilds ``q_traces``."""
    scores: np.ndarray
    per_model: list
    q_traces: list
    layer1_pooled: np.ndarray | None
    seconds: float
    q_sums: list = dataclasses.field(default_factory=list)
    q_counts: list = dataclasses.field(default_factory=list)

    def arrays(self) -> dict:
        """The fields as arrays, each model's stacked (a shard's file): ``from_arrays``
        reads them back."""
        out = {"scores": self.scores, "per_model": np.stack(self.per_model),
               "q_sums": np.asarray(self.q_sums, np.float64), "seconds": float(self.seconds),
               "q_counts": np.asarray(self.q_counts, np.float64)}
        if self.layer1_pooled is not None:
            out["layer1_pooled"] = self.layer1_pooled
        return out

    @classmethod
    def from_arrays(cls, d: dict) -> "Classified":
        q_sums, q_counts = list(d["q_sums"]), list(d["q_counts"])
        return cls(scores=d["scores"], per_model=list(d["per_model"]),
                   q_traces=[[float(q) for q in q_trace(s, c)] for s, c in zip(q_sums, q_counts)],
                   layer1_pooled=d.get("layer1_pooled"), seconds=float(d["seconds"]),
                   q_sums=q_sums, q_counts=q_counts)


@dataclasses.dataclass(frozen=True)
class KeptModels:
    """Collected supervised models: each one's ``dictionaries`` (per model, bottom first)
    and ``betas`` (per model, (C, F+1)), the SVM's standardisation ``mean``, ``std`` of the
    top layer, and what they share: the layers' settings, the hyperparameters (None: the
    defaults) and the start values of gamma_s and gamma_e (as
    :class:`dgdm_tf.topdown.options.Start`)."""
    dictionaries: Sequence[Sequence[np.ndarray]]
    betas: Sequence[np.ndarray]
    mean: np.ndarray
    std: np.ndarray
    layers: Sequence[dict]
    hyper: dict | None = None
    gamma_s_init: float = 1.0
    gamma_e_init: float | None = None

    @classmethod
    def of_supervised(cls, sup, layers: Sequence[dict], hyper: dict | None) -> "KeptModels":
        """The kept models of a supervised model ``sup``
        (:class:`dgdm_tf.io.artifacts.SupervisedModel`: its gamma_s and gamma_e too)."""
        betas = np.asarray(sup.samples_beta)
        return cls([[v[j] for v in sup.samples_D] for j in range(len(betas))], list(betas),
                   np.asarray(sup.svm_mean), np.asarray(sup.svm_std), layers, hyper,
                   gamma_s_init=sup.gamma_s, gamma_e_init=sup.gamma_e_mean)

    def start(self, j: int) -> Start:
        """Model j as the start of a test-time chain."""
        return Start(self.dictionaries[j], self.layers, self.hyper, gamma_e_init=self.gamma_e_init,
                     gamma_s_init=self.gamma_s_init)


def top_features(x: np.ndarray, start: Start, options: MapOptions | TopdownOptions, *, seed: int,
                 images: Sequence[int] | None = None,
                 progress: Callable[[str], None] | None = None) -> dict:
    """One model's (``start``) top-layer features of ``x`` by the route of ``options``
    (the result dict of the route's inference; its ``features`` (N, F)):
    :class:`dgdm_tf.mcem.options.MapOptions`, ``burn_in`` sweeps and MCEM iterations
    until each image's Q changes by at most ``tol`` of itself (at most ``iterations``;
    :func:`infer_map`); :class:`dgdm_tf.topdown.options.TopdownOptions`, ``burn_in`` +
    ``collect`` sweeps in each of ``chains`` chains (each its own seed and map order,
    :func:`dgdm_tf.topdown.chain.infer_topdown`), averaged. ``images`` (start, stop): only
    those images, whole batches, as the feature functions take it."""
    if isinstance(options, MapOptions):
        return infer_map(x, start, options, seed=seed, images=images, progress=progress)
    if isinstance(options, TopdownOptions):
        return infer_topdown(x, start, options, seed=seed, images=images, progress=progress)
    raise TypeError("the route's options must be MapOptions (Algorithm 2) or TopdownOptions "
                    f"(the chain's posterior mean), got {type(options).__name__}")


def classify(x: np.ndarray, models: KeptModels, options: MapOptions | TopdownOptions, *,
             seeds: Sequence[int], images: Sequence[int] | None = None,
             progress: Callable[[str], None] | None = None) -> Classified:
    """The decision values of ``x`` under each of ``models`` (:class:`KeptModels`), model
    j's features by :func:`top_features` with ``options`` drawn from ``seeds[j]``.
    ``images`` (start, stop): only those images (their draws and outputs are the call's
    on all of ``x``; :func:`gather_classified` joins such shards)."""
    if len(seeds) != len(models.betas):
        raise ValueError(f"{len(seeds)} seeds for {len(models.betas)} models")
    mcem = isinstance(options, MapOptions)
    per_model, q_traces, q_sums, q_counts, layer1, seconds = [], [], [], [], None, 0.0
    for j, beta in enumerate(models.betas):
        res = top_features(x, models.start(j), options, seed=seeds[j], images=images,
                           progress=progress)
        if mcem:
            q_traces.append([float(q) for q in res["q_trace"]])
            q_sums.append(res["q_sums"])
            q_counts.append(res["q_counts"])
        elif j == 0:
            layer1 = res["layer1_pooled"]
        per_model.append(decision_values([beta], models.mean, models.std, res["features"]))
        seconds += res["seconds"]
    return Classified(scores=np.mean(per_model, axis=0), per_model=per_model, q_traces=q_traces,
                      layer1_pooled=layer1, seconds=seconds, q_sums=q_sums, q_counts=q_counts)


def gather_classified(parts: Sequence[Classified]) -> Classified:
    """:func:`classify`'s result on all images from its results on shards (in image
    order, each on whole batches via ``images``): each model's decision values, Q sums
    and layer-1 maps joined, then averaged and traced as :func:`classify` does, bit for
    bit the unsplit call's."""
    if not parts:
        raise ValueError("no shard to gather")
    per_model = [np.concatenate([p.per_model[j] for p in parts]) for j in range(len(parts[0].per_model))]
    q_sums = [np.concatenate([p.q_sums[j] for p in parts]) for j in range(len(parts[0].q_sums))]
    q_counts = [np.concatenate([p.q_counts[j] for p in parts]) for j in range(len(parts[0].q_counts))]
    layer1 = (None if parts[0].layer1_pooled is None
              else np.concatenate([p.layer1_pooled for p in parts]))
    return Classified(scores=np.mean(per_model, axis=0), per_model=per_model,
                      q_traces=[[float(q) for q in q_trace(s, c)] for s, c in zip(q_sums, q_counts)],
                      layer1_pooled=layer1, seconds=float(sum(p.seconds for p in parts)),
                      q_sums=q_sums, q_counts=q_counts)


def classify_supervised(x: np.ndarray, sup, options: PredictOptions, layers: Sequence[dict], *,
                        seeds: Sequence[int], hyper: dict | None,
                        images: Sequence[int] | None = None,
                        progress: Callable[[str], None] | None = None) -> Classified:
    """:func:`classify` with the kept models of a supervised model ``sup``
    (:meth:`KeptModels.of_supervised`) by the test route of ``options``
    (:class:`dgdm_tf.mcem.options.PredictOptions`, config block `supervised.predict`);
    ``seeds[j]`` seeds kept model j."""
    return classify(x, KeptModels.of_supervised(sup, layers, hyper), options.route,
                    seeds=list(seeds), images=images, progress=progress)
