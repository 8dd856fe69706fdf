"""``compiled``: ``tf.function`` without AutoGraph, how every compiled step is built.

The samplers' control flow is explicit: ``tf.while_loop`` over the maps of a colour,
Python loops over what is static (colours, layers, leapfrog steps, chunks). AutoGraph
has nothing to convert there, but left on it re-parses and rewrites the source of every
Python function a trace reaches. That was two thirds of the time to trace a sweep
(measured 2026-11-23 on 2 cores, first call of a sweep, trace included: 2-layer Geweke
model 12.9 s -> 5.9 s, 3-layer 26.0 s -> 10.4 s, the smoke config's MNIST model 17.5 s
-> 6.3 s), and tracing, not sampling, is what small runs and the test suite spend.
Code that needs a data-dependent branch writes ``tf.cond`` / ``tf.while_loop``; a Python
``if`` on a tensor fails at trace time with TensorFlow's own message.
"""

from __future__ import annotations

import tensorflow as tf


def compiled(fn=None, **kwargs):
    """``tf.function(fn, autograph=False, **kwargs)``; also a decorator, bare or with
    keyword arguments (``@compiled``, ``@compiled(jit_compile=True)``)."""
    if fn is None:
        return lambda f: compiled(f, **kwargs)
    return tf.function(fn, autograph=False, **kwargs)
