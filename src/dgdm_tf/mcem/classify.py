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

from dgdm_tf.mcem.test_time import infer_map
from dgdm_tf.supervised.joint_svm import decision_values
from dgdm_tf.topdown.chain import infer_topdown


@dataclasses.dataclass
class Classified:
    """``scores`` (N, C): decision values averaged over the models; ``per_model`` each
    model's (N, C); ``q_traces`` each model's mean Q per MCEM iteration (route ``mcem``);
    ``layer1_pooled`` the first model's layer-1 pooled posterior mean (route ``gibbs``:
    the mixing diagnostics read it); ``seconds`` spent inferring features."""
    scores: np.ndarray
    per_model: list
    q_traces: list
    layer1_pooled: np.ndarray | None
    seconds: float


def classify(x: np.ndarray, models: Sequence[tuple], mean, std, layers: Sequence[dict], *,
             route: str, seeds: Sequence[int], burn_in: int, batch_size: int, gamma_s: float,
             collect: int | None = None, chains: int = 1, iterations: int | None = None,
             tol: float = 0.0, rmsprop: dict | None = None, gamma_e_init: float | None = None,
             hyper: dict | None = None, scan: str,
             progress: Callable[[str], None] | None = None) -> Classified:
    """The decision values of ``x`` under each of ``models`` ((dictionaries, beta (C, F+1))
    pairs; ``mean``, ``std`` the SVM's standardisation of the top layer), model j's
    features drawn from ``seeds[j]``. ``route`` ``mcem`` runs ``burn_in`` sweeps and
    MCEM iterations with ``rmsprop`` (lr, decay, steps) until each image's Q changes by at
    most ``tol`` of itself (at most ``iterations``; :func:`infer_map`); ``gibbs``
    ``burn_in`` + ``collect`` sweeps in each of ``chains`` chains (each its own seed and
    map order, :func:`dgdm_tf.topdown.chain.infer_topdown`), averaged."""
    if route not in ("mcem", "gibbs"):
        raise ValueError(f"route must be 'mcem' or 'gibbs', got {route!r}")
    if route == "mcem" and (iterations is None or rmsprop is None):
        raise ValueError("route 'mcem' needs iterations and rmsprop (lr, decay, steps)")
    if route == "gibbs" and collect is None:
        raise ValueError("route 'gibbs' needs collect")
    common = dict(burn_in=int(burn_in), batch_size=int(batch_size), gamma_s=gamma_s,
                  gamma_e_init=gamma_e_init, hyper=hyper, scan=scan, progress=progress)
    per_model, q_traces, layer1, seconds = [], [], None, 0.0
    for j, (dictionaries, beta) in enumerate(models):
        if route == "mcem":
            res = infer_map(x, dictionaries, layers, seed=seeds[j], iterations=int(iterations),
                            tol=float(tol), rmsprop_lr=float(rmsprop["lr"]), rmsprop_decay=float(rmsprop["decay"]),
                            rmsprop_steps=int(rmsprop["steps"]), **common)
            q_traces.append([float(q) for q in res["q_trace"]])
            s_top = res["features"]
        else:
            res = infer_topdown(x, dictionaries, layers, seed=seeds[j], collect=int(collect),
                                chains=int(chains), **common)
            if j == 0:
                layer1 = res["layer1_pooled"]
            s_top = res["features"]
        per_model.append(decision_values([beta], mean, std, s_top))
        seconds += res["seconds"]
    return Classified(scores=np.mean(per_model, axis=0), per_model=per_model, q_traces=q_traces,
                      layer1_pooled=layer1, seconds=seconds)


def classify_supervised(x: np.ndarray, sup, predict: dict, layers: Sequence[dict], *,
                        seeds: Sequence[int], hyper: dict | None, scan: str,
                        progress: Callable[[str], None] | None = None) -> Classified:
    """:func:`classify` with the kept models of a supervised model ``sup``
    (:class:`dgdm_tf.io.artifacts.SupervisedModel`) and the settings of a
    ``supervised.predict`` config block (features, burn_in, collect, chains, iterations,
    tol, batch_size, rmsprop_lr / _decay / _steps); ``seeds[j]`` seeds kept model j."""
    betas = np.asarray(sup.samples_beta)
    models = [([v[j] for v in sup.samples_D], betas[j]) for j in range(len(betas))]
    if len(seeds) != len(models):
        raise ValueError(f"{len(seeds)} seeds for {len(models)} kept models")
    return classify(x, models, np.asarray(sup.svm_mean), np.asarray(sup.svm_std), layers,
                    route=predict["features"], seeds=list(seeds),
                    burn_in=int(predict["burn_in"]), collect=int(predict["collect"]),
                    chains=int(predict["chains"]),
                    iterations=int(predict["iterations"]), tol=float(predict["tol"]),
                    batch_size=int(predict["batch_size"]),
                    rmsprop={k: predict[f"rmsprop_{k}"] for k in ("lr", "decay", "steps")},
                    gamma_s=sup.gamma_s, gamma_e_init=sup.gamma_e_mean, hyper=hyper, scan=scan,
                    progress=progress)
