"""Tests of test-time MCEM (dgdm_tf.mcem.test_time, supplement Algorithm 2): on a tiny model
whose lower unpooling can be enumerated, the MAP it finds has a higher exact posterior
density log p(W, Z[L] | X, D) than the averaged Gibbs features of the same images; each
M-step move raises the sampled Q; the same seed gives the same features."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import tensorflow as tf

from dgdm_tf.topdown import chain as deep_chain

from dgdm_tf.mcem import test_time as deep_mcem
from dgdm_tf.mcem.options import MapOptions
from dgdm_tf.topdown.options import Start, TopdownOptions
from dgdm_tf.core.model import DeepModel, generate

HYPER = {"a_e": 3.0, "b_e": 0.3, "a_w": 3.0, "b_w": 3.0, "dict_prior_precision": 1.0}
LAYERS = [{"dict_size": 3, "n_dict": 1, "pool": 2}, {"dict_size": 2, "n_dict": 2, "pool": 1}]


def _tiny_data(n=6, seed=0):
    model = DeepModel((6, 6, 1), LAYERS, HYPER)
    rng = np.random.default_rng(seed)
    d = [rng.normal(size=(g.dh, g.dw, g.c, g.k)).astype(np.float32) for g in model.geoms]
    gt, g0 = model.top, model.geoms[0]
    s = (rng.normal(size=(n, gt.hs, gt.ws, gt.k)) * (rng.random((n, gt.hs, gt.ws, gt.k)) < 0.6))
    z = rng.integers(0, g0.n_states, size=(n, g0.nbh, g0.nbw, g0.k)).astype(np.int32)
    rec = generate(tf.constant(s, tf.float32), model, [tf.constant(v) for v in d], [tf.constant(z)])
    x = np.asarray(rec) + 0.3 * rng.normal(size=rec.shape)
    return model, d, x.astype(np.float32)


def _log_student(sq, dim, a, b):
    """log of int N(r; 0, I/g) Gamma(g; a, b) dg for ||r||^2 = sq (the precision integrated out)."""
    return (a * math.log(b) - math.lgamma(a) - 0.5 * dim * math.log(2 * math.pi)
            + math.lgamma(a + 0.5 * dim) - (a + 0.5 * dim) * np.log(b + 0.5 * sq))


def exact_log_posterior(w, on, x, model: DeepModel, d) -> float:
    """log p(W, Z[L] | X, D) up to a constant: gamma_e, every map's gamma_s, theta and pi
    integrated out in closed form, the lower unpooling (5^4 states) summed by enumeration."""
    h, g0, gt = model.hyper, model.geoms[0], model.top
    blocks = g0.nbh * g0.nbw * g0.k
    combos = np.array(list(itertools.product(range(g0.n_states), repeat=blocks)), np.int32)
    z = combos.reshape(-1, g0.nbh, g0.nbw, g0.k)
    s_top = np.broadcast_to((w * on)[None], (len(z),) + w.shape).astype(np.float32)
    rec = np.asarray(generate(tf.constant(s_top), model, [tf.constant(v) for v in d], [tf.constant(z)]))
    sq = np.sum((x[None] - rec) ** 2, axis=(1, 2, 3))
    alpha = 1.0 / g0.n_states
    counts = np.stack([(combos == m).sum(1) for m in range(g0.n_states)], 1)  # one map (K0 = 1)
    log_dm = (math.lgamma(g0.n_states * alpha) - math.lgamma(g0.n_states * alpha + blocks)
              + np.sum([[math.lgamma(alpha + c) - math.lgamma(alpha) for c in row] for row in counts], 1))
    terms = log_dm + _log_student(sq, x.size, h.a_e, h.b_e)
    log_lik = np.logaddexp.reduce(terms)
    # W ~ N(0, 1/gamma_s[k]) at every unit of map k, gamma_s[k] ~ Gamma(a_w, b_w): per map
    log_w = sum(_log_student(np.sum(w[..., k] ** 2), gt.hs * gt.ws, h.a_w, h.b_w) for k in range(gt.k))
    a1, b1 = 1.0 / gt.k, 1.0 - 1.0 / gt.k  # Beta-Bernoulli per map, hs * ws units
    n_on = on.reshape(-1, gt.k).sum(0)
    n_units = gt.hs * gt.ws
    log_z = np.sum([math.lgamma(a1 + c) + math.lgamma(b1 + n_units - c) - math.lgamma(a1 + b1 + n_units)
                    - math.lgamma(a1) - math.lgamma(b1) + math.lgamma(a1 + b1) for c in n_on])
    return float(log_lik + log_w + log_z)


@pytest.mark.slow
def test_map_beats_averaged_gibbs_features_in_exact_posterior_density():
    model, d, x = _tiny_data()
    start = Start(d, LAYERS, HYPER, gamma_e_init=10.0, gamma_s_init=1.0)
    mp = deep_mcem.infer_map(x, start, MapOptions(burn_in=10, iterations=30, rmsprop_lr=1e-3,
                                                  batch_size=len(x)), seed=3, progress=None)
    gb = deep_chain.infer_topdown(x, start, TopdownOptions(burn_in=10, collect=30, batch_size=len(x),
                                                           chains=1, scan="random", start=None),
                                  seed=3, progress=None)
    shape = (model.top.hs, model.top.ws, model.top.k)
    lp_map, lp_gibbs = [], []
    for n in range(len(x)):
        s_map = mp["features"][n].reshape(shape)
        s_avg = gb["features"][n].reshape(shape)
        lp_map.append(exact_log_posterior(s_map, (s_map != 0).astype(np.float32), x[n], model, d))
        lp_gibbs.append(exact_log_posterior(s_avg, (s_avg != 0).astype(np.float32), x[n], model, d))
    lp_map, lp_gibbs = np.array(lp_map), np.array(lp_gibbs)
    # per image, the MAP is at least as probable (tolerance 0.5 nats), and better overall
    assert np.all(lp_map >= lp_gibbs - 0.5), (lp_map, lp_gibbs)
    assert lp_map.sum() > lp_gibbs.sum(), (lp_map, lp_gibbs)


@pytest.mark.slow
def test_scan_order_reaches_the_compiled_steps():
    """infer_map's compiled sweeps and iterations, shared between calls by the cached
    builders, are per scan order: the fixed and the random scan give other features from
    one seed (a trace shared across scans would give the same), and each the same twice."""
    _, d, x = _tiny_data()
    start = Start(d, LAYERS, HYPER, gamma_e_init=10.0, gamma_s_init=1.0)
    kw = dict(batch_size=len(x), burn_in=2, iterations=2)
    out = {scan: deep_mcem.infer_map(x, start, MapOptions(scan=scan, **kw), seed=4, progress=None)["features"]
           for scan in ("fixed", "random")}
    assert not np.array_equal(out["fixed"], out["random"])
    np.testing.assert_array_equal(deep_mcem.infer_map(x, start, MapOptions(**kw), seed=4,
                                                      progress=None)["features"], out["random"])


@pytest.mark.slow
def test_map_follows_the_scale_of_the_top_layer():
    """D[L] times 1/c, gamma_s (and its prior's rate b_w) times c^2 is the same model with W
    times c: the MAP is the same features times c. The W step is RMSprop's, whose size does
    not follow the gradient, so it is taken in units of W's prior sd; an absolute step
    (the paper's 1e-3) scrambled MNIST's top layer, whose sd is ~2e-3. Same units on, same
    values within 2 % (float32 round-off, measured 0.7 %; an absolute step is off by
    its own size, here 5e-2 against features of 1e-3)."""
    model, d, x = _tiny_data()
    c = 2.0 ** -10
    opts = MapOptions(batch_size=len(x), burn_in=5, iterations=10, rmsprop_lr=0.05, rmsprop_steps=3)
    ref = deep_mcem.infer_map(x, Start(d, LAYERS, HYPER, gamma_e_init=10.0, gamma_s_init=1.0), opts,
                              seed=5, progress=None)
    small = deep_mcem.infer_map(x, Start([d[0], d[1] / c], LAYERS, {**HYPER, "b_w": HYPER["b_w"] * c ** 2},
                                         gamma_e_init=10.0, gamma_s_init=1.0 / c ** 2), opts,
                                seed=5, progress=None)
    assert np.mean(ref["features"] != 0) > 0.2
    np.testing.assert_array_equal(small["features"] != 0, ref["features"] != 0)
    np.testing.assert_allclose(small["features"], c * ref["features"], rtol=0.02, atol=1e-8)


def test_map_stops_each_image_when_its_q_settles():
    """With ``tol`` each image stops at the first iteration whose Q moved by at most tol
    of itself: a loose tolerance stops every image within a few iterations, tol 0 runs
    them all; the iterations are recorded per image, and a stopped image keeps the
    features of the iteration it stopped at (the same as a run of exactly that many)."""
    _, d, x = _tiny_data()
    start = Start(d, LAYERS, HYPER, gamma_e_init=10.0, gamma_s_init=1.0)

    def run(**opts):
        return deep_mcem.infer_map(x, start, MapOptions(batch_size=len(x), burn_in=2, **opts), seed=6,
                                   progress=None)

    full = run(iterations=12)
    assert np.all(full["iterations"] == 12) and len(full["q_trace"]) == 12
    assert not np.any(full["converged"])  # no tolerance, no image called converged
    loose = run(iterations=12, tol=0.5)
    assert np.all(loose["converged"]) and np.all(loose["iterations"] <= 4)
    at2 = loose["iterations"] == 2
    assert at2.any()
    short = run(iterations=2)
    np.testing.assert_array_equal(loose["features"][at2], short["features"][at2])
    assert not np.array_equal(loose["features"][~at2], short["features"][~at2])
    tight = run(iterations=12, tol=1e-12)
    assert not np.any(tight["converged"]) and np.all(tight["iterations"] == 12)
    assert loose["layer1_pooled"].shape[0] == len(x)
