"""How a long chain's fit and noise precision move together: the relative residual against the
sweep on log-log axes, its power-law exponent, and rr^2 * gamma_e (constant when the residual
sits at the noise level that gamma_e implies, which eq. SampleE's conditional
gamma_e | - ~ Gamma(a_e + N/2, b_e + ||E||^2 / 2) makes it do under a diffuse prior).

Reads the `checkpoint/trace.csv` of chain folders written by `chain_length.py run` (one state
a sweep). For each chain, at the sweeps asked for: the relative residual rr, gamma_e's mean
and rr^2 * gamma_e; over the chain's second half the exponent b of rr ~ sweep^-b (least
squares on the logs) and the relative spread of rr^2 * gamma_e. A chain whose residual meets
a floor shows b falling towards 0 at its end; one still approaching it shows a steady b.

    python experiments/length/residual_decay.py CHAIN_DIR... [--label NAME...] \\
        [--at 10 50 150] [--png decay.png] [--out decay.json]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from dgdm_tf.io import atomic


def exponent(sweeps: np.ndarray, rr: np.ndarray) -> float:
    """b of rr ~ sweep^-b, least squares on log rr against log sweep."""
    slope, _ = np.polyfit(np.log(sweeps), np.log(rr), 1)
    return float(-slope)


def summary(trace: pd.DataFrame, at: list[int]) -> dict:
    """The chain's rr, gamma_e and rr^2 gamma_e at the sweeps ``at`` (those it has run), the
    exponent over its second half and over its last quarter, and the relative spread
    (std / mean) of rr^2 gamma_e over its second half."""
    t = trace.sort_values("sweep").set_index("sweep")
    inv = t["rel_residual"] ** 2 * t["gamma_e_mean"]
    sweeps = t.index.to_numpy()
    half, quarter = sweeps > sweeps.max() / 2, sweeps > 0.75 * sweeps.max()
    rows = {int(s): {"rel_residual": float(t.at[s, "rel_residual"]),
                     "gamma_e_mean": float(t.at[s, "gamma_e_mean"]), "rr2_gamma_e": float(inv[s])}
            for s in at if s in t.index}
    rr = t["rel_residual"].to_numpy()
    return {"sweeps": int(sweeps.max()), "at": rows,
            "exponent_second_half": exponent(sweeps[half], rr[half]),
            "exponent_last_quarter": exponent(sweeps[quarter], rr[quarter]),
            "rr2_gamma_e_spread_second_half": float(inv[half].std() / inv[half].mean())}


def plot(traces: dict, png: str) -> None:
    from dgdm_tf.report.plots import plt, save_figure  # Agg, set there

    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.4))
    for label, t in traces.items():
        a.loglog(t["sweep"], t["rel_residual"], lw=1, label=label)
        b.semilogy(t["sweep"], t["rel_residual"] ** 2 * t["gamma_e_mean"], lw=1, label=label)
    a.set_xlabel("sweep")
    a.set_ylabel("relative residual")
    b.set_xlabel("sweep")
    b.set_ylabel("rr^2 x mean gamma_e")
    a.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, png)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("chains", nargs="+", help="chain folders (chain_length.py run --out)")
    p.add_argument("--label", nargs="+", default=None, help="a name for each chain")
    p.add_argument("--at", type=int, nargs="+", default=[10, 50, 100, 150, 300])
    p.add_argument("--png", default=None)
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)
    labels = a.label or [Path(c).name for c in a.chains]
    if len(labels) != len(a.chains):
        raise SystemExit(f"{len(labels)} labels for {len(a.chains)} chains")
    traces = {l: pd.read_csv(Path(c) / "checkpoint" / "trace.csv") for l, c in zip(labels, a.chains)}
    out = {l: summary(t, a.at) for l, t in traces.items()}
    for l, s in out.items():
        print(f"{l}: {s['sweeps']} sweeps; rr ~ sweep^-b, b {s['exponent_second_half']:.3f} (second "
              f"half), {s['exponent_last_quarter']:.3f} (last quarter); rr^2 gamma_e spread "
              f"{s['rr2_gamma_e_spread_second_half']:.3f}")
        for sweep, r in s["at"].items():
            print(f"   sweep {sweep:4d}: rr {r['rel_residual']:.4f}  gamma_e {r['gamma_e_mean']:.4g}  "
                  f"rr^2 gamma_e {r['rr2_gamma_e']:.2f}")
    if a.png:
        plot(traces, a.png)
    if a.out:
        atomic.write_json(a.out, out)
    return out


if __name__ == "__main__":
    main()
