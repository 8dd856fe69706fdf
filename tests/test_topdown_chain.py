"""Tests of the top-down driver (dgdm_tf.topdown.chain): recovery of a known two-layer model
from its own draws, masked inference, checkpoint and resume, missing-data masks."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from dgdm_tf.topdown import chain as deep_chain, refine
from dgdm_tf.core.model import generate, project_top_to_data
from dgdm_tf.mcmc.checkpoint import CheckpointDir
from dgdm_tf.mcmc.driver import PROGRESS_PARTS
from dgdm_tf.topdown.options import Start, TopdownOptions

from _topdown_model import LAYERS, draw as _draw

TWO_SWEEPS = refine.RefineOptions(burn_in=1, collect=1)
#: one chain, the random scan, every top unit off at the start
ONE_CHAIN = dict(chains=1, scan="random", start=None)


def _matched_cosine(a, b):
    """Mean |cosine| of true projected elements a (K, ...) with estimated b after greedy
    matching (elements are identified up to order and sign)."""
    a = a.reshape(len(a), -1)
    b = b.reshape(len(b), -1)
    cos = np.abs(a @ b.T) / np.outer(np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1))
    used, out = set(), []
    for i in np.argsort(-cos.max(1)):
        j = max((j for j in range(len(b)) if j not in used), key=lambda j: cos[i, j])
        used.add(j)
        out.append(cos[i, j])
    return float(np.mean(out))


@pytest.mark.slow
def test_refinement_recovers_a_known_two_layer_model():
    """100 images drawn from the model; the chain starts from dictionaries perturbed by
    noise of 0.6x their norm. Refinement raises the log joint and the top-layer elements
    projected to the data plane match the truth with mean cosine >= 0.9 (they start
    below that)."""
    model, d_true, x = _draw(100)
    rng = np.random.default_rng(1)
    d_start = [(d + 0.6 * rng.normal(size=d.shape) * np.linalg.norm(d) / np.sqrt(d.size)).astype(np.float32)
               for d in d_true]
    truth = project_top_to_data(model, d_true)
    start_cos = _matched_cosine(truth, project_top_to_data(model, d_start))
    out = refine.run_refine(x, refine.Start(d_start, LAYERS, gamma_e_init=100.0, gamma_s_init=0.25),
                            refine.RefineOptions(burn_in=20, collect=5), seed=3, progress=None)
    lj = [r["log_joint"] for r in out["trace"]]
    assert lj[-1] > lj[0]
    end_cos = _matched_cosine(truth, project_top_to_data(model, out["D"]))
    assert start_cos < 0.9 <= end_cos, (start_cos, end_cos)
    tr = out["trace"]  # the fit tightens: residual down, noise precision up
    assert tr[-1]["rel_residual"] < 0.75 * tr[0]["rel_residual"]
    assert tr[-1]["gamma_e_mean"] > 2 * tr[0]["gamma_e_mean"]


@pytest.mark.slow
def test_masked_inference_fills_the_hidden_half_better_than_the_mean():
    """Dictionaries known, the bottom half of each image hidden, the chain started at the
    model's own draw of the hidden variables: 10 sweeps with only the observed pixels in
    the likelihood keep a Rao-Blackwellised reconstruction whose hidden half beats the
    mean image of other draws by far. (From the matched-filter start the chain does not
    find that explanation within 30 sweeps on this dense synthetic model: a mixing
    limit recorded in docs/design.md, not an error of the conditionals.)"""
    from dgdm_tf.topdown.state import init_state, residual
    from dgdm_tf.topdown.sweep import make_sweep_fn

    model, d_true, x, truth = _draw(60, seed=4, with_state=True)
    ref, test = x[:40], x[40:]
    mask = deep_chain.missing_mask(test.shape, "half")
    xm, mt = tf.constant(test * mask), tf.constant(mask)
    st = init_state(test, model, d_true, [0, 1], gamma_e_init=400.0, gamma_s_init=0.25, mask=mt)
    st = st._replace(z=(tf.constant(truth["z0"][40:]),), s_top=tf.constant(truth["s"][40:]),
                     on=tf.constant(truth["on"][40:]))
    st = st._replace(resid=residual(st, xm, model, mt))
    fn = make_sweep_fn(model, mask_given=True, update_globals=False)
    rec = np.zeros_like(test)
    for _ in range(10):
        z_before = st.z
        st, stats = fn(st, xm, mt)
        rec += generate(stats["expected_top"], model, st.d, z_before).numpy() / 10
    ours = deep_chain.hidden_error(test, rec, mask)["mse"]
    mean_fill = deep_chain.hidden_error(test, np.broadcast_to(ref.mean(0), test.shape), mask)["mse"]
    assert ours < 0.5 * mean_fill, (ours, mean_fill)


@pytest.mark.slow
def test_missing_pixels_never_enter_inference():
    model, d_true, x = _draw(8, seed=4)
    mask = deep_chain.missing_mask(x.shape, "half")
    start = refine.Start(d_true, LAYERS, gamma_e_init=100.0, gamma_s_init=0.25)
    opts = TopdownOptions(burn_in=2, collect=2, batch_size=4, **ONE_CHAIN)
    res = deep_chain.infer_topdown(x, start, opts, seed=0, mask=mask, progress=None)
    poked = x.copy()
    poked[mask == 0] = np.nan  # not even required to be finite
    res2 = deep_chain.infer_topdown(poked, start, opts, seed=0, mask=mask, progress=None)
    np.testing.assert_array_equal(res2["reconstruction"], res["reconstruction"])
    np.testing.assert_array_equal(res2["features"], res["features"])


@pytest.mark.slow
def test_hidden_blocks_enter_the_reconstruction_at_their_conditional_mean():
    """Exact, first sweep (theta is then at its prior mean, known): the reconstruction is
    g(E[S_top | rest], Z) with the Z of every block whose footprint is wholly hidden
    replaced by E[Z | theta] (uniform over the p*p positions and off), every other block
    at the start's state. Rows 12-15 are reached by such blocks only: with one draw of
    their Z (the estimator before) they held the matched-filter start's position."""
    from dgdm_tf.topdown.state import init_state
    from dgdm_tf.core.model import layer_inputs, soft_indicators, unseen_blocks

    model, d, x = _draw(6, seed=4)
    mask = deep_chain.missing_mask(x.shape, "half")
    res = deep_chain.infer_topdown(x, refine.Start(d, LAYERS, gamma_e_init=100.0, gamma_s_init=0.25),
                                   TopdownOptions(burn_in=0, collect=1, batch_size=6, **ONE_CHAIN),
                                   seed=0, mask=mask, progress=None)
    unseen = unseen_blocks(mask, model)[0]
    assert unseen[:, 4:].all() and not unseen[:, :4].any()  # blocks reach rows 2u .. 2u + 5
    xm = np.where(mask > 0, x, 0.0).astype(np.float32)
    st = init_state(xm, model, d, [0, 1], gamma_e_init=100.0, mask=tf.constant(mask))
    g0, gt = model.geoms
    theta = np.full((6, g0.k, g0.n_states), 1.0 / g0.n_states, np.float32)
    zd = [soft_indicators(st.z[0], g0, theta, unseen)]
    s_top = res["features"].reshape(6, gt.hs, gt.ws, gt.k)
    want = layer_inputs(tf.constant(s_top), model, st.d, zd)[0].numpy()
    np.testing.assert_allclose(res["reconstruction"], want, rtol=1e-4, atol=1e-5)
    one_draw = layer_inputs(tf.constant(s_top), model, st.d, [soft_indicators(st.z[0], g0)])[0].numpy()
    assert np.abs(one_draw[:, 12:] - want[:, 12:]).max() > 0.1  # the draw differs there
    np.testing.assert_allclose(one_draw[:, :8], want[:, :8], rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_permuted_maps_are_the_same_model_and_chains_are_put_back_in_order():
    """permute_maps is the same generative function; infer_topdown's chain 1 (its maps
    in another order) reports features and layer-1 outputs in the given map order: they
    agree with chain 0's (it is the single chain), which a wrong order would not."""
    model, d, x = _draw(12, seed=4, noise=0.02)
    perms = deep_chain.chain_permutations([4, 3], 1)
    assert all(np.array_equal(p, np.arange(len(p))) for p in deep_chain.chain_permutations([4, 3], 0))
    dp = deep_chain.permute_maps(d, perms)
    rng = np.random.default_rng(0)
    g0, gt = model.geoms
    s = rng.normal(size=(3, gt.hs, gt.ws, gt.k)).astype(np.float32)
    z = rng.integers(0, g0.n_states, size=(3, g0.nbh, g0.nbw, g0.k)).astype(np.int32)
    a = generate(tf.constant(s), model, [tf.constant(v) for v in d], [tf.constant(z)]).numpy()
    b = generate(tf.constant(s[..., perms[1]]), model, [tf.constant(v) for v in dp],
                 [tf.constant(z[..., perms[0]])]).numpy()
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    start = refine.Start(d, LAYERS, gamma_e_init=1000.0, gamma_s_init=0.25)
    opts = TopdownOptions(burn_in=5, collect=5, batch_size=12, **ONE_CHAIN)
    kw = dict(seed=0, progress=None)
    one = deep_chain.infer_topdown(x, start, opts, **kw)
    two = deep_chain.infer_topdown(x, start, dataclasses.replace(opts, chains=2, keep_chains=True), **kw)
    # keep_chains reports each chain's own mean: chain 0 is the single chain, and the
    # chains' average is the features
    np.testing.assert_array_equal(two["chain_features"][0], one["features"])
    np.testing.assert_allclose(two["chain_features"].mean(0), two["features"], rtol=1e-5, atol=1e-7)
    assert "chain_features" not in one
    for key in ("features", "layer1_pooled"):
        second = 2 * two[key] - one[key]  # chain 1 alone
        assert not np.allclose(second, one[key], atol=1e-3)
        assert np.corrcoef(second.ravel(), one[key].ravel())[0, 1] > 0.6, key
    with pytest.raises(ValueError, match="chains"):
        dataclasses.replace(opts, chains=0)
    # chain_orders "same": chain 1 keeps chain 0's map order and differs by its seed, so
    # it repeats neither chain 0 nor the permuted chain 1
    same = deep_chain.infer_topdown(x, start, dataclasses.replace(opts, chains=2, keep_chains=True,
                                                                  chain_orders="same"), **kw)
    np.testing.assert_array_equal(same["chain_features"][0], one["features"])
    assert not np.allclose(same["chain_features"][1], one["features"], atol=1e-3)
    assert not np.allclose(same["chain_features"][1], two["chain_features"][1], atol=1e-3)
    with pytest.raises(ValueError, match="chain_orders"):
        dataclasses.replace(opts, chains=2, chain_orders="reversed")


def test_each_test_time_chain_traces_its_scalars_for_r_hat():
    """Two chains on two batches: trace_sums holds each batch's and chain's traced
    scalars at every sweep; pooled over the batches, chain c's mean feature over its
    collected sweeps is the mean of its own features (what the trace claims to be), and
    trace_settlement reads the pooled traces (R-hat across the two chains)."""
    from dgdm_tf.mcmc.diagnostics import pooled_traces, trace_settlement

    _model, d, x = _draw(12, seed=4, noise=0.02)
    start = refine.Start(d, LAYERS, gamma_e_init=1000.0, gamma_s_init=0.25)
    opts = TopdownOptions(burn_in=2, collect=4, batch_size=6, chains=2, keep_chains=True)
    out = deep_chain.infer_topdown(x, start, opts, seed=0, progress=None)
    assert out["trace_sums"].shape == (2, 2, len(deep_chain.TRACE_SCALARS), 6)
    np.testing.assert_array_equal(out["trace_images"], [6, 6])
    traces = pooled_traces(out["trace_sums"], out["trace_images"], deep_chain.TRACE_SCALARS)
    collected = [opts.schedule.at(t).collected for t in range(opts.schedule.total)]
    for c in range(2):
        np.testing.assert_allclose(np.mean(traces[c]["feature_mean"][collected]),
                                   out["chain_features"][c].mean(), rtol=1e-5)
        assert 0 <= traces[c]["active_top"].min() and traces[c]["active_top"].max() <= 1
    settle = trace_settlement(traces, collected=collected)
    assert settle["n_chains"] == 2 and settle["scalars"]["gamma_e_mean"]["rhat"] is not None


def test_a_sweep_of_many_chunks_reports_its_progress_a_tenth_at_a_time():
    """A refinement sweep of at least PROGRESS_PARTS chunks says how far it is at each
    tenth of them (here 20 chunks: every second one) with the time left; a sweep of fewer
    chunks says nothing inside the sweep."""
    _model, d_true, x = _draw(20, seed=5)
    start = refine.Start(d_true, LAYERS, gamma_e_init=50.0, gamma_s_init=0.25)
    tenths = [f"{c}/20 chunks" for c in range(2, 21, 2)]
    for chunk, lines in ((1, [f"refine sweep {t}/2: {c}" for t in (1, 2) for c in tenths]), (4, [])):
        said = []
        refine.run_refine(x, start, refine.RefineOptions(burn_in=1, collect=1, chunk=chunk),
                          seed=1, progress=said.append)
        inside = [m for m in said if "chunks," in m]
        assert [m.split(",")[0] for m in inside] == lines, said
        assert all("s to go" in m for m in inside)
    assert PROGRESS_PARTS == 10  # the threshold the lines above assume: 20 chunks report, 5 do not


@pytest.mark.slow
def test_killed_refinement_resumes_to_the_same_result(tmp_path):
    model, d_true, x = _draw(6, seed=5)
    start = refine.Start(d_true, LAYERS, gamma_e_init=50.0, gamma_s_init=0.25)
    opts = refine.RefineOptions(burn_in=3, collect=3, checkpoint_every=2)
    kw = dict(seed=1, progress=None)
    full = refine.run_refine(x, start, opts, **kw)
    ck = tmp_path / "ck"
    assert refine.run_refine(x, start, opts, checkpoint=CheckpointDir(ck, stop_after=4), **kw) is None
    assert (ck / "checkpoint.npz").exists()
    resumed = refine.run_refine(x, start, opts, checkpoint=CheckpointDir(ck), **kw)
    for a, b in zip(full["D"], resumed["D"]):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(full["features"], resumed["features"])
    assert [r["sweep"] for r in resumed["trace"]] == list(range(1, 7))
    # the other scan order is another chain: it does not resume from this checkpoint
    said = []
    kw["progress"] = said.append
    assert refine.run_refine(x, start, dataclasses.replace(opts, scan="fixed"),
                             checkpoint=CheckpointDir(ck, stop_after=1), **kw) is None
    assert "starting afresh" in said[0]


@pytest.mark.slow
def test_on_step_reads_every_sweep_and_leaves_the_draws_unchanged():
    """run_refine's on_step sees each sweep's state; a chain with it draws the same bits,
    and the states it saw, summed over the collected sweeps as the chain sums them, give
    the chain's collection average."""
    model, d_true, x = _draw(6, seed=5)
    kw = dict(seed=1, progress=None)
    start = refine.Start(d_true, LAYERS, gamma_e_init=50.0, gamma_s_init=0.25)
    opts = refine.RefineOptions(burn_in=2, collect=3)
    plain = refine.run_refine(x, start, opts, **kw)
    seen = {}
    watched = refine.run_refine(x, start, opts, **kw,
                                on_step=lambda t, st: seen.setdefault(t, [np.asarray(d) for d in st[0].d]))
    assert sorted(seen) == list(range(5))
    for a, b in zip(plain["D"], watched["D"]):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(plain["features"], watched["features"])
    for l in range(len(d_true)):
        acc = seen[2][l]
        for t in (3, 4):
            acc = acc + seen[t][l]
        np.testing.assert_array_equal((acc / 3.0).astype(np.float32), watched["D"][l])


def test_missing_masks_and_errors():
    m = deep_chain.missing_mask((4, 10, 8, 3), "half")
    assert m[:, :5].min() == 1 and m[:, 5:].max() == 0
    m = deep_chain.missing_mask((50, 10, 8, 1), "pixels", fraction=0.3, seed=2)
    assert abs((m == 0).mean() - 0.3) < 0.03
    m = deep_chain.missing_mask((5, 10, 8, 1), "blocks", block=4, seed=2)
    assert np.all((m == 0).sum(axis=(1, 2, 3)) == 16)
    with pytest.raises(ValueError, match="half"):
        deep_chain.missing_mask((1, 4, 4, 1), "stripes")
    x = np.zeros((1, 2, 2, 1))
    assert deep_chain.hidden_error(x, x + 0.1, np.array([[[[1], [0]], [[1], [1]]]]))["psnr_db"] == pytest.approx(20.0)
    with pytest.raises(ValueError, match="hides no pixel"):
        deep_chain.hidden_error(x, x, np.ones_like(x))


def test_refinement_refuses_bad_input():
    _, d_true, x = _draw(4, seed=6)
    bad = x.copy()
    bad[0, 0, 0, 0] = np.nan
    with pytest.raises(FloatingPointError, match="non-finite"):
        refine.run_refine(bad, refine.Start(d_true, LAYERS), TWO_SWEEPS, seed=0, progress=None)
    with pytest.raises(ValueError, match="shape"):
        refine.run_refine(x, refine.Start([d_true[0][:4], d_true[1]], LAYERS), TWO_SWEEPS, seed=0,
                          progress=None)
    with pytest.raises(ValueError, match="pool"):
        refine.run_refine(x, refine.Start(d_true, [LAYERS[0], dict(LAYERS[1], pool=2)]), TWO_SWEEPS,
                          seed=0, progress=None)
    with pytest.raises(ValueError, match="labels need SupervisedOptions"):
        refine.run_refine(x, refine.Start(d_true, LAYERS, n_classes=2), TWO_SWEEPS, seed=0,
                          labels=np.zeros(len(x), int), progress=None)


@pytest.mark.slow
def test_chain_states_are_one_chain_kept_at_the_sweeps_asked():
    """chain_states keeps the states of one chain: asking for sweeps {0, 1, 3} or {3}
    gives the same state at 3 (one chain, not one per sweep), the same seed repeats it,
    another seed does not, and each kept state's residual is its own image's."""
    model, d, x = _draw(6, seed=5, noise=0.02)
    held = Start(dictionaries=d, layers=LAYERS, gamma_s_init=0.25, gamma_e_init=1000.0)
    m, some = deep_chain.chain_states(x, held, seed=[3, 4], sweeps=[0, 1, 3])
    assert sorted(some) == [0, 1, 3] and not np.asarray(some[0].on).any()  # the start: every top unit off
    _, late = deep_chain.chain_states(x, held, seed=[3, 4], sweeps=[3])
    _, other = deep_chain.chain_states(x, held, seed=[3, 5], sweeps=[3])
    for f in ("s_top", "on", "gamma_e", "resid"):
        np.testing.assert_array_equal(np.asarray(getattr(late[3], f)), np.asarray(getattr(some[3], f)))
    assert not np.array_equal(np.asarray(other[3].s_top), np.asarray(late[3].s_top))
    from dgdm_tf.topdown.state import residual
    np.testing.assert_allclose(np.asarray(some[3].resid), np.asarray(residual(some[3], x, m)), atol=1e-4)


def test_refinement_chains_and_their_settlement(tmp_path):
    """Chain 0 of two is the one chain bit for bit (the result is chain 0's), chain 1
    draws another chain; both trace ||D[l]|| and its move from the start; a 3-sweep chain
    from a perturbed start reads "not settled", its R-hat not computed (3 draws)."""
    model, d_true, x = _draw(6, seed=5)
    rng = np.random.default_rng(2)
    d_start = [(d + 0.6 * rng.normal(size=d.shape) * np.linalg.norm(d) / np.sqrt(d.size)).astype(np.float32)
               for d in d_true]
    said = []
    start = refine.Start(d_start, LAYERS, gamma_e_init=50.0, gamma_s_init=0.25)
    opts = refine.RefineOptions(burn_in=1, collect=2)
    one = refine.run_refine(x, start, opts, seed=1, progress=None)
    two = refine.run_refine(x, start, dataclasses.replace(opts, chains=2), seed=1,
                            progress=said.append, checkpoint=CheckpointDir(tmp_path / "ck"))
    for a, b in zip(one["D"], two["D"]):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(one["features"], two["features"])
    assert [r["log_joint"] for r in one["trace"]] == [r["log_joint"] for r in two["chain_traces"][0]]
    assert [r["log_joint"] for r in two["chain_traces"][1]] != [r["log_joint"] for r in one["trace"]]
    assert (tmp_path / "ck" / "trace_chain1.csv").exists() and (tmp_path / "ck" / "chain1").is_dir()
    first = one["trace"][0]
    assert first["dnorm_layer1"] > 0 and 0 < first["dmove_layer1"] < 1 and "dmove_layer2" in first
    for out in (one, two):
        st = out["settlement"]
        assert not st["settled"] and st["drifting"] and "not computed" in st["rhat"]
        assert set(st["scalars"]) == set(refine.settle_columns(model.n_layers, model.supervised))
    assert one["settlement"]["n_chains"] == 1 and two["settlement"]["n_chains"] == 2
    verdict = [m for m in said if "settled" in m]
    assert len(verdict) == 1 and verdict[0].startswith("refinement not settled: ")
    assert any(m.startswith("chain 2/2: refine sweep 3/3") for m in said)
    with pytest.raises(ValueError, match="chains must be at least 1"):
        dataclasses.replace(opts, chains=0)
