"""``compiled``: ``tf.function`` without AutoGraph, how every compiled step is built.

The samplers' control flow is explicit: ``tf.while_loop`` over the maps of a colour,
Python loops over what is static (colours, layers, leapfrog steps, chunks). AutoGraph
has nothing to convert there, but left on it re-parses and rewrites the source of every
Python function a trace reaches: two thirds of the time to trace a sweep
(docs/design.md, "Compiled steps without AutoGraph"), and tracing, not sampling, is what
small runs and the test suite spend.
Code that needs a data-dependent branch writes ``tf.cond`` / ``tf.while_loop``; a Python
``if`` on a tensor fails at trace time with TensorFlow's own message.

Every compiled step also runs without Grappler's arithmetic optimizer
(:func:`reproducible_graphs`): with it, two traces of the same step could reorder the
same sums differently, so the same seed gave different numbers in another process.
"""

from __future__ import annotations

import tensorflow as tf


def reproducible_graphs() -> None:
    """Turn off Grappler's arithmetic optimizer for this process, so that a traced step
    computes the same floating-point sums whichever trace or process runs it.

    With it on, retracing the same top-down sweep on the same state gave Rao-Blackwellised
    top-unit means that differed in the last bits (logits one ulp apart; the draws agreed)
    from trace to trace, so a chain, and the tables after it, were not repeatable across
    runs (``tests/test_core_compiled.py``; ``experiments/determinism/retrace.py``). Its AddOps
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
