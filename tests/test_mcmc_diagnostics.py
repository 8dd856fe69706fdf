"""dgdm_tf.mcmc.diagnostics: the figures that tell a sampler that follows the image from one that
follows its scan order."""

import json

import numpy as np
import pytest

from dgdm_tf.mcmc import diagnostics as mixing


def test_ink_per_cell_matches_a_direct_window_average():
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, size=(3, 11, 10, 2))
    d, p = 4, 3
    hs, ws = 11 - d + 1, 10 - d + 1
    win = np.array([[np.abs(x[:, i:i + d, j:j + d]).mean() for j in range(ws)] for i in range(hs)])
    want = np.array([[win[3 * u:3 * u + 3, 3 * v:3 * v + 3].mean() for v in range(-(-ws // p))]
                     for u in range(-(-hs // p))])  # partial edge blocks average what they hold
    np.testing.assert_allclose(mixing.ink_per_cell(x, d, p), want, rtol=1e-12)


def test_activity_ink_correlation_sees_where_the_activity_is():
    rng = np.random.default_rng(1)
    x = np.zeros((20, 12, 12, 1))
    x[:, 2:6, 3:9] = 1.0  # ink in the upper middle
    ink = mixing.ink_per_cell(x, 3, 2)
    follows = rng.uniform(0.5, 1.5, size=(20, 1, 1, 4)) * ink[None, :, :, None]
    grid = np.zeros_like(follows)
    grid[:, ::2, ::2] = 1.0  # a colour grid, blind to the image
    assert mixing.activity_ink_correlation(follows, x, 3, 2) > 0.99
    assert abs(mixing.activity_ink_correlation(grid, x, 3, 2)) < 0.3
    with pytest.raises(ValueError, match="does not match"):
        mixing.activity_ink_correlation(follows[:, :-1], x, 3, 2)


def test_map_distance():
    a = np.arange(6.0).reshape(2, 3)
    assert mixing.map_distance(a, a) == 0.0
    assert mixing.map_distance(a, 2 * a) == pytest.approx(np.linalg.norm(a) / (1.5 * np.linalg.norm(a)))


def test_half_distance_compares_the_even_and_the_odd_chains():
    rng = np.random.default_rng(0)
    base = rng.normal(size=(50, 8))
    # chains that agree up to small noise: near 0; unrelated chains of equal norm: near sqrt(2)
    same = np.stack([base + 0.01 * rng.normal(size=base.shape) for _ in range(4)])
    assert mixing.half_distance(same) < 0.02
    apart = rng.normal(size=(2, 2000, 8))
    assert mixing.half_distance(apart) == pytest.approx(np.sqrt(2.0), abs=0.03)
    # even chains (0, 2) against odd (1, 3), not the first half against the second
    ordered = np.stack([base, -base, base, -base])
    assert mixing.half_distance(ordered) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="two or more"):
        mixing.half_distance(base[None])


def test_ridge_probe_reads_out_separable_classes_and_not_noise():
    rng = np.random.default_rng(2)
    y = rng.integers(0, 3, size=600)
    f = rng.normal(size=(600, 20))
    f[np.arange(600), y] += 4.0  # class c lifts feature c
    assert mixing.ridge_probe(f[:400], y[:400], f[400:], y[400:]) < 2.0
    noise = rng.normal(size=(600, 20))
    assert mixing.ridge_probe(noise[:400], y[:400], noise[400:], y[400:]) > 50.0


def test_polarity_split():
    f = np.array([[1.0, -2.0], [0.0, 3.0]])
    np.testing.assert_array_equal(mixing.polarity_split(f), [[1, 0, 0, 2], [0, 3, 0, 0]])


# --- cross-chain convergence: rhat, ess, summarise_chains ---------------------------------

def _ar1(rng, rho, chains, n):
    """Stationary AR(1) chains x_t = rho x_{t-1} + e_t, e_t ~ N(0, 1)."""
    e = rng.normal(size=(chains, n))
    x = np.empty_like(e)
    x[:, 0] = e[:, 0] / np.sqrt(1 - rho ** 2)
    for t in range(1, n):
        x[:, t] = rho * x[:, t - 1] + e[:, t]
    return x


def test_rhat_and_ess_of_independent_chains():
    x = np.random.default_rng(0).normal(size=(4, 1000))
    assert abs(mixing.rhat(x) - 1.0) < 0.01
    assert mixing.ess(x) == pytest.approx(4000, rel=0.15)
    assert mixing.ess(x, "tail") == pytest.approx(4000, rel=0.25)  # noisier: 10% of draws


def test_bulk_ess_of_ar1_chains_matches_the_exact_value():
    rho = 0.9
    x = _ar1(np.random.default_rng(1), rho, 4, 4000)
    # the estimate's seed-to-seed sd is about 10% here: 20% holds for this seed (1.01 of
    # exact) and for about 95% of seeds, while a wrong tau (no factor 2, no truncation)
    # misses by far more
    assert mixing.ess(x) == pytest.approx(16000 * (1 - rho) / (1 + rho), rel=0.2)  # 842


def test_rhat_sees_a_shifted_chain_and_the_tail_rhat_a_wider_one():
    rng = np.random.default_rng(2)
    # one chain shifted by 1 sd: R-hat near sqrt(1 + 1/3) = 1.15 for 2 chains (split into
    # 4), but only sqrt(1 + 3/14) = 1.10 for 4, where "> 1.1" would be a coin flip
    shifted = rng.normal(size=(2, 1000))
    shifted[0] += 1.0
    assert mixing.rhat(shifted) > 1.1
    shifted = rng.normal(size=(4, 1000))
    shifted[0] += 1.0
    assert mixing.rhat(shifted) > 1.05
    wide = rng.normal(size=(4, 1000)) * np.array([1.0, 1.0, 1.0, 3.0])[:, None]
    bulk = mixing._rhat_raw(mixing._z_scale(mixing._split(wide[None])))[0]
    assert bulk < 1.02  # same means: the bulk R-hat alone passes the chains
    assert mixing.rhat(wide) > 1.05  # the folded draws do not


# References computed with ArviZ 0.23.4 (az.rhat(method="rank"), az.ess(method="bulk"),
# az.ess(method="tail"); the third array through az.convert_to_dataset), installed for
# this check only. ArviZ returns NaN for one chain where rhat compares its halves; none
# of these arrays has one chain, so no convention differs.
def _reference_arrays():
    a = _ar1(np.random.default_rng(11), 0.7, 4, 500)
    b = np.random.default_rng(12).standard_t(3, size=(4, 301))  # odd: the middle draw drops
    rng = np.random.default_rng(13)
    c = rng.normal(size=(3, 200, 2, 3)) * np.array([1.0, 2.0, 0.5])
    c[0, :, 0, 0] += 0.5
    c[:, :, 1] = np.round(c[:, :, 1], 1)  # ties: average ranks
    return a, b, c


REFERENCE = [
    (1.0022848416042152, 370.0177104260992, 747.7961405381753),
    (1.0032640044403498, 1125.8898175677548, 947.0374955800412),
    ([[1.0414526061556926, 1.008803182784571, 0.999184678135194],
      [1.0034867807131764, 1.0076630968975533, 0.9977699837207417]],
     [[325.67335138983566, 514.9059654512918, 450.75870805748315],
      [640.9049232497254, 641.6131817432695, 636.6402736119339]],
     [[161.45472792792592, 545.4526537746581, 467.78828273553586],
      [550.3829710142423, 599.8939348488725, 563.0542513393224]]),
]


@pytest.mark.parametrize("case", range(3))
def test_rhat_and_ess_match_arviz(case):
    x = _reference_arrays()[case]
    want_rhat, want_bulk, want_tail = REFERENCE[case]
    np.testing.assert_allclose(mixing.rhat(x), want_rhat, rtol=1e-6)
    np.testing.assert_allclose(mixing.ess(x), want_bulk, rtol=1e-6)
    np.testing.assert_allclose(mixing.ess(x, "tail"), want_tail, rtol=1e-6)


def test_diagnostics_keep_the_parameter_shape():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(3, 50, 2, 4)) * rng.uniform(0.5, 2, size=(2, 4))
    x[:, :, 1, 2] = _ar1(rng, 0.8, 3, 50)
    for f in (mixing.rhat, mixing.ess, lambda a: mixing.ess(a, "tail")):
        got = f(x)
        assert got.shape == (2, 4)
        # each entry is its own parameter's, not a neighbour's
        want = [[f(x[:, :, i, j]) for j in range(4)] for i in range(2)]
        np.testing.assert_allclose(got, want, rtol=1e-12)
    assert isinstance(mixing.rhat(x[:, :, 0, 0]), float)


def test_diagnostics_refuse_too_short_chains_and_unknown_kinds():
    x = np.random.default_rng(4).normal(size=(4, 3))
    with pytest.raises(ValueError, match="at least 4 draws"):
        mixing.rhat(x)
    with pytest.raises(ValueError, match="at least 4 draws"):
        mixing.ess(x)
    with pytest.raises(ValueError, match="chains, draws"):
        mixing.rhat(np.zeros(10))
    with pytest.raises(ValueError, match="bulk"):
        mixing.ess(np.zeros((2, 10)), "mean")
    one = np.random.default_rng(5).normal(size=(1, 400))
    one[0, 200:] += 2.0  # one chain: its halves disagree
    assert mixing.rhat(one) > 1.5


def test_summarise_chains_is_json_ready():
    x = np.random.default_rng(6).normal(size=(2, 100, 3))
    x[0, :, 1] += 2.0
    s = mixing.summarise_chains(x)
    assert json.loads(json.dumps(s)) == s
    assert s["n_chains"] == 2 and s["n_draws"] == 100
    assert type(s["rhat_max"]) is float and type(s["n_chains"]) is int
    assert s["rhat_max"] == pytest.approx(mixing.rhat(x)[1])
    assert s["ess_bulk_min"] == pytest.approx(mixing.ess(x).min())
    assert s["ess_tail_min"] == pytest.approx(mixing.ess(x, "tail").min())


def test_feature_draws_summary_separates_mixed_from_stuck_chains():
    """Features drawn iid in 2 chains x 50 draws: median R-hat near 1, none above 1.1,
    bulk ESS near the 100 draws; the same with the chains at means 3 sd apart: every
    feature above 1.1. A feature never on is left out."""
    from dgdm_tf.mcmc.diagnostics import feature_draws_summary

    rng = np.random.default_rng(0)
    mixed = rng.normal(size=(2, 50, 20, 6))
    mixed[..., 0] = 0.0  # a unit never on: no R-hat
    c = feature_draws_summary(mixed)
    assert c["features_moving"] == 20 * 5 and (c["n_chains"], c["n_draws"]) == (2, 50)
    assert abs(c["rhat_median"] - 1.0) < 0.03 and c["rhat_above_1.1"] < 0.02
    assert 60 < c["ess_bulk_median"] < 140
    stuck = mixed + np.array([0.0, 3.0])[:, None, None, None]
    stuck[..., 0] = 0.0
    s = feature_draws_summary(stuck)
    assert s["rhat_above_1.1"] == 1.0 and s["rhat_median"] > 1.5 and s["ess_bulk_median"] < 20
    assert feature_draws_summary(np.zeros((2, 8, 3)))["features_moving"] == 0


def _default_run_log_joint():
    """The log joint of the default run's refinement as it reads: -2.15e6 at sweep 1,
    1.65e6 and 1.74e6 at sweeps 14 and 15, still +9e4 a sweep (a geometric approach,
    each sweep's gain 0.86 of the next)."""
    gains = 9e4 * 0.863 ** -np.arange(14)[::-1]
    return -2.15e6 + np.r_[0.0, np.cumsum(gains)]


def test_drift_reads_the_default_runs_log_joint_as_not_settled_and_ar1_as_settled():
    lj = _default_run_log_joint()
    assert lj[0] == -2.15e6 and abs(lj[-1] - 1.74e6) < 2e4 and abs(lj[-2] - 1.65e6) < 2e4
    assert mixing.drift(lj) > 2 * mixing.SETTLE_TOLERANCE  # 3.2
    x = _ar1(np.random.default_rng(3), 0.5, 1, 3000)[0]
    assert abs(mixing.drift(x)) < 0.5 * mixing.SETTLE_TOLERANCE
    # any slope's noise-free line drifts by 2 to 3.5; a shift or scale of the trace changes nothing
    for n in (3, 5, 15, 1000):
        assert 2.0 <= mixing.drift(-7.0 * np.arange(n) + 3.0) * -1 <= 3.5
    assert mixing.drift(5e6 + 1e4 * x) == pytest.approx(mixing.drift(x))
    assert mixing.drift(np.ones(30)) == 0.0
    assert np.isnan(mixing.drift([1.0, np.nan, 2.0]))
    # a fraction sitting at one value but for a late rise: the MAD is 0, the sd scales it
    step = np.r_[np.zeros(25), 0.0, 0.0, 0.0, 1.0, 1.0]
    assert mixing.drift(step) > mixing.SETTLE_TOLERANCE


def test_trace_settlement_names_the_drifting_scalars_and_computes_split_rhat():
    rng = np.random.default_rng(4)
    n, burn = 600, 200
    collected = np.arange(n) >= burn
    lj = np.r_[np.linspace(-5, 0, 200), np.zeros(400)] + 0.1 * _ar1(rng, 0.5, 1, n)[0]
    chains = [{"log_joint": lj, "gamma_e_mean": _ar1(rng, 0.5, 1, n)[0]},
              {"log_joint": lj[::-1].copy(), "gamma_e_mean": _ar1(rng, 0.5, 1, n)[0]}]
    one = mixing.trace_settlement(chains[:1], collected=collected)
    assert one["settled"] and one["drifting"] == [] and one["n_chains"] == 1
    assert "one chain's two halves" in one["rhat"]
    assert one["scalars"]["gamma_e_mean"]["rhat"] < 1.05
    assert one["scalars"]["gamma_e_mean"]["ess_bulk"] > 50
    two = mixing.trace_settlement(chains, collected=collected)
    # the reversed chain 1 ends in a fall: not settled, and the chains disagree
    assert not two["settled"] and two["drifting"] == ["log_joint"]
    assert two["scalars"]["log_joint"]["drift"] < -mixing.SETTLE_TOLERANCE
    assert two["scalars"]["log_joint"]["rhat"] > 1.5 and "across the chains" in two["rhat"]
    json.dumps(two, allow_nan=False)  # JSON-ready
    short = mixing.trace_settlement([{"log_joint": lj[:6]}], collected=[False] * 3 + [True] * 3)
    assert "rhat" not in short["scalars"]["log_joint"] and "not computed" in short["rhat"]
    # a chain too short for the drift test is never called settled: not drifting beyond the
    # tolerance, it reads None (too short to tell); drifting, it reads False
    flat = 1e-3 * rng.standard_normal(3 * mixing.SETTLE_MIN_WINDOW)
    for n in (3, 6, 3 * mixing.SETTLE_MIN_WINDOW - 1):
        s = mixing.trace_settlement([{"x": flat[:n]}], collected=[True] * n, tolerance=1e9)
        assert s["settled"] is None and s["min_sweeps"] == 3 * mixing.SETTLE_MIN_WINDOW, n
    ramp = mixing.trace_settlement([{"x": np.arange(6.0)}], collected=[True] * 6)
    assert ramp["settled"] is False and ramp["drifting"] == ["x"]
    full = mixing.trace_settlement([{"x": flat}], collected=[True] * len(flat), tolerance=1e9)
    assert full["settled"] is True
    loose = mixing.trace_settlement(chains, collected=collected, tolerance=100.0)
    assert loose["settled"] and loose["tolerance"] == 100.0
    with pytest.raises(ValueError, match="same scalars"):
        mixing.trace_settlement([{"a": lj}, {"b": lj}], collected=collected)
    with pytest.raises(ValueError, match="sweeps traced"):
        mixing.trace_settlement([{"a": lj}], collected=collected[:10])


def test_pooled_traces_are_the_per_image_means_of_each_chain():
    """Batches of 3 and 1 images, 2 chains, 2 scalars, 5 sweeps: chain c's trace is its
    sums over the batches divided by the 4 images; a wrong shape is refused by name."""
    from dgdm_tf.mcmc.diagnostics import pooled_traces

    rng = np.random.default_rng(0)
    sums = rng.normal(size=(2, 2, 2, 5))
    out = pooled_traces(sums, [3, 1], ["a", "b"])
    assert len(out) == 2 and list(out[0]) == ["a", "b"]
    np.testing.assert_allclose(out[1]["b"], (sums[0, 1, 1] + sums[1, 1, 1]) / 4, rtol=1e-15)
    with pytest.raises(ValueError, match=r"trace_sums must be \(batches=2, chains, 3, sweeps\)"):
        pooled_traces(sums, [3, 1], ["a", "b", "c"])
