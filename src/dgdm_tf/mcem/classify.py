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

from dgdm_tf.mcem.test_time import infer_map, q_trace
from dgdm_tf.supervised.joint_svm import decision_values
from dgdm_tf.topdown.chain import infer_topdown


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


def top_features(x: np.ndarray, dictionaries, layers: Sequence[dict], *, route: str, seed: int,
                 burn_in: int, batch_size: int, gamma_s: float, collect: int | None = None,
                 chains: int = 1, iterations: int | None = None, tol: float = 0.0,
                 rmsprop: dict | None = None, gamma_e_init: float | None = None,
                 hyper: dict | None = None, scan: str, images: Sequence[int] | None = None,
                 progress: Callable[[str], None] | None = None) -> dict:
    """One model's top-layer features of ``x`` by ``route`` (the result dict of the
    route's inference; its ``features`` (N, F)). ``mcem`` runs ``burn_in`` sweeps and MCEM
    iterations with ``rmsprop`` (lr, decay, steps) until each image's Q changes by at
    most ``tol`` of itself (at most ``iterations``; :func:`infer_map`); ``gibbs``
    ``burn_in`` + ``collect`` sweeps in each of ``chains`` chains (each its own seed and
    map order, :func:`dgdm_tf.topdown.chain.infer_topdown`), averaged. ``images``
    (start, stop): only those images, whole batches, as the feature functions take it."""
    if route not in ("mcem", "gibbs"):
        raise ValueError(f"route must be 'mcem' or 'gibbs', got {route!r}")
    if route == "mcem" and (iterations is None or rmsprop is None):
        raise ValueError("route 'mcem' needs iterations and rmsprop (lr, decay, steps)")
    if route == "gibbs" and collect is None:
        raise ValueError("route 'gibbs' needs collect")
    common = dict(seed=seed, burn_in=int(burn_in), batch_size=int(batch_size), gamma_s=gamma_s,
                  gamma_e_init=gamma_e_init, hyper=hyper, scan=scan, images=images,
                  progress=progress)
    if route == "mcem":
        return infer_map(x, dictionaries, layers, iterations=int(iterations), tol=float(tol),
                         rmsprop_lr=float(rmsprop["lr"]), rmsprop_decay=float(rmsprop["decay"]),
                         rmsprop_steps=int(rmsprop["steps"]), **common)
    return infer_topdown(x, dictionaries, layers, collect=int(collect), chains=int(chains), **common)


def classify(x: np.ndarray, models: Sequence[tuple], mean, std, layers: Sequence[dict], *,
             route: str, seeds: Sequence[int], burn_in: int, batch_size: int, gamma_s: float,
             collect: int | None = None, chains: int = 1, iterations: int | None = None,
             tol: float = 0.0, rmsprop: dict | None = None, gamma_e_init: float | None = None,
             hyper: dict | None = None, scan: str, images: Sequence[int] | None = None,
             progress: Callable[[str], None] | None = None) -> Classified:
    """The decision values of ``x`` under each of ``models`` ((dictionaries, beta (C, F+1))
    pairs; ``mean``, ``std`` the SVM's standardisation of the top layer), model j's
    features by :func:`top_features` (the other arguments) drawn from ``seeds[j]``.
    ``images`` (start, stop): only those images (their draws and outputs are the call's
    on all of ``x``; :func:`gather_classified` joins such shards)."""
    settings = dict(route=route, burn_in=burn_in, batch_size=batch_size, gamma_s=gamma_s,
                    collect=collect, chains=chains, iterations=iterations, tol=tol,
                    rmsprop=rmsprop, gamma_e_init=gamma_e_init, hyper=hyper, scan=scan,
                    images=images, progress=progress)
    per_model, q_traces, q_sums, q_counts, layer1, seconds = [], [], [], [], None, 0.0
    for j, (dictionaries, beta) in enumerate(models):
        res = top_features(x, dictionaries, layers, seed=seeds[j], **settings)
        if route == "mcem":
            q_traces.append([float(q) for q in res["q_trace"]])
            q_sums.append(res["q_sums"])
            q_counts.append(res["q_counts"])
        elif j == 0:
            layer1 = res["layer1_pooled"]
        per_model.append(decision_values([beta], mean, std, res["features"]))
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


def supervised_route(sup, predict: dict, *, hyper: dict | None, scan: str) -> dict:
    """:func:`top_features`' route settings for the kept models of a supervised model
    ``sup`` (:class:`dgdm_tf.io.artifacts.SupervisedModel`: its gamma_s and gamma_e) under
    a ``supervised.predict`` config block (features, burn_in, collect, chains, iterations,
    tol, batch_size, rmsprop_lr / _decay / _steps)."""
    return dict(route=predict["features"], burn_in=int(predict["burn_in"]),
                collect=int(predict["collect"]), chains=int(predict["chains"]),
                iterations=int(predict["iterations"]), tol=float(predict["tol"]),
                batch_size=int(predict["batch_size"]),
                rmsprop={k: predict[f"rmsprop_{k}"] for k in ("lr", "decay", "steps")},
                gamma_s=sup.gamma_s, gamma_e_init=sup.gamma_e_mean, hyper=hyper, scan=scan)


def alg2_route(topdown: dict, *, hyper: dict | None) -> dict:
    """:func:`top_features`' route settings for a `topdown_features` config block of
    route ``alg2`` (its ``alg2`` settings and ``scan``): the test-time features of the
    unsupervised_svm and pretrained_svm rows (supplement Algorithm 2)."""
    if topdown.get("route") != "alg2":
        raise ValueError(f"alg2_route needs a topdown_features block of route 'alg2', got "
                         f"{topdown.get('route')!r}")
    a = topdown["alg2"]
    return dict(route="mcem", burn_in=int(a["burn_in"]), iterations=int(a["max_iterations"]),
                tol=float(a["tol"]), batch_size=int(a["batch_size"]),
                rmsprop={k: a[f"rmsprop_{k}"] for k in ("lr", "decay", "steps")},
                hyper=hyper, scan=topdown["scan"])


def classify_supervised(x: np.ndarray, sup, predict: dict, layers: Sequence[dict], *,
                        seeds: Sequence[int], hyper: dict | None, scan: str,
                        images: Sequence[int] | None = None,
                        progress: Callable[[str], None] | None = None) -> Classified:
    """:func:`classify` with the kept models of a supervised model ``sup`` by
    :func:`supervised_route`; ``seeds[j]`` seeds kept model j."""
    betas = np.asarray(sup.samples_beta)
    models = [([v[j] for v in sup.samples_D], betas[j]) for j in range(len(betas))]
    if len(seeds) != len(models):
        raise ValueError(f"{len(seeds)} seeds for {len(models)} kept models")
    return classify(x, models, np.asarray(sup.svm_mean), np.asarray(sup.svm_std), layers,
                    seeds=list(seeds), images=images, progress=progress,
                    **supervised_route(sup, predict, hyper=hyper, scan=scan))
