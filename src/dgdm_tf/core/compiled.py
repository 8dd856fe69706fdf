"""``compiled``: ``tf.function`` without AutoGraph, how every compiled step is built.

The samplers' control flow is explicit: ``tf.while_loop`` over the maps of a colour,
Python loops over what is static (colours, layers, leapfrog steps, chunks). AutoGraph
has nothing to convert there, but left on it re-parses and rewrites the source of every
Python function a trace reaches: two thirds of the time to trace a sweep
(docs/findings/autograph_off.md), and tracing, not sampling, is what
small runs and the test suite spend.
Code that needs a data-dependent branch writes ``tf.cond`` / ``tf.while_loop``; a Python
``if`` on a tensor fails at trace time with TensorFlow's own message.

Every compiled step also runs without Grappler's arithmetic optimizer
(:func:`reproducible_graphs`): with it, two traces of the same step could reorder the
same sums differently, so the same seed gave different numbers in another process.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import types

import numpy as np
import tensorflow as tf


def reproducible_graphs() -> None:
    """Turn off Grappler's arithmetic optimizer for this process, so that a traced step
    computes the same floating-point sums whichever trace or process runs it.

    With it on, retracing the same top-down sweep on the same state gave Rao-Blackwellised
    top-unit means that differed in the last bits (logits one ulp apart; the draws agreed)
    from trace to trace, so a chain, and the tables after it, were not repeatable across
    runs (``tests/test_core_compiled.py``; docs/findings/bitwise_repeatability.md). Its AddOps
    rewrite also stops deep models' sweeps with ``AlreadyExistsError ... AddOpsRewrite
    ... TmpVar`` (TensorFlow 2.21, CPU). It is an optimisation only: the graph computes
    the same expressions, in the order the code writes them. Process-wide and idempotent;
    takes effect for functions traced after the call."""
    tf.config.optimizer.set_experimental_options({"arithmetic_optimization": False})


def compiled(fn=None, **kwargs):
    """``tf.function(fn, autograph=False, **kwargs)``; also a decorator, bare or with
    keyword arguments (``@compiled``, ``@compiled(jit_compile=True)``). Turns on
    :func:`reproducible_graphs` first."""
    if fn is None:
        return lambda f: compiled(f, **kwargs)
    reproducible_graphs()
    return tf.function(fn, autograph=False, **kwargs)


def value_key(obj):
    """A hashable key of ``obj``'s value, for :func:`cached_builder`: scalars by type
    and value, dicts, lists, tuples and arrays by content, frozen dataclasses by their
    fields, functions by identity, and objects with a ``cache_key()`` method (:class:`dgdm_tf.core.model.DeepModel`)
    by what it returns. Anything else raises TypeError: a key by identity could hand a
    trace of one model to another."""
    if obj is None or isinstance(obj, (bool, int, float, str, np.bool_, np.integer, np.floating)):
        return (type(obj).__name__, obj.item() if isinstance(obj, np.generic) else obj)
    if isinstance(obj, types.FunctionType):  # by identity; the key holds it, so no id is reused
        return ("function", obj)
    if hasattr(obj, "cache_key"):
        return (type(obj).__qualname__, value_key(obj.cache_key()))
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type) and obj.__dataclass_params__.frozen:
        return (type(obj).__qualname__, value_key(dataclasses.astuple(obj)))
    if isinstance(obj, dict):
        return ("dict", tuple(sorted((str(k), value_key(v)) for k, v in obj.items())))
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, tuple(value_key(v) for v in obj))
    if isinstance(obj, np.ndarray):
        return ("ndarray", obj.dtype.str, obj.shape, obj.tobytes())
    raise TypeError(f"no value key for a {type(obj).__qualname__}: give it a cache_key() method "
                    "or do not cache the builder that takes it")


_CACHES: list = []


def clear_builder_caches() -> None:
    """Empty every :func:`cached_builder`'s cache: what a test that monkeypatches a
    function a trace calls must do before and after (``tests/conftest.py`` does it for
    every test marked ``retrace``), or a trace from before the patch runs, or outlives
    it."""
    for cache in _CACHES:
        cache.clear()


def _call_shapes(args, kwargs):
    """The shapes and dtypes of a call's tensors and arrays, and its other values: what a
    trace of that call is specialised to."""
    out = []
    for leaf in tf.nest.flatten((args, kwargs)):
        if isinstance(leaf, (tf.Tensor, tf.Variable, np.ndarray)):
            out.append((tuple(leaf.shape), leaf.dtype.name))
        else:
            out.append(value_key(leaf))
    return tuple(out)


class _PerShape:
    """What a :func:`cached_builder` hands out: the builder's function built once for each
    shape of the arguments it is called with. One function called at two batch sizes would
    be retraced by TensorFlow with the batch unknown, and the steps that size their work
    by the batch (the dictionaries' exact Gaussian) cannot be traced so."""

    def __init__(self, build):
        self._build = build
        self._fns: dict = {}

    def __call__(self, *args, **kwargs):
        key = _call_shapes(args, kwargs)
        fn = self._fns.get(key)
        if fn is None:
            fn = self._fns[key] = self._build()
        return fn(*args, **kwargs)

    def experimental_get_tracing_count(self) -> int:
        """Traces made so far, over every shape (``tf.function``'s own count)."""
        return sum(f.experimental_get_tracing_count() for f in self._fns.values()
                   if hasattr(f, "experimental_get_tracing_count"))


def cached_builder(maxsize: int = 16):
    """Decorator: memoise a builder of compiled functions on the value of its arguments
    (:func:`value_key`), so that chains of the same model in one process (train and test
    images, chains, seeds) share one trace for each shape they are called with, instead
    of tracing afresh. A trace is a function of the model's structure, the builder's
    options and the call's shapes only, never of the state or data it is called with, so
    a shared trace draws what a fresh one draws, bit for bit
    (``tests/test_core_compiled.py``). The least recently used of more than ``maxsize``
    builds are dropped. ``builder.__wrapped__`` builds afresh, without the cache;
    ``builder.tracing_count()`` counts the traces of the builds it holds."""
    def deco(builder):
        cache: collections.OrderedDict = collections.OrderedDict()
        _CACHES.append(cache)

        @functools.wraps(builder)
        def wrapper(*args, **kwargs):
            key = value_key((args, kwargs))
            if key in cache:
                cache.move_to_end(key)
                return cache[key]
            fn = cache[key] = _PerShape(lambda: builder(*args, **kwargs))
            while len(cache) > maxsize:
                cache.popitem(last=False)
            return fn

        wrapper.tracing_count = lambda: sum(f.experimental_get_tracing_count()
                                            for f in cache.values())
        return wrapper
    return deco


def per_layer(flag, n_layers: int, key: str = "jit_compile") -> list[bool]:
    """A per-layer switch (config ``jit_compile``) as one bool per layer: a bool applies
    to every layer, ``"top"`` to the top layer alone, a list gives each layer its own
    (layer 1 first)."""
    if isinstance(flag, bool):
        return [flag] * n_layers
    if flag == "top":
        return [False] * (n_layers - 1) + [True]
    flags = list(flag) if isinstance(flag, (list, tuple)) else []
    if len(flags) != n_layers or not all(isinstance(f, bool) for f in flags):
        raise ValueError(f"{key} must be true, false, 'top' or a list of {n_layers} booleans, "
                         f"one per layer (layer 1 first); got {flag!r}")
    return flags
