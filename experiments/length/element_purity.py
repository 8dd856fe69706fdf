"""How class-specific the top-layer elements of long chains are (the paper's Fig. 2 claim:
supervised elements "unique to a single number", unsupervised ones "blurry"), on the chain's
own labelled training images.

Reads chain folders written by `chain_length.py run`: the checkpoint's running sum of the
posterior-mean top layer over the collected sweeps (`acc_features` / `acc_count`, the
features the chain hands to the SVM), element k's usage by image n the sum of its |S[L]|
over positions, and the labels of the chain's images (`run.json` image_indices into the
prepared training split). Per chain: the usage-weighted mean purity (max class share) and
normalised class entropy of the elements (`dgdm_tf.report.element_classes.class_purity`),
beside the same with the labels shuffled.

    python experiments/length/element_purity.py CHAIN_DIR... [--png purity.png] [--out purity.json]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from dgdm_tf.data.arrays import class_count, load_prepared
from dgdm_tf.io import atomic
from dgdm_tf.report.element_classes import checkpoint_usage, class_purity


def chain_usage(folder: Path) -> tuple[np.ndarray, np.ndarray, int, int]:
    """(usage (N, K), labels (N,), n_classes, the checkpoint's sweep) of one chain folder."""
    run = json.loads((folder / "run.json").read_text())
    try:
        usage, sweep = checkpoint_usage(folder / "checkpoint" / "checkpoint.npz")
    except (FileNotFoundError, ValueError) as e:
        raise SystemExit(f"{e} (chain_length.py run --out {folder})")
    d = load_prepared(Path(run["results"]) / "data" / "prepared.npz")
    labels = np.asarray(d["y_train"])[np.asarray(run["image_indices"])]
    return usage, labels, class_count(d), sweep


def plot(out: dict, png: str) -> None:
    from dgdm_tf.report.plots import plt, save_figure  # Agg, set there

    fig, ax = plt.subplots(figsize=(6, 3.4))
    bins = np.linspace(0, 1, 21)
    for label, r in out["chains"].items():
        ax.hist(r["purity"], bins=bins, histtype="step", lw=1.3,
                label=f"{label} (weighted mean {r['weighted_purity']:.2f})")
    ax.axvline(np.mean([r["shuffled_weighted_purity"] for r in out["chains"].values()]), color="k",
               ls=":", lw=1, label="labels shuffled")
    ax.set_xlabel("element purity: largest share of its usage on one class")
    ax.set_ylabel("top-layer elements")
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, png)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("chains", nargs="+", help="chain folders (chain_length.py run --out), each "
                                             "named by its folder's name")
    p.add_argument("--out", default=None, help="write the result here as JSON")
    p.add_argument("--png", default=None, help="draw each chain's purity histogram here")
    a = p.parse_args(argv)
    if len({Path(c).name for c in a.chains}) != len(a.chains):
        raise SystemExit(f"two chain folders share a name ({a.chains}): their results would overwrite")
    out = {"chains": {}}
    for folder in a.chains:
        label = Path(folder).name
        usage, y, n_classes, sweep = chain_usage(Path(folder))
        r = class_purity(usage, y, n_classes)
        out["chains"][label] = {"folder": str(folder), "sweep": sweep,
                                **{k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in r.items()}}
        print(f"{label} (sweep {sweep}, {r['n_elements']} elements on {r['n_images']} images): "
              f"weighted purity {r['weighted_purity']:.3f} (shuffled {r['shuffled_weighted_purity']:.3f}), "
              f"median {r['median_purity']:.3f}, weighted entropy {r['weighted_entropy']:.3f} "
              f"(shuffled {r['shuffled_weighted_entropy']:.3f})")
    if a.png:
        plot(out, a.png)
    if a.out:
        atomic.write_json(a.out, out)
    return out


if __name__ == "__main__":
    main()
