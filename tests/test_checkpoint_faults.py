"""Damaged checkpoints in every chain that checkpoints (in-memory and batched pretraining,
refinement, supervised refinement, stochastic MCEM, model averaging): a run stopped
early leaves its checkpoint, the checkpoint is truncated, overwritten with random bytes,
or (for some) given an array of the wrong shape; the rerun sets it aside as
``<name>.damaged``, says so with the path, starts afresh and ends bit for bit where a
fresh run ends (:mod:`dgdm_tf.mcmc.driver`)."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from dgdm_tf.data.minibatches import ArrayData
from dgdm_tf.mcem import averaging as A, stochastic as M
from dgdm_tf.mcem.options import AveragingOptions, McemOptions, McemStart
from dgdm_tf.mcmc.checkpoint import CheckpointDir
from dgdm_tf.pretrain import chain
from dgdm_tf.pretrain.options import Layer, PretrainOptions
from dgdm_tf.topdown import refine
from _damage import random_bytes, truncate
from _smcem_model import AVERAGING, HYPER, LAYERS as MCEM_LAYERS, MCEM, labelled
from _topdown_model import LAYERS, draw as _draw


def _wrong_shape(name):
    def damage(path):
        with np.load(path) as z:
            arrays = {k: z[k] for k in z.files}
        arrays[name] = np.concatenate([arrays[name], arrays[name]], axis=-1)
        np.savez(path, **arrays)
    damage.__name__ = f"wrong_shape_{name}"
    return damage


def _pretrain_data(n=12, side=12, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((n, side, side, 1)).astype(np.float32) * (rng.random((n, side, side, 1)) < 0.3)


PRETRAIN = dict(burn_in=4, collect=3, thin=2, checkpoint_every=2, prune_min_usage=0.0,
                jit_compile=False)


def _pretrain(ck, stop_after, progress, **kw):
    return chain.run_pretrain_layer(
        _pretrain_data(), Layer(dict_size=3, n_dict=4, pool=2),
        PretrainOptions(**{**PRETRAIN, **kw}), seed=5,
        checkpoint=None if ck is None else CheckpointDir(ck, stop_after=stop_after, trace=None),
        progress=progress)


REFINE = dict(burn_in=3, collect=3, checkpoint_every=2)


def _refine(ck, stop_after, progress, supervised=False):
    _, d_true, x = _draw(6, seed=5)
    start = refine.Start(d_true, LAYERS, gamma_e_init=50.0, gamma_s_init=0.25,
                         n_classes=3 if supervised else None)
    opts = (refine.SupervisedOptions(**REFINE, scan="random", svm_steps=2, keep_models=2,
                                     svm_warmup=2, svm_average=2)
            if supervised else refine.RefineOptions(**REFINE))
    return refine.run_refine(x, start, opts, seed=1, labels=np.arange(6) % 3 if supervised else None,
                             checkpoint=None if ck is None else CheckpointDir(ck, stop_after=stop_after),
                             progress=progress)


def _checkpoint(ck, stop_after):
    return None if ck is None else CheckpointDir(ck, stop_after=stop_after, trace=None)


def _mcem(ck, stop_after, progress):
    d_true, x, y = labelled(32, seed=5)
    return M.run_mcem(x, McemStart(MCEM_LAYERS, HYPER, d_true), McemOptions(**MCEM), seed=3, y=y,
                      checkpoint=_checkpoint(ck, stop_after), progress=progress)


@functools.lru_cache(maxsize=1)
def _mcem_model():
    return _mcem(None, None, None)


def _averaging(ck, stop_after, progress):
    _, x, y = labelled(32, seed=5)
    m = _mcem_model()
    return A.run_averaging(ArrayData(x, y, 16, seed=4, n_classes=2),
                           McemStart(MCEM_LAYERS, HYPER, m["D"], m["beta"], m["mean"], m["std"]),
                           AveragingOptions(**AVERAGING), seed=6,
                           checkpoint=_checkpoint(ck, stop_after), progress=progress)


#: (chain, its checkpoint under the folder, the steps of the stopped run)
CHAINS = {
    "pretrain": (_pretrain, "checkpoint.npz", 6),
    "batched_pretrain": (functools.partial(_pretrain, batch_size=4, prune_min_usage=0.3),
                         "batches/head.npz", 5),
    "refine": (_refine, "checkpoint.npz", 4),
    "supervised_refine": (functools.partial(_refine, supervised=True), "checkpoint.npz", 4),
    "mcem": (_mcem, "mcem_checkpoint.npz", 3),
    "averaging": (_averaging, "averaging_checkpoint.npz", 3),
}


def _assert_same(a, b, where="result"):
    """Equal bit for bit, timings aside."""
    if isinstance(a, dict):
        assert sorted(a) == sorted(b), where
        for k in a:
            if k != "seconds":
                _assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (u, v) in enumerate(zip(a, b)):
            _assert_same(u, v, f"{where}[{i}]")
    else:
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=where)



# the slow tier: six chains twice over, minutes; the driver's own damage tests
# (tests/test_mcmc_driver.py, a toy chain) are the default tier's
pytestmark = pytest.mark.slow

@pytest.fixture(scope="module")
def fresh():
    """Each chain's result from a fresh run (no checkpoint), computed once."""
    return {}


def _check(tmp_path, fresh, name, damage):
    run, ck_name, stop = CHAINS[name]
    if name not in fresh:
        fresh[name] = run(None, None, None)
    ck = tmp_path / "ck"
    assert run(ck, stop, None) is None
    path = ck / ck_name
    assert path.exists()
    damage(path)
    said = []
    _assert_same(run(ck, None, said.append), fresh[name])
    aside = path.with_name(path.name + ".damaged")
    assert aside.exists()
    lines = [m for m in said if f"checkpoint {path} is damaged (" in m]
    assert lines and f"renamed to {aside}; starting afresh" in lines[0], said
    assert "unsafely" not in lines[0] and "allow_pickle" not in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("damage", [truncate, random_bytes], ids=["truncated", "random_bytes"])
@pytest.mark.parametrize("name", list(CHAINS))
def test_a_damaged_checkpoint_is_set_aside_and_the_chain_runs_as_a_fresh_one(
        tmp_path, fresh, name, damage):
    _check(tmp_path, fresh, name, damage)


@pytest.mark.parametrize("name, array", [("pretrain", "state_s"), ("mcem", "d1"),
                                         ("refine", "state_d_0"), ("averaging", "kept0_d0")])
def test_a_checkpoint_whose_arrays_do_not_fit_the_chain_is_set_aside(tmp_path, fresh, name,
                                                                      array):
    line = _check(tmp_path, fresh, name, _wrong_shape(array))
    assert f"the array {array} is float32" in line


def test_a_damaged_batch_file_sets_the_batched_state_aside(tmp_path, fresh):
    """The head is whole but one batch file of its buffer is truncated: the resume reads
    every batch of the buffer first, so the state is set aside before any sweep."""
    name = "batched_pretrain"

    def damage_batch(head):
        with np.load(head) as z:
            buffer = int(z["buffer"])
        truncate(head.parent / f"buffer{buffer}" / "batch00001.npz")

    line = _check(tmp_path, fresh, name, damage_batch)
    assert "batch00001.npz: not a readable .npz archive (a damaged or truncated zip" in line
