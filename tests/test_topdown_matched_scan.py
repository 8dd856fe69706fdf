"""Tests of the top-down sampler's matched scan (``DeepModel(scan="matched")``,
dgdm_tf.topdown.top_units): each image visits its top units in the order of their
matched-filter response. Exactness (Geweke), the order itself, and what the order buys:
the features no longer depend on how the maps happen to be numbered."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from dgdm_tf.core.model import DeepModel, generate
from dgdm_tf.topdown import chain as deep_chain
from dgdm_tf.topdown.options import Start, TopdownOptions
from dgdm_tf.topdown.state import init_state
from dgdm_tf.topdown.top_units import matched_order, resample_top
from dgdm_tf.topdown import sweep as topdown_sweep
from _deep_geweke import GEWEKE_HYPER, gamma_s_without_off_weights, geweke_sweep, power_size

LAYERS = [{"dict_size": 5, "n_dict": 4, "pool": 2}, {"dict_size": 3, "n_dict": 5, "pool": 1}]


def _draw(n, seed=0):
    """Images from a known two-layer model (16x16x1; 4 x 4 top positions whose units
    all overlap, one per colour) and its dictionaries."""
    rng = np.random.default_rng(seed)
    model = DeepModel((16, 16, 1), LAYERS)
    g0, gt = model.geoms
    d = [rng.normal(size=(g.dh, g.dw, g.c, g.k)).astype(np.float32) for g in model.geoms]
    d = [v / np.linalg.norm(v.reshape(-1, v.shape[-1]), axis=0) for v in d]
    z0 = rng.choice(g0.n_states, size=(n, g0.nbh, g0.nbw, g0.k), p=[0.7 / 4] * 4 + [0.3])
    on = rng.random((n, gt.hs, gt.ws, gt.k)) < 0.25
    s = (on * rng.normal(size=on.shape) * 2.0).astype(np.float32)
    x = generate(tf.constant(s), model, [tf.constant(v) for v in d], [tf.constant(z0.astype(np.int32))]).numpy()
    return model, d, (x + 0.05 * rng.normal(size=x.shape)).astype(np.float32)


# The default tier's size and the slow tier's (docs/findings/geweke_power.md): chains,
# sweeps, seed
SMALL, SLOW = (30, 4, 17), (60, 6, 17)


def _matched_geweke(chains, steps, seed):
    model = DeepModel((7, 8, 2), [{"dict_size": 2, "n_dict": 2, "pool": 2},
                                  {"dict_size": 2, "n_dict": 2, "pool": 1}], GEWEKE_HYPER,
                      scan="matched")
    assert model.colourings[-1].n_h * model.colourings[-1].n_w == 1  # the scan applies
    return geweke_sweep(model, n=2, chains=chains, steps=steps, seed=seed)


@pytest.mark.slow
def test_geweke_two_layers_matched_scan():
    """The sweep with the matched scan keeps the joint (|z| < 4, SLOW: 60 chains of 6
    sweeps, the test functions of the other scans' Geweke tests): an order that depends
    on X, Z and D only, none of which the top units' step updates, is an exact scan."""
    z, acc = _matched_geweke(*SLOW)
    assert acc[1] > 0.3, acc
    assert np.all(np.abs(z) < 4.0), z


def test_geweke_two_layers_matched_scan_small():
    """The test above at the default tier's size (SMALL: 30 chains of 4 sweeps). Its
    power, the next test (slow tier): gamma_s without the off units' weights gives z =
    7.0 on the mean of log gamma_s at this size (docs/findings/geweke_power.md)."""
    z, acc = _matched_geweke(*SMALL)
    assert acc[1] > 0.3, acc
    assert np.all(np.abs(z) < 4.0), z


@pytest.mark.slow
@pytest.mark.retrace
def test_geweke_matched_scan_finds_a_wrong_conditional(monkeypatch):
    """The small test has power: gamma_s drawn without the off units' weights
    (:func:`_deep_geweke.gamma_s_without_off_weights`) in the matched-scan sweep puts
    the mean of log gamma_s outside |z| < 4 at the same size."""
    monkeypatch.setattr(topdown_sweep, "resample_gamma_s", gamma_s_without_off_weights)
    z, _ = _matched_geweke(*power_size(SMALL, SLOW))
    print(f"z: {np.round(z, 2).tolist()}")
    assert z[4] > 5.0, z  # mean log gamma_s


def test_matched_order_is_by_decreasing_normalised_response():
    rng = np.random.default_rng(3)
    f = rng.normal(size=(7, 3, 4, 5, 2)).astype(np.float32) * rng.random((7, 1, 1, 1, 1)).astype(np.float32)
    x = rng.normal(size=(3, 4, 5, 2)).astype(np.float32)
    mask = (rng.random((3, 4, 5, 2)) > 0.3).astype(np.float32)
    order = matched_order(tf.constant(f * mask), tf.constant(x), tf.constant(mask)).numpy()
    for n in range(3):
        fn = (f * mask)[:, n].reshape(7, -1)
        score = np.abs(fn @ (x * mask)[n].ravel()) / np.linalg.norm(fn, axis=1)
        assert np.array_equal(order[:, n], np.argsort(-score, kind="stable"))


@pytest.mark.slow
def test_relabelled_maps_give_the_same_features_relabelled():
    """The matched scan's features are a function of the image and the model, not of how
    its top maps are numbered: with D[1]'s maps reversed, the first sweep's features (the
    test-time chains collect it) are the reversed features, to round-off. (Later sweeps
    also depend on pi, whose draws are indexed by the map's number: the same law, other
    draws.) The fixed scan visits maps by their number, so there the reversal gives
    another decomposition (what this test guards against)."""
    model, d, x = _draw(6)
    k = d[1].shape[-1]
    rev = [d[0], np.ascontiguousarray(d[1][..., ::-1])]
    def features(dicts, scan):
        out = deep_chain.infer_topdown(x, Start(dicts, LAYERS, gamma_e_init=400.0, gamma_s_init=1.0),
                                       TopdownOptions(burn_in=0, collect=1, batch_size=6, chains=1,
                                                      scan=scan, start=None),
                                       seed=4, progress=None)["features"]
        return out.reshape(len(x), -1, k)

    rel = {}
    for scan in ("matched", "fixed"):
        a, b = features(d, scan), features(rev, scan)[..., ::-1]
        rel[scan] = np.linalg.norm(a - b) / np.linalg.norm(a)
    # measured: 0 and 0.48
    assert rel["matched"] < 1e-5 and rel["fixed"] > 0.2, rel
    again = features(d, "matched")  # the same seed: the same features
    assert np.array_equal(again, features(d, "matched"))


def test_matched_scan_needs_one_top_unit_per_colour():
    """A top layer whose colours hold several units (units that do not all overlap) is
    refused with what to use instead, as is the supervised chain."""
    model = DeepModel((12, 13, 2), [{"dict_size": 3, "n_dict": 3, "pool": 2},
                                    {"dict_size": 2, "n_dict": 2, "pool": 1}], scan="matched")
    rng = np.random.default_rng(0)
    ds = [rng.normal(size=(g.dh, g.dw, g.c, g.k)).astype(np.float32) for g in model.geoms]
    x = rng.normal(size=(2, 12, 13, 2)).astype(np.float32)
    st = init_state(x, model, ds, [1, 2])
    with pytest.raises(ValueError, match="one per colour.*use scan 'fixed' or 'random'"):
        resample_top(st, x, model, tf.constant([5, 6]))
    _, d, x = _draw(2)
    model = DeepModel((16, 16, 1), LAYERS, scan="matched")
    st = init_state(x, model, d, [1, 2])
    with pytest.raises(ValueError, match="supervised"):
        resample_top(st, x, model, tf.constant([5, 6]), svm_terms={"coef": None})
