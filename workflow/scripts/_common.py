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
    """The keys every metrics.json ends with: seed, config, versions, time."""
    import platform
    import time as _time

    import dgdm_tf

    return {"seed": seed, "config_file": ", ".join(config_files), "config": run_cfg["block"],
            "hyper": run_cfg["hyper"], "dgdm_tf_version": dgdm_tf.__version__,
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


def topdown_batch(cfg: dict) -> int:
    """The batch size of a `topdown_features` block's route: shards hold whole batches."""
    return int(cfg["alg2"]["batch_size"] if cfg["route"] == "alg2" else cfg["batch_size"])


def topdown_per_image(x, dictionaries, layers, cfg: dict, *, seed: int, gamma_s: float,
                      gamma_e_init: float, hyper: dict, images=None) -> dict:
    """The per-image part of a `topdown_features` block's features (of ``images``, a
    shard, or all): route alg2, dgdm_tf.mcem.test_time.infer_map with the block's `alg2`
    settings and the chain's scan; route chain, dgdm_tf.topdown.chain.infer_topdown with
    the chain settings, each chain's features and draws kept where the diagnostics of
    :func:`topdown_chain_features` read them."""
    import dataclasses

    from dgdm_tf.mcem.classify import top_features
    from dgdm_tf.mcem.options import topdown_route
    from dgdm_tf.topdown.options import Start

    route = topdown_route(cfg)
    if cfg["route"] == "chain":  # each chain's features and draws, for the diagnostics
        chains = int(cfg["chains"])
        route = dataclasses.replace(route, keep_chains=chains > 1,
                                    keep_draws=chains > 1 and int(cfg["collect"]) >= 4)
    return top_features(x, Start(dictionaries, layers, hyper, gamma_e_init=gamma_e_init,
                                 gamma_s_init=gamma_s),
                        route, seed=seed, images=images, progress=progress)


def topdown_gather(cfg: dict):
    """The function that joins :func:`topdown_per_image`'s shards for ``cfg``'s route."""
    if cfg["route"] == "alg2":
        from dgdm_tf.mcem.test_time import gather_map

        return gather_map
    from dgdm_tf.topdown.chain import gather_topdown

    return gather_topdown


def alg2_summary(res: dict, cfg: dict) -> dict:
    """Route alg2's result with 'alg2', the iterations the images took, and 'chains' 0."""
    import numpy as np

    a = cfg["alg2"]
    it = res["iterations"]
    res["alg2"] = {"iterations_mean": float(np.mean(it)), "iterations_median": float(np.median(it)),
                   "iterations_max": int(np.max(it)), "converged": float(np.mean(res["converged"])),
                   "q_trace": [float(q) for q in res["q_trace"]], "seconds": float(res["seconds"])}
    res["chains"] = 0  # no chain is averaged: a MAP
    progress(f"Algorithm 2: {res['alg2']['iterations_mean']:.1f} iterations an image (max "
             f"{res['alg2']['iterations_max']}), {100 * res['alg2']['converged']:.0f} % within tol {a['tol']}")
    return res


def topdown_chain_features(x, dictionaries, layers, cfg: dict, *, seed: int, gamma_s: float,
                           gamma_e_init: float, hyper: dict, check_seed: int | None = None,
                           res: dict | None = None) -> dict:
    """The test-time top-down features of a `topdown_features` block: route alg2
    (:func:`alg2_summary`), or route chain, the chain (dgdm_tf.topdown.chain.infer_topdown)
    with the block's chain settings: the features of unsupervised_svm (refined model) and
    of pretrained_svm with `features.route: topdown` (pretrained layers).
    With two or more chains the result also holds 'half_distance'
    (dgdm_tf.mcmc.diagnostics.half_distance of the chains' features: the chains differ by
    their map order, so it says how much the order decides the features) and, with 4 or
    more collected sweeps, 'convergence' (dgdm_tf.mcmc.diagnostics.feature_draws_summary:
    R-hat and ESS of the features across the chains). With
    ``check_seed`` and `posterior_check.images` > 0 it also holds 'posterior_check'
    (dgdm_tf.topdown.evidence.posterior_gain on the first images: how much more probable
    the chain's state gets in `posterior_check.sweeps` more sweeps). ``res``: the
    per-image part already computed (:func:`topdown_per_image`, or its shards gathered)."""
    from dgdm_tf.mcmc import diagnostics as mixing
    from dgdm_tf.pretrain.ridge_start import RidgeStart
    from dgdm_tf.topdown import evidence

    if res is None:
        res = topdown_per_image(x, dictionaries, layers, cfg, seed=seed, gamma_s=gamma_s,
                                gamma_e_init=gamma_e_init, hyper=hyper)
    if cfg["route"] == "alg2":
        return alg2_summary(res, cfg)
    if int(cfg["chains"]) > 1:
        res["half_distance"] = mixing.half_distance(res.pop("chain_features"))
        progress(f"the chains' features lie {res['half_distance']:.3f} apart (relative; "
                 "about 1.4: unrelated, 0: they agree)")
    if int(cfg["chains"]) > 1:  # R-hat and bulk ESS of the chains' traced scalars
        from dgdm_tf.topdown.chain import TRACE_SCALARS
        from dgdm_tf.topdown.options import TopdownOptions

        schedule = TopdownOptions(burn_in=int(cfg["burn_in"]), collect=int(cfg["collect"])).schedule
        traces = mixing.pooled_traces(res.pop("trace_sums"), res.pop("trace_images"), TRACE_SCALARS)
        res["chain_mixing"] = mixing.trace_settlement(
            traces, collected=[schedule.at(t).collected for t in range(schedule.total)])
        sc = res["chain_mixing"]["scalars"].values()
        rh = [v["rhat"] for v in sc if v.get("rhat") is not None]
        es = [v["ess_bulk"] for v in sc if v.get("ess_bulk") is not None]
        progress(f"{len(traces)} test-time chains' traced scalars: "
                 + (f"worst R-hat {max(rh):.3f}, smallest bulk ESS {min(es):.1f}" if rh and es
                    else res["chain_mixing"]["rhat"]))
    if "draws" in res:  # R-hat and ESS need 4 draws a chain (split halves)
        res["convergence"] = mixing.feature_draws_summary(res.pop("draws"))
        c = res["convergence"]
        progress(f"features over {c['n_chains']} chains x {c['n_draws']} draws: median R-hat "
                 f"{c['rhat_median']:.3f}, {100 * c['rhat_above_1.1']:.0f} % above 1.1, median "
                 f"bulk ESS {c['ess_bulk_median']:.1f}")
    check = cfg["posterior_check"]
    if check_seed is not None and int(check["images"]) > 0:
        n = min(int(check["images"]), len(x))
        progress(f"posterior check: {n} images, {int(cfg['burn_in']) + int(cfg['collect'])} sweeps, "
                 f"then {int(check['sweeps'])} more")
        res["posterior_check"] = evidence.posterior_gain(
            x[:n], dictionaries, layers, seed=check_seed, sweeps=int(cfg["burn_in"]) + int(cfg["collect"]),
            more_sweeps=int(check["sweeps"]), gamma_s=gamma_s, gamma_e_init=gamma_e_init, hyper=hyper,
            scan=cfg["scan"], start=RidgeStart.from_config(cfg["start"]))
        pc = res["posterior_check"]
        progress(f"posterior check: {int(check['sweeps'])} more sweeps make the state more probable in "
                 f"{100 * pc['fraction_more_probable']:.0f} % of the images, by a median of "
                 f"e^{pc['median_log_prob_gain']:.0f}; top units on {pc['top_units_on'][0]:.3f} -> "
                 f"{pc['top_units_on'][1]:.3f} (a large gain: the features are an early transient "
                 "of the chain, docs/findings/posterior_mass.md)")
    return res


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
