"""The batched pretraining sweep (image batches, D from summed statistics, state on
disk): D's draw is resample_d's, the sweep keeps the joint (Geweke), recovers a known
dictionary, and a killed run resumes bit for bit. Fixed seeds, stated tolerances."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from dgdm_tf.pretrain import chain, batched_chain as chain_batched
from dgdm_tf.pretrain import kernel as P, layer_model as PM
from dgdm_tf.pretrain import dictionary as PD, batched as S
from dgdm_tf.core.layout import LayerGeometry
from dgdm_tf.mcmc.checkpoint import CheckpointDir
from dgdm_tf.pretrain.options import Layer, PretrainOptions
from _deep_geweke import geweke_chains
from _layer_geweke import (GEWEKE_HYPER, forward_data, forward_params, match_cosine,
                           layer_stats, recovery_data)


def _chain_state(n=6, seed=0):
    geom = LayerGeometry(hx=12, wx=11, c=2, dh=3, dw=3, k=4, p=2)
    model = PM.LayerModel(geom, PM.Hyper(), top=False, n_images=n)
    x = np.random.default_rng(seed).normal(size=(n, 12, 11, 2)).astype(np.float32)
    st = PM.init_state(x, model, tf.constant([1, 2]))
    fn = P.make_sweep_fn(model)
    for _ in range(3):
        st = fn(st, tf.constant(x))
    return model, x, st


def test_d_from_batch_statistics_is_resample_d():
    """The same seed gives resample_d's draw by the loop over the residual, whether the
    statistics come from all six images at once or summed over batches of 2, 3 and 1
    (round-off only: 1e-5 of D's scale)."""
    model, x, st = _chain_state()
    seed = tf.constant([5, 6])
    ref = P.resample_d(st, tf.constant(x), model, seed, route="loop").d.numpy()
    total = S.StatsSum()
    for sl in (slice(0, 2), slice(2, 5), slice(5, 6)):
        f_corr, f_gram = PD.d_statistics(st.s[:, :, :, sl], tf.constant(x[sl]), st.d,
                                        st.gamma_e[sl], model)
        zeros = [tf.zeros([])] * (len(S.BatchStats._fields) - 2)
        total.add(S.BatchStats(f_corr, f_gram, *zeros))
    got = PD.draw_d(st.d, total.result().f_corr, total.result().f_gram, model, seed).numpy()
    np.testing.assert_allclose(got, ref, atol=1e-5 * np.abs(ref).max())
    other = PD.draw_d(st.d, total.result().f_corr, total.result().f_gram, model,
                     tf.constant([5, 7])).numpy()
    assert np.abs(other - ref).max() > 1e-3  # the seed is what makes them agree


def test_stored_blocks_rebuild_the_state_exactly():
    """One int8 state and one weight per block hold everything s holds."""
    model, _, st = _chain_state()
    z8 = tf.cast(st.z, tf.int8)
    back = S.dense_blocks(z8, S.compact_blocks(st.s), model)
    np.testing.assert_array_equal(back.numpy(), st.s.numpy())


def _geweke_batched(chains, steps, seed):
    """z per test function of :func:`_deep_geweke.geweke_chains` on the batched sweep:
    two images in two batches of one, the test functions of the in-memory sweep's."""
    geom = LayerGeometry(hx=4, wx=5, c=2, dh=2, dw=2, k=2, p=2)
    n = 2
    model = PM.LayerModel(geom, PM.Hyper.from_dict(GEWEKE_HYPER), top=False, n_images=n)
    rng = np.random.default_rng(seed)
    batch_fn, global_fn = S.make_batch_step(model), S.make_global_step(model)

    def locals_of(prm):
        return [{"z": prm["z"][:, :, :, i:i + 1].astype(np.int8),
                 "w": prm["s"][:, :, :, i:i + 1].sum(-1),
                 "log_theta": prm["log_theta"][i:i + 1], "gamma_e": prm["gamma_e"][i:i + 1]}
                for i in range(n)]

    def start(c):
        prm = forward_params(rng, geom, model, n)
        x = forward_data(rng, geom, prm)
        glob = S.BatchedGlobals(d=tf.constant(prm["d"]), gamma_w=tf.constant(prm["gamma_w"]),
                               seed=tf.constant([seed, c]))
        return (glob, locals_of(prm), x), layer_stats(prm, x, geom, model)

    def advance(carry):
        glob, locs, x = carry
        inf = tf.constant([np.inf], tf.float32)
        new = [None] * n

        def write(b, loc, _expected):
            new[b] = loc

        glob, _ = S.batched_sweep(glob, n, lambda b: (locs[b], x[b:b + 1], inf), write, model,
                                   batch_fn, global_fn)
        z = np.concatenate([loc["z"] for loc in new], axis=3).astype(np.int32)
        w = np.concatenate([loc["w"] for loc in new], axis=3)
        prm = {"z": z, "s": S.dense_blocks(z, w, model).numpy(), "d": glob.d.numpy(),
               "gamma_w": glob.gamma_w.numpy(),
               "log_theta": np.concatenate([loc["log_theta"] for loc in new]),
               "gamma_e": np.concatenate([loc["gamma_e"] for loc in new])}
        x = forward_data(rng, geom, prm)
        return (glob, locals_of(prm), x), layer_stats(prm, x, geom, model), 1.0

    return geweke_chains(start, advance, chains, steps)[0]


@pytest.mark.slow
def test_geweke_batched_sweep():
    """Successive-conditional simulation through the batched sweep keeps the joint
    (|z| < 4: 300 chains of 20 sweeps, :func:`_geweke_batched`), two images in two
    batches of one, the nine test functions of the in-memory sweep's Geweke test
    (test_pretrain_kernel.py). Its power: with D's statistics taken from the blocks
    before the (z, W) step instead of after (a plausible slip of a batched sweep) the
    data-reconstruction cross term gave z = 4.2; errors inside D's draw are pinned by
    test_d_from_batch_statistics_is_resample_d."""
    zscore = _geweke_batched(300, 20, 2025)
    assert np.all(np.abs(zscore) < 4.0), zscore


# The default tier's size (docs/findings/geweke_power.md): chains, sweeps, seed
SMALL = (40, 5, 2025)


def test_geweke_batched_sweep_small():
    """The test above at the default tier's size (SMALL: 40 chains of 5 sweeps), whose
    power the next test shows."""
    zscore = _geweke_batched(*SMALL)
    assert np.all(np.abs(zscore) < 4.0), zscore


@pytest.mark.retrace
def test_geweke_batched_finds_a_wrong_conditional(monkeypatch):
    """The small test has power: gamma_e's shape from the padded residual's size (a_e +
    |pad(E_n)| / 2, where eq. SampleE counts the Hx Wx C pixels of the image), patched
    into the batch step, puts log gamma_e[0] far outside |z| < 4 at the same size."""
    from dgdm_tf.pretrain.kernel import _gamma_sample

    def wrong(state, x, model, seed):
        h = model.hyper
        padded = float(np.prod(state.resid.shape[1:]))
        sq = tf.reduce_sum(tf.square(state.resid), axis=[1, 2, 3])
        return state._replace(gamma_e=_gamma_sample(h.a_e + 0.5 * padded, h.b_e + 0.5 * sq, seed))

    monkeypatch.setattr(S, "resample_gamma_e", wrong)  # as the batch step calls it
    zscore = _geweke_batched(*SMALL)
    assert zscore[2] > 5.0, zscore  # log gamma_e[0]


@pytest.mark.slow
def test_batched_chain_recovers_known_dictionary(tmp_path):
    """test_pretrain's recovery data (500 images, 4 known 5x5 atoms) in batches of 125:
    the collected dictionary matches the truth with mean cosine >= 0.9 and the fit
    reaches the noise level, as the in-memory chain does."""
    x, d_true, noise_rel = recovery_data()
    out = chain.run_pretrain_layer(
        x, Layer(dict_size=5, n_dict=4, pool=2),
        PretrainOptions(burn_in=60, collect=10, prune_min_usage=0.0, dict_init="prior",
                        batch_size=125, jit_compile=False),
        seed=3, checkpoint=CheckpointDir(tmp_path, trace=None), progress=None)
    cos = match_cosine(d_true[:, :, 0], out["D"][:, :, 0])
    assert cos >= 0.9, cos
    assert out["trace"][-1]["rel_residual"] < 4 * noise_rel, (out["trace"][-1], noise_rel)
    assert out["x_next"].shape[0] == len(x) and out["gamma_e"].shape == (len(x),)


def _data(n=10, side=12, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((n, side, side, 1)).astype(np.float32) * (rng.random((n, side, side, 1)) < 0.3)


OPTIONS = PretrainOptions(burn_in=4, collect=3, thin=2, prune_min_usage=0.3, batch_size=4,
                          jit_compile=False)


def _run(x, checkpoint, *, progress=None, **changes):
    return chain.run_pretrain_layer(x, Layer(dict_size=3, n_dict=4, pool=2),
                                    dataclasses.replace(OPTIONS, **changes), seed=5,
                                    checkpoint=checkpoint, progress=progress)


def test_killed_batched_run_resumes_bit_for_bit(tmp_path, monkeypatch):
    """A run stopped after 5 sweeps, and one killed in the middle of sweep 8 (a batch
    half written), both resume to the uninterrupted run's outputs exactly; pruning at
    the end of burn-in happens between them."""
    x = _data()
    full = _run(x, CheckpointDir(tmp_path / "a", trace=None))
    assert full["D"].shape[-1] < 4  # the pruning path ran
    lines = []
    assert _run(x, CheckpointDir(tmp_path / "b", stop_after=5, trace=None),
                progress=lines.append) is None
    writes = []
    real_write = chain_batched.StateFiles.write

    def dying_write(self, buffer, b, arrays):
        writes.append(b)
        if len(writes) == 8:  # sweeps 6 and 7 done, sweep 8's batch 0 written, then a kill
            raise KeyboardInterrupt
        real_write(self, buffer, b, arrays)

    monkeypatch.setattr(chain_batched.StateFiles, "write", dying_write)
    with pytest.raises(KeyboardInterrupt):
        _run(x, CheckpointDir(tmp_path / "b", trace=None), progress=lines.append)
    monkeypatch.setattr(chain_batched.StateFiles, "write", real_write)
    resumed = _run(x, CheckpointDir(tmp_path / "b", trace=None), progress=lines.append)
    assert any("resuming from the batched state at sweep 5" in m for m in lines)
    assert any("resuming from the batched state at sweep 7" in m for m in lines)
    for key in ("D", "x_next", "usage", "gamma_e", "gamma_w", "kept"):
        np.testing.assert_array_equal(full[key], resumed[key], err_msg=key)
    assert [r["sweep"] for r in resumed["trace"]] == list(range(1, 11))
    # the state on disk: one file a batch in each buffer, the head beside them
    stream = tmp_path / "b" / "batches"
    assert sorted(p.name for p in (stream / "buffer0").iterdir()) == [
        "batch00000.npz", "batch00001.npz", "batch00002.npz"]
    assert (stream / "head.npz").exists()


@pytest.mark.slow
def test_batched_run_with_xla_and_a_stale_state_folder(tmp_path):
    """The (z, W) step compiled with XLA runs in the batched chain, and a state folder
    left by a run with other settings (here more batches) is cleared, not mixed in."""
    x = _data()
    args = dict(burn_in=2, collect=1, thin=1, prune_min_usage=0.0)
    _run(x, CheckpointDir(tmp_path, stop_after=1, trace=None), **{**args, "batch_size": 2})
    assert len(list((tmp_path / "batches" / "buffer0").iterdir())) == 5
    lines = []
    out = _run(x, CheckpointDir(tmp_path, trace=None), jit_compile=True, progress=lines.append,
               **args)
    assert any("starting afresh" in m for m in lines)
    assert len(list((tmp_path / "batches" / "buffer0").iterdir())) == 3
    assert np.all(np.isfinite(out["x_next"])) and out["D"].shape == (3, 3, 1, 4)
