"""Tests of the supervised model (dgdm_tf.supervised.joint_svm and its wiring into deep_gibbs /
deep_chain): a Geweke joint-distribution test of the whole supervised sweep (the S[L]
conditional with the SVM terms, beta, lambda, omega, kappa) on a tiny labelled model, the
lambda draws against their inverse-Gaussian moments, margin bookkeeping, resume and
determinism of the supervised chain (supervised vs unsupervised + SVM:
test_supervised_against_unsupervised.py)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from dgdm_tf.mcmc.checkpoint import CheckpointDir
from dgdm_tf.topdown import refine

from dgdm_tf.supervised import joint_svm as deep_svm
from dgdm_tf.topdown.sweep import make_sweep_fn
from dgdm_tf.supervised import svm_gibbs as S
from dgdm_tf.core.model import DeepModel
from _deep_geweke import GEWEKE_HYPER, forward_draws, joint_stats, geweke_chains, power_size, redraw_x
from _labelled_toy import LAYERS, labelled_data

# gamma small and a unit-variance bias keep the forward sampler's acceptance near 0.36
GEWEKE_SVM = deep_svm.SvmHyper(gamma=0.1, a_kappa=3.0, b_kappa=3.0, bias_var=1.0, kappa=1.0)


def _forward_supervised(rng, model: DeepModel, y, mean, std, hyper=GEWEKE_SVM):
    """An exact draw of the supervised joint given the labels y (C, N), by rejection: the
    deep model and beta, omega, kappa from their priors, accepted with probability
    prod_nl exp(-2 gamma max(c_nl, 0)) (the pseudo-likelihood with lambda integrated out,
    <= 1), then lambda | c from its conditional and X from the likelihood."""
    c_, f = y.shape[0], mean.size
    while True:
        st, x, rec = forward_draws(rng, model, y.shape[1])
        kappa = rng.gamma(hyper.a_kappa, 1.0 / hyper.b_kappa, size=c_)
        omega = rng.exponential(1.0 / kappa[:, None], size=(c_, f))
        beta = np.concatenate([rng.normal(size=(c_, f)) * np.sqrt(omega),
                               rng.normal(size=(c_, 1)) * np.sqrt(hyper.bias_var)], 1)
        c = 1.0 - y * (beta @ deep_svm.design(st.s_top, mean, std).numpy().T)
        if rng.random() < np.exp(-2.0 * hyper.gamma * np.maximum(c, 0.0).sum()):
            break
    lam = S.lambda_from_residual(c, hyper.gamma, rng.integers(0, 2 ** 31, size=2)).numpy()
    svm = deep_svm.SvmState(beta=tf.constant(beta), omega=tf.constant(omega),
                            kappa=tf.constant(kappa), lam=tf.constant(lam),
                            mean=tf.constant(mean), std=tf.constant(std))
    return st, svm, x, rec


def _svm_stats(st, svm, x, rec, model, y):
    m = deep_svm.margins(svm, st.s_top).numpy().T
    lam = svm.lam.numpy()
    extra = [svm.beta.numpy()[0, 0], svm.beta.numpy()[1, -1], np.log(svm.kappa.numpy()[0]),
             1.0 / (1.0 + lam[0, 0]), 1.0 / (1.0 + lam[1, 1]),  # bounded: lambda is heavy-tailed
             np.tanh(y[0, 0] * m[0, 0]), np.tanh(y[1, 1] * m[1, 1]), np.tanh(np.sum(y * m)),
             np.log(svm.omega.numpy()[0, 1])]
    return np.concatenate([joint_stats(st, x, rec, model), extra])


def _geweke_supervised(chains, steps, seed):
    """z per test function of :func:`_deep_geweke.geweke_chains` on the supervised sweep
    of a tiny labelled model, from exact joint draws (rejection), with a non-trivial
    fixed standardisation (it exercises the coefficient mapping)."""
    model = DeepModel((7, 8, 2), [{"dict_size": 2, "n_dict": 2, "pool": 2},
                                  {"dict_size": 2, "n_dict": 2, "pool": 1}], GEWEKE_HYPER,
                      supervised=True)
    rng = np.random.default_rng(seed)
    y = np.array([[1.0, -1.0], [-1.0, 1.0]])
    f = model.top.hs * model.top.ws * model.top.k
    mean, std = np.full(f, 0.1, np.float32), np.full(f, 1.5, np.float32)
    sweep = make_sweep_fn(model, n_leapfrog=5, svm_hyper=GEWEKE_SVM)
    yt = tf.constant(y)

    def start(c):
        st, svm, x, rec = _forward_supervised(rng, model, y, mean, std)
        return (st._replace(seed=tf.constant([seed, c])), svm, x), _svm_stats(st, svm, x, rec, model, y)

    def advance(carry):
        st, svm, stats = sweep(carry[0], carry[1], tf.constant(carry[2]), yt)
        x, rec = redraw_x(rng, st, model)
        return (st, svm, x), _svm_stats(st, svm, x, rec, model, y), stats["accept"].numpy()

    return geweke_chains(start, advance, chains, steps)[0]


@pytest.mark.slow
def test_geweke_supervised_sweep():
    """Successive-conditional simulation of the supervised model from exact joint draws
    keeps the joint (|z| < 4; SLOW: 75 independent chains of 6 sweeps, paired with their
    starts: :func:`_geweke_supervised`) on the deep model's test functions and on beta,
    kappa, omega, lambda and the margins y beta^T s (which couple the SVM to S[L])."""
    z = _geweke_supervised(*SLOW)
    assert np.all(np.abs(z) < 4.0), z


# The default tier's size and the slow tier's (docs/findings/geweke_power.md): chains,
# sweeps, seed
SMALL, SLOW = (30, 4, 5), (75, 6, 5)


def test_geweke_supervised_sweep_small():
    """The test above at the default tier's size (SMALL: 30 chains of 4 sweeps). Its
    power, the next test (slow tier): kappa's rate with sum omega halved gives z = 9.3 on
    log kappa[0] at this size (docs/findings/geweke_power.md)."""
    z = _geweke_supervised(*SMALL)
    assert np.all(np.abs(z) < 4.0), z


@pytest.mark.slow
@pytest.mark.retrace
def test_geweke_supervised_finds_a_wrong_conditional(monkeypatch):
    """The small test has power: kappa's rate with sum omega halved (b + sum omega / 2,
    the Laplace prior's kappa / 2 read into the exponential mixing density; the
    conditional is Gamma(a + F, b + sum omega)) puts log kappa outside |z| < 4 at the
    same size."""
    def wrong(omega, a, b, seed):
        omega = S.f64(omega)
        rate = S.f64(b) + 0.5 * tf.reduce_sum(omega, axis=-1)
        alpha = S.f64(a) + tf.cast(tf.shape(omega)[-1], S.DTYPE)
        return tf.random.stateless_gamma(tf.shape(rate), seed=S._seed(seed), alpha=alpha,
                                         dtype=S.DTYPE) / rate

    monkeypatch.setattr(S, "resample_kappa", wrong)  # as resample_svm calls it
    z = _geweke_supervised(*power_size(SMALL, SLOW))
    print(f"z: {np.round(z, 2).tolist()}")
    assert z[19] > 5.0, z  # log kappa[0], after the 17 deep-model functions and 2 of beta


def test_lambda_draws_match_inverse_gaussian_moments():
    """Through the deep wiring (standardised top layer): 1/lambda ~ IG(1/|c|, gamma) with
    c = 1 - y margin; 20000 draws' mean and variance within 3 % / 8 % of
    1/|c| and 1/(|c|^3 gamma)."""
    n, gamma = 20000, 0.7
    s_top = np.broadcast_to(np.array([0.4, -1.2, 0.0], np.float32).reshape(1, 1, 1, 3), (n, 1, 1, 3))
    mean, std = np.array([0.1, -0.2, 0.0], np.float32), np.array([2.0, 0.5, 1.0], np.float32)
    beta = np.array([[0.3, -0.4, 1.0, -0.5], [-0.5, 0.1, 0.0, -0.3]])  # |c| = 0.655, 0.425
    svm = deep_svm.init_svm(2, mean, std, n, deep_svm.SvmHyper(gamma=gamma))._replace(beta=tf.constant(beta))
    y = deep_svm.targets(np.zeros(n, np.int64), 2)
    out = deep_svm.resample_svm(svm, tf.constant(s_top), y, deep_svm.SvmHyper(gamma=gamma), [1, 2])
    sd = (s_top[0].ravel() - mean) / std
    c = 1.0 - np.array([1.0, -1.0]) * (beta[:, :3] @ sd + beta[:, 3])
    inv = 1.0 / out.lam.numpy()
    mu, var = 1.0 / np.abs(c), 1.0 / (np.abs(c) ** 3 * gamma)
    np.testing.assert_allclose(inv.mean(1), mu, rtol=0.03)
    np.testing.assert_allclose(inv.var(1), var, rtol=0.08)


def test_unit_terms_reproduce_the_margins():
    """offset + sum_u coef_u s_u (what the S[L] conditional uses) equals beta^T [(s - mean)
    / std, 1] (what the SVM conditionals use)."""
    rng = np.random.default_rng(0)
    s_top = rng.normal(size=(5, 2, 3, 4)).astype(np.float32)
    mean, std = deep_svm.standardisation(s_top, scale="unit")
    svm = deep_svm.init_svm(3, mean, std, 5, deep_svm.SvmHyper())._replace(
        beta=tf.constant(rng.normal(size=(3, 25))))
    terms = deep_svm.unit_terms(svm, deep_svm.targets([0, 1, 2, 0, 1], 3), (2, 3, 4), deep_svm.SvmHyper())
    marg = terms["offset"][None] + np.einsum("nhwk,chwk->nc", s_top, terms["coef"].numpy())
    np.testing.assert_allclose(marg, deep_svm.margins(svm, s_top).numpy(), rtol=1e-4, atol=1e-4)


def test_standardisation_global_and_unit():
    """global: mean 0 and one scale, the root mean square of every entry; unit: per-unit
    mean and sd, sd 1 for a unit never on."""
    rng = np.random.default_rng(1)
    s_top = rng.normal(size=(40, 1, 2, 3)).astype(np.float32) * np.array([1.0, 3.0, 0.0], np.float32)
    mean, std = deep_svm.standardisation(s_top, scale="global")
    np.testing.assert_array_equal(mean, 0.0)
    np.testing.assert_allclose(std, np.sqrt(np.mean(s_top.astype(np.float64) ** 2)), rtol=1e-6)
    mean, std = deep_svm.standardisation(s_top, scale="unit")
    f = s_top.reshape(40, -1)
    np.testing.assert_allclose(mean, f.mean(0), atol=1e-6)
    np.testing.assert_allclose(std, np.where(f.std(0) > 0, f.std(0), 1.0), rtol=1e-5)
    with pytest.raises(ValueError, match="scale"):
        deep_svm.SvmHyper(scale="per-image")


def test_svm_steps_are_successive_scans():
    """steps = 2 is two scans, the second seeded by fold-in 1: the same draws as two calls."""
    rng = np.random.default_rng(2)
    s_top = rng.normal(size=(30, 1, 1, 4)).astype(np.float32)
    y = deep_svm.targets(rng.integers(0, 3, 30), 3)
    mean, std = deep_svm.standardisation(s_top)
    h1, h2 = deep_svm.SvmHyper(), deep_svm.SvmHyper(steps=2)
    svm = deep_svm.init_svm(3, mean, std, 30, h1)
    seed = tf.constant([5, 6], tf.int64)
    two = deep_svm.resample_svm(svm, s_top, y, h2, seed)
    one = deep_svm.resample_svm(svm, s_top, y, h1, seed)
    one = deep_svm.resample_svm(one, s_top, y, h1, tf.random.experimental.stateless_fold_in(seed, 1))
    for a, b in zip(two, one):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


# ---------------------------------------------------------------------------------------
# The supervised chain
# ---------------------------------------------------------------------------------------

@pytest.mark.slow
def test_supervised_chain_resumes_exactly(tmp_path):
    """Killed after 3 sweeps and rerun, the chain ends where an uninterrupted one does
    (state, SVM and kept models are checkpointed); same seed, same numbers."""
    _, d, x, lab = labelled_data(24)
    start = refine.Start(d, LAYERS, n_classes=3)
    opts = refine.SupervisedOptions(burn_in=3, collect=3, scan="random", svm_steps=2, keep_models=2,
                                    checkpoint_every=1, svm_warmup=3, svm_average=3)
    kw = dict(seed=4, labels=lab, progress=None)
    said = []
    full = refine.run_refine(x, start, opts, **{**kw, "progress": said.append})
    assert any(m.startswith("supervised sweep 6/6") for m in said), said  # not "refine sweep"
    assert refine.run_refine(x, start, opts, checkpoint=CheckpointDir(tmp_path, stop_after=3),
                             **kw) is None
    resumed = refine.run_refine(x, start, opts, checkpoint=CheckpointDir(tmp_path), **kw)
    assert full["samples"]["beta"].shape[0] == 2
    np.testing.assert_array_equal(full["samples"]["beta"], resumed["samples"]["beta"])
    for a, b in zip(full["D"], resumed["D"]):
        np.testing.assert_array_equal(a, b)
    assert np.isfinite([r["svm_train_error"] for r in full["trace"][1:]]).all()


