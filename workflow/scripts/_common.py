"""Shared by the rule scripts: logging to the rule's log, threads, timing.

Snakemake puts this folder on ``sys.path`` for local scripts; the repository's ``src``
is put first so the workflow always runs the library it ships with (also without
``pip install -e .``).
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from pathlib import Path


def _repo() -> Path:
    """The repository this job runs: Snakemake may import this module from its source
    cache (no src/ beside it), but runs the job's script from <repo>/.snakemake/scripts/."""
    for cand in (Path(__file__).resolve().parents[2], Path(sys.argv[0]).resolve().parents[2]):
        if (cand / "src" / "dgdm_tf").is_dir():
            return cand
    return Path(__file__).resolve().parents[2]


REPO = _repo()
if str(REPO / "src") not in sys.path[:1]:
    sys.path.insert(0, str(REPO / "src"))

_T0 = time.perf_counter()


def start(snakemake, *, tensorflow: bool = False) -> None:
    """Send stdout/stderr (TensorFlow's C++ logging included) to the rule's log file.

    The log is opened in append mode, so every writer of the job (worker processes
    included) adds to one file. Snakemake deletes a job's log before it reruns or
    resubmits the job, so a resumed chain's log starts afresh and says "resuming from
    checkpoint at sweep N". An uncaught exception is written to the log in full and its
    last line is also printed on the terminal, so errors such as DatasetMissingError are
    seen without opening it.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    threads = max(1, int(snakemake.threads))
    os.environ["OMP_NUM_THREADS"] = str(threads)
    if snakemake.log:
        log = Path(snakemake.log[0])
        log.parent.mkdir(parents=True, exist_ok=True)
        sys.stdout.flush()
        sys.stderr.flush()
        terminal = os.fdopen(os.dup(2), "w", buffering=1)
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        sys.stdout.reconfigure(line_buffering=True)
        sys.stderr.reconfigure(line_buffering=True)

        def hook(etype, value, tb):
            traceback.print_exception(etype, value, tb)
            sys.stderr.flush()
            terminal.write(f"\n[{snakemake.rule}] {etype.__name__}: {value}\n"
                           f"[{snakemake.rule}] full traceback in {log}\n")
            terminal.flush()

        sys.excepthook = hook
    import dgdm_tf  # only its version: the library this job runs, named in the log

    progress(f"=== rule {snakemake.rule} {dict(snakemake.wildcards)} started, "
             f"{threads} thread(s), pid {os.getpid()}, dgdm_tf {dgdm_tf.__version__} from "
             f"{Path(dgdm_tf.__file__).parent}")
    if tensorflow:
        import tensorflow as tf

        from dgdm_tf.core.compiled import reproducible_graphs

        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(min(2, threads))
        reproducible_graphs()  # Keras' and every traced step's sums in the code's order


def progress(msg: str) -> None:
    """Progress line for the log, with a timestamp."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def elapsed() -> float:
    """Seconds since this script started."""
    return time.perf_counter() - _T0


def load_layers(paths):
    """(dictionaries, gamma_ws, mean gamma_es) of pretrained layer files, bottom up."""
    from dgdm_tf.io import artifacts

    layers = [artifacts.read_pretrained_layer(path) for path in paths]
    return [z.D for z in layers], [z.gamma_w for z in layers], [z.gamma_e_mean for z in layers]


def provenance(seed: int, config_files, run_cfg: dict) -> dict:
    """The keys every metrics.json ends with: seed, config (and hyper where the run has
    them), versions, time."""
    import platform
    import time as _time

    import dgdm_tf

    # a row without a model (the CNN) has no hyperparameters to record
    hyper = {"hyper": run_cfg["hyper"]} if "hyper" in run_cfg else {}
    return {"seed": seed, "config_file": ", ".join(config_files), "config": run_cfg["block"],
            **hyper, "dgdm_tf_version": dgdm_tf.__version__,
            "python": platform.python_version(), "finished": _time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def plain(obj):
    """Snakemake params (Namedlist / dict-likes) as plain Python for yaml/json."""
    if isinstance(obj, dict):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    return obj


def write_resolved_config(path, config_files, method: str, run_cfg: dict) -> None:
    """A run directory's config.yaml: the config file(s), the method and the run's
    resolved config (defaults filled in), written atomically."""
    import yaml

    from dgdm_tf.io import atomic as atomic_io

    resolved = {"config_files": list(config_files), "method": method, **run_cfg}
    atomic_io.write_text(path, "# resolved config of this run (defaults filled in)\n"
                         + yaml.safe_dump(resolved, sort_keys=False))


def prepared_image_shape(prepared_npz) -> tuple[int, int, int]:
    """(H, W, C) of a prepared.npz's x_train, read from the npy header without loading
    the array."""
    import zipfile

    import numpy as np

    with zipfile.ZipFile(prepared_npz) as zf, zf.open("x_train.npy") as fh:
        version = np.lib.format.read_magic(fh)
        header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                  else np.lib.format.read_array_header_2_0)
        return tuple(int(s) for s in header(fh)[0][1:])


def machine_rows_csv(rows: list[dict], csv_path) -> None:
    """``rows`` with this machine's description in ``machine_*`` columns, written to
    ``csv_path`` atomically."""
    import pandas as pd

    from dgdm_tf.bench.timing import machine_info
    from dgdm_tf.io import atomic as atomic_io

    df = pd.DataFrame(rows)
    for k, v in machine_info().items():
        df[f"machine_{k}"] = str(v)
    with atomic_io.atomic_path(csv_path) as tmp:
        df.to_csv(tmp, index=False)


def isolated_rows_csv(specs, run, csv_path, label: str) -> None:
    """One row per spec from ``run`` (a benchmark that runs each spec in its own
    process), logged as it comes, then written to ``csv_path`` atomically."""
    import pandas as pd

    from dgdm_tf.io import atomic as atomic_io

    rows = []
    for spec in specs:
        progress(f"{label} {spec['name']}: {spec}")
        rows.append(run(spec))
        progress(f"  {rows[-1]}")
    with atomic_io.atomic_path(csv_path) as tmp:
        pd.DataFrame(rows).to_csv(tmp, index=False)


# ------------------------------------------------------------ shards (config `shards`)
def shard_job(snakemake, n_images: int, batch: int, compute, arrays=lambda r: r,
              what: str = "images") -> None:
    """A shard rule's job: ``compute(images)`` on its shard of ``n_images`` (shard
    ``{i}`` of ``{n}``, whole batches of ``batch``: dgdm_tf.core.shards.shard_bounds),
    its result (``arrays(result)``: a dict of arrays) written to ``output.shard``.
    ``what`` the units split (images, or chunks of them)."""
    from dgdm_tf.core.shards import shard_bounds
    from dgdm_tf.io.shards import write_shard

    i, n = int(snakemake.wildcards.i), int(snakemake.wildcards.n)
    lo, hi = shard_bounds(n_images, n, batch)[i]
    progress(f"shard {i + 1} of {n}: {what} {lo}:{hi} of {n_images}")
    write_shard(snakemake.output.shard, arrays(compute((lo, hi))) if hi > lo else {}, (lo, hi))


def gathered(snakemake, split: str, n_images: int, compute, gather, shard_rule: str):
    """``compute(None)``, the per-image work on all ``n_images`` images of ``split``, or,
    where the rule reads shard files of ``split`` (`shards` > 1), their results joined
    by ``gather``: the same bits."""
    from dgdm_tf.io.shards import read_shards

    files = [p for p in snakemake.input.get("shards", []) if Path(p).name.startswith(f"{split}_")]
    if not files:
        return compute(None)
    progress(f"{split}: gathering {len(files)} shards")
    return gather(read_shards(files, n_images, shard_rule))


def layer1_mixing(pooled, x, dict_size: int, pool: int, png: str, title: str) -> dict:
    """Does layer 1's activity follow the ink, or the scan order? The diagnostics of
    dgdm_tf.mcmc.diagnostics for mixing.json, logged and drawn to ``png``."""
    import numpy as np

    from dgdm_tf.mcmc import diagnostics as mixing
    from dgdm_tf.report import plots

    diag = mixing.layer1_diagnostics(pooled, x, int(dict_size), int(pool))
    r = diag["activity_ink_layer1"]
    progress(f"layer-1 activity-ink correlation {r:.3f} ({len(x)} train images)")
    plots.plot_activity(np.array(diag["activity_map_layer1"]), np.array(diag["ink_map_layer1"]),
                        r, png, title)
    return diag
