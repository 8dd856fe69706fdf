"""Data-parallel refinement (``run_refine`` with ``workers`` > 1): worker w sweeps chunks
w, w + W, ...; every chunk is seeded by its index and the dictionaries' sums run over
every worker's chunks in one order, so two worker processes (MultiWorkerMirroredStrategy
over localhost, TF_CONFIG) draw the one-process chain bit for bit, and a checkpoint
written by either resumes with the other."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from dgdm_tf.core import cluster
from dgdm_tf.core.image_chunks import Shards, map_over_chunks, sum_over_chunks
from dgdm_tf.mcmc.checkpoint import CheckpointDir
from dgdm_tf.topdown import refine
from _topdown_model import LAYERS, draw as _draw

REPO = Path(__file__).resolve().parents[1]
#: 7 images in chunks of 3: three chunks, the last one short (worker 0 sweeps chunks 0
#: and 2, worker 1 chunk 1)
KW = dict(burn_in=2, collect=2, n_leapfrog=3, chunk=3, checkpoint_every=2)


def _refine(x, d_true, ck, kw, *, workers, stop=None, progress=None):
    """The chain of options ``kw`` (SupervisedOptions' when they hold ``svm_steps``: then
    image i is of class i mod 3) on ``workers``, checkpointing into ``ck``."""
    sup = "svm_steps" in kw
    opts = (refine.SupervisedOptions if sup else refine.RefineOptions)(**kw, workers=workers)
    start = refine.Start(d_true, LAYERS, gamma_e_init=50.0, gamma_s_init=0.25,
                         n_classes=3 if sup else None)
    return refine.run_refine(x, start, opts, seed=1, labels=np.arange(len(x)) % 3 if sup else None,
                             checkpoint=None if ck is None else CheckpointDir(ck, stop_after=stop),
                             progress=progress)


def test_one_worker_shards_sum_and_map_as_one_process():
    """W = 1: the same sums, bit for bit, as sum_over_chunks (last chunk first), and the
    same map; W = 2 splits the chunks w, w + 2, ... and needs a chunk per worker."""
    x = tf.random.stateless_normal([10, 4, 3], [1, 2])
    fn = lambda t: (tf.reduce_sum(tf.square(t), 0), tf.reduce_sum(t))  # noqa: E731
    one = Shards(3, cluster.Workers())
    for a, b in zip(one.total(fn, [x]), sum_over_chunks(fn, [x], 3)):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_array_equal(one.map(tf.sin, [x]).numpy(),
                                  map_over_chunks(tf.sin, [x], 3).numpy())
    assert [c for c, _, _ in Shards(3, cluster.Workers(2, 1)).owned(10)] == [1, 3]
    assert Shards(3, cluster.Workers(2, 0)).owned(10) == [(0, 0, 3), (2, 6, 9)]
    with pytest.raises(ValueError, match="fewer than the 3 workers"):
        Shards(5, cluster.Workers(3, 0)).owned(10)


def test_distributed_refinement_needs_chunks():
    _, d_true, x = _draw(4, seed=5)
    with pytest.raises(ValueError, match="needs chunk"):
        _refine(x, d_true, None, {**KW, "chunk": None}, workers=2)


#: the supervised model's settings (labels: image i is of class i mod 3)
SUPERVISED = dict(scan="random", svm_steps=2, keep_models=2, svm_warmup=2, svm_average=2)

WORKER = textwrap.dedent("""
    import json, os, sys
    sys.path[:0] = [{src!r}, {tests!r}]
    from dgdm_tf.core import cluster
    team = cluster.workers()  # before TensorFlow runs anything
    assert team.count == 2, team
    from _topdown_model import draw as _draw
    from test_topdown_refine_distributed import _refine
    kw = json.loads({kw!r})
    _, d_true, x = _draw(7, seed=5)
    tmp = {tmp!r}
    for name, stop in (("full", None), ("from_one", None), ("two_then_one", 2)):
        _refine(x, d_true, os.path.join(tmp, name), kw, workers=2, stop=stop)
    print("done", team.index)
""")


def _final(ckpt_dir):
    """The checkpoint a chain leaves at its end: its state, sums and trace."""
    with np.load(Path(ckpt_dir) / "checkpoint.npz") as z:
        arrays = {k: z[k] for k in z.files if k != "trace"}
        trace = [{k: v for k, v in r.items() if k != "seconds"} for r in json.loads(str(z["trace"]))]
    return arrays, trace


def _assert_same_chain(a, b):
    (arr_a, tr_a), (arr_b, tr_b) = a, b
    assert sorted(arr_a) == sorted(arr_b)
    for k in arr_a:
        np.testing.assert_array_equal(arr_a[k], arr_b[k], err_msg=k)
    assert tr_a == tr_b


@pytest.mark.slow
# the unsupervised refinement on 2 workers against 1 is the default tier's
# (tests/test_workflow_tiny.py, through Snakemake); the supervised chain runs the same
# workers and checkpoints with the SVM on top, so it alone stays here
@pytest.mark.parametrize("supervised", [True], ids=["supervised"])
def test_two_worker_processes_draw_the_one_process_chain(tmp_path, supervised):
    """The chunked chain of one process without ``distribute`` (the reference), then two
    workers over localhost: the same final state (D, gamma_s, gamma_e, every image's Z
    and S, the seed; the supervised model's SVM and kept models), sums and trace, bit
    for bit. Two workers resume a checkpoint of one distributed worker, and one resumes
    the two workers'."""
    _, d_true, x = _draw(7, seed=5)
    kw = dict(KW, **(SUPERVISED if supervised else {}))
    _refine(x, d_true, tmp_path / "ref", kw, workers=1)
    ref = _final(tmp_path / "ref")
    assert any(k.startswith("state_z_") for k in ref[0]) and "state_gamma_e" in ref[0]
    assert ("svm_beta" in ref[0] and "sample1_beta" in ref[0]) == supervised
    assert _refine(x, d_true, tmp_path / "one", kw, workers=2, stop=2) is None
    shutil.copytree(tmp_path / "one", tmp_path / "from_one")

    code = WORKER.format(src=str(REPO / "src"), tests=str(REPO / "tests"),
                         kw=json.dumps(kw), tmp=str(tmp_path))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    procs = [subprocess.Popen([sys.executable, "-c", code], env={**env, "TF_CONFIG": c},
                              text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for c in cluster.local_tf_configs(2)]
    outs = [p.communicate(timeout=1200) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
        assert "done" in out

    _assert_same_chain(_final(tmp_path / "full"), ref)
    _assert_same_chain(_final(tmp_path / "from_one"), ref)
    said = []
    _refine(x, d_true, tmp_path / "two_then_one", kw, workers=2, progress=said.append)
    assert "resuming refinement from checkpoint at sweep 2/4" in said[0]
    _assert_same_chain(_final(tmp_path / "two_then_one"), ref)
