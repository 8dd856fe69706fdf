"""Mixing diagnostics of the blocked Gibbs samplers: does the inferred activity follow
the image, or the order in which the sampler visits the blocks?

A chain at a high noise precision freezes into whatever decomposition its first sweep
builds; with a fixed colour order that decomposition favours the colour visited first,
and the features then encode the scan order, not the image. These figures catch it:

* :func:`activity_ink_correlation`: the mean |pooled feature| per pooled cell (over
  images and maps) against the mean ink under that cell's receptive field. A sampler
  that follows the image tracks the ink; one that follows its colour grid does not.
* :func:`map_distance`: how far two mean activity maps are apart (scan-order and
  translation checks compare it with the seed-to-seed spread of the same chain).
* :func:`half_distance`: how far the averages of the even and the odd chains lie apart;
  for chains that differ by their scan order, how much the order decides the features.
* :func:`ridge_probe`: a fixed linear read-out (one-vs-all ridge on standardised
  features), the figure that decides whether features carry the class.
* :func:`rhat`, :func:`ess`, :func:`summarise_chains`: cross-chain convergence of any
  scalar draws (chains, draws, *params), rank-normalised as in Vehtari, Gelman, Simpson,
  Carpenter and Bürkner (2021), "Rank-normalization, folding, and localization: an
  improved R-hat for assessing convergence of MCMC", Bayesian Analysis 16(2), 667-718.

Axis layout as in :mod:`dgdm_tf.core.layout`: images (N, H, W, C), pooled features
(N, nbh, nbw, K).
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np


def ink_per_cell(x: np.ndarray, dict_size: int, pool: int) -> np.ndarray:
    """(nbh, nbw): mean |x| under each feature position's dh x dw receptive field,
    averaged over the images and over the positions of each pooling block."""
    x = np.abs(np.asarray(x, np.float64)).mean(axis=(0, 3))  # H, W
    h, w = x.shape
    hs, ws = h - dict_size + 1, w - dict_size + 1
    c = np.pad(np.cumsum(np.cumsum(x, 0), 1), [[1, 0], [1, 0]])
    d = dict_size
    win = (c[d:, d:] - c[:-d, d:] - c[d:, :-d] + c[:-d, :-d])[:hs, :ws] / (d * d)
    return _block_mean(win, pool)


def _block_mean(m: np.ndarray, pool: int) -> np.ndarray:
    hs, ws = m.shape
    nbh, nbw = math.ceil(hs / pool), math.ceil(ws / pool)
    total = np.zeros((nbh, nbw))
    count = np.zeros((nbh, nbw))
    ii, jj = np.arange(hs) // pool, np.arange(ws) // pool
    np.add.at(total, (ii[:, None], jj[None, :]), m)
    np.add.at(count, (ii[:, None], jj[None, :]), 1.0)
    return total / count


def activity_map(pooled: np.ndarray) -> np.ndarray:
    """(nbh, nbw): mean |pooled feature| over images and maps."""
    return np.abs(np.asarray(pooled, np.float64)).mean(axis=(0, 3))


def activity_ink_correlation(pooled: np.ndarray, x: np.ndarray, dict_size: int,
                             pool: int) -> float:
    """Pearson correlation, over pooled cells, of :func:`activity_map` with
    :func:`ink_per_cell` (1.0: activity exactly where the ink is)."""
    a = activity_map(pooled).ravel()
    b = ink_per_cell(x, dict_size, pool).ravel()
    if a.shape != b.shape:
        raise ValueError(f"pooled grid {activity_map(pooled).shape} does not match the "
                         f"images' grid {ink_per_cell(x, dict_size, pool).shape}")
    if a.std() == 0 or b.std() == 0:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


def layer1_diagnostics(pooled: np.ndarray, x: np.ndarray, dict_size: int, pool: int) -> dict:
    """What a run records of layer 1's pooled output: the activity-ink correlation,
    both maps (for the figure) and the number of images, JSON-ready."""
    return {"activity_ink_layer1": activity_ink_correlation(pooled, x, dict_size, pool),
            "images": int(len(x)),
            "activity_map_layer1": activity_map(pooled).round(6).tolist(),
            "ink_map_layer1": ink_per_cell(x, dict_size, pool).round(6).tolist()}


def map_distance(a: np.ndarray, b: np.ndarray) -> float:
    """Relative distance ||a - b|| / ((||a|| + ||b||) / 2) of two activity maps."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(0.5 * (np.linalg.norm(a) + np.linalg.norm(b)), 1e-30))


def half_distance(chain_features: np.ndarray) -> float:
    """:func:`map_distance` of the mean of the even-numbered and the odd-numbered chains'
    features, ``chain_features`` (chains >= 2, ...): about 1.4 when they are unrelated,
    0 when they agree."""
    f = np.asarray(chain_features, np.float64)
    if len(f) < 2:
        raise ValueError(f"half_distance needs two or more chains, got {len(f)}")
    return map_distance(f[0::2].mean(axis=0).ravel(), f[1::2].mean(axis=0).ravel())


def polarity_split(f: np.ndarray) -> np.ndarray:
    """(N, ...) signed features -> (N, 2F): positive and negative parts."""
    f = np.asarray(f).reshape(len(f), -1)
    return np.concatenate([np.maximum(f, 0), np.maximum(-f, 0)], axis=1)


def ridge_probe(f_train: np.ndarray, y_train: np.ndarray, f_test: np.ndarray,
                y_test: np.ndarray, alpha: float = 1.0) -> float:
    """Test error (%) of a one-vs-all ridge classifier on standardised features, with
    penalty alpha * n_train / 100 (a fixed read-out: only the features differ)."""
    a = np.asarray(f_train, np.float64).reshape(len(f_train), -1)
    b = np.asarray(f_test, np.float64).reshape(len(f_test), -1)
    mu, sd = a.mean(0), a.std(0)
    sd[sd == 0] = 1.0
    a, b = (a - mu) / sd, (b - mu) / sd
    classes = np.unique(y_train)
    t = np.where(np.asarray(y_train)[:, None] == classes[None], 1.0, -1.0)
    a1 = np.hstack([a, np.ones((len(a), 1))])
    b1 = np.hstack([b, np.ones((len(b), 1))])
    reg = alpha * len(a) / 100.0 * np.eye(a1.shape[1])
    reg[-1, -1] = 0.0  # the intercept is not penalised
    w = np.linalg.solve(a1.T @ a1 + reg, a1.T @ t)
    pred = classes[np.argmax(b1 @ w, axis=1)]
    return float(100.0 * np.mean(pred != np.asarray(y_test)))


# Cross-chain convergence (Vehtari et al. 2021, above), checked against ArviZ's port.
# Each function takes draws (chains, draws, *params) and works on a (P, chains, draws)
# view; a parameter with a non-finite draw gets NaN, as in Stan and ArviZ.

def _as_chains(draws) -> tuple[np.ndarray, tuple]:
    a = np.asarray(draws, np.float64)
    if a.ndim < 2:
        raise ValueError(f"draws must be (chains, draws, *params), got shape {a.shape}")
    if a.shape[0] < 1 or a.shape[1] < 4:
        raise ValueError(f"need at least 1 chain of at least 4 draws (2 split halves of 2), "
                         f"got {a.shape[0]} chain(s) of {a.shape[1]} draw(s)")
    params = a.shape[2:]
    return np.moveaxis(a.reshape(a.shape[:2] + (-1,)), -1, 0), params


def _split(a: np.ndarray) -> np.ndarray:
    """(P, M, N) -> (P, 2M, N // 2): first and last halves as chains (an odd N drops its
    middle draw, as ArviZ and Stan's posterior package do)."""
    half = a.shape[2] // 2
    return np.concatenate([a[:, :, :half], a[:, :, -half:]], axis=1)


def _z_scale(a: np.ndarray) -> np.ndarray:
    """Rank normalisation: Phi^-1((r - 3/8) / (S + 1/4)) (Blom's offset) of the average rank r
    of each draw among all S draws of its parameter."""
    p, m, n = a.shape
    s = m * n
    flat = a.reshape(p, s)
    order = np.argsort(flat, axis=1, kind="stable")
    srt = np.take_along_axis(flat, order, 1)
    first = np.ones((p, s), bool)
    first[:, 1:] = srt[:, 1:] != srt[:, :-1]
    first = first.ravel()  # each row opens a new run, so ties never cross parameters
    run = np.cumsum(first)
    edge = np.r_[np.nonzero(first)[0], first.size]
    # 2 r - 2 as an integer (r is a multiple of 1/2): one table of 2S - 1 quantiles serves
    # every parameter, and the stdlib's inverse CDF (Wichura's AS241) needs no SciPy
    two_r = (edge[run] + edge[run - 1] + 1).reshape(p, s) - 2 * s * np.arange(p)[:, None]
    phi_inv = NormalDist().inv_cdf
    table = np.array([phi_inv((k / 2 + 1 - 0.375) / (s + 0.25)) for k in range(2 * s - 1)])
    z = np.empty((p, s))
    np.put_along_axis(z, order, table[two_r - 2], 1)
    return z.reshape(p, m, n)


def _rhat_raw(a: np.ndarray) -> np.ndarray:
    """Split chains (P, M, N) -> R-hat = sqrt(var+ / W), var+ = (N - 1) / N W + B / N."""
    n = a.shape[2]
    b = n * a.mean(axis=2).var(axis=1, ddof=1)
    w = a.var(axis=2, ddof=1).mean(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.sqrt(((n - 1) / n * w + b / n) / w)


def _autocov(a: np.ndarray) -> np.ndarray:
    """Autocovariance of each chain at lags 0..N-1 (biased, / N), by FFT zero-padded to
    2N so the circular correlation is the linear one."""
    n = a.shape[-1]
    f = np.fft.rfft(a - a.mean(axis=-1, keepdims=True), n=2 * n, axis=-1)
    return np.fft.irfft(f * np.conj(f), n=2 * n, axis=-1)[..., :n] / n


def _ess_raw(a: np.ndarray) -> np.ndarray:
    """Split chains (P, M, N) -> ESS = MN / tau (sec. 3.2): the multi-chain autocorrelation
    summed over Geyer's initial positive sequence, made monotone. The loop is ArviZ's port
    of Stan's, step for step, so that the two agree to rounding."""
    p, m, n = a.shape
    out = np.full(p, np.nan)
    acov = _autocov(a).mean(axis=1)  # (P, N): mean over chains
    w = acov[:, 0] * n / (n - 1.0)
    var_plus = w * (n - 1.0) / n + a.mean(axis=2).var(axis=1, ddof=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = 1.0 - (w[:, None] - acov) / var_plus[:, None]  # every lag at once
    for i in range(p):
        if a[i].max() - a[i].min() < np.finfo(float).resolution:
            out[i] = m * n  # constant draws: ArviZ's convention (Stan's posterior says NA)
            continue
        r = np.zeros(n)
        r[0], r[1] = 1.0, rho[i, 1]
        even, odd, t = 1.0, rho[i, 1], 1
        while t < n - 3 and even + odd > 0.0:
            even, odd = rho[i, t + 1], rho[i, t + 2]
            if even + odd >= 0:
                r[t + 1], r[t + 2] = even, odd
            t += 2
        max_t = t - 2
        if even > 0:  # the last positive even lag still counts
            r[max_t + 1] = even
        for t in range(1, max_t - 1, 2):  # initial monotone sequence
            if r[t + 1] + r[t + 2] > r[t - 1] + r[t]:
                r[t + 1] = r[t + 2] = (r[t - 1] + r[t]) / 2.0
        tau = -1.0 + 2.0 * r[:max_t + 1].sum() + r[max_t + 1:max_t + 2].sum()
        # Stan's floor on tau: ESS at most MN log10(MN) for antithetic chains
        tau = max(tau, 1.0 / np.log10(m * n))
        out[i] = np.nan if np.isnan(r).any() else m * n / tau
    return out


def _finite(a: np.ndarray, values: np.ndarray, params: tuple):
    values = np.where(np.isfinite(a).all(axis=(1, 2)), values, np.nan)
    return float(values[0]) if params == () else values.reshape(params)


def rhat(draws) -> float | np.ndarray:
    """Rank-normalised split-R-hat (Vehtari et al. 2021): the larger of the bulk
    R-hat of the rank-normalised split chains and the tail R-hat of the folded draws
    |x - median|. ``draws`` (chains, draws, *params) -> a float or an array over params;
    one chain works (its halves are compared), at least 4 draws per chain."""
    a, params = _as_chains(draws)
    s = _split(a)
    bulk = _rhat_raw(_z_scale(s))
    folded = np.abs(s - np.median(s.reshape(len(s), -1), axis=1)[:, None, None])
    tail = _rhat_raw(_z_scale(folded))
    return _finite(a, np.maximum(bulk, tail), params)


def ess(draws, kind: str = "bulk") -> float | np.ndarray:
    """Effective sample size (Vehtari et al. 2021). ``kind="bulk"``: of the
    rank-normalised split chains; ``"tail"``: the smaller of the ESS of the indicators
    I(x <= q) at the 5% and 95% quantiles (type 7, over all chains). ``draws`` (chains,
    draws, *params) -> a float or an array over params."""
    a, params = _as_chains(draws)
    if kind == "bulk":
        values = _ess_raw(_z_scale(_split(a)))
    elif kind == "tail":
        flat = a.reshape(len(a), -1)
        q = np.quantile(flat, [0.05, 0.95], axis=1)  # (2, P)
        values = np.minimum(*(_ess_raw(_split((a <= qi[:, None, None]).astype(float)))
                              for qi in q))
    else:
        raise ValueError(f"kind must be 'bulk' or 'tail', got {kind!r}")
    return _finite(a, values, params)


def summarise_chains(draws) -> dict:
    """JSON-ready convergence summary of one parameter set (chains, draws, *params): the
    worst :func:`rhat` and the smallest bulk and tail :func:`ess` over its parameters
    (NaN if any parameter has a non-finite draw, or a constant one for R-hat)."""
    a = np.asarray(draws)
    return {"rhat_max": float(np.max(rhat(a))),
            "ess_bulk_min": float(np.min(ess(a, "bulk"))),
            "ess_tail_min": float(np.min(ess(a, "tail"))),
            "n_chains": int(a.shape[0]), "n_draws": int(a.shape[1])}


def feature_draws_summary(draws) -> dict:
    """R-hat and bulk ESS of test-time features, from their draws (chains, draws, N, F)
    or (chains, draws, P): computed for every feature that moves (a unit never on is
    left out, its R-hat undefined), then summarised: the median R-hat, the fraction of
    features whose R-hat exceeds 1.1 (Vehtari et al. 2021 ask for 1.01), the median bulk
    ESS, how many features moved."""
    a = np.asarray(draws)
    a = a.reshape(a.shape[0], a.shape[1], -1)
    moving = np.ptp(a, axis=(0, 1)) > 0
    if not moving.any():
        return {"rhat_median": float("nan"), "rhat_above_1.1": float("nan"),
                "ess_bulk_median": float("nan"), "features_moving": 0,
                "n_chains": int(a.shape[0]), "n_draws": int(a.shape[1])}
    rh, es = rhat(a[..., moving]), ess(a[..., moving], "bulk")
    return {"rhat_median": float(np.nanmedian(rh)), "rhat_above_1.1": float(np.nanmean(rh > 1.1)),
            "ess_bulk_median": float(np.nanmedian(es)), "features_moving": int(moving.sum()),
            "n_chains": int(a.shape[0]), "n_draws": int(a.shape[1])}


# Has a chain settled? The traced scalars of every chain (log joint, gamma_e, the active
# fractions, the dictionaries' norms and moves, ...): R-hat and ESS over the collected
# draws, and the drift of each trace over the last third of all its sweeps.

#: the default of ``settle_tolerance``: a noise-free linear trend drifts by 2.7 to 3.5
SETTLE_TOLERANCE = 1.0
#: the fewest values in the drift window (the last third) for a chain to be called settled:
#: a stationary trace's drift is about N(0, 12 / n), so a shorter window cannot tell a
#: settled chain from one in its transient (a chain under 36 sweeps is "too short")
SETTLE_MIN_WINDOW = 12


def drift_window(n_sweeps: int) -> int:
    """How many of a trace's last sweeps :func:`drift` reads: the last third, at least 3."""
    return max(n_sweeps // 3, 3)


def drift(trace) -> float:
    """How far a trace still moves: over the last third of its sweeps (burn-in included,
    non-finite values left out), the least-squares slope times the window's length,
    divided by the window's robust scale (1.4826 x its median absolute deviation; its
    standard deviation where that is 0, as for a fraction that mostly sits at one value).
    A noise-free linear trend gives 2.7 to 3.5 whatever its slope; a stationary trace
    gives about N(0, 12 / n_eff) for n_eff effective draws in the window. 0 for a
    constant window; NaN for fewer than 3 finite values."""
    t = np.asarray(trace, np.float64).ravel()
    idx = np.arange(len(t))
    keep = idx >= len(t) - drift_window(len(t))
    keep &= np.isfinite(t)
    w, i = t[keep], idx[keep].astype(np.float64)
    if len(w) < 3:
        return float("nan")
    scale = 1.4826 * np.median(np.abs(w - np.median(w)))
    if scale == 0:
        scale = w.std()
    if scale == 0:
        return 0.0
    slope = np.polyfit(i, w, 1)[0]
    return float(slope * (i[-1] - i[0] + 1) / scale)


def _json_float(v) -> float | None:
    v = float(v)
    return v if np.isfinite(v) else None


def pooled_traces(trace_sums, images, names) -> list[dict]:
    """The per-chain traces :func:`trace_settlement` reads, from traces kept batch by
    batch: ``trace_sums`` (batches, chains, len(names), sweeps), each scalar summed over a
    batch's images, ``images`` (batches,) their counts. Chain c's trace of a scalar is its
    mean over every image at each sweep (the batches added in order, so shards joined
    give the same bits); the chains of one index across batches are one chain of the
    whole image set."""
    sums = np.asarray(trace_sums, np.float64)
    if sums.ndim != 4 or sums.shape[2] != len(names) or sums.shape[0] != len(images):
        raise ValueError(f"trace_sums must be (batches={len(images)}, chains, {len(names)}, "
                         f"sweeps), got {sums.shape}")
    total = np.zeros(sums.shape[1:])
    for b in range(sums.shape[0]):
        total += sums[b]
    total /= float(np.sum(images))
    return [{name: total[c, k] for k, name in enumerate(names)} for c in range(sums.shape[1])]


def trace_settlement(chains, *, collected, tolerance: float = SETTLE_TOLERANCE) -> dict:
    """Has a chain settled, and how well are its collected draws mixed? ``chains``: one
    mapping per chain of traced scalar name -> its values over every sweep (each chain
    the same sweeps); ``collected``: a boolean per sweep, the collected draws.

    Per scalar: :func:`drift` of each chain (the largest |drift| kept) and, with 4 or
    more collected draws, the rank-normalised split-R-hat (:func:`rhat`: across the
    chains, each split in halves; with one chain, its two halves) and bulk ESS
    (:func:`ess`) of the collected draws. ``settled`` is False while any scalar's
    |drift| exceeds ``tolerance`` in any chain ('drifting' names them); None, when none
    does but the drift window holds fewer than :data:`SETTLE_MIN_WINDOW` sweeps (too
    short to tell); True otherwise. JSON-ready (NaN as None)."""
    chains = [dict(c) for c in chains]
    names = list(chains[0])
    if any(list(c) != names for c in chains):
        raise ValueError("every chain must trace the same scalars, in the same order")
    collected = np.asarray(collected, bool)
    per, drifting = {}, []
    for name in names:
        vals = np.asarray([c[name] for c in chains], np.float64)  # chains, sweeps
        if vals.shape[1] != len(collected):
            raise ValueError(f"{name}: {vals.shape[1]} sweeps traced, {len(collected)} flagged")
        d = [drift(v) for v in vals]
        worst = max(d, key=lambda v: -1.0 if np.isnan(v) else abs(v))
        entry = {"drift": _json_float(worst)}
        draws = vals[:, collected]
        if draws.shape[1] >= 4:
            entry["rhat"] = _json_float(rhat(draws))
            entry["ess_bulk"] = _json_float(ess(draws, "bulk"))
        per[name] = entry
        if np.isfinite(worst) and abs(worst) > tolerance:
            drifting.append(name)
    n_draws = int(collected.sum())
    short = drift_window(len(collected)) < SETTLE_MIN_WINDOW
    settled = False if drifting else (None if short else True)
    how = ("across the chains, each split in halves" if len(chains) > 1
           else "of the one chain's two halves")
    return {"settled": settled, "drifting": drifting, "tolerance": float(tolerance),
            "min_sweeps": 3 * SETTLE_MIN_WINDOW,
            "n_chains": len(chains), "n_sweeps": int(len(collected)), "n_draws": n_draws,
            "rhat": (f"rank-normalised split-R-hat {how}" if n_draws >= 4 else
                     f"not computed: {n_draws} collected draws, split-R-hat needs 4"),
            "drift": "slope x length / robust scale over the last third of all sweeps",
            "scalars": per}
