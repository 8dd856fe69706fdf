"""Tests of the persistent E-step of stochastic MCEM (dgdm_tf.mcem.local_store,
``mcem.local_state: persist``): a visited image starts from the state it left, with its
residual under the current D; the first epoch is the restarted algorithm's bit for bit
and the second is not; a killed persistent run of the supervised model resumes to the
uninterrupted run's numbers (the locals are in the checkpoint); a start from pruned
dictionaries takes its atom counts from them."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from dgdm_tf.core.model import DeepModel
from dgdm_tf.mcem import stochastic as M
from dgdm_tf.mcem.local_store import LocalStore
from dgdm_tf.mcem.options import McemOptions, McemStart
from dgdm_tf.mcmc.checkpoint import CheckpointDir
from dgdm_tf.topdown.state import PER_IMAGE_FIELDS, init_state, residual
from dgdm_tf.topdown.sweep import make_sweep_fn
from _smcem_model import HYPER, LAYERS, MCEM, known_model_data, labelled


def _fields(st, i):
    out = {}
    for f in PER_IMAGE_FIELDS:
        v = getattr(st, f)
        out.update({f"{f}_{j}": np.asarray(t)[i] for j, t in enumerate(v)} if isinstance(v, tuple)
                   else {f: np.asarray(v)[i]})
    return out


def test_a_visited_image_starts_where_it_left_and_a_new_one_from_the_matched_filter():
    model, d, x = known_model_data(6, seed=1)
    st = init_state(x[:4], model, d, [1, 2])
    swept, _ = make_sweep_fn(model, update_globals=False)(st, tf.constant(x[:4]))
    store = LocalStore(6)
    store.keep(swept, [0, 1, 2, 3])
    d2 = [v * 1.1 for v in d]  # D moved between the visits
    idx = [2, 3, 4, 5]
    fresh = init_state(x[idx], model, d2, [3, 4])
    merged = store.merge(fresh, idx, x[idx], model)
    for row, i in enumerate(idx):
        want = _fields(swept, i) if i < 4 else _fields(fresh, row)
        got = _fields(merged, row)
        for k in want:
            if k != "resid":
                np.testing.assert_array_equal(got[k], want[k], err_msg=f"image {i}, {k}")
    np.testing.assert_allclose(np.asarray(merged.resid), np.asarray(residual(merged, x[idx], model)),
                               rtol=0, atol=1e-6)
    assert not np.allclose(np.asarray(merged.resid)[:2], np.asarray(swept.resid)[2:4])
    again = LocalStore.load(store.arrays(), 6)
    assert list(again.seen) == [True] * 4 + [False] * 2
    with pytest.raises(ValueError, match="no local state of 7 images"):
        LocalStore.load(store.arrays(), 7)


def test_persist_equals_restart_in_the_first_epoch_and_not_after():
    _, d_true, x = known_model_data(32, seed=2)
    start = McemStart(LAYERS, HYPER, d_true)
    o = McemOptions(batch_size=16, iterations=2, sweeps=1, lr=0.02, checkpoint_every=10)
    run = {ls: M.run_mcem(x, start, dataclasses.replace(o, local_state=ls), seed=3, progress=None)
           for ls in ("restart", "persist")}
    for a, b in zip(run["restart"]["D"], run["persist"]["D"]):
        np.testing.assert_array_equal(a, b)  # one epoch (2 batches): every image new
    o4 = dataclasses.replace(o, iterations=4)
    later = {ls: M.run_mcem(x, start, dataclasses.replace(o4, local_state=ls), seed=3, progress=None)
             for ls in ("restart", "persist")}
    assert not np.array_equal(later["restart"]["D"][0], later["persist"]["D"][0])
    # the second epoch's E-step continues the first's chain: after one sweep from where
    # the last sample left, the fit is closer than one sweep from the matched filter
    res = {ls: [r["rel_residual"] for r in later[ls]["trace"]] for ls in later}
    assert res["persist"][:2] == res["restart"][:2]
    assert max(res["persist"][2:]) < min(res["restart"][2:])


def test_a_killed_persistent_supervised_run_resumes_to_the_same_numbers(tmp_path):
    d_true, x, y = labelled(32, seed=5)
    start = McemStart(LAYERS, HYPER, d_true)
    o = McemOptions(**{**MCEM, "iterations": 6, "local_state": "persist"})
    full = M.run_mcem(x, start, o, seed=3, y=y, progress=None)
    assert M.run_mcem(x, start, o, seed=3, y=y, progress=None,
                      checkpoint=CheckpointDir(tmp_path, stop_after=5, trace=None)) is None
    z = np.load(tmp_path / "mcem_checkpoint.npz")
    assert z["local_seen"].all() and "local_s_top" in z.files and "local_resid" not in z.files
    resumed = M.run_mcem(x, start, o, seed=3, y=y, progress=None,
                         checkpoint=CheckpointDir(tmp_path, trace=None))
    for a, b in zip(full["D"] + [full["beta"]], resumed["D"] + [resumed["beta"]]):
        np.testing.assert_array_equal(a, b)


def test_persist_refuses_what_it_cannot_keep():
    _, d_true, x = known_model_data(16, seed=2)
    o = McemOptions(batch_size=8, iterations=1, sweeps=1, local_state="persist")
    with pytest.raises(ValueError, match="runs on one device"):
        M.run_mcem(x, McemStart(LAYERS, HYPER, d_true), o, seed=0, devices=["/cpu:0"], progress=None)

    class Stream:  # a streamed source: batches, but no image indices
        image_shape, n_total, batch_size, n_classes, data_id = x.shape[1:], 16, 8, None, "s"

        def batches(self, start):
            while True:
                yield start, x[:8], None
                start += 1

    with pytest.raises(ValueError, match="needs in-memory images"):
        M.train(Stream(), McemStart(LAYERS, HYPER, d_true), o, seed=0, progress=None)
    with pytest.raises(ValueError, match="'restart' or 'persist'"):
        McemOptions(local_state="keep")


def test_a_start_from_pruned_dictionaries_takes_their_atom_counts():
    _, d_true, x = known_model_data(16, seed=2)
    # the config says 2 atoms a layer; a pruned top layer keeps 1
    pruned = [d_true[0], d_true[1][..., :1]]
    start = McemStart(LAYERS, HYPER, pruned)
    assert [lay["n_dict"] for lay in start.model_layers] == [2, 1]
    assert [lay["n_dict"] for lay in McemStart(LAYERS, HYPER).model_layers] == [2, 2]
    out = M.run_mcem(x, start, McemOptions(batch_size=8, iterations=1, sweeps=1), seed=0, progress=None)
    assert [v.shape for v in out["D"]] == [v.shape for v in pruned]
    assert DeepModel(x.shape[1:], start.model_layers, HYPER).top.k == 1
    with pytest.raises(ValueError, match="1 starting dictionaries for 2 layers"):
        McemStart(LAYERS, HYPER, pruned[:1]).model_layers
