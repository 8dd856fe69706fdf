"""Data-parallel stochastic MCEM (tf.distribute.MirroredStrategy): the per-device
gradients sum to the whole batch's (the prior counted once), and a run over two devices
(two logical CPUs, in a subprocess: devices are fixed when TensorFlow starts) runs the
supervised model (the gather of S[L] and lambda for beta's step) to finite numbers.
Resuming is device-independent code, tested on one device in test_mcem_stochastic."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from types import SimpleNamespace
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from dgdm_tf.topdown.state import take_images
from dgdm_tf.mcem import stochastic as M
from _smcem_model import known_model_data

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_shard_gradients_sum_to_the_whole_batch():
    """grad_delta of each half with N/2 as its total, summed, plus the prior's D once
    more, equals grad_delta of the whole batch (the same samples): the replicas' sum."""
    model, d_true, x = known_model_data(8, seed=1)
    d = [tf.constant(v) for v in d_true]
    samples = M.e_step(x, d, model, tf.constant([1, 2], tf.int64), sweeps=2, n_samples=2,
                       gamma_s=1.0)
    whole, q_whole = M.grad_delta(d, samples, x, model, 100, with_q=True)
    halves = [([take_images(s, sl) for s in samples], x[sl]) for sl in (slice(0, 4), slice(4, 8))]
    parts = [M.grad_delta(d, smp, xs, model, 50, with_q=True) for smp, xs in halves]
    for l in range(2):
        summed = parts[0][0][l] + parts[1][0][l] + d[l]  # prior precision 1
        np.testing.assert_allclose(summed.numpy(), whole[l].numpy(), rtol=1e-4,
                                   atol=1e-5 * float(tf.reduce_max(tf.abs(whole[l]))))
    prior_q = 0.5 * sum(float(tf.reduce_sum(v * v)) for v in d)
    np.testing.assert_allclose(float(parts[0][1] + parts[1][1]) + prior_q, float(q_whole), rtol=1e-5)


SCRIPT = textwrap.dedent("""
    import json, sys
    sys.path[:0] = [{src!r}, {tests!r}]
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import numpy as np
    from _smcem_model import labelled, LAYERS, HYPER, MCEM
    from dgdm_tf.mcem import stochastic as M
    from dgdm_tf.mcem.options import McemOptions, McemStart
    d_true, x, y = labelled(32, seed=5)
    options = McemOptions(**{{**MCEM, "iterations": 2, "sweeps": 1, "supervise_from": 0}})
    a = M.run_mcem(x, McemStart(LAYERS, HYPER, d_true), options, seed=3, y=y, progress=None,
                   devices=["/cpu:0", "/cpu:1"])
    print(json.dumps({{"finite": bool(all(np.all(np.isfinite(v)) for v in a["D"] + [a["beta"]])),
                      "beta_moved": bool(np.any(a["beta"] != 0)),
                      "errors": [r["train_error"] for r in a["trace"]]}}))
""")


@pytest.mark.slow
def test_two_device_supervised_run(tmp_path):
    code = SCRIPT.format(src=str(REPO / "src"), tests=str(REPO / "tests"))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["finite"] and out["beta_moved"], out
    assert len(out["errors"]) == 2 and all(0.0 <= e <= 1.0 for e in out["errors"]), out


def test_batch_must_split_evenly_over_devices():
    with pytest.raises(ValueError, match="multiple of the 2 devices"):
        M._replicated_step(SimpleNamespace(num_replicas_in_sync=2), None, None,
                           n_total=10, batch_size=5, sweeps=1, n_samples=1, gamma_s=1.0,
                           svm_hyper=None, jit_compile=False)
