"""The Gibbs driver: checkpoint/resume gives the uninterrupted result, pruning keeps the
residual exact, bad input is refused early, progress and trace are written."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from dgdm_tf.pretrain import chain, chain_parts
from dgdm_tf.pretrain import blocks as PB, kernel as P, layer_model as PM
from dgdm_tf.core.layout import LayerGeometry
from dgdm_tf.mcmc.checkpoint import CheckpointDir
from dgdm_tf.pretrain.options import Layer, PretrainOptions


def _data(n=12, side=12, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((n, side, side, 1)).astype(np.float32) * (rng.random((n, side, side, 1)) < 0.3)


LAYER = Layer(dict_size=3, n_dict=4, pool=2)
OPTIONS = PretrainOptions(burn_in=4, collect=3, thin=2, prune_min_usage=0.0, checkpoint_every=2,
                          jit_compile=False)


def _run(x, checkpoint=None, *, seed=5, progress=None, **changes):
    return chain.run_pretrain_layer(x, LAYER, dataclasses.replace(OPTIONS, **changes), seed=seed,
                                    checkpoint=checkpoint, progress=progress)


def test_killed_and_resumed_run_equals_uninterrupted(tmp_path):
    x = _data()
    full = _run(x, CheckpointDir(tmp_path / "a"))
    lines = []
    assert _run(x, CheckpointDir(tmp_path / "b", stop_after=6), progress=lines.append) is None
    assert (tmp_path / "b" / "checkpoint.npz").exists()
    resumed = _run(x, CheckpointDir(tmp_path / "b"), progress=lines.append)
    assert any("resuming from checkpoint at sweep 6" in m for m in lines)
    for key in ("D", "x_next", "usage", "gamma_e", "gamma_w", "kept"):
        np.testing.assert_array_equal(full[key], resumed[key], err_msg=key)
    assert len(resumed["trace"]) == OPTIONS.sweeps == 4 + 3 * 2


def test_checkpoint_from_other_settings_is_not_reused(tmp_path):
    x = _data()
    _run(x, CheckpointDir(tmp_path, stop_after=4))
    lines = []
    out = _run(x, CheckpointDir(tmp_path), seed=6, progress=lines.append)
    assert any("starting afresh" in m for m in lines)
    assert out["D"].shape == (3, 3, 1, 4)


def test_pruning_returns_dropped_maps_to_the_residual():
    geom = LayerGeometry(hx=12, wx=12, c=1, dh=3, dw=3, k=4, p=2)
    x = _data()
    model = PM.LayerModel(geom, PM.Hyper(), top=False, n_images=len(x))
    st = PM.init_state(x, model, tf.constant([1, 2]), init_off=0.3)
    st = P.make_sweep_fn(model)(st, tf.constant(x))
    st2, model2 = chain.prune_state(st, model, np.array([0, 2]))
    assert model2.geom.k == 2 and st2.d.shape[-1] == 2
    rec = PB.reconstruction(st2.s, st2.d, model2.geom).numpy()
    np.testing.assert_allclose(st2.resid.numpy()[:, :12, :12], x - rec, atol=1e-5)


def test_usage_pruning_drops_unused_maps(tmp_path):
    x = _data()
    out = _run(x, prune_min_usage=0.999)
    # no map is on in 99.9% of the blocks: the most used one is kept
    assert out["D"].shape[-1] == 1 and len(out["kept"]) == 1


def test_nan_input_is_refused_with_a_clear_message():
    x = _data()
    x[0, 0, 0, 0] = np.nan
    with pytest.raises(FloatingPointError, match="layer input x has 1 non-finite"):
        _run(x)


def test_trace_tsv_and_progress(tmp_path):
    lines = []
    _run(_data(), CheckpointDir(tmp_path, trace="t.tsv"), progress=lines.append)
    rows = (tmp_path / "t.tsv").read_text().splitlines()
    assert rows[0].split("\t") == chain_parts.TRACE_COLUMNS
    assert len(rows) == 1 + 4 + 3 * 2
    assert any(m.startswith("sweep 10/10 (collect)") for m in lines)


def test_pruning_without_burn_in_is_refused():
    with pytest.raises(ValueError, match="pruning happens at the end of burn-in"):
        PretrainOptions(burn_in=0, prune_min_usage=0.1)
