"""Figures of the top-down model: image grids (generated images, Fig. 3; top-layer
elements in the data plane, Fig. 2), missing-data interpolation (original / observed /
reconstructions) and the refinement chain's diagnostics. Written atomically (Agg)."""

from __future__ import annotations

import math
import os
from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from dgdm_tf.report.plots import save_figure  # noqa: E402


def _show(ax, img: np.ndarray, scale: str = "own", hidden: np.ndarray | None = None) -> None:
    """One image (H, W, C): grey for C = 1, RGB for C = 3, channel energy otherwise.
    ``scale='own'`` stretches each image to its range (atoms have arbitrary sign and
    scale); ``'unit'`` clips to [0, 1] (pixels). Hidden pixels are drawn red."""
    c = img.shape[-1]
    if c not in (1, 3):
        img = np.sqrt(np.sum(img ** 2, axis=-1, keepdims=True))
        c = 1
    if scale == "own":
        lo, hi = float(img.min()), float(img.max())
        img = (img - lo) / max(hi - lo, 1e-12)
    else:
        img = np.clip(img, 0.0, 1.0)
    rgb = np.repeat(img, 3, axis=-1) if c == 1 else img
    if hidden is not None:
        hid = hidden.reshape(hidden.shape[0], hidden.shape[1], -1).any(-1)
        rgb = rgb.copy()
        rgb[hid] = (0.85, 0.2, 0.2)
    ax.imshow(rgb, interpolation="nearest")
    ax.axis("off")


def plot_image_grid(images: np.ndarray, path: str | os.PathLike, title: str, *,
                    scale: str = "own", max_images: int = 100, cols: int = 10,
                    labels: Sequence[str] | None = None) -> None:
    """A grid of images (N, H, W, C)."""
    images = np.asarray(images)[:max_images]
    cols = min(cols, len(images))
    rows = math.ceil(len(images) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(cols * 1.0, rows * 1.05 + 0.5), squeeze=False)
    for ax in axes.ravel():
        ax.axis("off")
    for i, (ax, img) in enumerate(zip(axes.ravel(), images)):
        _show(ax, img, scale)
        if labels is not None:
            ax.set_title(labels[i], fontsize=6)
    fig.suptitle(title, fontsize=8)
    save_figure(fig, path)


def plot_inpainting(x: np.ndarray, mask: np.ndarray, recons: dict[str, np.ndarray],
                    path: str | os.PathLike, title: str, n: int = 10) -> None:
    """Rows: original, observed (hidden pixels red), then one row per reconstruction."""
    n = min(n, len(x))
    rows = 2 + len(recons)
    fig, axes = plt.subplots(rows, n, figsize=(n * 1.0, rows * 1.1 + 0.5), squeeze=False)
    for j in range(n):
        _show(axes[0, j], x[j], "unit")
        _show(axes[1, j], x[j] * mask[j], "unit", hidden=mask[j] == 0)
        for r, rec in enumerate(recons.values()):
            _show(axes[2 + r, j], rec[j], "unit")
    for r, name in enumerate(["original", "observed"] + list(recons)):
        axes[r, 0].text(-0.1, 0.5, name, transform=axes[r, 0].transAxes, ha="right",
                        va="center", fontsize=7)
    fig.suptitle(title, fontsize=8)
    save_figure(fig, path)


def plot_refine_trace(rows: list[dict], path: str | os.PathLike, title: str) -> None:
    """Per sweep: log joint, mean noise precision, active fraction per layer, HMC
    acceptance; with the SVM its training error and the labels' share of the top units'
    conditional precision (median, 90th percentile, median inside a margin; log scale);
    the burn-in / collection boundary marked."""
    df = pd.DataFrame(rows)
    active = [c for c in df.columns if c.startswith("active_")]
    accept = [c for c in df.columns if c.startswith("accept_")]
    panels = [("log_joint", ["log_joint"]), ("gamma_e (mean)", ["gamma_e_mean"]),
              ("fraction on", active)]
    if accept:
        panels.append(("HMC acceptance", accept))
    if "svm_train_error" in df.columns:  # supervised model
        panels.append(("SVM train error (current draw)", ["svm_train_error"]))
    share = [c for c in ("label_share_median", "label_share_p90", "label_share_margin")
             if c in df.columns and df[c].notna().any()]
    if share:  # the labels' part of the top units' conditional precision
        panels.append(("labels' share of a top unit's precision", share))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.0 * len(panels), 3.0))
    burn = df.loc[df["phase"] == "burn-in", "sweep"].max() if (df["phase"] == "burn-in").any() else None
    for ax, (name, cols) in zip(axes, panels):
        long = df.melt(id_vars=["sweep"], value_vars=cols, var_name="series", value_name="value")
        sns.lineplot(data=long, x="sweep", y="value", hue="series" if len(cols) > 1 else None, ax=ax)
        ax.set_ylabel(name)
        if name.startswith("labels' share"):
            ax.set_yscale("log")
        if burn is not None and not (isinstance(burn, float) and math.isnan(burn)):
            ax.axvline(burn + 0.5, color="grey", ls="--", lw=0.8)
        ax.set_title(name, fontsize=9)
    fig.suptitle(title + " (dashed: end of burn-in)", fontsize=9)
    fig.tight_layout()
    save_figure(fig, path)


def plot_confusion(labels: np.ndarray, predicted: np.ndarray, n_classes: int,
                   path: str | os.PathLike, title: str, class_names: Sequence[str] | None = None) -> None:
    """Confusion matrix (rows: true class, columns: predicted), counts annotated for
    up to 20 classes."""
    cm = np.zeros((n_classes, n_classes), np.int64)
    np.add.at(cm, (np.asarray(labels, np.int64), np.asarray(predicted, np.int64)), 1)
    names = list(class_names) if class_names is not None else [str(c) for c in range(n_classes)]
    side = min(2.0 + 0.45 * n_classes, 16.0)
    fig, ax = plt.subplots(figsize=(side, side * 0.85))
    sns.heatmap(cm, annot=n_classes <= 20, fmt="d", cmap="Blues", cbar=True, ax=ax,
                xticklabels=names, yticklabels=names, annot_kws={"fontsize": 7})
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    err = 100.0 * (1.0 - np.trace(cm) / max(cm.sum(), 1))
    ax.set_title(f"{title}\n{cm.sum()} test images, error {err:.2f}%", fontsize=9)
    fig.tight_layout()
    save_figure(fig, path)


def plot_image_pair(left: np.ndarray, right: np.ndarray, labels: tuple[str, str],
                    path: str | os.PathLike, title: str, *, max_images: int = 64,
                    cols: int = 8) -> None:
    """Two image grids side by side (Fig. 2: unsupervised vs supervised elements)."""
    n = min(max_images, len(left), len(right))
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, 2 * cols + 1, figsize=((2 * cols + 1) * 0.9, rows * 0.95 + 0.7),
                             squeeze=False)
    for ax in axes.ravel():
        ax.axis("off")
    for side, imgs in enumerate((left, right)):
        for i in range(n):
            _show(axes[i // cols, side * (cols + 1) + i % cols], imgs[i])
        axes[0, side * (cols + 1)].set_title(labels[side], fontsize=8, loc="left")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    save_figure(fig, path)


def plot_mcem_trace(rows: list[dict], path: str | os.PathLike, title: str) -> None:
    """Per stochastic-MCEM iteration: the sampled objective Qbar, the relative residual,
    the mean noise precision and (supervised) the batch's training error."""
    df = pd.DataFrame(rows)
    panels = [("Qbar", "q"), ("relative residual", "rel_residual"), ("gamma_e (mean)", "gamma_e")]
    if "train_error" in df.columns and df["train_error"].notna().any():
        panels.append(("batch train error", "train_error"))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.0 * len(panels), 3.0))
    for ax, (name, col) in zip(np.atleast_1d(axes), panels):
        sns.lineplot(data=df, x="iteration", y=col, ax=ax)
        ax.set_title(name, fontsize=9)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    save_figure(fig, path)
