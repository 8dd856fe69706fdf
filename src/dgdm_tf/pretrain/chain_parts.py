"""What the in-memory (:mod:`dgdm_tf.pretrain.chain`) and the batched (:mod:`dgdm_tf.pretrain.batched_chain`)
pretraining drivers share: the seeds' salts, the finiteness check, the trace (its
columns, its TSV, the progress line) and the pruning rule."""

from __future__ import annotations

import os

import numpy as np

from dgdm_tf.io import atomic as atomic_io
from dgdm_tf.mcmc.checkpoint import CheckpointMismatch


TRACE_COLUMNS = ["sweep", "phase", "n_dict", "log_lik", "rel_residual", "active_frac",
                 "gamma_e_mean", "gamma_w", "seconds"]


def kept_maps(d: np.ndarray, k: int) -> int:
    """The maps a checkpoint's D (dh, dw, C, K') holds (pruning keeps 1 <= K' <= K)."""
    if d.ndim != 4 or not 1 <= d.shape[-1] <= k:
        raise CheckpointMismatch(f"its D has shape {list(d.shape)}: not (dh, dw, C, K') with "
                                 f"1 <= K' <= {k}")
    return int(d.shape[-1])


def check_finite(name: str, arr) -> None:
    """Stop early, with the variable's name, when a chain produces NaN or Inf."""
    a = np.asarray(arr)
    if not np.all(np.isfinite(a)):
        bad = int(np.size(a) - np.count_nonzero(np.isfinite(a)))
        raise FloatingPointError(
            f"{name} has {bad} non-finite value(s): the chain diverged. Check the input "
            "scale (pixels should be O(1)) and the hyperparameters under `hyper:`.")


def write_trace(path: str | os.PathLike, rows: list[dict]) -> None:
    lines = ["\t".join(TRACE_COLUMNS)]
    for r in rows:
        lines.append("\t".join(f"{r[c]:.6g}" if isinstance(r[c], float) else str(r[c])
                               for c in TRACE_COLUMNS))
    atomic_io.write_text(path, "\n".join(lines) + "\n")


def report_sweep(say, rows: list[dict], trace_path, total: int, sec_per_sweep: float,
                 extra: str = "") -> None:
    """The progress line of the sweep in ``rows[-1]`` (with an ETA at ``sec_per_sweep``)
    and the trace TSV rewritten."""
    row = rows[-1]
    say(f"sweep {row['sweep']}/{total} ({row['phase']}) K={row['n_dict']}{extra} "
        f"rel.resid={row['rel_residual']:.4f} active={row['active_frac']:.3f} "
        f"gamma_e={row['gamma_e_mean']:.4g} {row['seconds']:.2f} s/sweep, "
        f"ETA {(total - row['sweep']) * sec_per_sweep:.0f} s")
    if trace_path:
        write_trace(trace_path, rows)


def maps_to_keep(used: np.ndarray, prune_min_usage: float, say) -> np.ndarray | None:
    """The maps pruning keeps at the end of burn-in: those on in at least
    ``prune_min_usage`` of the blocks (at least the most used one); ``None`` keeps all."""
    keep = np.flatnonzero(used >= prune_min_usage)
    if keep.size == 0:
        keep = np.array([int(np.argmax(used))])
    if keep.size == len(used):
        return None
    say(f"pruning: keeping {keep.size} of {len(used)} dictionary elements "
        f"(usage >= {prune_min_usage})")
    return keep
