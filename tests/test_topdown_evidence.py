"""Tests of dgdm_tf.topdown.evidence: the Gaussian over the top weights against the dense
covariance, the integral over gamma_e against a direct quadrature, the collapsed priors
by exact enumeration, and the whole score on images drawn from a known model."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import tensorflow as tf

from dgdm_tf.core.model import DeepModel, generate, unseen_blocks
from dgdm_tf.topdown import evidence
from dgdm_tf.topdown.options import Start
from dgdm_tf.topdown.state import init_state, residual


def _dense_log_normal(f, x, gamma_s, gamma):
    cov = f.T @ f / gamma_s + np.eye(x.size) / gamma[..., None, None]
    _, logdet = np.linalg.slogdet(cov)
    quad = np.einsum("i,...ij,j->...", x, np.linalg.inv(cov), x)
    return -0.5 * x.size * math.log(2 * math.pi) - 0.5 * logdet - 0.5 * quad


def test_log_normal_of_span_matches_the_dense_covariance():
    rng = np.random.default_rng(0)
    for m in (0, 3, 15):  # no unit on, fewer units than pixels, more
        f, x = rng.normal(size=(m, 12)), rng.normal(size=12)
        lg = np.log([0.1, 2.0, 40.0])
        np.testing.assert_allclose(evidence.log_normal_of_span(f, x, 1.7, lg),
                                   _dense_log_normal(f, x, 1.7, np.exp(lg)), rtol=1e-9)


def test_log_evidence_integrates_over_the_gamma_prior():
    """Against the trapezoid rule in gamma itself (not log gamma) on a dense grid, with the
    Gamma density written out: 1e-4 in log."""
    rng = np.random.default_rng(1)
    f, x = rng.normal(size=(4, 10)), 0.3 * rng.normal(size=10)
    a, b = 3.0, 0.05
    g = np.linspace(1e-4, 600.0, 200001)
    log_prior = a * math.log(b) - math.lgamma(a) + (a - 1) * np.log(g) - b * g
    v = _dense_log_normal(f, x, 0.8, g) + log_prior
    direct = v.max() + math.log(np.trapezoid(np.exp(v - v.max()), g))
    assert evidence.log_evidence(f, x, 0.8, a, b) == pytest.approx(direct, abs=1e-4)


def test_collapsed_priors_sum_to_one_over_every_sequence():
    """Exact enumeration: 3 states x 4 draws under Dirichlet(1/3, 1/3, 1/3), 5 on/off
    draws under Beta(0.1, 0.9); one draw's probability is alpha_s / sum(alpha)."""
    alpha = np.full(3, 1 / 3)
    total = sum(math.exp(evidence.log_dirichlet_multinomial(np.bincount(seq, minlength=3), alpha))
                for seq in itertools.product(range(3), repeat=4))
    assert total == pytest.approx(1.0, abs=1e-12)
    total = sum(math.exp(evidence.log_beta_binomial(np.array(seq), 0.1, 0.9))
                for seq in itertools.product((0, 1), repeat=5))
    assert total == pytest.approx(1.0, abs=1e-12)
    alpha = np.array([0.5, 1.5, 2.0])
    assert math.exp(evidence.log_dirichlet_multinomial(np.array([0, 1, 0]), alpha)) == pytest.approx(1.5 / 4)


def _drawn(rng, n=4):
    """A tiny two-layer model, its dictionaries and images drawn from it with their state."""
    model = DeepModel((16, 16, 1), [{"dict_size": 5, "n_dict": 4, "pool": 2},
                                    {"dict_size": 3, "n_dict": 3, "pool": 1}])
    g0, gt = model.geoms
    d = [rng.normal(size=(g.dh, g.dw, g.c, g.k)).astype(np.float32) for g in model.geoms]
    d = [v / np.linalg.norm(v.reshape(-1, v.shape[-1]), axis=0) for v in d]
    z0 = rng.integers(0, g0.n_states, size=(n, g0.nbh, g0.nbw, g0.k)).astype(np.int32)
    on = (rng.random((n, gt.hs, gt.ws, gt.k)) < 0.3).astype(np.float32)
    s = on * 2.0 * rng.normal(size=on.shape).astype(np.float32)
    x = generate(tf.constant(s), model, [tf.constant(v) for v in d], [tf.constant(z0)]).numpy()
    x = (x + 0.05 * rng.normal(size=x.shape)).astype(np.float32)
    return model, d, x, z0, on, s


def test_the_true_state_is_more_probable_than_its_maps_shuffled():
    """Images drawn from a known two-layer model: each image's true (Z, on) scores higher
    than the same state with its top units moved to other maps; one image alone scores
    what it scores among others; with pixels missing, the blocks they wholly hide do not
    change the score (they do with every pixel seen)."""
    model, d, x, z0, on, s = _drawn(np.random.default_rng(2))
    g0 = model.geoms[0]
    st = init_state(x, model, d, [1, 2])._replace(z=(tf.constant(z0),), on=tf.constant(on),
                                                  s_top=tf.constant(s), gamma_s=tf.fill([len(x), model.top.k], 0.25))
    true = st._replace(resid=residual(st, x, model))
    shuffled = st._replace(on=tf.constant(on[..., ::-1].copy()), s_top=tf.constant(s[..., ::-1].copy()))
    shuffled = shuffled._replace(resid=residual(shuffled, x, model))
    a = evidence.collapsed_log_prob(true, x, model)
    b = evidence.collapsed_log_prob(shuffled, x, model)
    assert np.all(a > b + 10.0), (a, b)
    # the factors sum to the score; another prior on pi moves the 'on' factor alone
    terms = evidence.collapsed_log_prob_terms(true, x, model)
    np.testing.assert_array_equal(terms["fit"] + terms["codes"] + terms["on"], a)
    flat = evidence.collapsed_log_prob_terms(true, x, model, pi_prior=(1.0, 1.0))
    for f in ("fit", "codes"):
        np.testing.assert_array_equal(flat[f], terms[f])
    assert np.all(flat["on"] != terms["on"])
    one = evidence.collapsed_log_prob(true._replace(
        **{f: (tuple(t[1:2] for t in getattr(true, f)) if isinstance(getattr(true, f), tuple)
               else getattr(true, f)[1:2]) for f in ("z", "log_theta", "s_top", "on", "log_pi", "gamma_e", "resid")}),
        x[1:2], model)
    assert one[0] == pytest.approx(a[1], rel=1e-9)
    mask = np.ones(x.shape, np.float32)
    mask[:, 9:] = 0.0  # the bottom rows hidden: the blocks they hide no longer count
    unseen = unseen_blocks(mask, model)[0]
    assert unseen.any() and not unseen.all()
    moved = st._replace(z=(tf.constant(np.where(unseen[..., None], (z0 + 1) % g0.n_states, z0)),))

    def score(state, m=None):
        return evidence.collapsed_log_prob(state._replace(resid=residual(state, x, model, m)), x, model, m)
    np.testing.assert_allclose(score(moved, mask), score(true, mask), rtol=1e-12)
    assert np.all(score(moved) != a)
    # a state whose residual belongs to other units (stale) is refused, mask or not
    for m in (None, mask):
        with pytest.raises(ValueError, match="residual"):
            evidence.collapsed_log_prob(shuffled._replace(resid=true.resid), x, model, m)


@pytest.mark.slow
def test_posterior_gain_scores_the_chain_twice_and_repeats():
    """On images drawn from a known model, from every top unit off: the state 6 sweeps
    past the first is more probable in most images (the first sweep switches on what
    later sweeps prune); the same seed gives the same figures; another seed others."""
    model, d, x, *_ = _drawn(np.random.default_rng(4), n=6)
    layers = [{"dict_size": 5, "n_dict": 4, "pool": 2}, {"dict_size": 3, "n_dict": 3, "pool": 1}]
    held = Start(d, layers, gamma_e_init=400.0, gamma_s_init=0.25)
    kw = dict(sweeps=1, more_sweeps=6)
    a = evidence.posterior_gain(x, held, seed=3, **kw)
    assert a["images"] == 6 and a["sweeps"] == [1, 7] and len(a["top_units_on"]) == 2
    assert a["fraction_more_probable"] >= 0.5 and a["median_log_prob_gain"] > 0, a
    assert evidence.posterior_gain(x, held, seed=3, **kw) == a
    assert evidence.posterior_gain(x, held, seed=5, **kw) != a
