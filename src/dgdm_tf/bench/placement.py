"""Where a compiled step's ops run: each op of its graph (nested functions and loop bodies
too) must have a kernel for the target device type in TensorFlow's kernel registry, none may
be pinned to another device, a run with soft placement off must not raise, and the outputs
must land on the target (:mod:`dgdm_tf.bench.gpu_check` uses it to fail a step that would
silently fall back to the CPU)."""

from __future__ import annotations

import contextlib
import functools
import time
from dataclasses import dataclass, field

import tensorflow as tf
from tensorflow.python.framework import kernels as tf_kernels

from dgdm_tf.core.compiled import compiled

HOST_DTYPES = (tf.int32, tf.string, tf.resource, tf.variant)


@dataclass
class Placement:
    """What :func:`check_placement` found for one step on ``target``."""

    step: str
    target: str
    no_kernel: list = field(default_factory=list)
    pinned: list = field(default_factory=list)
    strict_error: str = ""
    outputs: list = field(default_factory=list)
    n_ops: int = 0
    #: ops with no GPU kernel in this build's registry, whatever the target
    no_gpu_kernel: list = field(default_factory=list)
    #: seconds of the first run (trace aside): the executable's build is in it
    first_run_s: float | None = None

    @property
    def ok(self) -> bool:
        return not (self.no_kernel or self.pinned or self.strict_error or self.outputs)

    def problems(self) -> list[str]:
        out = [f"no {_device_type(self.target)} kernel: {m}" for m in self.no_kernel]
        out += [f"pinned elsewhere: {m}" for m in self.pinned]
        out += [f"strict placement failed: {self.strict_error}"] if self.strict_error else []
        out += [f"output on another device: {m}" for m in self.outputs]
        return out


def _device_type(device: str) -> str:
    return tf.DeviceSpec.from_string(device).device_type or "CPU"


def same_device(actual: str, target: str) -> bool:
    """Whether device string ``actual`` names the device ``target`` names (type and index;
    a missing index is 0)."""
    a, t = tf.DeviceSpec.from_string(actual), tf.DeviceSpec.from_string(target)
    return (a.device_type, a.device_index or 0) == (t.device_type, t.device_index or 0)


def graph_nodes(concrete) -> list:
    """Every node of a concrete function's graph and of each function in its library
    (nested functions, loop and branch bodies): ``(function, NodeDef)`` pairs."""
    gd = concrete.graph.as_graph_def()
    name = concrete.name.decode() if isinstance(concrete.name, bytes) else concrete.name
    out = [(name, n) for n in gd.node]
    for f in gd.library.function:
        out += [(f.signature.name, n) for n in f.node_def]
    return out


def _kernel_allows(kdef, node) -> bool:
    for c in kdef.constraint:
        if c.name not in node.attr:
            continue
        allowed = set(c.allowed_values.list.type)
        a = node.attr[c.name]
        types = list(a.list.type) if a.HasField("list") else [a.type]
        if allowed and any(t not in allowed for t in types):
            return False
    return True


@functools.lru_cache(maxsize=None)
def _registered(op: str) -> tuple:
    return tuple(tf_kernels.get_registered_kernels_for_op(op).kernel)


def has_kernel(node, device_type: str) -> bool:
    """Whether this TensorFlow build registers a kernel for ``node``'s op and dtypes on
    ``device_type`` (a kernel for every device, ``DEFAULT``, counts)."""
    return any(k.device_type in (device_type, "DEFAULT") and _kernel_allows(k, node) for k in _registered(node.op))


def kernel_misses(nodes, device_type: str) -> list[str]:
    """``op (dtype attrs)`` of each node with no kernel on ``device_type``, once each."""
    miss = set()
    for _, n in nodes:
        if n.op in ("NoOp",) or has_kernel(n, device_type):
            continue
        dtypes = ",".join(f"{k}={tf.dtypes.as_dtype(v.type).name}" for k, v in sorted(n.attr.items())
                          if v.WhichOneof("value") == "type")
        miss.add(f"{n.op}({dtypes})")
    return sorted(miss)


def pinned_elsewhere(nodes, target: str) -> list[str]:
    """Nodes whose requested device is set and is not ``target``."""
    return sorted({f"{fn}/{n.name} ({n.op}) on {n.device}" for fn, n in nodes
                   if n.device and not same_device(n.device, target)})


def to_device(args, device: str):
    with tf.device(device):
        return tf.nest.map_structure(lambda t: tf.identity(t) if isinstance(t, tf.Tensor) else t, args)


def traced(step: Step):
    return compiled(lambda *a: step.fn(*a))


@contextlib.contextmanager
def strict_placement():
    """Soft device placement off inside (a step that cannot run where it is put fails).
    A traced function's executable is built per placement setting: a step timed under
    another setting than its first run pays that build (seconds) inside its timing."""
    soft = tf.config.get_soft_device_placement()
    tf.config.set_soft_device_placement(False)
    try:
        yield
    finally:
        tf.config.set_soft_device_placement(soft)


def check_placement(step: Step, target: str, *, kernel_device_type: str | None = None) -> tuple[Placement, object, tuple]:
    """Trace and run ``step`` on ``target`` with soft device placement off (module
    docstring, part 1). Returns the :class:`Placement` found, the traced function and
    the arguments on ``target`` (for :func:`time_step`, under :func:`strict_placement`:
    this run is its warm-up). ``kernel_device_type``: the device type the kernel
    registry is asked about (default: the target's)."""
    p = Placement(step.name, target)
    fn = traced(step)
    args = step.args
    with strict_placement():
        with tf.device(target):
            concrete = fn.get_concrete_function(*args)
        nodes = graph_nodes(concrete)
        p.n_ops = len(nodes)
        p.no_kernel = kernel_misses(nodes, kernel_device_type or _device_type(target))
        p.pinned = pinned_elsewhere(nodes, target)
        p.no_gpu_kernel = kernel_misses(nodes, "GPU")
        try:
            args = to_device(step.args, target)
            t0 = time.perf_counter()
            with tf.device(target):
                out = fn(*args)
                tf.nest.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else t, out)
            p.first_run_s = time.perf_counter() - t0
        except (tf.errors.OpError, ValueError, RuntimeError) as e:
            p.strict_error = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
            return p, fn, args
    p.outputs = misplaced_outputs(out, target)
    return p, fn, args


def misplaced_outputs(out, target: str) -> list[str]:
    """``path dtype device`` of every output tensor outside ``target`` (host dtypes aside)."""
    bad = []
    for i, t in enumerate(tf.nest.flatten(out)):
        if isinstance(t, tf.Tensor) and t.dtype not in HOST_DTYPES and not same_device(t.device, target):
            bad.append(f"output {i} {t.dtype.name} on {t.device}")
    return bad
