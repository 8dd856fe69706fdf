"""dgdm_tf.report.recovery (atom and code recovery) and dgdm_tf.data.model_draws (images
from a known two-layer model), on cases with known answers."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from dgdm_tf.core.model import generate
from dgdm_tf.data import model_draws
from dgdm_tf.report import recovery


def _atoms(k=6, side=8, seed=0):
    return np.random.default_rng(seed).normal(size=(side, side, 1, k))


def _shift(d, dy, dx):
    out = np.zeros_like(d)
    h, w = d.shape[:2]
    src = d[max(0, -dy): h - max(0, dy), max(0, -dx): w - max(0, dx)]
    out[max(0, dy): max(0, dy) + src.shape[0], max(0, dx): max(0, dx) + src.shape[1]] = src
    return out


def test_an_atom_recovered_exactly_up_to_order_sign_and_shift_scores_one():
    d = _atoms()
    est = np.concatenate([_shift(d, 1, -2)[..., ::-1] * -3.0, _atoms(2, seed=9)], axis=-1)
    got = recovery.atom_recovery(d, est, max_shift=3)
    assert got["mean"] == pytest.approx(1.0)
    np.testing.assert_array_equal(got["matched"], np.arange(5, -1, -1))
    # a shift past max_shift is not forgiven
    assert recovery.atom_recovery(d, _shift(d, 4, 0), max_shift=3)["mean"] < 0.9


def test_noisy_atoms_score_their_cosine_and_random_atoms_the_baseline():
    d = _atoms(k=12)
    rng = np.random.default_rng(1)
    noisy = d + 0.5 * rng.normal(size=d.shape)  # cosine about 1 / sqrt(1.25) = 0.894
    assert recovery.atom_recovery(d, noisy)["mean"] == pytest.approx(0.894, abs=0.03)
    base = recovery.random_atom_score(d, 12, draws=5, seed=2)
    rand = recovery.atom_recovery(d, rng.normal(size=d.shape))["mean"]
    assert 0.2 < base < 0.6 and rand == pytest.approx(base, abs=0.05)
    # more random atoms to pick from: a higher floor
    assert recovery.random_atom_score(d, 48, seed=2) > base + 0.03


def test_ncc_matrix_refuses_atoms_of_other_shapes():
    with pytest.raises(ValueError, match="different shapes"):
        recovery.ncc_matrix(_atoms(side=8), _atoms(side=6))


def test_code_recovery_is_one_for_a_rescaled_permutation_and_low_for_shuffled_images():
    rng = np.random.default_rng(0)
    s = rng.normal(size=(400, 2, 2, 3)) * (rng.random((400, 2, 2, 3)) < 0.5)
    est = np.concatenate([-2.0 * s.reshape(400, -1)[:, ::-1], rng.normal(size=(400, 5))], axis=1)
    assert recovery.code_recovery(s, est) == pytest.approx(1.0)
    assert recovery.shuffled_code_score(s, est, seed=1) < 0.25
    # a unit that never varies does not count
    s2 = s.copy()
    s2[..., 0] = 0.0
    assert recovery.code_recovery(s2, est) == pytest.approx(1.0)


def test_on_fraction_reads_both_kinds_of_density():
    sh = model_draws.Shapes(k1=12)
    # 12 maps x 49 blocks x 64 pixels over 784 pixels: 48 atoms a pixel when all are on
    assert model_draws.coverage_per_fraction(sh) == pytest.approx(48.0)
    assert model_draws.on_fraction("c1.5", sh) == pytest.approx(1.5 / 48)
    assert model_draws.on_fraction("f0.97", sh) == 0.97
    for bad in ("x0.5", "f1.5", "c100"):
        with pytest.raises(ValueError):
            model_draws.on_fraction(bad, sh)


def test_draw_is_the_model_s_image_of_its_truth_with_classes_at_the_top():
    sh = model_draws.Shapes(k1=5, k2=6)
    got = model_draws.draw(sh, on=0.3, noise=0.05, n=60, n_classes=3, maps_per_class=2, seed=4)
    x, clean, s, y, z = got["x"], got["clean"], got["s_top"], got["y"], got["z"]
    assert x.shape == (60, 28, 28, 1) and s.shape == (60, 2, 2, 6) and z.shape == (60, 7, 7, 5)
    np.testing.assert_allclose(
        generate(tf.constant(s), sh.model(), [tf.constant(d) for d in got["d"]], [tf.constant(z)]).numpy(),
        clean, atol=1e-5)
    rng_px = clean.reshape(60, -1).max(1) - clean.reshape(60, -1).min(1)
    np.testing.assert_allclose(rng_px, 1.0, rtol=1e-5)
    assert np.std(x - clean) == pytest.approx(0.05, rel=0.05)
    assert got["on"] == pytest.approx(0.3, abs=0.03) and got["coverage"] == pytest.approx(0.3 * 20, rel=0.1)
    on_maps = np.abs(s).sum(axis=(1, 2)) > 0  # (n, K2)
    for c in range(3):
        assert not on_maps[y == c][:, [m for m in range(6) if m // 2 != c]].any()
        assert on_maps[y == c].any(axis=1).all()  # every image holds its class
    again = model_draws.draw(sh, on=0.3, noise=0.05, n=60, n_classes=3, maps_per_class=2, seed=4)
    np.testing.assert_array_equal(again["x"], x)


@pytest.mark.slow
def test_pretraining_recovers_layer_one_at_a_sparse_mnist_shaped_cell():
    """docs/findings/recovery_grid.md, cell k12_c1_n0.05 (12 atoms of 8 x 8, pool 3, each
    pixel under one atom on average, noise sd 0.05 of an image's range; 500 training
    images, the config's 15 + 20 sweeps): layer 1's atoms recovered at 0.766 there
    against 0.408 for random atoms, the residual at 1.11 x the noise. Held here at >= 0.70
    and within 1.25 x. (At MNIST's density, 97 % of the blocks on, the same chain reads
    0.487 against 0.400: not held, the page's open question.)"""
    from dgdm_tf.core.random import seed_for
    from dgdm_tf.pretrain.chain import run_pretrain_layer
    from dgdm_tf.pretrain.options import Layer, PretrainOptions

    shapes = model_draws.Shapes(k1=12, k2=20)
    cseed = seed_for(0, "recovery", "k12_c1_n0.05")
    data = model_draws.draw(shapes, on=model_draws.on_fraction("c1", shapes), noise=0.05, n=1000, seed=cseed)
    x = data["x"][:500]
    noise_rel = float(np.linalg.norm(x - data["clean"][:500]) / np.linalg.norm(x))
    out = run_pretrain_layer(x, Layer(dict_size=8, n_dict=12, pool=3, index=0, n_layers=2),
                             PretrainOptions(burn_in=15, collect=20), seed=seed_for(cseed, "pretrain", 1),
                             progress=None)
    got = recovery.atom_recovery(data["d"][0], out["D"])["mean"]
    floor = recovery.random_atom_score(data["d"][0], out["D"].shape[-1], seed=seed_for(cseed, "random_atoms"))
    assert got >= 0.70 and floor < 0.45, (got, floor)
    assert out["trace"][-1]["rel_residual"] < 1.25 * noise_rel, (out["trace"][-1], noise_rel)
