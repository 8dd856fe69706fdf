"""Figures a user looks at rather than reads: dictionaries and chain traces.

Matplotlib (via seaborn) with the non-interactive Agg backend; every figure is written
atomically.
"""

from __future__ import annotations

import math
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from dgdm_tf import atomic_io  # noqa: E402


def _save(fig, path: str | os.PathLike) -> None:
    with atomic_io.atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)


def plot_dictionary(d: np.ndarray, path: str | os.PathLike, title: str,
                    usage: np.ndarray | None = None, max_atoms: int = 100) -> None:
    """Grid of dictionary elements D (dh, dw, C, K), most used first.

    One or three input channels are shown as grey / RGB images (each atom scaled to its
    own range); other channel counts (upper layers) show the channel-summed energy,
    sum_c D[:, :, c, k]^2, i.e. where in the window the atom acts.
    """
    dh, dw, c, k = d.shape
    order = np.argsort(-usage) if usage is not None else np.arange(k)
    order = order[:max_atoms]
    cols = min(10, len(order))
    rows = math.ceil(len(order) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(cols * 1.0, rows * 1.05 + 0.4), squeeze=False)
    for ax in axes.ravel():
        ax.axis("off")
    for ax, kk in zip(axes.ravel(), order):
        atom = d[:, :, :, kk]
        if c == 1:
            img, cmap = atom[:, :, 0], "gray"
        elif c == 3:
            lo, hi = atom.min(), atom.max()
            img, cmap = (atom - lo) / max(hi - lo, 1e-12), None
        else:
            img, cmap = np.sum(atom ** 2, axis=2), "magma"
        ax.imshow(img, cmap=cmap, interpolation="nearest")
        if usage is not None:
            ax.set_title(f"{usage[kk]:.2f}", fontsize=6)
    fig.suptitle(title + (" (titles: fraction of blocks on)" if usage is not None else ""),
                 fontsize=8)
    _save(fig, path)


def plot_trace(rows: list[dict], path: str | os.PathLike, title: str) -> None:
    """Per-sweep log-likelihood, noise precision, active fraction and residual."""
    df = pd.DataFrame(rows)
    panels = [("log_lik", "log-likelihood"), ("gamma_e_mean", "mean noise precision gamma_e"),
              ("active_frac", "fraction of blocks on"), ("rel_residual", "relative residual")]
    sns.set_theme(style="whitegrid", font_scale=0.7)
    fig, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels), 2.6))
    for ax, (col, label) in zip(axes, panels):
        sns.lineplot(data=df, x="sweep", y=col, hue="phase", ax=ax, legend=(col == "log_lik"))
        ax.set_ylabel(label)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    _save(fig, path)
