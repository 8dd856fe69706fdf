"""Figures a user looks at rather than reads: dictionaries, chain traces, test error
against wall time, and how benchmark throughput grows with the work.

Matplotlib (via seaborn) with the non-interactive Agg backend; every figure is written
atomically.
"""

from __future__ import annotations

import math
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from dgdm_tf.io import atomic as atomic_io  # noqa: E402


def save_figure(fig, path: str | os.PathLike) -> None:
    """Write ``fig`` to ``path`` as a PNG, atomically, and close it."""
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
    save_figure(fig, path)


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
    save_figure(fig, path)



def plot_chain_traces(traces: list[dict], path: str | os.PathLike, title: str, *,
                      burn_in: int, window: int, drift: dict | None = None) -> None:
    """Each scalar's trace, one panel a scalar and one line a chain, against the sweep:
    ``traces[c][name]`` is chain c's array (sweep 1 first). Burn-in is shaded and the last
    ``window`` sweeps, those a drift is measured over, are marked; ``drift`` (name -> value)
    goes into each panel's title."""
    names = list(traces[0])
    cols = min(4, len(names))
    rows = math.ceil(len(names) / cols)
    sns.set_theme(style="whitegrid", font_scale=0.7)
    fig, axes = plt.subplots(rows, cols, figsize=(3.0 * cols, 2.3 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names):
        for c, tr in enumerate(traces):
            v = np.asarray(tr[name], dtype=float)
            ax.plot(np.arange(1, len(v) + 1), v, lw=0.9, label=f"chain {c}")
        n = max(len(tr[name]) for tr in traces)
        ax.axvspan(0.5, burn_in + 0.5, color="0.9")
        ax.axvline(n - window + 0.5, color="0.5", lw=0.6, ls=":")
        ax.set_title(name + (f" (drift {drift[name]:+.2f})" if drift and name in drift else ""),
                     fontsize=7)
        ax.set_xlabel("sweep")
    for ax in list(axes.flat)[len(names):]:
        ax.set_visible(False)
    axes.flat[0].legend(fontsize=6)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    save_figure(fig, path)

def plot_activity(activity: np.ndarray, ink: np.ndarray, r: float,
                  path: str | os.PathLike, title: str) -> None:
    """Mean |pooled feature| per cell beside the mean ink under each cell
    (:mod:`dgdm_tf.mcmc.diagnostics`): a sampler that follows the image shows the same picture twice;
    one that follows its scan order shows the colour grid on the left."""
    fig, axes = plt.subplots(1, 2, figsize=(5.6, 3.3))
    fig.subplots_adjust(top=0.78)  # room for the two-line title above the panel titles
    for ax, img, name in ((axes[0], activity, "mean |feature| per cell"),
                          (axes[1], ink, "mean ink under each cell")):
        ax.imshow(img, cmap="magma", interpolation="nearest")
        ax.set_title(name, fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle(f"{title}\nactivity-ink correlation r = {r:.3f}", fontsize=8)
    save_figure(fig, path)


def _machine_text(machine: dict | str | None) -> str:
    if not machine:
        return ""
    if isinstance(machine, dict):
        machine = ", ".join(f"{k}: {v}" for k, v in machine.items())
    return f"Machine: {machine}."


def caption(fig, lines: list[str]) -> None:
    """Wrapped lines of small text under a figure's axes."""
    import textwrap

    text = "\n".join(textwrap.fill(l, 130) for l in lines if l)
    if text:
        fig.text(0.01, -0.02, text, ha="left", va="top", fontsize=6.5)


def plot_error_vs_time(runs: dict, path: str | os.PathLike, title: str, *,
                       labels: dict | None = None, missing: dict | None = None,
                       machine: dict | str | None = None) -> None:
    """Test error against wall time, one entry per method that has run.

    ``runs``: method -> its metrics.json. A run with a per-epoch ``curve`` (the CNN) is
    drawn as a line through (training seconds so far, test error) after each epoch; any
    other run as one point at (``wall_seconds``, ``test_error_pct``), the wall time of
    every rule that produced it. ``missing``: method -> why it is not shown, listed
    under the plot (with the machine the times were measured on). Log time axis.
    """
    labels = labels or {}
    missing = dict(missing or {})
    sns.set_theme(style="whitegrid", font_scale=0.8)
    fig, ax = plt.subplots(figsize=(7.0, 4.2))
    palette = sns.color_palette("colorblind", max(3, len(runs)))
    drawn = 0
    for i, (method, m) in enumerate(runs.items()):
        label = labels.get(method, method)
        curve = m.get("curve") or []
        if curve:
            df = pd.DataFrame(curve)
            sns.lineplot(data=df, x="seconds_cumulative", y="test_error_pct", ax=ax,
                         marker="o", markersize=4, color=palette[i], sort=True,
                         label=f"{label}: after each epoch (training time)")
            last = df.iloc[-1]
            ax.annotate(f"{last['test_error_pct']:.2f}%", (last["seconds_cumulative"],
                        last["test_error_pct"]), textcoords="offset points", xytext=(4, 4),
                        fontsize=7, color=palette[i])
        elif m.get("wall_seconds") is not None and m.get("test_error_pct") is not None:
            x, y = float(m["wall_seconds"]), float(m["test_error_pct"])
            ax.scatter([x], [y], s=60, marker="D", color=palette[i], zorder=3,
                       label=f"{label} (total wall time)")
            ax.annotate(f"{y:.2f}%", (x, y), textcoords="offset points", xytext=(5, 5),
                        fontsize=7, color=palette[i])
        else:
            missing[method] = "its metrics.json has no wall time or test error"
            continue
        drawn += 1
    if drawn:
        ax.set_xscale("log")
        ax.legend(fontsize=7, loc="best")
    else:
        ax.text(0.5, 0.5, "no run has finished yet", ha="center", va="center",
                transform=ax.transAxes)
    ax.set_xlabel("wall time (s, log scale)")
    ax.set_ylabel("test error (%)")
    ax.set_title(title, fontsize=9)
    notes = []
    if missing:
        notes.append("Not shown: " + "; ".join(f"{labels.get(k, k)} ({v})"
                                                for k, v in missing.items()) + ".")
    caption(fig, notes + [_machine_text(machine)])
    save_figure(fig, path)


def plot_scaling(rows, path: str | os.PathLike, *,
                 machine: dict | str | None = None) -> None:
    """Throughput (images/s) against batch size, image side and (where measured) the
    layers' K, one line per benchmark (``dgdm_tf.bench.scaling.benchmark_scaling`` rows);
    log-log axes."""
    df = pd.DataFrame(rows)
    names = {"pretrain_sweep": "pretraining sweep, bottom layer",
             "topdown_sweep": "top-down test-time sweep, whole model",
             "cnn_train_step": "CNN training step"}
    if len(df):
        df = df.dropna(subset=["images_per_s"]).assign(
            kernel=lambda d: d["benchmark"].map(lambda b: names.get(b, b)))
    sns.set_theme(style="whitegrid", font_scale=0.8)
    panels = [("batch_size", "batch size (images)"), ("image_side", "image side (pixels)")]
    if len(df) and (df["sweep"] == "n_dict").any():
        panels.append(("n_dict", "maps K of layer 1 (others alike)"))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 3.6))
    for ax, (series, xlab) in zip(axes, panels):
        part = df[df["sweep"] == series] if len(df) else df
        if len(part):
            sns.lineplot(data=part, x=series, y="images_per_s", hue="kernel", marker="o",
                         ax=ax, legend=(series == "batch_size"))
            ax.set_xscale("log")
            ax.set_yscale("log")
            # plain numbers at the measured sizes, no minor-tick clutter
            ticks = sorted(part[series].unique())
            ax.xaxis.set_major_locator(matplotlib.ticker.FixedLocator(ticks))
            ax.xaxis.set_major_formatter(matplotlib.ticker.FixedFormatter([str(t) for t in ticks]))
            ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
            ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(10, subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
            ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            if series in ("image_side", "n_dict"):
                b = int(part["batch_size"].iloc[0])
                xlab += f", batch {b}"
        else:
            ax.text(0.5, 0.5, "no rows", ha="center", va="center", transform=ax.transAxes)
        ax.set_xlabel(xlab)
        ax.set_ylabel("images / s")
    fig.suptitle("How cost grows with work: throughput vs batch size, image side and K",
                 fontsize=9)
    fig.tight_layout()
    caption(fig, [_machine_text(machine)])
    save_figure(fig, path)
