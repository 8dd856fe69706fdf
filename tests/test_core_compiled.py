"""The compiled steps compute the same numbers whichever trace runs them."""

import numpy as np
import tensorflow as tf

from dgdm_tf.topdown.state import init_state
from dgdm_tf.topdown.sweep import make_sweep_fn
import pytest

from dgdm_tf.core.compiled import cached_builder, compiled, per_layer, value_key
from dgdm_tf.core.model import DeepModel
from _labelled_toy import LAYERS, labelled_data


def test_compiled_turns_off_the_arithmetic_optimizer():
    compiled(lambda t: t + 1.0)
    assert tf.config.optimizer.get_experimental_options()["arithmetic_optimization"] is False


@pytest.mark.slow
def test_two_traces_of_a_sweep_give_bitwise_equal_outputs():
    """Retraced on the same state, the top-down sweep at the MNIST shapes returns the same
    Rao-Blackwellised means bit for bit. With Grappler's arithmetic optimizer on
    (TensorFlow's default) about 300 of these 6 400 differ in the last bits from trace to
    trace (docs/findings/bitwise_repeatability.md), which made runs unrepeatable."""
    rng = np.random.default_rng(0)
    x = (np.abs(rng.normal(size=(8, 28, 28, 1))) * (rng.random((8, 28, 28, 1)) < 0.2)).astype(np.float32)
    ds = [rng.normal(size=(8, 8, 1, 50)).astype(np.float32),
          rng.normal(size=(6, 6, 50, 200)).astype(np.float32)]
    layers = [{"dict_size": d.shape[0], "n_dict": d.shape[-1], "pool": p} for d, p in zip(ds, (3, 1))]
    model = DeepModel(x.shape[1:], layers, None, scan="fixed").with_ks([50, 200])
    st = init_state(x, model, ds, tf.constant([5, 1]), gamma_e_init=1000.0, gamma_s_init=100.0)
    xt = tf.constant(x)
    fresh = make_sweep_fn.__wrapped__  # the builder without its cache: a new trace each call
    st, _ = fresh(model, mask_given=False, update_globals=False)(st, xt)
    outs = []
    for _ in range(2):
        new, stats = fresh(model, mask_given=False, update_globals=False)(st, xt)
        outs.append([np.asarray(stats["expected_top"]), np.asarray(new.s_top)])
    assert np.count_nonzero(outs[0][0]) > 1000  # the means are not trivially zero
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    np.testing.assert_array_equal(outs[0][1], outs[1][1])


def test_per_layer_spreads_a_bool_and_checks_a_list():
    assert per_layer(True, 3) == [True, True, True]
    assert per_layer([False, True], 2) == [False, True]
    assert per_layer("top", 3) == [False, False, True]
    for bad in ([True], [True, "yes"], "all"):
        try:
            per_layer(bad, 2)
        except ValueError as e:
            assert "2 booleans, one per layer" in str(e) and repr(bad) in str(e)
        else:
            raise AssertionError(f"{bad!r} was accepted")


def test_equal_models_share_a_trace_and_other_options_do_not():
    a, b = DeepModel((12, 12, 1), LAYERS), DeepModel((12, 12, 1), [dict(l) for l in LAYERS])
    assert make_sweep_fn(a, update_globals=False) is make_sweep_fn(b, update_globals=False)
    assert make_sweep_fn(a, update_globals=False) is not make_sweep_fn(a, update_globals=True)
    for other in (DeepModel((12, 12, 1), LAYERS, scan="fixed"), a.with_ks([3, 3]),
                  DeepModel((12, 12, 1), LAYERS, {"a_e": 1.0}), DeepModel((13, 13, 1), LAYERS)):
        assert make_sweep_fn(other, update_globals=False) is not make_sweep_fn(a, update_globals=False)
    with pytest.raises(TypeError, match="no value key for a object"):
        value_key(object())
    assert value_key(True) != value_key(1) and value_key([1.0]) != value_key((1.0,))


def test_a_cached_builder_builds_once_per_call_shape():
    """One build per shape of the call: a step that sizes its work by the batch (as the
    dictionaries' exact Gaussian does) would fail in the trace TensorFlow makes with the
    batch unknown when one function meets a second batch size. Equal arguments share."""
    builds = []

    @cached_builder()
    def build(scale: float):
        builds.append(scale)
        return compiled(lambda x: x * scale * int(x.shape[0]), reduce_retracing=True)

    f = build(2.0)
    for n in (3, 5, 3):
        np.testing.assert_array_equal(f(tf.ones([n, 2])).numpy(), np.full([n, 2], 2.0 * n))
    assert build(2.0) is f and builds == [2.0, 2.0]  # built for batch 3, then for batch 5
    assert f.experimental_get_tracing_count() == 2  # one trace for each of the two shapes
    with pytest.raises(TypeError, match="NoneType"):  # what one function would do
        g = build.__wrapped__(2.0)
        for n in (3, 5):
            g(tf.ones([n, 2]))


@pytest.mark.slow
def test_a_shared_trace_draws_what_a_fresh_trace_draws():
    """The cached sweep, already run on another state, draws on a new state exactly what a
    trace made afresh for it draws."""
    model, d, x, _ = labelled_data(6, seed=1, noise=0.6)
    xt = tf.constant(x)
    shared = make_sweep_fn(model, update_globals=False)
    shared(init_state(x, model, d, tf.constant([1, 2])), xt)
    st = init_state(x, model, d, tf.constant([3, 4]))
    a, sa = shared(st, xt)
    b, sb = make_sweep_fn.__wrapped__(model, update_globals=False)(st, xt)
    assert make_sweep_fn(DeepModel((12, 12, 1), LAYERS), update_globals=False) is shared
    assert np.count_nonzero(sa["expected_top"]) > 5
    for u, v in zip(tf.nest.flatten((a, sa)), tf.nest.flatten((b, sb))):
        np.testing.assert_array_equal(np.asarray(u), np.asarray(v))


@pytest.mark.slow  # a real chain, twice: about 50 s of CPU
def test_a_second_batched_pretraining_chain_makes_no_new_trace(tmp_path):
    """Two batched pretraining chains of one layer model (batches of 4, 4 and 2 images):
    the second, from another seed, runs on the first's traces of the batch step and the
    global step."""
    from dgdm_tf.mcmc.checkpoint import CheckpointDir
    from dgdm_tf.pretrain import batched, chain
    from dgdm_tf.pretrain.options import Layer, PretrainOptions

    x = np.random.default_rng(0).random((10, 12, 12, 1)).astype(np.float32)
    layer = Layer(dict_size=3, n_dict=3, pool=2)
    opts = PretrainOptions(burn_in=2, collect=1, prune_min_usage=0.0, batch_size=4,
                           jit_compile=False)
    builders = (batched.make_batch_step, batched.make_global_step)
    chain.run_pretrain_layer(x, layer, opts, seed=1, progress=None,
                             checkpoint=CheckpointDir(tmp_path / "a", trace=None))
    first = [b.tracing_count() for b in builders]
    assert all(n > 0 for n in first)
    chain.run_pretrain_layer(x, layer, opts, seed=2, progress=None,
                             checkpoint=CheckpointDir(tmp_path / "b", trace=None))
    assert [b.tracing_count() for b in builders] == first


@pytest.mark.slow  # a real chain, twice: about 50 s of CPU
def test_a_second_refinement_makes_no_new_trace():
    """Two supervised, chunked refinements of one model (chunks of 4 and 2 images), the
    second from another seed: its sweeps and its SVM scans (the averaged beta) run on
    the first's traces."""
    from dgdm_tf.supervised import joint_svm
    from dgdm_tf.topdown import refine, sweep

    _, d, x, lab = labelled_data(6, seed=1)
    start = refine.Start(d, LAYERS, n_classes=3)
    opts = refine.SupervisedOptions(burn_in=1, collect=1, scan="random", svm_steps=1, keep_models=1,
                                    svm_warmup=0, svm_average=2, chunk=4, n_leapfrog=2)
    builders = (joint_svm.make_svm_scan, sweep.make_local_steps, sweep.make_global_steps)
    refine.run_refine(x, start, opts, seed=1, labels=lab, progress=None)
    first = [b.tracing_count() for b in builders]
    assert all(n > 0 for n in first)
    refine.run_refine(x, start, opts, seed=2, labels=lab, progress=None)
    assert [b.tracing_count() for b in builders] == first
