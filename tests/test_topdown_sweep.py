"""Tests of the top-down sampler (dgdm_tf.topdown): exactness (Geweke joint-distribution
tests on tiny 2- and 3-layer models), the fast layer-0 path against the generic one,
residual bookkeeping, determinism, masked inference."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from dgdm_tf.core.draws import log_dirichlet_sample
from dgdm_tf.topdown import sweep as topdown_sweep
from dgdm_tf.topdown import top_units, unpooling
from dgdm_tf.topdown.dictionaries import _layer_s, resample_d
from dgdm_tf.topdown.scan import scan_orders
from dgdm_tf.topdown.state import concat_images, dense_z, init_state, reconstruct, residual, take_images
from dgdm_tf.topdown.sweep import local_steps, make_sweep_fn
from dgdm_tf.topdown.top_units import resample_top, top_unit_images
from dgdm_tf.topdown.unpooling import resample_z
from dgdm_tf.core.compiled import compiled
from dgdm_tf.core.model import DeepModel
from _deep_geweke import (GEWEKE_HYPER, forward_draws, gamma_s_without_off_weights, geweke_sweep,
                          power_size)

# The default tier's Geweke sizes, (chains, sweeps, seed); each one's power, a known-wrong
# conditional's z at that size, is measured in docs/findings/geweke_power.md
SMALL_TWO, SMALL_GLOBAL, SMALL_CHUNKED, SMALL_THREE = (40, 4, 11), (30, 4, 12), (30, 4, 13), (30, 4, 12)
# The slow tier's, with theirs (GEWEKE_POWER_AT=slow runs the wrong conditionals at them)
SLOW_TWO, SLOW_CHUNKED, SLOW_THREE = (100, 6, 11), (60, 6, 13), (100, 6, 12)


@pytest.mark.slow
def test_geweke_two_layers():
    """Successive-conditional simulation keeps the joint (|z| < 4: SLOW_TWO, 100 chains
    of 6 sweeps) on test functions of D[0], D[1], gamma_e, gamma_s, the top units and pi, the
    unpooling states and theta, and data-parameter cross terms. Partial edge blocks,
    C = 2 channels."""
    model = DeepModel((7, 8, 2), [{"dict_size": 2, "n_dict": 2, "pool": 2},
                                  {"dict_size": 2, "n_dict": 2, "pool": 1}], GEWEKE_HYPER)
    chains, steps, seed = SLOW_TWO
    z, acc = geweke_sweep(model, n=2, chains=chains, steps=steps, seed=seed)
    assert acc[1] > 0.3, acc  # the HMC kernel moves
    assert np.all(np.abs(z) < 4.0), z


def test_geweke_two_layers_small():
    """The test above at the default tier's size (SMALL_TWO: 40 chains of 4 sweeps),
    whose power the next test shows."""
    model = DeepModel((7, 8, 2), [{"dict_size": 2, "n_dict": 2, "pool": 2},
                                  {"dict_size": 2, "n_dict": 2, "pool": 1}], GEWEKE_HYPER)
    chains, steps, seed = SMALL_TWO
    z, acc = geweke_sweep(model, n=2, chains=chains, steps=steps, seed=seed)
    assert acc[1] > 0.3, acc
    assert np.all(np.abs(z) < 4.0), z


@pytest.mark.retrace
def test_geweke_finds_a_wrong_conditional(monkeypatch):
    """The small test has power: gamma_s drawn without the off units' weights
    (:func:`_deep_geweke.gamma_s_without_off_weights`) is not the conditional, and the
    same harness at the same size puts the mean of log gamma_s over images and maps far
    outside |z| < 4 (too large)."""
    monkeypatch.setattr(topdown_sweep, "resample_gamma_s", gamma_s_without_off_weights)  # as the sweep calls it
    model = DeepModel((7, 8, 2), [{"dict_size": 2, "n_dict": 2, "pool": 2},
                                  {"dict_size": 2, "n_dict": 2, "pool": 1}], GEWEKE_HYPER)
    chains, steps, seed = power_size(SMALL_TWO, SLOW_TWO)
    z, _ = geweke_sweep(model, n=2, chains=chains, steps=steps, seed=seed)
    print(f"z at {chains} x {steps}: {np.round(z, 2).tolist()}")
    assert z[4] > 5.0, z  # mean log gamma_s


def _pi_from_the_off_counts(state, x, model, seed):
    """A wrong pi | -: Beta(1/K + #off, 1 - 1/K + #on), the counts swapped."""
    on = tf.reduce_sum(state.on, axis=[1, 2])
    total = float(model.top.hs * model.top.ws)
    counts = tf.stack([total - on, on], axis=-1)
    return state._replace(log_pi=log_dirichlet_sample(model.pi_prior + counts, seed))


@pytest.mark.retrace
def test_geweke_finds_pi_drawn_from_the_off_counts(monkeypatch):
    """The small test sees a pi that swaps the on and off counts: at K = 2 pi's prior is
    symmetric, so every marginal moment stays right, and only the cross term of pi with
    the indicators (the last test function) moves, far outside |z| < 4 (too small: pi
    and the units it draws go opposite ways). A session's deliberate break found this
    blind spot before the cross term was added (docs/benchmarks/test_suite.md)."""
    monkeypatch.setattr(topdown_sweep, "resample_pi", _pi_from_the_off_counts)  # as the sweep calls it
    model = DeepModel((7, 8, 2), [{"dict_size": 2, "n_dict": 2, "pool": 2},
                                  {"dict_size": 2, "n_dict": 2, "pool": 1}], GEWEKE_HYPER)
    chains, steps, seed = SMALL_TWO
    z, _ = geweke_sweep(model, n=2, chains=chains, steps=steps, seed=seed)
    assert z[-1] < -5.0, z  # mean of pi x the unit's share on


@pytest.mark.slow
def test_geweke_two_layers_global_gamma_s():
    """The global gamma_s (``hyper.gamma_s: global``, the measured option) keeps the joint
    too: one gamma_s for every image and map, drawn with the dictionaries (60 chains of
    12 sweeps: the kernel is the one the sampler had before gamma_s was per image)."""
    model = DeepModel((7, 8, 2), [{"dict_size": 2, "n_dict": 2, "pool": 2},
                                  {"dict_size": 2, "n_dict": 2, "pool": 1}],
                      {**GEWEKE_HYPER, "gamma_s": "global"})
    z, _ = geweke_sweep(model, n=2, chains=60, steps=12, seed=12)
    assert np.all(np.abs(z) < 4.0), z


def _global_gamma_s_model():
    return DeepModel((7, 8, 2), [{"dict_size": 2, "n_dict": 2, "pool": 2},
                                 {"dict_size": 2, "n_dict": 2, "pool": 1}],
                     {**GEWEKE_HYPER, "gamma_s": "global"})


def test_geweke_two_layers_global_gamma_s_small():
    """The test above at the default tier's size (SMALL_GLOBAL: 30 chains of 4 sweeps).
    Its power, the next test (slow tier): a wrong shape gives z = 8.4 on log gamma_s at
    this size (docs/findings/geweke_power.md)."""
    chains, steps, seed = SMALL_GLOBAL
    z, _ = geweke_sweep(_global_gamma_s_model(), n=2, chains=chains, steps=steps, seed=seed)
    assert np.all(np.abs(z) < 4.0), z


@pytest.mark.slow
@pytest.mark.retrace
def test_geweke_global_gamma_s_finds_a_wrong_conditional(monkeypatch):
    """The small test has power: the global gamma_s's shape counting every top unit, on
    or off (a_w + N K M / 2, where the conditional counts the A active units), is not the
    conditional; the same harness at the same size puts log gamma_s outside |z| < 4."""
    def wrong(state, x, model, seed):
        h = model.hyper
        shape = h.a_w + 0.5 * tf.cast(tf.size(state.on), tf.float32)
        g = tf.random.stateless_gamma([], seed, alpha=shape) / (h.b_w + 0.5 * tf.reduce_sum(tf.square(state.s_top)))
        return state._replace(gamma_s=tf.fill(tf.shape(state.gamma_s), g))

    monkeypatch.setattr(topdown_sweep, "resample_gamma_s", wrong)
    chains, steps, seed = SMALL_GLOBAL
    z, _ = geweke_sweep(_global_gamma_s_model(), n=2, chains=chains, steps=steps, seed=seed)
    assert z[4] > 5.0, z  # mean log gamma_s


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["image_map", "global"])
def test_fixed_dictionary_chains_draw_gamma_s_only_when_it_is_per_image(kind):
    """gamma_s per image and map is a local variable: the test-time chains (dictionaries
    held) draw it every sweep; a global one they hold, as they hold D."""
    model = DeepModel((7, 8, 2), [{"dict_size": 2, "n_dict": 2, "pool": 2},
                                  {"dict_size": 2, "n_dict": 2, "pool": 1}], {**GEWEKE_HYPER, "gamma_s": kind})
    st, x, _ = forward_draws(np.random.default_rng(0), model, 3)
    st2, _ = make_sweep_fn(model, update_globals=False)(st, tf.constant(x))
    assert tuple(st2.gamma_s.shape) == (3, model.top.k)
    assert (not np.array_equal(st2.gamma_s.numpy(), st.gamma_s.numpy())) == (kind == "image_map")
    if kind == "global":
        assert np.all(st2.gamma_s.numpy() == st2.gamma_s.numpy()[0, 0])


def _chunked(chains, steps, seed):
    model = DeepModel((7, 8, 2), [{"dict_size": 2, "n_dict": 2, "pool": 2},
                                  {"dict_size": 2, "n_dict": 2, "pool": 1}], GEWEKE_HYPER)
    return geweke_sweep(model, n=3, chains=chains, steps=steps, seed=seed, chunk=2)


@pytest.mark.slow
def test_geweke_two_layers_chunked():
    """The chunked sweep (per-image steps a chunk at a time, globals on all images) keeps
    the joint: 3 images in chunks of 2 and 1, the same test functions, |z| < 4
    (SLOW_CHUNKED, 60 chains of 6 sweeps: the unchunked sweep has its own test above; this
    one checks what chunking adds)."""
    z, acc = _chunked(*SLOW_CHUNKED)
    assert acc[1] > 0.3, acc
    assert np.all(np.abs(z) < 4.0), z


def test_geweke_two_layers_chunked_small():
    """The test above at the default tier's size (SMALL_CHUNKED: 30 chains of 4 sweeps).
    Its power, the next test (slow tier): gamma_s without the off units' weights gives
    z = 9.9 on the mean of log gamma_s at this size (docs/findings/geweke_power.md)."""
    z, acc = _chunked(*SMALL_CHUNKED)
    assert acc[1] > 0.3, acc
    assert np.all(np.abs(z) < 4.0), z


@pytest.mark.slow
@pytest.mark.retrace
def test_geweke_chunked_finds_a_wrong_conditional(monkeypatch):
    """The small chunked test has power: gamma_s drawn without the off units' weights
    (:func:`_deep_geweke.gamma_s_without_off_weights`), patched into the chunked
    sweep's global steps, puts the mean of log gamma_s outside |z| < 4 at the same size."""
    monkeypatch.setattr(topdown_sweep, "resample_gamma_s", gamma_s_without_off_weights)
    z, _ = _chunked(*power_size(SMALL_CHUNKED, SLOW_CHUNKED))
    print(f"z: {np.round(z, 2).tolist()}")
    assert z[4] > 5.0, z  # mean log gamma_s


@pytest.mark.slow
def test_geweke_three_layers():
    """As above for three layers (SLOW_THREE, 100 chains of 6 sweeps): the windowed paths
    of the middle layer's blocks and of the top units, and HMC of D[1] and D[2]."""
    chains, steps, seed = SLOW_THREE
    z, acc = geweke_sweep(_three_layers(), n=2, chains=chains, steps=steps, seed=seed)
    assert np.all(acc[1:] > 0.3), acc
    assert np.all(np.abs(z) < 4.0), z


def _three_layers():
    return DeepModel((9, 9, 1), [{"dict_size": 2, "n_dict": 2, "pool": 2},
                                 {"dict_size": 2, "n_dict": 2, "pool": 2},
                                 {"dict_size": 1, "n_dict": 2, "pool": 1}], GEWEKE_HYPER)


def test_geweke_three_layers_small():
    """The test above at the default tier's size (SMALL_THREE: 30 chains of 4 sweeps).
    Its power, the next test (slow tier): gamma_s without the off units' weights gives
    z = 6.2 on the mean of log gamma_s at this size (docs/findings/geweke_power.md)."""
    chains, steps, seed = SMALL_THREE
    z, acc = geweke_sweep(_three_layers(), n=2, chains=chains, steps=steps, seed=seed)
    assert np.all(acc[1:] > 0.3), acc
    assert np.all(np.abs(z) < 4.0), z


@pytest.mark.slow
@pytest.mark.retrace
def test_geweke_three_layers_finds_a_wrong_conditional(monkeypatch):
    """The small three-layer test has power: gamma_s drawn without the off units' weights
    (:func:`_deep_geweke.gamma_s_without_off_weights`) puts the mean of log gamma_s
    outside |z| < 4 at the same size. (A flat Dir(1) prior in theta's draw, a subtler
    slip, stays below it there: docs/findings/geweke_power.md.)"""
    monkeypatch.setattr(topdown_sweep, "resample_gamma_s", gamma_s_without_off_weights)
    chains, steps, seed = power_size(SMALL_THREE, SLOW_THREE)
    z, _ = geweke_sweep(_three_layers(), n=2, chains=chains, steps=steps, seed=seed)
    print(f"z at {chains} x {steps}: {np.round(z, 2).tolist()}")
    assert z[4] > 5.0, z  # mean log gamma_s


# ---------------------------------------------------------------------------------------
# Fast paths, bookkeeping, determinism
# ---------------------------------------------------------------------------------------

def _tiny(seed=0, n=3):
    model = DeepModel((12, 13, 2), [{"dict_size": 3, "n_dict": 3, "pool": 2},
                                    {"dict_size": 2, "n_dict": 2, "pool": 1}])
    rng = np.random.default_rng(seed)
    ds = [rng.normal(size=(g.dh, g.dw, g.c, g.k)).astype(np.float32) for g in model.geoms]
    x = rng.normal(size=(n, 12, 13, 2)).astype(np.float32)
    st = init_state(x, model, ds, [1, 2])
    st = resample_top(st, x, model, tf.constant([5, 6]), fast=False)
    return model, x, st


def test_fast_paths_draw_what_the_generic_paths_draw():
    """Layer-0 blocks by footprint correlations and the two-layer top by one batched
    product give the same draws as one pass down per candidate (partial edge blocks,
    C = 2), with and without a fresh state."""
    model, x, st = _tiny()
    a = resample_z(st, x, model, 0, tf.constant([3, 4]), fast=True)
    b = resample_z(st, x, model, 0, tf.constant([3, 4]), fast=False)
    assert np.array_equal(a.z[0].numpy(), b.z[0].numpy())
    np.testing.assert_allclose(a.resid.numpy(), b.resid.numpy(), atol=1e-5)
    a = resample_top(st, x, model, tf.constant([9, 6]), fast=True)
    b = resample_top(st, x, model, tf.constant([9, 6]), fast=False)
    assert np.array_equal(a.on.numpy(), b.on.numpy()) and a.on.numpy().sum() > 0
    np.testing.assert_allclose(a.s_top.numpy(), b.s_top.numpy(), atol=1e-5)


def test_two_layer_unit_images_by_frames_equal_one_pass_down_per_unit():
    """The two-layer top units' images, built frame by frame (a frame spanning 3 x 3
    cells, pool 3 with 5 x 5 atoms, edge blocks whose offsets fall outside S[0], C = 2),
    equal one pass down per unit, masked pixels included."""
    model = DeepModel((16, 17, 2), [{"dict_size": 5, "n_dict": 3, "pool": 3},
                                    {"dict_size": 2, "n_dict": 2, "pool": 1}])
    rng = np.random.default_rng(3)
    ds = [rng.normal(size=(g.dh, g.dw, g.c, g.k)).astype(np.float32) for g in model.geoms]
    x = rng.normal(size=(2, 16, 17, 2)).astype(np.float32)
    mask = tf.constant((rng.random(x.shape) > 0.3).astype(np.float32))
    st = init_state(x, model, ds, [1, 2], mask=mask)
    st = resample_z(st, x, model, 0, tf.constant([3, 4]), mask)
    z0 = st.z[0].numpy()
    assert 0 < np.mean(z0 < model.geoms[0].p ** 2) < 1  # blocks on and off
    # an edge block at an offset outside S[0]: it must place nothing
    z0[:, :, -1, :] = model.geoms[0].p - 1
    assert not model.position_valid(0)[0, -1, model.geoms[0].p - 1]
    st = st._replace(z=(tf.constant(z0),) + tuple(st.z[1:]))
    fast = top_unit_images(st, model, mask, fast=True)
    slow = top_unit_images(st, model, mask, fast=False)
    col = model.colourings[-1]
    for ci in range(len(col.colours())):
        for k in range(model.top.k):
            np.testing.assert_allclose(fast(ci, k).numpy(), slow(ci, k).numpy(), atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("use_mask,maps_per_pass", [(False, None), (True, 2)])
def test_windowed_passes_draw_what_the_whole_plane_passes_draw(use_mask, maps_per_pass, monkeypatch):
    """Blocks of layers 1 and 2 and the top units of a four-layer model (partial edge
    blocks, padded member grids), each candidate pushed down inside its member's window
    (fast; all maps' candidates in one pass, or 2 maps a pass: 3 maps in uneven passes)
    or through the whole plane (generic): the same draws, the same residual, and the
    residual is still the exact one."""
    if maps_per_pass:
        for mod in (top_units, unpooling):  # each binds its own maps_per_pass
            monkeypatch.setattr(mod, "maps_per_pass", lambda *a: min(maps_per_pass, a[-1]))
    model = DeepModel((40, 37, 1), [{"dict_size": 3, "n_dict": 2, "pool": 2},
                                    {"dict_size": 3, "n_dict": 3, "pool": 2},
                                    {"dict_size": 2, "n_dict": 3, "pool": 2},
                                    {"dict_size": 2, "n_dict": 3, "pool": 1}])
    rng = np.random.default_rng(4)
    ds = [rng.normal(size=(g.dh, g.dw, g.c, g.k)).astype(np.float32) for g in model.geoms]
    x = rng.normal(size=(2, 40, 37, 1)).astype(np.float32)
    mask = tf.constant((rng.random(x.shape) > 0.3).astype(np.float32)) if use_mask else None
    if use_mask:
        x = x * mask.numpy()
    st = init_state(x, model, ds, [1, 2], mask=mask)
    a = resample_top(st, x, model, tf.constant([5, 6]), mask, fast=True)
    b = resample_top(st, x, model, tf.constant([5, 6]), mask, fast=False)
    assert np.array_equal(a.on.numpy(), b.on.numpy()) and 0 < a.on.numpy().mean() < 1
    np.testing.assert_allclose(a.s_top.numpy(), b.s_top.numpy(), atol=1e-5)
    st = b
    for l in (2, 1):
        a = resample_z(st, x, model, l, tf.constant([3, l]), mask, fast=True)
        b = resample_z(st, x, model, l, tf.constant([3, l]), mask, fast=False)
        assert np.array_equal(a.z[l].numpy(), b.z[l].numpy())
        assert np.mean(a.z[l].numpy() != st.z[l].numpy()) > 0.2  # the draw moved blocks
        np.testing.assert_allclose(a.resid.numpy(), b.resid.numpy(), atol=1e-5)
        np.testing.assert_allclose(a.resid.numpy(), residual(a, x, model, mask).numpy(), atol=1e-5)
        st = b


def test_fast_bottom_blocks_with_missing_pixels_match_the_generic_path():
    model, x, _ = _tiny(3)
    rng = np.random.default_rng(3)
    mask = tf.constant((rng.random(x.shape) > 0.4).astype(np.float32))
    ds = [rng.normal(size=(g.dh, g.dw, g.c, g.k)).astype(np.float32) for g in model.geoms]
    st = init_state(x, model, ds, [1, 2], mask=mask)
    st = resample_top(st, x * mask, model, tf.constant([5, 6]), mask=mask, fast=False)
    a = resample_z(st, x * mask, model, 0, tf.constant([3, 4]), mask, fast=True)
    b = resample_z(st, x * mask, model, 0, tf.constant([3, 4]), mask, fast=False)
    assert np.array_equal(a.z[0].numpy(), b.z[0].numpy())
    np.testing.assert_allclose(a.resid.numpy(), b.resid.numpy(), atol=1e-4)
    np.testing.assert_allclose(a.resid.numpy(), residual(a, x * mask, model, mask).numpy(), atol=1e-4)


def test_unpooling_maps_keep_their_channels_with_an_unknown_batch():
    """A chunked sweep traces its per-image steps again with the batch unknown (chunks of
    other sizes); the dense unpooling maps must still know their map count, or the
    windowed passes of a three-layer model cannot be built."""
    from dgdm_tf.core.model import dense_indicators
    g = DeepModel((22, 21, 1), [{"dict_size": 3, "n_dict": 3, "pool": 2},
                                {"dict_size": 2, "n_dict": 2, "pool": 1}]).geoms[0]
    f = tf.function(lambda z: dense_indicators(z, g),
                    input_signature=[tf.TensorSpec([None, g.nbh, g.nbw, g.k], tf.int32)])
    assert f.get_concrete_function().structured_outputs.shape.as_list() == [None, g.hs, g.ws, g.k]


@pytest.mark.slow
def test_residual_stays_exact_through_a_sweep():
    model, x, st = _tiny(1)
    fn = make_sweep_fn(model)
    for _ in range(2):
        st, _ = fn(st, tf.constant(x))
    np.testing.assert_allclose(st.resid.numpy(), residual(st, x, model).numpy(), atol=1e-4)


def test_log_joint_terms_split_the_log_joint_by_image():
    """Each image's fit and codes are its own (the same computed on all images or on
    the image alone), the fit is the Gaussian log-density of the observed pixels of
    x - g(S) (NumPy), and the terms sum to the log joint."""
    model, x, st = _tiny(2, n=3)
    mask = (np.random.default_rng(3).random(x.shape) < 0.6).astype(np.float32)
    st = st._replace(resid=residual(st, x, model, mask))
    assert st.on.numpy().sum() > 0
    t = {k: v.numpy() for k, v in topdown_sweep.log_joint_terms(st, x, model, mask).items()}
    r = (x - reconstruct(st, model).numpy()) * mask
    ge = st.gamma_e.numpy()
    fit = 0.5 * mask.sum((1, 2, 3)) * np.log(ge / (2 * np.pi)) - 0.5 * ge * (r ** 2).sum((1, 2, 3))
    np.testing.assert_allclose(t["fit"], fit, rtol=1e-4)
    for i in range(len(x)):
        one = topdown_sweep.log_joint_terms(take_images(st, slice(i, i + 1)), x[i:i + 1], model,
                                            mask[i:i + 1])
        np.testing.assert_allclose(one["fit"].numpy(), t["fit"][i:i + 1], rtol=1e-5)
        np.testing.assert_allclose(one["codes"].numpy(), t["codes"][i:i + 1], rtol=1e-5)
        assert float(one["shared"]) == pytest.approx(float(t["shared"]))
    assert len(set(np.round(t["codes"], 3))) == len(x)  # the images' codes differ
    lj = float(topdown_sweep.log_joint(st, x, model, mask))
    assert lj == pytest.approx(t["fit"].sum() + t["codes"].sum() + t["shared"], rel=1e-5)


@pytest.mark.slow
def test_one_chunk_of_all_images_is_the_sweep():
    """Chunked wiring (slicing, joining, global steps, seeds, the adaptation flag as an
    argument): one chunk holding every image draws exactly what the unchunked sweep
    draws; two chunks draw something else and keep the residual exact."""
    model, x, st = _tiny(3, n=4)
    st = st._replace(hmc_log_step=tf.fill([model.n_layers], -1.0))  # room to adapt either way
    a, sa = make_sweep_fn(model, adapt=True)(st, tf.constant(x))
    b, sb = make_sweep_fn(model, chunk=4, adapt="argument")(st, tf.constant(x), tf.constant(True))
    for u, v in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(sa["expected_top"].numpy(), sb["expected_top"].numpy(), atol=1e-5)
    assert b.hmc_log_step.numpy()[1] != st.hmc_log_step.numpy()[1]  # the flag reached HMC
    c, sc = make_sweep_fn(model, chunk=3, adapt="argument")(st, tf.constant(x), tf.constant(False))
    assert sc["expected_top"].shape == sa["expected_top"].shape
    assert not np.array_equal(c.z[0].numpy(), a.z[0].numpy())
    assert np.array_equal(c.hmc_log_step.numpy(), st.hmc_log_step.numpy())
    np.testing.assert_allclose(c.resid.numpy(), residual(c, x, model).numpy(), atol=1e-4)


def test_joining_chunks_that_it_consumes_gives_the_same_state():
    """concat_images(consume=True), as the chunked sweep joins its chunks: the same state
    as the join that leaves its pieces, and the list of pieces emptied."""
    model, x, st = _tiny(3, n=5)
    parts = [take_images(st, slice(0, 2)), take_images(st, slice(2, 5))]
    kept = concat_images(st, parts)
    assert len(parts) == 2
    consumed = concat_images(st, parts, consume=True)
    assert parts == []
    for u, v, w in zip(tf.nest.flatten(kept), tf.nest.flatten(consumed), tf.nest.flatten(st)):
        assert np.array_equal(np.asarray(u), np.asarray(v)) and np.array_equal(np.asarray(u), np.asarray(w))


def test_block_states_are_bytes_and_draw_what_int32_states_draw():
    """A chain's state holds the block states as bytes (the start, every sweep, a
    checkpoint read back); a state holding them as int32 (a checkpoint written before)
    sweeps to the same state, bit for bit, whole and in chunks, with the same log joint."""
    from dgdm_tf.topdown.refine import _state_from_numpy, _state_to_numpy
    model, x, st = _tiny(4, n=5)
    assert all(z.dtype == tf.int8 for z in st.z)
    wide = st._replace(z=tuple(tf.cast(z, tf.int32) for z in st.z))
    back = _state_from_numpy(_state_to_numpy(wide))
    assert all(z.dtype == tf.int8 for z in back.z)
    assert all(np.array_equal(u.numpy(), v.numpy()) for u, v in zip(back.z, st.z))
    xt = tf.constant(x)
    assert float(topdown_sweep.log_joint(st, xt, model)) == float(topdown_sweep.log_joint(wide, xt, model))
    for chunk in (None, 2):
        fn = make_sweep_fn(model, chunk=chunk)
        a, _ = fn(st, xt)
        b, _ = fn(wide, xt)
        assert all(z.dtype == tf.int8 for z in a.z + b.z)
        assert not np.array_equal(a.z[0].numpy(), st.z[0].numpy())  # the sweep moved them
        for u, v in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
            assert np.array_equal(np.asarray(u), np.asarray(v))


@pytest.mark.slow
@pytest.mark.parametrize("n_layers", [2, 3])
def test_chunked_d_steps_draw_what_one_call_draws(n_layers):
    """Every D step reading the images 2 at a time (5 images: two chunks and a remainder;
    D[0] by its sums-over-images route, D[l >= 1]'s HMC potential, gradient and Hessian
    probes summed over chunks, the residual rebuilt chunk by chunk) draws what one call
    on every image draws, from the same seed, up to round-off; a middle layer's S[l]
    comes from the layers above it."""
    layers = [{"dict_size": 3, "n_dict": 3, "pool": 2}, {"dict_size": 2, "n_dict": 2, "pool": 1}]
    shape = (12, 13, 2)
    if n_layers == 3:
        layers = [{"dict_size": 3, "n_dict": 3, "pool": 2}, {"dict_size": 2, "n_dict": 3, "pool": 2},
                  {"dict_size": 1, "n_dict": 2, "pool": 1}]
        shape = (16, 15, 1)
    model = DeepModel(shape, layers)
    rng = np.random.default_rng(4)
    ds = [rng.normal(size=(g.dh, g.dw, g.c, g.k)).astype(np.float32) for g in model.geoms]
    x = tf.constant(rng.normal(size=(5,) + shape).astype(np.float32))
    st = init_state(x, model, ds, [1, 2])
    st = resample_top(st, x, model, tf.constant([5, 6]), fast=False)
    for l in range(n_layers):
        one, a1 = compiled(lambda s: resample_d(s, x, model, l, tf.constant([7, l])))(st)
        chunked, a2 = compiled(lambda s: resample_d(s, x, model, l, tf.constant([7, l]), chunk=2))(st)
        np.testing.assert_allclose(chunked.d[l].numpy(), one.d[l].numpy(), rtol=1e-3, atol=1e-4)
        assert np.abs(chunked.d[l].numpy() - st.d[l].numpy()).max() > 1e-3  # D moved
        np.testing.assert_allclose(chunked.resid.numpy(), one.resid.numpy(), rtol=1e-3, atol=1e-3)
        np.testing.assert_allclose(chunked.resid.numpy(), residual(chunked, x, model).numpy(),
                                   atol=1e-4)
        np.testing.assert_allclose(a2.numpy(), a1.numpy(), rtol=1e-3)


@pytest.mark.slow
def test_same_seed_gives_identical_sweeps():
    """The same seed twice: identical states. adapt="argument" (one trace for burn-in
    and collection, as deep_chain uses it) draws exactly what adapt=True draws; with the
    flag False the same, but the HMC steps (used from the next sweep on) stay put."""
    model, x, st = _tiny(2)
    st = st._replace(hmc_log_step=tf.fill([model.n_layers], -1.0))  # room to adapt either way
    fn = make_sweep_fn(model, adapt="argument")
    on, off = tf.constant(True), tf.constant(False)
    a, b = st, st
    for _ in range(2):
        a, _ = fn(a, tf.constant(x), on)
        b, _ = fn(b, tf.constant(x), on)
    for u, v in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
        assert np.array_equal(np.asarray(u), np.asarray(v))
    c, _ = fn(st._replace(seed=tf.constant([1, 3])), tf.constant(x), on)
    assert not np.array_equal(c.s_top.numpy(), a.s_top.numpy())
    fixed, _ = make_sweep_fn(model, adapt=True)(st, tf.constant(x))
    frozen, _ = fn(st, tf.constant(x), off)
    assert fn.experimental_get_tracing_count() == 1
    first, _ = fn(st, tf.constant(x), on)
    for u, v, w in zip(tf.nest.flatten(fixed), tf.nest.flatten(first),
                       tf.nest.flatten(frozen._replace(hmc_log_step=first.hmc_log_step))):
        assert np.array_equal(np.asarray(u), np.asarray(v)) and np.array_equal(np.asarray(u), np.asarray(w))
    assert np.array_equal(frozen.hmc_log_step.numpy(), st.hmc_log_step.numpy())
    assert not np.array_equal(first.hmc_log_step.numpy(), st.hmc_log_step.numpy())


def test_hmc_kernel_leaves_the_exact_gaussian_conditional_invariant():
    """D[1] of a two-layer model, everything else fixed: 3500 HMC draws match the mean
    and standard deviations of its exact Gaussian conditional (dense design matrix)."""
    from dgdm_tf.core.model import down_from
    from dgdm_tf.core.ops import full_conv
    model = DeepModel((7, 8, 2), [{"dict_size": 2, "n_dict": 2, "pool": 2},
                                  {"dict_size": 2, "n_dict": 2, "pool": 1}], GEWEKE_HYPER)
    st, x, _ = forward_draws(np.random.default_rng(3), model, 2)
    zd = dense_z(st, model)
    s_l = _layer_s(st.s_top, st.d, model, 1, zd)
    g = model.geoms[1]
    j = g.dh * g.dw * g.c * g.k
    cols = []
    for i in range(j):
        e = np.zeros(j, np.float32)
        e[i] = 1
        cols.append(down_from(full_conv(s_l, tf.constant(e.reshape(g.dh, g.dw, g.c, g.k))), 1,
                              model, st.d, zd).numpy().reshape(-1))
    a = np.array(cols).T
    ge = np.repeat(st.gamma_e.numpy(), np.prod(x.shape[1:]))
    prec = a.T @ (ge[:, None] * a) + np.eye(j)
    mu = np.linalg.solve(prec, a.T @ (ge * x.reshape(-1)))
    sd = np.sqrt(np.diag(np.linalg.inv(prec)))
    f = compiled(lambda s, sd_: resample_d(s, tf.constant(x), model, 1, sd_, n_leapfrog=5))
    draws = []
    for i in range(4000):
        st, _ = f(st, tf.constant([i, 99]))
        draws.append(st.d[1].numpy().reshape(-1))
    draws = np.array(draws)[500:]
    # autocorrelated draws (~175 effective): 0.6 sd is about 8 standard errors
    assert np.all(np.abs(draws.mean(0) - mu) < 0.6 * sd), (draws.mean(0), mu)
    np.testing.assert_allclose(draws.std(0), sd, rtol=0.2)


# ---------------------------------------------------------------------------------------
# Scan order
# ---------------------------------------------------------------------------------------

def _four_layers(scan="random"):
    """Partial edge blocks: layer 2's colours fall in four scan classes (window shapes)."""
    return DeepModel((40, 37, 1), [{"dict_size": 3, "n_dict": 2, "pool": 2},
                                   {"dict_size": 3, "n_dict": 3, "pool": 2},
                                   {"dict_size": 2, "n_dict": 3, "pool": 2},
                                   {"dict_size": 2, "n_dict": 3, "pool": 1}], scan=scan)


def test_scan_orders():
    """fixed: colours row-major (ints), maps in index order. random: each slot holds a
    colour of its own scan class, every colour once, each slot's maps a permutation; the
    same seed gives the same order, and over seeds every colour of a class reaches every
    slot of that class (one class, so every slot, where the path is not windowed)."""
    fixed = _four_layers("fixed")
    assert scan_orders(fixed, 2, tf.constant([1, 2])) == (list(range(9)), None)
    model = _four_layers()
    assert len(set(model.scan_classes(2))) == 4 and len(set(model.scan_classes(0))) == 1
    for l in (0, 2):
        classes = model.scan_classes(l)
        n_col, k = len(classes), model.geoms[l].k
        seen = np.zeros((n_col, n_col), bool)  # slot, colour
        for s in range(60):
            ids, maps = scan_orders(model, l, tf.constant([s, 5]))
            ids = np.array([int(v) for v in ids])
            assert sorted(ids) == list(range(n_col))
            assert np.array_equal(classes[ids], classes)
            assert np.array_equal(np.sort(maps.numpy(), axis=1), np.tile(np.arange(k), (n_col, 1)))
            seen[np.arange(n_col), ids] = True
        assert np.array_equal(seen, classes[:, None] == classes[None, :]), l
        again = scan_orders(model, l, tf.constant([59, 5]))
        assert [int(v) for v in again[0]] == list(ids) and np.array_equal(again[1], maps)


@pytest.mark.slow
def test_the_random_scan_in_index_order_is_the_fixed_scan(monkeypatch):
    """The random scan picks each slot's colour and each step's map at run time (window
    offsets, masks, seeds); handed the index order it draws exactly what the fixed scan
    draws, bit for bit, on the fast paths (three layers: windowed top units and layer-1
    blocks, layer-0 blocks by footprint tiles; two layers, supervised: the top units by
    one batched product, one unit per colour, with the SVM's terms). The generic paths
    draw what these draw under the random scan (the tests above)."""
    from dgdm_tf.supervised import joint_svm as deep_svm
    real = scan_orders

    def index_order(model, l, seed):
        ids, maps = real(model, l, seed)
        if maps is None:
            return ids, maps
        return tf.unstack(tf.range(len(ids))), tf.broadcast_to(tf.range(maps.shape[1]), maps.shape)

    for mod in (top_units, unpooling):  # each binds its own scan_orders
        monkeypatch.setattr(mod, "scan_orders", index_order)
    for shape, layers, sup in (((21, 22, 1), [{"dict_size": 3, "n_dict": 2, "pool": 2},
                                              {"dict_size": 2, "n_dict": 3, "pool": 2},
                                              {"dict_size": 2, "n_dict": 2, "pool": 1}], False),
                               ((12, 13, 2), [{"dict_size": 3, "n_dict": 3, "pool": 2},
                                              {"dict_size": 2, "n_dict": 2, "pool": 1}], True)):
        models = [DeepModel(shape, layers, supervised=sup, scan=s) for s in ("fixed", "random")]
        rng = np.random.default_rng(1)
        ds = [rng.normal(size=(g.dh, g.dw, g.c, g.k)).astype(np.float32) for g in models[0].geoms]
        x = rng.normal(size=(2,) + shape).astype(np.float32)
        terms = None
        if sup:
            gt, hyper = models[0].top, deep_svm.SvmHyper()
            f = gt.hs * gt.ws * gt.k
            svm = deep_svm.init_svm(2, np.zeros(f, np.float32), np.ones(f, np.float32), 2, hyper)
            terms = deep_svm.unit_terms(svm._replace(beta=tf.constant(rng.normal(size=(2, f + 1)))),
                                        deep_svm.targets([0, 1], 2), (gt.hs, gt.ws, gt.k), hyper)
        out = []
        for m in models:
            st = init_state(x, m, ds, [1, 2])
            st = resample_top(st, x, m, tf.constant([5, 6]), svm_terms=terms)
            for l in range(m.n_layers - 2, -1, -1):
                st = resample_z(st, x, m, l, tf.constant([3, l]))
            out.append(st)
        assert out[0].on.numpy().sum() > 0
        for u, v in zip(tf.nest.flatten(out[0]), tf.nest.flatten(out[1])):
            assert np.array_equal(np.asarray(u), np.asarray(v)), (shape, sup)


def test_fixed_and_random_scans_draw_differently_and_keep_the_residual():
    """From one state and seed the two scans visit in other orders, so they draw other
    states (both exact: the residual stays the image's)."""
    _, x, _ = _tiny(2)
    out = []
    for scan in ("fixed", "random"):
        model = DeepModel((12, 13, 2), [{"dict_size": 3, "n_dict": 3, "pool": 2},
                                        {"dict_size": 2, "n_dict": 2, "pool": 1}], scan=scan)
        rng = np.random.default_rng(2)
        ds = [rng.normal(size=(g.dh, g.dw, g.c, g.k)).astype(np.float32) for g in model.geoms]
        st = init_state(x, model, ds, [1, 2])
        st, _ = local_steps(st, x, model, tf.constant([5, 6]), tf.constant([7, 8]))
        np.testing.assert_allclose(st.resid.numpy(), residual(st, x, model).numpy(), atol=1e-4)
        out.append(st)
    assert not np.array_equal(out[0].z[0].numpy(), out[1].z[0].numpy())
    assert not np.array_equal(out[0].s_top.numpy(), out[1].s_top.numpy())
    with pytest.raises(ValueError, match="scan"):
        DeepModel((12, 13, 2), [{"dict_size": 2, "n_dict": 2, "pool": 1}], scan="sequential")


@pytest.mark.slow
def test_adapted_hmc_step_stays_within_half_the_stability_limit():
    """Burn-in adaptation raises the step while HMC accepts above its target, but never
    past log step 0 (eps = 1 / sqrt(lambda_max estimate), half the leapfrog's limit)."""
    model, x, st = _tiny(4)
    fn = make_sweep_fn(model, adapt=True)
    up, stats = fn(st._replace(hmc_log_step=tf.fill([model.n_layers], -3.0)), tf.constant(x))
    assert float(stats["accept"][1]) > 0.7 and up.hmc_log_step.numpy()[1] > -3.0  # a small step: raised
    capped = 0  # sweeps that accepted above target at the cap: the cap held the step
    for _ in range(6):
        at_cap = st.hmc_log_step.numpy()[1] == 0.0
        st, stats = fn(st, tf.constant(x))
        capped += int(at_cap and float(stats["accept"][1]) > 0.7)
        assert st.hmc_log_step.numpy()[1] <= 0.0
    assert capped > 0


def test_a_chunked_sweep_reports_each_chunk_and_draws_the_same():
    """``on_chunk`` is called once after each chunk, (done, chunks), and changes no draw:
    the sweep with it is the sweep without it, bit for bit."""
    model, x, st = _tiny(4, n=10)
    fn = make_sweep_fn(model, chunk=1, adapt="argument")
    seen = []
    a, sa = fn(st, tf.constant(x), tf.constant(False), on_chunk=lambda *c: seen.append(c))
    b, sb = fn(st, tf.constant(x), tf.constant(False))
    assert seen == [(i, 10) for i in range(1, 11)]
    for u, v in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
        assert np.array_equal(np.asarray(u), np.asarray(v))
    assert np.array_equal(sa["expected_top"].numpy(), sb["expected_top"].numpy())
