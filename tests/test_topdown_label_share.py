"""The labels' share of the top units' conditionals (dgdm_tf.topdown.label_share),
against a hand computation on a tiny model: each unit's image F and residual R0 by
reconstructing the image with the unit at 1 and at 0, the SVM's parts from beta, lambda
and the margins without the unit."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from dgdm_tf.core.model import DeepModel
from dgdm_tf.supervised import joint_svm as deep_svm
from dgdm_tf.topdown import label_share
from dgdm_tf.mcmc.checkpoint import CheckpointDir
from dgdm_tf.topdown import refine
from dgdm_tf.topdown.state import init_state, reconstruct, residual
from _labelled_toy import LAYERS, labelled_data


def _state_and_svm(n=6, gamma=2.5, seed=0):
    _, d, x, lab = labelled_data(n, seed=seed)
    model = DeepModel(x.shape[1:], LAYERS, supervised=True)
    st = init_state(x, model, d, tf.constant([1, 2], tf.int32), gamma_e_init=3.0)
    rng = np.random.default_rng(seed)
    # a state with top units on and off and per-image noise precisions
    s = rng.normal(size=np.shape(st.s_top)) * (rng.random(np.shape(st.s_top)) < 0.6)
    st = st._replace(s_top=tf.constant(s, tf.float32),
                     on=tf.constant(s != 0, tf.float32),
                     gamma_e=tf.constant(rng.uniform(1.0, 5.0, n), tf.float32))
    st = st._replace(resid=residual(st, x, model))
    c = model.top.k
    mean, std = deep_svm.standardisation(s.astype(np.float32), scale="unit")
    hyper = deep_svm.SvmHyper(gamma=gamma)
    svm = deep_svm.init_svm(c, mean, std, n, hyper)._replace(
        beta=tf.constant(rng.normal(size=(c, s[0].size + 1))),
        lam=tf.constant(rng.uniform(0.2, 3.0, (c, n))))
    return model, st, svm, x, deep_svm.targets(lab, c), hyper


def _by_hand(model, st, svm, x, y, hyper):
    """Every unit's four parts, from reconstructions and the SVM's own margins."""
    s = np.asarray(st.s_top)
    n = s.shape[0]
    ge = np.asarray(st.gamma_e, np.float64)
    beta, lam = np.asarray(svm.beta), np.asarray(svm.lam)  # C, F+1; C, N
    coef = beta[:, :-1] / np.asarray(svm.std, np.float64)  # C, F
    yy = np.asarray(y, np.float64)  # C, N
    out = {k: np.zeros(s.shape) for k in ("prec_image", "prec_svm", "lin_image", "lin_svm")}
    for u in np.ndindex(*s.shape[1:]):
        one = np.zeros_like(s)
        one[(slice(None), *u)] = 1.0
        f = np.asarray(reconstruct(st._replace(s_top=tf.constant(one)), model), np.float64)
        without = s.copy()
        without[(slice(None), *u)] = 0.0
        r0 = np.asarray(x, np.float64) - np.asarray(reconstruct(st._replace(s_top=tf.constant(without)), model))
        fu = np.ravel_multi_index(u, s.shape[1:])
        marg0 = np.asarray(deep_svm.margins(svm, without), np.float64)  # N, C: without the unit
        for i in range(n):
            idx = (i, *u)
            out["prec_image"][idx] = ge[i] * np.sum(f[i] ** 2)
            out["lin_image"][idx] = ge[i] * np.sum(f[i] * r0[i])
            w = hyper.gamma / lam[:, i]
            out["prec_svm"][idx] = np.sum(w * coef[:, fu] ** 2)
            out["lin_svm"][idx] = np.sum(w * coef[:, fu] * (yy[:, i] * (1 + lam[:, i]) - marg0[i]))
    return out


def test_unit_parts_match_a_hand_computation():
    """Each unit's image and SVM parts of its conditional equal those computed from its
    image F and residual R0 (reconstructions) and from beta, lambda and the margins."""
    model, st, svm, x, y, hyper = _state_and_svm()
    terms = deep_svm.unit_terms(svm, y, st.s_top.shape[1:], hyper)
    got = label_share.unit_parts(st, model, terms)
    want = _by_hand(model, st, svm, x, y, hyper)
    for k, v in want.items():
        np.testing.assert_allclose(np.asarray(got[k], np.float64), v, rtol=2e-4, atol=1e-4, err_msg=k)
    # the compiled builder gives the same
    again = label_share.make_unit_parts(model)(st, terms)
    for k in want:
        np.testing.assert_allclose(np.asarray(again[k]), np.asarray(got[k]), rtol=1e-6, atol=1e-6)


def test_share_scales_with_the_hinge_weight():
    """The labels' precision share is P_svm / (P_image + P_svm) and P_svm is linear in
    gamma: ten times gamma gives share s' with s' / (1 - s') = 10 s / (1 - s)."""
    model, st, svm, x, y, _ = _state_and_svm()
    parts = {}
    for g in (1.0, 10.0):
        h = deep_svm.SvmHyper(gamma=g)
        parts[g] = label_share.unit_parts(st, model, deep_svm.unit_terms(svm, y, st.s_top.shape[1:], h))
    s1, _ = label_share.shares(parts[1.0])
    s10, _ = label_share.shares(parts[10.0])
    np.testing.assert_allclose(s10 / (1 - s10), 10 * s1 / (1 - s1), rtol=1e-4)
    odds = np.asarray(parts[1.0]["prec_svm"]) / np.asarray(parts[1.0]["prec_image"])
    np.testing.assert_allclose(s1, odds / (1 + odds), rtol=1e-5)


def test_summary_quantiles_and_margin_images():
    """summarise: the median / 90th percentile over every (image, unit), and the median
    over the units of the images inside a margin only."""
    prec_img = np.ones((4, 1, 1, 5))
    prec_svm = np.arange(20, dtype=np.float64).reshape(4, 1, 1, 5)  # share k / (1 + k)
    parts = {"prec_image": prec_img, "prec_svm": prec_svm,
             "lin_image": np.ones_like(prec_img), "lin_svm": -3 * np.ones_like(prec_img)}
    shares = prec_svm / (1 + prec_svm)
    inside = np.array([False, False, True, True])
    out = label_share.summarise(parts, inside)
    assert out["label_share_median"] == pytest.approx(np.median(shares))
    assert out["label_share_p90"] == pytest.approx(np.percentile(shares, 90))
    assert out["label_share_margin"] == pytest.approx(np.median(shares[2:]))
    assert out["label_mean_share_median"] == pytest.approx(0.75)
    assert np.isnan(label_share.summarise(parts, np.zeros(4, bool))["label_share_margin"])
    m = np.array([[2.0, -2.0], [0.5, -2.0], [2.0, 0.0]])  # y m: image 1 and 2 inside
    y = np.array([[1.0, -1.0], [1.0, -1.0], [1.0, -1.0]])
    np.testing.assert_array_equal(label_share.within_margin(m, y), [False, True, True])


def test_supervised_chain_traces_the_share():
    """The supervised chain's trace carries the share columns at every sweep, within
    [0, 1]; its settlement summary holds them; share_images 0 leaves them NaN and draws
    the same chain."""
    _, d, x, lab = labelled_data(12)
    start = refine.Start(d, LAYERS, n_classes=3)
    kw = dict(burn_in=1, collect=2, scan="fixed", svm_steps=1, svm_warmup=2, svm_average=0,
              keep_models=1, chunk=None)
    out = refine.run_refine(x, start, refine.SupervisedOptions(**kw, share_images=64), seed=3,
                            labels=lab, progress=None)
    rows = out["trace"]
    for r in rows:  # the SVM starts at the end of the first sweep, so its row has it too
        for c in label_share.COLUMNS:
            assert 0.0 <= r[c] <= 1.0 or (c == "label_share_margin" and np.isnan(r[c])), (c, r[c])
        assert r["label_share_median"] <= r["label_share_p90"]
    summary = out["settlement"]["label_share"]
    assert summary["sweep"] == 3
    assert summary["last"]["label_share_median"] == rows[-1]["label_share_median"]
    assert set(label_share.COLUMNS) <= set(refine.trace_columns(
        DeepModel(x.shape[1:], LAYERS, supervised=True)))
    off = refine.run_refine(x, start, refine.SupervisedOptions(**kw, share_images=0), seed=3,
                            labels=lab, progress=None)
    assert all(np.isnan(r["label_share_median"]) for r in off["trace"])
    assert off["settlement"]["label_share"] == {}
    # a reader: the chain is unchanged
    for a, b in zip(out["D"], off["D"]):
        np.testing.assert_array_equal(a, b)


def test_balanced_gamma_scales_the_odds():
    """gamma x (target odds / traced odds), by at most a factor 10 either way; a share
    that cannot be read leaves gamma where it is."""
    assert refine.balanced_gamma(2.0, 0.2, 0.5) == pytest.approx(2.0 * 4.0)
    assert refine.balanced_gamma(2.0, 0.5, 0.2) == pytest.approx(2.0 / 4.0)
    assert refine.balanced_gamma(1.0, 1e-4, 0.5) == pytest.approx(10.0)
    assert refine.balanced_gamma(1.0, 1 - 1e-6, 0.5) == pytest.approx(0.1)
    for bad in (float("nan"), 0.0, 1.0):
        assert refine.balanced_gamma(3.0, bad, 0.5) == 3.0
    with pytest.raises(ValueError, match="share_images"):
        refine.SupervisedOptions(gamma_mode="balanced", share_images=0)
    with pytest.raises(ValueError, match="gamma_mode"):
        refine.SupervisedOptions(gamma_mode="tuned")


def test_balanced_chain_moves_gamma_toward_its_share_and_resumes(tmp_path):
    """gamma_mode balanced re-sets gamma every balance_every sweeps from the traced share
    (the trace's svm_gamma), which moves the share toward its target; killed and
    resumed, the chain ends where the uninterrupted one does (gamma in force is in the
    checkpoint)."""
    _, d, x, lab = labelled_data(12)
    start = refine.Start(d, LAYERS, n_classes=3)
    opts = refine.SupervisedOptions(burn_in=1, collect=5, scan="fixed", svm_steps=1, svm_warmup=2,
                                    svm_average=0, keep_models=1, chunk=None, checkpoint_every=1,
                                    gamma_mode="balanced", balance_share=0.5, balance_every=2)
    kw = dict(seed=3, labels=lab, progress=None)
    full = refine.run_refine(x, start, opts, **kw)
    rows = full["trace"]
    gammas = [r["svm_gamma"] for r in rows]
    assert gammas[:2] == [1.0, 1.0] and gammas[2] != 1.0, gammas  # re-set after sweep 2
    want = refine.balanced_gamma(1.0, rows[1]["label_share_median"], 0.5)
    assert gammas[2] == pytest.approx(want)
    first = abs(np.log(rows[0]["label_share_median"] / (1 - rows[0]["label_share_median"])))
    last = abs(np.log(rows[-1]["label_share_median"] / (1 - rows[-1]["label_share_median"])))
    assert last < first  # the odds nearer 1
    assert refine.run_refine(x, start, opts, checkpoint=CheckpointDir(tmp_path, stop_after=3),
                             **kw) is None
    resumed = refine.run_refine(x, start, opts, checkpoint=CheckpointDir(tmp_path), **kw)
    assert [r["svm_gamma"] for r in resumed["trace"]] == gammas
    for a, b in zip(full["D"], resumed["D"]):
        np.testing.assert_array_equal(a, b)
