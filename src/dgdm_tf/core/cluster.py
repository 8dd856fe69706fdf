"""Worker processes of a data-parallel chain: who they are, and how they exchange tensors.

A chain's workers are the tasks of a ``tf.distribute.MultiWorkerMirroredStrategy``
cluster, across processes and nodes: under Slurm (a job step of more than one task,
``SLURM_JOB_ID`` and ``SLURM_NTASKS`` > 1) its cluster comes from
``SlurmClusterResolver``, else from ``TF_CONFIG`` when that is set
(``TFConfigClusterResolver``), else the process is the one worker and nothing is
distributed (no strategy, no server). The strategy configures the collective ops of
the cluster and must be made before TensorFlow runs anything in the process
(:func:`workers` first).

The chains exchange tensors by all-gathers only (:func:`all_gather`, TensorFlow's
``CollectiveGatherV2``): a gather moves bits and adds nothing, so every worker receives
every worker's values exactly and sums them itself in a fixed order
(:class:`dgdm_tf.core.image_chunks.Shards`). An all-reduce would sum in an order of its
own. The gathers run inside compiled functions and their while loops, where the
strategy's ``all_gather`` (a ``merge_call``) cannot.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import signal
import socket
import subprocess
import threading
import time

import tensorflow as tf

#: the collective group of the chains' gathers (apart from the strategy's own groups,
#: which count up from 1)
GROUP_KEY = 25703  # "dg" in ASCII; a collective key, not a random stream
_INSTANCE_KEYS = itertools.count(1)
_WORKERS: list = []


@dataclasses.dataclass(frozen=True)
class Workers:
    """This process's place among a chain's workers: ``count`` workers, this one
    ``index`` (0 is the chief: the one that writes checkpoints and outputs)."""
    count: int = 1
    index: int = 0
    strategy: object = None

    @property
    def chief(self) -> bool:
        return self.index == 0

    def cache_key(self):
        return (self.count, self.index)


def resolver():
    """The cluster's resolver: Slurm's inside a job step of several tasks, TF_CONFIG's
    when it is set, None for one local worker."""
    resolvers = tf.distribute.cluster_resolver
    tasks = int(os.environ.get("SLURM_NTASKS", "1"))
    if os.environ.get("SLURM_JOB_ID") and tasks > 1:
        # a port range of the job's own: two jobs' workers on one node do not meet
        port_base = 20000 + int(os.environ["SLURM_JOB_ID"]) % 4000 * 10
        if int(os.environ.get("SLURM_GPUS_ON_NODE") or 0) > 0:
            return resolvers.SlurmClusterResolver(port_base=port_base)
        # no GPUs: the resolver hands each task a GPU slot (range(0, gpus, gpus per
        # task) would be empty, or step 0); give it slots it does not use
        return resolvers.SlurmClusterResolver(port_base=port_base, gpus_per_node=tasks,
                                              gpus_per_task=1, auto_set_gpu=False)
    if os.environ.get("TF_CONFIG"):
        return resolvers.TFConfigClusterResolver()
    return None


def place(res) -> tuple[int, int]:
    """(number of workers, this task's index) of a resolver's cluster: the chief (if the
    cluster names one) first, then the workers in order."""
    spec = res.cluster_spec().as_dict()
    chiefs = len(spec.get("chief", []))
    count = chiefs + len(spec.get("worker", []))
    index = int(res.task_id) + (chiefs if res.task_type == "worker" else 0)
    return count, index


def workers() -> Workers:
    """This process's :class:`Workers`, the strategy made once per process (the first
    call must come before TensorFlow runs anything)."""
    if not _WORKERS:
        res = resolver()
        if res is None:
            _WORKERS.append(Workers())
        else:
            count, index = place(res)
            strategy = (tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=res)
                        if count > 1 else None)
            _WORKERS.append(Workers(count, index, strategy))
    return _WORKERS[0]


def all_gather(t: tf.Tensor, group_size: int) -> tf.Tensor:
    """Every worker's ``t`` (the same shape on each) joined on a new leading axis, in
    worker order; exact (the bits are moved, not summed). Each call site (a trace, or an
    eager call) takes the next instance key: the workers run the same code, so they make
    their calls, and their traces, in the same order and agree on the keys."""
    if group_size == 1:
        return t[None]
    dtype = t.dtype
    if dtype == tf.complex64:  # the gather takes real types: move the bits as float pairs
        t = tf.bitcast(t, tf.float32)
    elif dtype in (tf.bool, tf.int8):  # the gather takes neither (the block states are bytes)
        t = tf.cast(t, tf.int32)
    out = tf.raw_ops.CollectiveGatherV2(
        input=t[None], group_size=group_size, group_key=GROUP_KEY,
        instance_key=next(_INSTANCE_KEYS), ordering_token=[])
    if dtype == tf.complex64:
        return tf.bitcast(out, tf.complex64)
    return tf.cast(out, dtype) if dtype in (tf.bool, tf.int8) else out


#: set in the environment of the processes :func:`run_as_workers` starts
WORKER_ENV = "DGDM_WORKER"


def is_worker() -> bool:
    """Whether this process is one of the workers :func:`run_as_workers` started."""
    return os.environ.get(WORKER_ENV) == "1"


def free_ports(count: int) -> list[int]:
    """``count`` TCP ports free on localhost now (the OS's choice)."""
    socks = [socket.socket() for _ in range(count)]
    try:
        for s in socks:
            s.bind(("localhost", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def local_tf_configs(count: int) -> list[str]:
    """TF_CONFIG of each of ``count`` workers on localhost, on free ports."""
    hosts = [f"localhost:{p}" for p in free_ports(count)]
    return [json.dumps({"cluster": {"worker": hosts}, "task": {"type": "worker", "index": i}})
            for i in range(count)]


def run_as_workers(argv: list[str], count: int, *, threads: int) -> None:
    """Run ``argv`` as ``count`` workers of one cluster and wait for them all; raise when
    one fails. Inside a Slurm job, one per task of a job step (``srun``, each task
    ``threads`` CPUs; the workers find their cluster by :func:`resolver`); elsewhere as
    local processes with TF_CONFIG on localhost (a failed worker stops the others; SIGTERM
    is passed on to the workers, and this process then exits with 143 = 128 + SIGTERM)."""
    env = {**os.environ, WORKER_ENV: "1"}
    env.pop("TF_CONFIG", None)
    if os.environ.get("SLURM_JOB_ID"):
        # --overlap: this job's own step (the executor's `srun -n1`) holds CPUs of the
        # allocation the workers' step shares
        subprocess.run(["srun", "--overlap", f"--ntasks={count}", f"--cpus-per-task={threads}",
                        "--kill-on-bad-exit=1", *argv], env=env, check=True)
        return
    procs = [subprocess.Popen(argv, env={**env, "TF_CONFIG": c}) for c in local_tf_configs(count)]
    # SIGTERM goes on to every worker, which finish their step together and leave (a
    # chain's workers agree on the step: dgdm_tf.mcmc.driver), then this process leaves
    # with their status; under Slurm scancel signals every task itself
    signalled: list[int] = []

    def forward(signum, _frame):
        signalled.append(signum)
        for p in procs:
            if p.poll() is None:
                p.send_signal(signum)

    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, forward) if main else None
    try:
        failed = None
        while failed is None and any(p.poll() is None for p in procs):
            failed = next((i for i, p in enumerate(procs) if p.poll() not in (None, 0)), None)
            time.sleep(0.2)
        failed = next((i for i, p in enumerate(procs) if p.returncode not in (None, 0)), failed)
        if failed is not None:
            for p in procs:
                if p.poll() is None and not signalled:
                    p.terminate()
            for p in procs:
                p.wait()
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
    if signalled:
        codes = [p.returncode for p in procs]
        print(f"SIGTERM forwarded to the {count} workers; their exit codes {codes}", flush=True)
        raise SystemExit(128 + signal.SIGTERM)
    if failed is not None:
        raise RuntimeError(f"worker {failed} of {count} failed (exit code "
                           f"{procs[failed].returncode}): {' '.join(argv)}")
