"""The pretraining sampler: exact conditionals, a Geweke joint-distribution test,
recovery of a known dictionary, determinism. Fixed seeds, stated tolerances."""

import numpy as np
import pytest
import tensorflow as tf

from dgdm_tf.pretrain import blocks as PB, kernel as P, layer_model as PM
from dgdm_tf.core.compiled import compiled
from dgdm_tf.core.layout import LayerGeometry
from dgdm_tf.core.ops import full_conv
from _deep_geweke import geweke_chains
from _layer_geweke import GEWEKE_HYPER, forward_data, forward_params, layer_stats, match_cosine, recovery_data


def _model(geom, n, hyper=None, top=False):
    return PM.LayerModel(geom, PM.Hyper.from_dict(hyper), top=top, n_images=n)


def _blocks_from_dense(geom, s_nhwc):
    return PB.nhwc_to_blocks(tf.constant(s_nhwc, tf.float32), geom)


# ---------------------------------------------------------------------------------------
# (z, W) of one block: W integrated out, against numerical quadrature
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_zw_block_conditional_matches_quadrature(jit_compile):
    """One 2x2 block of a 3x3 image (dict 2x2): the state frequencies over 20,000
    independent images match p(z | -) computed by quadrature over W, and W | z matches
    its quadrature mean and variance; half the images start with the block on, which the
    draw must ignore. Under XLA too (config ``jit_compile``), whose random bits are its
    own."""
    geom = LayerGeometry(hx=3, wx=3, c=1, dh=2, dw=2, k=1, p=2)
    n = 20000
    rng = np.random.default_rng(0)
    d = np.array([[0.9, -0.4], [0.3, 0.7]], np.float32).reshape(2, 2, 1, 1)
    x1 = np.array([[0.2, 0.5, -0.1], [0.4, 0.9, 0.3], [0.0, 0.2, 0.5]], np.float32)
    x = np.broadcast_to(x1[None, :, :, None], (n, 3, 3, 1)).copy()
    ge, gw = 4.0, 2.0
    theta = np.array([0.1, 0.3, 0.15, 0.25, 0.2], np.float32)  # 4 positions + off
    model = _model(geom, n)
    # start: half the images with the block on at a random position and value
    s0 = np.zeros((n, 2, 2, 1), np.float32)
    on = rng.random(n) < 0.5
    pos = rng.integers(0, 4, n)
    s0[on, pos[on] // 2, pos[on] % 2, 0] = rng.normal(size=on.sum())
    z0 = np.where(on, pos, 4).astype(np.int32).reshape(1, 1, 1, n, 1, 1)
    recon = full_conv(s0, d).numpy()
    state = PM.PretrainState(
        s=_blocks_from_dense(geom, s0), z=tf.constant(z0), d=tf.constant(d),
        log_theta=tf.constant(np.log(np.broadcast_to(theta, (n, 1, 5))).astype(np.float32)),
        gamma_w=tf.constant(gw), gamma_e=tf.constant(np.full(n, ge, np.float32)),
        resid=PB.pad_input(tf.constant(x - recon), geom), seed=tf.constant([0, 0]))
    step = compiled(lambda st, sd: P.resample_zw(st, tf.constant(x), model, sd),
                    jit_compile=jit_compile)
    out = step(state, tf.constant([7, 11]))
    z = out.z.numpy().reshape(n)
    s = PB.blocks_to_nhwc(out.s, geom).numpy().reshape(n, 4)
    # residual bookkeeping stays exact
    np.testing.assert_allclose(
        out.resid.numpy()[:, :3, :3], x - full_conv(PB.blocks_to_nhwc(out.s, geom), d).numpy(),
        atol=1e-5)

    # quadrature: p(z = m) ∝ theta_m ∫ N(x | w A_m, 1/ge) N(w | 0, 1/gw) dw
    w_grid = np.linspace(-6, 6, 24001)
    dw_ = w_grid[1] - w_grid[0]
    prior = np.sqrt(gw / (2 * np.pi)) * np.exp(-0.5 * gw * w_grid ** 2)
    xv = x1.ravel()
    log_off = -0.5 * ge * np.sum(xv ** 2)
    mass, mean_w, var_w = [], [], []
    for m in range(4):
        a = np.zeros((3, 3))
        r, c = divmod(m, 2)
        a[r:r + 2, c:c + 2] = d[:, :, 0, 0]
        av = a.ravel()
        ll = -0.5 * ge * np.sum((xv[None] - w_grid[:, None] * av[None]) ** 2, axis=1) - log_off
        post = prior * np.exp(ll)
        zm = post.sum() * dw_
        mass.append(theta[m] * zm)
        mean_w.append(np.sum(w_grid * post) * dw_ / zm)
        var_w.append(np.sum(w_grid ** 2 * post) * dw_ / zm - mean_w[-1] ** 2)
    mass.append(theta[4])
    probs = np.array(mass) / np.sum(mass)
    freq = np.bincount(z, minlength=5) / n
    se = np.sqrt(probs * (1 - probs) / n)
    assert np.all(np.abs(freq - probs) < 4.5 * se + 1e-12), (freq, probs)
    for m in range(4):
        w = s[z == m, m]
        assert np.all(s[z == m][:, [j for j in range(4) if j != m]] == 0)
        if len(w) > 500:
            assert abs(w.mean() - mean_w[m]) < 4.5 * np.sqrt(var_w[m] / len(w))
            assert abs(w.var() / var_w[m] - 1) < 4.5 * np.sqrt(2 / len(w))
    assert np.all(s[z == 4] == 0)


# ---------------------------------------------------------------------------------------
# D: sequential exact Gaussian conditionals, against a dense NumPy design matrix
# ---------------------------------------------------------------------------------------

def _design(s_nhwc, geom):
    """A[k]: (N*hx*wx*C, dh*dw*C) design of D_k, and per-row image index."""
    n = s_nhwc.shape[0]
    mats = []
    for k in range(geom.k):
        cols = []
        for t in range(geom.dh * geom.dw * geom.c):
            e = np.zeros((geom.dh * geom.dw * geom.c,), np.float32)
            e[t] = 1
            dk = np.zeros((geom.dh, geom.dw, geom.c, 1), np.float32)
            dk[..., 0] = e.reshape(geom.dh, geom.dw, geom.c)
            cols.append(full_conv(s_nhwc[..., k:k + 1], dk).numpy().reshape(-1))
        mats.append(np.stack(cols, 1))
    rows = np.repeat(np.arange(n), geom.hx * geom.wx * geom.c)
    return mats, rows


@pytest.mark.parametrize("route", ["loop", "statistics"])
def test_d_conditional_matches_exact_gaussian(route):
    """Both routes of D's draw (pretrain.dictionary) sample map 0's exact Gaussian
    conditional, then map 1's given map 0's new value."""
    geom = LayerGeometry(hx=5, wx=4, c=2, dh=2, dw=3, k=2, p=1)
    n = 3
    rng = np.random.default_rng(1)
    s_nhwc = (rng.normal(size=(n, 4, 2, 2)) * (rng.random((n, 4, 2, 2)) < 0.6)).astype(np.float32)
    d0 = rng.normal(size=(2, 3, 2, 2)).astype(np.float32)
    ge = np.array([1.5, 0.7, 2.0], np.float32)
    x = (full_conv(s_nhwc, d0).numpy() + rng.normal(size=(n, 5, 4, 2))).astype(np.float32)
    model = _model(geom, n, {"dict_prior_precision": 1.3}, top=True)
    z = np.where(s_nhwc != 0, 0, 1).astype(np.int32)
    state = PM.PretrainState(
        s=_blocks_from_dense(geom, s_nhwc),
        z=tf.constant(PB.nhwc_to_blocks(tf.constant(z, tf.float32), geom).numpy()[..., 0].astype(np.int32)),
        d=tf.constant(d0), log_theta=tf.zeros([n, 2, 2]), gamma_w=tf.constant(1.0),
        gamma_e=tf.constant(ge), resid=PB.pad_input(tf.constant(x - full_conv(s_nhwc, d0).numpy()), geom),
        seed=tf.constant([0, 0]))
    fn = compiled(lambda sd: P.resample_d(state, tf.constant(x), model, sd, route).d)
    draws = np.stack([fn(tf.constant([3, i])).numpy() for i in range(3000)])  # M, dh, dw, C, K

    mats, rows = _design(s_nhwc, geom)
    w = ge[rows]
    xv = x.reshape(-1)

    def cond(k, other):
        a_k, a_o = mats[k], mats[1 - k]
        lam = 1.3 * np.eye(a_k.shape[1]) + a_k.T @ (w[:, None] * a_k)
        rhs = a_k.T @ (w * (xv - a_o @ other))
        return np.linalg.solve(lam, rhs), np.linalg.inv(lam)

    flat = lambda d: np.transpose(d, (0, 1, 2)).reshape(-1)  # (dh, dw, C) row-major
    # map 0 given the old map 1
    mu0, cov0 = cond(0, flat(d0[..., 1]))
    s0 = draws[..., 0].reshape(len(draws), -1)
    se0 = np.sqrt(np.diag(cov0) / len(draws))
    assert np.all(np.abs(s0.mean(0) - mu0) < 4.5 * se0)
    np.testing.assert_allclose(np.cov(s0.T), cov0, atol=0.12 * np.max(np.diag(cov0)))
    # map 1 given the NEW map 0: residual from the exact conditional mean is N(0, cov1)
    res = []
    for i in range(len(draws)):
        mu1, cov1 = cond(1, flat(draws[i, ..., 0]))
        res.append(draws[i, ..., 1].reshape(-1) - mu1)
    res = np.array(res)
    assert np.all(np.abs(res.mean(0)) < 4.5 * np.sqrt(np.diag(cov1) / len(draws)))
    np.testing.assert_allclose(np.cov(res.T), cov1, atol=0.12 * np.max(np.diag(cov1)))


# ---------------------------------------------------------------------------------------
# Geweke joint-distribution test of the whole sweep
# ---------------------------------------------------------------------------------------


def _geweke_layer(chains, steps, seed, jit_compile=False):
    """z per test function of :func:`_deep_geweke.geweke_chains` on the in-memory
    pretraining sweep: ``chains`` independent chains of ``steps`` sweeps, each from an
    exact joint draw; partial edge blocks, two colours per axis, two input channels."""
    geom = LayerGeometry(hx=4, wx=5, c=2, dh=2, dw=2, k=2, p=2)  # hs=3 x ws=4
    n = 2
    model = _model(geom, n, GEWEKE_HYPER)
    rng = np.random.default_rng(seed)
    sweep = P.make_sweep_fn(model, jit_compile=jit_compile)

    def start(c):
        prm = forward_params(rng, geom, model, n)
        x = forward_data(rng, geom, prm)
        rec = PB.reconstruction(tf.constant(prm["s"]), tf.constant(prm["d"]), geom).numpy()
        st = PM.PretrainState(
            s=tf.constant(prm["s"]), z=tf.constant(prm["z"]), d=tf.constant(prm["d"]),
            log_theta=tf.constant(prm["log_theta"]), gamma_w=tf.constant(prm["gamma_w"]),
            gamma_e=tf.constant(prm["gamma_e"]), resid=PB.pad_input(tf.constant(x - rec), geom),
            seed=tf.constant([seed, c]))
        return (st, x), layer_stats(prm, x, geom, model, rec)

    def advance(carry):
        st, x = carry
        st = sweep(st, tf.constant(x))
        prm = {k: getattr(st, k).numpy() for k in ("s", "z", "d", "log_theta", "gamma_w", "gamma_e")}
        # X | parameters: the reconstruction is X - residual; draw fresh noise around it
        rec = x - st.resid.numpy()[:, : geom.hx, : geom.wx]
        noise = (rng.normal(size=x.shape) / np.sqrt(prm["gamma_e"])[:, None, None, None])
        x = (rec + noise).astype(np.float32)
        st = st._replace(resid=PB.pad_input(tf.constant(noise.astype(np.float32)), geom))
        return (st, x), layer_stats(prm, x, geom, model, rec), 1.0

    return geweke_chains(start, advance, chains, steps)[0]


@pytest.mark.slow
@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_geweke_joint_distribution(jit_compile):
    """Successive-conditional simulation keeps the joint (|z| < 4: 125 independent chains
    of 20 sweeps, :func:`_geweke_layer`) on nine test functions covering D, gamma_e,
    gamma_w, z, W, theta and data-parameter cross terms. With the (z, W) step under XLA
    too (config ``jit_compile``)."""
    zscore = _geweke_layer(125, 20, 2024, jit_compile)
    assert np.all(np.abs(zscore) < 4.0), zscore


# The default tier's size (docs/findings/geweke_power.md): chains, sweeps, seed
SMALL = (80, 5, 2024)


# XLA compiles the same kernel: the slow tier checks it (the graph path is the default)
@pytest.mark.parametrize("jit_compile", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["graph", "xla"])
def test_geweke_joint_distribution_small(jit_compile):
    """The test above at the default tier's size (SMALL: 80 chains of 5 sweeps), whose power
    the next test shows."""
    zscore = _geweke_layer(*SMALL, jit_compile)
    assert np.all(np.abs(zscore) < 4.0), zscore


@pytest.mark.retrace
def test_geweke_layer_finds_a_wrong_conditional(monkeypatch):
    """The small test has power: gamma_w's shape counting every block of every map, on
    or off (a_w + (#blocks)/2 where Eq. SampleR's count is of the active weights), is not
    the conditional; the same harness at the same size puts log gamma_w far outside
    |z| < 4 (too large)."""
    def wrong(state, x, model, seed):
        blocks = tf.reduce_sum(tf.cast(model.block_valid, tf.float32)) * model.geom.k * model.n
        return state._replace(gamma_w=P.draw_gamma_w(blocks, tf.reduce_sum(tf.square(state.s)),
                                                     model.hyper, seed))

    monkeypatch.setattr(P, "resample_gamma_w", wrong)  # as the sweep calls it
    zscore = _geweke_layer(*SMALL)
    assert zscore[3] > 5.0, zscore  # log gamma_w


# ---------------------------------------------------------------------------------------
# Recovery of a known dictionary from data drawn from the model
# ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_recovers_known_dictionary():
    """:func:`recovery_data`: the collected dictionary matches the truth with mean
    cosine >= 0.9, and the fit reaches the noise level."""
    from dgdm_tf.pretrain.chain import run_pretrain_layer
    from dgdm_tf.pretrain.options import Layer, PretrainOptions

    x, d_true, noise_rel = recovery_data()
    out = run_pretrain_layer(x, Layer(dict_size=5, n_dict=4, pool=2),
                             PretrainOptions(burn_in=60, collect=10, prune_min_usage=0.0,
                                             dict_init="prior", jit_compile=False),
                             seed=3, progress=None)
    cos = match_cosine(d_true[:, :, 0], out["D"][:, :, 0])
    assert cos >= 0.9, cos
    assert out["trace"][-1]["rel_residual"] < 4 * noise_rel, (out["trace"][-1], noise_rel)


def test_same_seed_gives_identical_sweeps():
    geom = LayerGeometry(hx=10, wx=9, c=1, dh=3, dw=3, k=3, p=2)
    x = np.random.default_rng(0).random((4, 10, 9, 1)).astype(np.float32)
    model = _model(geom, 4)
    runs = []
    for _ in range(2):
        st = PM.init_state(x, model, tf.constant([1, 2]))
        fn = P.make_sweep_fn(model)
        for _ in range(3):
            st = fn(st, tf.constant(x))
        runs.append({k: v.numpy() for k, v in st._asdict().items()})
    for key in runs[0]:
        np.testing.assert_array_equal(runs[0][key], runs[1][key], err_msg=key)
    st3 = PM.init_state(x, model, tf.constant([1, 3]))
    st3 = P.make_sweep_fn(model)(st3, tf.constant(x))
    assert not np.array_equal(st3.d.numpy(), runs[0]["d"])


@pytest.mark.slow
def test_random_scan_compiles_with_xla():
    """The random scan's run-time colour and map choices compile under XLA (a pad whose
    widths came from the seed did not compile; a slice whose start did recompiled at
    every call). XLA draws other random bits than graph mode, so the checks are what
    must hold either way: the residual the sweep carries is X - D * S, the same seed
    repeats the chain, and another seed moves it."""
    geom = LayerGeometry(hx=12, wx=11, c=1, dh=3, dw=3, k=3, p=2)
    x = tf.constant(np.random.default_rng(5).random((3, 12, 11, 1)).astype(np.float32))
    model = _model(geom, 3)
    assert model.scan == "random"
    for jit in (False, True):
        fn = P.make_sweep_fn(model, jit_compile=jit, return_expected_pool=True)
        runs = []
        for seed in ([7, 8], [7, 8], [7, 9]):
            st = PM.init_state(x.numpy(), model, tf.constant(seed))
            for _ in range(2):
                st, _ = fn(st, x)
            want = PB.pad_input(x - PB.reconstruction(st.s, st.d, geom), geom)
            np.testing.assert_allclose(st.resid.numpy(), want.numpy(), atol=1e-4)
            runs.append(st.z.numpy())
        np.testing.assert_array_equal(runs[0], runs[1])
        assert not np.array_equal(runs[0], runs[2])
