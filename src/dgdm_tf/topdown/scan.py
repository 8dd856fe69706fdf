"""Scan order of the top-down sampler (``DeepModel.scan``, :func:`scan_orders`).

By default each sweep visits a layer's colours, and within each colour its maps, in an
order drawn from the sweep's seed (fixed orders: colours row-major, maps in index
order). At the noise precision the models settle at, the block visited first takes
whatever residual it sees and no later single-block update moves that explanation to a
neighbour, so with a fixed order the features follow the scan, not the image
(docs/findings/layerwise_scan_order.md). An order drawn independently of the state makes the sweep a
mixture of exact sweeps; the draws of a (colour, map) step keep their seeds whatever the
order, so ``scan="fixed"`` repeats the sampler's earlier draws bit for bit. The windowed
paths permute a layer's colours within classes of equal window shapes only
(:meth:`DeepModel.scan_classes`). ``scan="matched"`` orders the top units per image
(:func:`dgdm_tf.topdown.top_units.matched_order`) and every lower layer as "fixed".
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from dgdm_tf.core.model import DeepModel



def scan_orders(model: DeepModel, l: int, seed):
    """One sweep's visiting order of layer l's colours (the top units' when l = L-1):
    (colour id per slot, map order per slot or None); colour (a, b) has id a G_w + b.

    ``model.scan == "fixed"``: ids 0, 1, ... (row-major, Python ints) and None (maps in
    index order). "random": the ids as scalar tensors, a permutation of the colours
    within each of :meth:`DeepModel.scan_classes` (slot s holds a colour of colour s's
    class; one class, so a uniform permutation, on every path but the windowed ones),
    and an (n_colours, K) tensor, slot s's maps in a uniformly drawn order. Stateless: the
    same seed gives the same order. Every path of a layer draws the same order."""
    col = model.colourings[l]
    n_col = col.g_h * col.g_w
    if model.scan in ("fixed", "matched"):  # "matched" orders the top units per image
        return list(range(n_col)), None
    classes = model.scan_classes(l)
    s_col, s_map = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    perm = tf.argsort(tf.random.stateless_uniform([n_col], s_col))
    # the colours grouped by class, each class in its random order, then into its slots
    grouped = tf.gather(perm, tf.argsort(tf.gather(tf.constant(classes), perm), stable=True))
    ids = tf.gather(grouped, np.argsort(np.argsort(classes, kind="stable")))
    maps = tf.argsort(tf.random.stateless_uniform([n_col, model.geoms[l].k], s_map), axis=-1)
    return tf.unstack(ids), maps


def per_colour(values: np.ndarray, ci):
    """values[ci] (values: one row per colour) as a tensor; ci an int or a scalar tensor."""
    if isinstance(ci, int):
        return tf.constant(values[ci])
    return tf.gather(tf.constant(values), ci)


def over_colours(colour_ids, map_orders, one_colour, carry, *, loop: bool):
    """``carry = one_colour(slot, ci, maps, carry)`` for each slot of a sweep's order
    (:func:`scan_orders`: ``ci`` the slot's colour id, ``maps`` its map order or None).

    ``loop``: the slots run in one ``tf.while_loop`` (``ci`` and ``slot`` scalar tensors),
    so a traced sweep holds one colour's step instead of one per colour: tracing and
    graph optimisation, most of a job's first sweep, shrink with it, and each colour's
    step computes what it computed unrolled. Only where no shape depends on the slot
    (every path but the windowed ones); otherwise the slots are unrolled, ``slot`` an int."""
    if not loop:
        for slot, ci in enumerate(colour_ids):
            carry = one_colour(slot, ci, None if map_orders is None else map_orders[slot], carry)
        return carry
    ids = tf.stack([tf.convert_to_tensor(c, tf.int32) for c in colour_ids])

    def body(slot, carry):
        maps = None if map_orders is None else tf.gather(map_orders, slot)
        return slot + 1, one_colour(slot, tf.gather(ids, slot), maps, carry)

    _, carry = tf.while_loop(lambda slot, _: slot < len(colour_ids), body,
                             (tf.constant(0), tuple(carry)), parallel_iterations=1)
    return carry
