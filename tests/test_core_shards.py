"""Shards of the per-image test-time functions (dgdm_tf.core.shards): each function run on
the shards of `shard_bounds`, then gathered, gives the unsplit call's outputs bit for bit
(np.array_equal): Algorithm 2 with images stopping at different iterations and a padded
last batch, the top-down chains (two chains, their draws kept, a mask), the classifier
over two models and the block posteriors. Shards also pass through their files."""

from __future__ import annotations

import numpy as np
import pytest

from dgdm_tf.core.shards import concat_parts, image_range, shard_bounds
from dgdm_tf.io.shards import read_shard, read_shards, write_shard
from dgdm_tf.mcem import classify as mcem_classify
from dgdm_tf.mcem import test_time
from dgdm_tf.mcem.options import MapOptions
from dgdm_tf.pretrain import block_posterior
from dgdm_tf.topdown import chain as deep_chain
from dgdm_tf.topdown.options import Start, TopdownOptions

from _smcem_model import HYPER, LAYERS, known_model_data

N, BATCH = 7, 2  # four batches, the last one partial (padded by Algorithm 2)


def _equal(a: dict, b: dict, skip=("seconds",)):
    assert set(a) == set(b)
    for k in a:
        if k not in skip:
            assert np.array_equal(np.asarray(a[k]), np.asarray(b[k])), k


def _sharded(call, shards, n=N, batch=BATCH):
    return [call(images=r) for r in shard_bounds(n, shards, batch) if r[1] > r[0]]


def test_shard_bounds_cut_whole_batches_in_order():
    assert shard_bounds(7, 2, 2) == [(0, 4), (4, 7)]
    assert shard_bounds(10, 3, 2) == [(0, 2), (2, 6), (6, 10)]
    assert shard_bounds(3, 3, 2) == [(0, 0), (0, 2), (2, 3)]  # more shards than batches
    for n, s, b in [(7, 2, 2), (100, 7, 8), (5, 4, 10), (0, 2, 3), (9, 9, 1)]:
        r = shard_bounds(n, s, b)
        assert len(r) == s and r[0][0] == 0 and r[-1][1] == n
        assert all(r[i][1] == r[i + 1][0] for i in range(s - 1))
        assert all(image_range(x, n, max(1, min(b, n))) == x for x in r)
    with pytest.raises(ValueError, match="whole batches"):
        image_range((1, 4), 7, 2)
    with pytest.raises(ValueError):
        shard_bounds(7, 0, 2)


@pytest.mark.slow
def test_algorithm2_on_shards_gathers_the_unsplit_result(tmp_path):
    model, d, x = known_model_data(N)
    args = (Start(d, LAYERS, HYPER, gamma_e_init=10.0, gamma_s_init=1.0),
            MapOptions(burn_in=2, iterations=8, tol=0.1, batch_size=BATCH))
    kw = dict(seed=6, progress=None)
    whole = test_time.infer_map(x, *args, **kw)
    assert len(np.unique(whole["iterations"])) > 1  # images stop at different iterations
    parts = _sharded(lambda images: test_time.infer_map(x, *args, images=images, **kw), 2)
    _equal(test_time.gather_map(parts), whole)
    # through the shards' files, as the workflow hands them over
    paths = []
    for i, r in enumerate(shard_bounds(N, 3, BATCH)):
        paths.append(tmp_path / f"s{i}.npz")
        write_shard(paths[-1], test_time.infer_map(x, *args, images=r, **kw), r)
    _equal(test_time.gather_map(read_shards(paths, N, "test")), whole)


@pytest.mark.slow
def test_topdown_chains_on_shards_gather_the_unsplit_result():
    model, d, x = known_model_data(N)
    mask = np.ones_like(x)
    mask[:, 3:] = 0.0
    args = (Start(d, LAYERS, HYPER, gamma_s_init=1.0),
            TopdownOptions(burn_in=1, collect=4, batch_size=BATCH, chains=2, keep_chains=True,
                           keep_draws=True, scan="random", start=None))
    kw = dict(seed=3, mask=mask, progress=None)
    whole = deep_chain.infer_topdown(x, *args, **kw)
    parts = _sharded(lambda images: deep_chain.infer_topdown(x, *args, images=images, **kw), 2)
    _equal(deep_chain.gather_topdown(parts), whole)


@pytest.mark.slow
def test_classifier_on_shards_gathers_the_unsplit_result():
    model, d, x = known_model_data(N)
    rng = np.random.default_rng(1)
    f = int(np.prod([model.top.hs, model.top.ws, model.top.k]))
    models = [(d, rng.normal(size=(3, f + 1))), ([v * 1.1 for v in d], rng.normal(size=(3, f + 1)))]
    kept = mcem_classify.KeptModels([dk for dk, _ in models], [b for _, b in models], np.zeros(f),
                                    np.ones(f), LAYERS, HYPER, gamma_s_init=1.0)
    opts = MapOptions(burn_in=1, batch_size=BATCH, iterations=4, tol=1e-3, scan="random")
    whole = mcem_classify.classify(x, kept, opts, seeds=[4, 9])
    parts = _sharded(lambda images: mcem_classify.Classified.from_arrays(
        mcem_classify.classify(x, kept, opts, seeds=[4, 9], images=images).arrays()), 2)
    got = mcem_classify.gather_classified(parts)
    assert np.array_equal(got.scores, whole.scores)
    assert all(np.array_equal(a, b) for a, b in zip(got.per_model, whole.per_model))
    assert got.q_traces == whole.q_traces and len(got.q_traces) == 2


def test_block_posteriors_on_shards_gather_the_unsplit_result():
    model, d, x = known_model_data(N)
    kw = dict(gamma_ws=[1.0, 2.0], gamma_es=[5.0, 5.0], batch_size=BATCH)  # two layers
    pools = [L["pool"] for L in LAYERS]
    outs = []
    whole = block_posterior.block_posterior_features(x, d, pools, layer_outputs=outs, **kw)

    def shard(images):
        lo = []
        f = block_posterior.block_posterior_features(x, d, pools, layer_outputs=lo, images=images, **kw)
        return {"features": f, "layer1": lo[0]}

    got = concat_parts(_sharded(shard, 3))
    assert np.array_equal(got["features"], whole) and np.array_equal(got["layer1"], outs[0])


def test_shard_files_name_a_gap_and_their_rule(tmp_path):
    write_shard(tmp_path / "a.npz", {"features": np.zeros((2, 3)), "chains": 2, "none": None}, (0, 2))
    (lo, hi), got = read_shard(tmp_path / "a.npz", "features_shard")
    assert (lo, hi) == (0, 2) and got["chains"] == 2 and "none" not in got
    write_shard(tmp_path / "b.npz", {"features": np.zeros((2, 3))}, (4, 6))
    with pytest.raises(ValueError, match="expected to start at 2"):
        read_shards([tmp_path / "a.npz", tmp_path / "b.npz"], 6, "features_shard")
    with pytest.raises(FileNotFoundError, match="rule features_shard"):
        read_shards([tmp_path / "c.npz"], 2, "features_shard")
