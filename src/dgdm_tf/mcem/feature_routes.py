"""The test-time top-layer features of a `topdown_features` block, by its route, with the
diagnostics its rows write to mixing.json: the features of unsupervised_svm (the refined
model) and of pretrained_svm with `features.route: topdown` (the pretrained layers).

* route ``alg2``: the MAP of supplement Algorithm 2 (:func:`dgdm_tf.mcem.test_time.infer_map`);
* route ``chain``: the Rao-Blackwellised posterior mean of the top-down chain with every
  dictionary fixed (:func:`dgdm_tf.topdown.chain.infer_topdown`).

The per-image part (:func:`per_image`) runs on all images or on a shard of whole batches
(:func:`route_batch`); :func:`gather` joins shards bit for bit; :func:`summarise` adds
what needs every image.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Mapping

import numpy as np

from dgdm_tf.mcem.classify import top_features
from dgdm_tf.mcem.options import topdown_route
from dgdm_tf.mcem.test_time import gather_map
from dgdm_tf.mcmc import diagnostics as mixing
from dgdm_tf.pretrain.ridge_start import RidgeStart
from dgdm_tf.topdown import evidence
from dgdm_tf.topdown.chain import TRACE_SCALARS, gather_topdown
from dgdm_tf.topdown.options import Start


def route_batch(block: Mapping) -> int:
    """The batch size of the block's route: shards hold whole batches."""
    return int(block["alg2"]["batch_size"] if block["route"] == "alg2" else block["batch_size"])


def per_image(x: np.ndarray, start: Start, block: Mapping, *, seed: int, images=None,
              progress: Callable[[str], None] | None = print) -> dict:
    """The per-image part of the block's features of ``x`` (of ``images``, a shard, or all)
    under ``start``'s dictionaries: route alg2 with the block's `alg2` settings and the
    chain's scan; route chain with the chain settings, each chain's features and draws
    kept where :func:`summarise` reads them."""
    route = topdown_route(block)
    if block["route"] == "chain":  # each chain's features and draws, for the diagnostics
        chains = int(block["chains"])
        route = dataclasses.replace(route, keep_chains=chains > 1,
                                    keep_draws=chains > 1 and int(block["collect"]) >= 4)
    return top_features(x, start, route, seed=seed, images=images, progress=progress)


def gather(block: Mapping) -> Callable:
    """The function that joins :func:`per_image`'s shards for the block's route."""
    return gather_map if block["route"] == "alg2" else gather_topdown


def summarise(x: np.ndarray, start: Start, block: Mapping, res: dict, *,
              check_seed: int | None = None,
              progress: Callable[[str], None] | None = print) -> dict:
    """``res`` (:func:`per_image` on every image of ``x``, or its shards gathered) with
    its diagnostics. Route alg2: 'alg2' (the iterations the images took, how many met the
    tolerance, the Q trace) and 'chains' 0. Route chain, with two or more chains:
    'half_distance' (:func:`dgdm_tf.mcmc.diagnostics.half_distance` of the chains'
    features: the chains differ by their map order, so it says how much the order
    decides the features), 'chain_mixing' (:func:`dgdm_tf.mcmc.diagnostics.trace_settlement`
    of the chains' traced scalars: R-hat, bulk ESS, drift) and, with 4 or more collected
    sweeps, 'convergence' (:func:`dgdm_tf.mcmc.diagnostics.feature_draws_summary`: R-hat
    and ESS of the features themselves). With ``check_seed`` and
    `posterior_check.images` > 0 also 'posterior_check'
    (:func:`dgdm_tf.topdown.evidence.posterior_gain` on the first images: how much more
    probable the chain's state gets in `posterior_check.sweeps` more sweeps)."""
    say = progress or (lambda _m: None)
    if block["route"] == "alg2":
        return _alg2_summary(res, block, say)
    if int(block["chains"]) > 1:
        res["half_distance"] = mixing.half_distance(res.pop("chain_features"))
        say(f"the chains' features lie {res['half_distance']:.3f} apart (relative; "
            "about 1.4: unrelated, 0: they agree)")
        schedule = topdown_route(block).schedule
        traces = mixing.pooled_traces(res.pop("trace_sums"), res.pop("trace_images"), TRACE_SCALARS)
        res["chain_mixing"] = mixing.trace_settlement(
            traces, collected=[schedule.at(t).collected for t in range(schedule.total)])
        sc = res["chain_mixing"]["scalars"].values()
        rh = [v["rhat"] for v in sc if v.get("rhat") is not None]
        es = [v["ess_bulk"] for v in sc if v.get("ess_bulk") is not None]
        say(f"{len(traces)} test-time chains' traced scalars: "
            + (f"worst R-hat {max(rh):.3f}, smallest bulk ESS {min(es):.1f}" if rh and es
               else res["chain_mixing"]["rhat"]))
    if "draws" in res:  # R-hat and ESS need 4 draws a chain (split halves)
        res["convergence"] = mixing.feature_draws_summary(res.pop("draws"))
        c = res["convergence"]
        say(f"features over {c['n_chains']} chains x {c['n_draws']} draws: median R-hat "
            f"{c['rhat_median']:.3f}, {100 * c['rhat_above_1.1']:.0f} % above 1.1, median "
            f"bulk ESS {c['ess_bulk_median']:.1f}")
    check = block["posterior_check"]
    if check_seed is not None and int(check["images"]) > 0:
        res["posterior_check"] = _posterior_check(x, start, block, check_seed, say)
    return res


def _alg2_summary(res: dict, block: Mapping, say) -> dict:
    it = res["iterations"]
    res["alg2"] = {"iterations_mean": float(np.mean(it)), "iterations_median": float(np.median(it)),
                   "iterations_max": int(np.max(it)), "converged": float(np.mean(res["converged"])),
                   "q_trace": [float(q) for q in res["q_trace"]], "seconds": float(res["seconds"])}
    res["chains"] = 0  # no chain is averaged: a MAP
    say(f"Algorithm 2: {res['alg2']['iterations_mean']:.1f} iterations an image (max "
        f"{res['alg2']['iterations_max']}), {100 * res['alg2']['converged']:.0f} % within tol "
        f"{block['alg2']['tol']}")
    return res


def _posterior_check(x, start: Start, block: Mapping, check_seed: int, say) -> dict:
    check, sweeps = block["posterior_check"], int(block["burn_in"]) + int(block["collect"])
    n = min(int(check["images"]), len(x))
    say(f"posterior check: {n} images, {sweeps} sweeps, then {int(check['sweeps'])} more")
    pc = evidence.posterior_gain(
        x[:n], start, seed=check_seed, sweeps=sweeps, more_sweeps=int(check["sweeps"]),
        scan=block["scan"], top_start=RidgeStart.from_config(block["start"]))
    say(f"posterior check: {int(check['sweeps'])} more sweeps make the state more probable in "
        f"{100 * pc['fraction_more_probable']:.0f} % of the images, by a median of "
        f"e^{pc['median_log_prob_gain']:.0f}; top units on {pc['top_units_on'][0]:.3f} -> "
        f"{pc['top_units_on'][1]:.3f} (a large gain: the features are an early transient "
        "of the chain, docs/findings/posterior_mass.md)")
    return pc
