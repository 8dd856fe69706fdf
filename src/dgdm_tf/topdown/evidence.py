"""How probable a top-down state's discrete part is given the image:
log p(x_obs, Z, on | D, gamma_s), with each image's theta (Dirichlet-multinomial), pi
(beta-binomial), top-unit weights and gamma_e integrated out.

The plain log joint (:func:`dgdm_tf.topdown.sweep.log_joint`) is a density over theta
and pi, whose Dirichlet and Beta priors (parameters below one) are unbounded at the
simplex's edges, and over as many slab weights as units are on, so it does not compare
two states fairly. This does: given Z, the image is linear in the top units' weights
(x = sum_u w_u F_u + noise, Eq. 1 pushed through every layer), so the weights of the
units that are on integrate to a Gaussian with covariance sum_u F_u F_u^T / gamma_s[n, k_u]
+ I / gamma_e (each unit at its image's and map's slab precision, given),
and gamma_e is integrated over its Gamma(a_e, b_e) prior on a grid in log gamma_e. Blocks
of a lower layer whose footprint holds no observed pixel sum out exactly and are left
out. Used to ask whether the states a chain reaches are where the posterior's mass is.
"""

from __future__ import annotations

import math

import numpy as np
import tensorflow as tf

from dgdm_tf.core import random
from dgdm_tf.core.model import DeepModel, layer_inputs, unseen_blocks
from dgdm_tf.topdown.chain import chain_states
from dgdm_tf.topdown.options import Start
from dgdm_tf.topdown.state import DeepState, dense_z, take_images

#: log gamma_e from 1e-2 to 1e9; the integrand's width in log gamma_e is about
#: sqrt(2 / pixels) (0.05 at MNIST), so the step (0.01) resolves it
LOG_GAMMA_GRID = np.linspace(math.log(1e-2), math.log(1e9), 2501)


def log_normal_of_span(f: np.ndarray, x: np.ndarray, gamma_s: float, log_gamma: np.ndarray) -> np.ndarray:
    """log N(x | 0, f^T f / gamma_s + I / gamma) for each gamma = exp(log_gamma):
    f (m, P) the images of the units that are on, x (P,). By f's singular values, so each
    gamma costs O(m)."""
    p = x.size
    if len(f):
        _, sig, vt = np.linalg.svd(f, full_matrices=False)
        proj = vt @ x
    else:
        sig, proj = np.zeros(0), np.zeros(0)
    rest = float(x @ x - proj @ proj)  # x's part outside f's row space
    lg = np.asarray(log_gamma, np.float64)[:, None]
    var = sig[None] ** 2 / gamma_s + np.exp(-lg)
    return (-0.5 * p * math.log(2 * math.pi) - 0.5 * np.log(var).sum(1) + 0.5 * (p - len(sig)) * lg[:, 0]
            - 0.5 * (proj ** 2 / var).sum(1) - 0.5 * np.exp(lg[:, 0]) * rest)


def log_evidence(f: np.ndarray, x: np.ndarray, gamma_s: float, a_e: float, b_e: float,
                 log_gamma: np.ndarray = LOG_GAMMA_GRID) -> float:
    """log of the integral over gamma ~ Gamma(a_e, b_e) of :func:`log_normal_of_span`
    (trapezoid rule in log gamma)."""
    lg = np.asarray(log_gamma, np.float64)
    log_prior = a_e * math.log(b_e) - math.lgamma(a_e) + a_e * lg - b_e * np.exp(lg)  # d gamma = gamma d log gamma
    v = log_normal_of_span(f, x, gamma_s, lg) + log_prior
    w = np.full(len(lg), lg[1] - lg[0])
    w[[0, -1]] *= 0.5
    top = v.max()
    return float(top + math.log(np.sum(w * np.exp(v - top))))


def log_dirichlet_multinomial(counts: np.ndarray, alpha: np.ndarray) -> float:
    """log p of one sequence of categorical draws with these ``counts`` (..., S) under
    theta ~ Dirichlet(alpha), theta integrated; summed over the leading axes."""
    c = np.asarray(counts, np.float64)
    a = np.asarray(alpha, np.float64)
    lg = np.vectorize(math.lgamma)
    return float(np.sum(lg(a.sum()) - lg(a.sum() + c.sum(-1)) + np.sum(lg(a + c) - lg(a), -1)))


def log_beta_binomial(on: np.ndarray, a: float, b: float) -> float:
    """log p of one on/off sequence (..., n) under pi ~ Beta(a, b), pi integrated;
    summed over the leading axes."""
    on = np.asarray(on, np.float64)
    n = on.shape[-1]
    c = on.sum(-1)
    lg = np.vectorize(math.lgamma)
    return float(np.sum(lg(a + c) + lg(b + n - c) - lg(a + b + n) - math.lgamma(a) - math.lgamma(b)
                        + math.lgamma(a + b)))


def unit_images(state: DeepState, model: DeepModel, i: int) -> tuple[np.ndarray, np.ndarray]:
    """(units (m, 3) as (row, col, map), images (m, H, W, C)) of image ``i``'s top units
    that are on, each pushed down through the current Z and D."""
    on = np.asarray(state.on[i]) > 0  # hs, ws, K
    units = np.argwhere(on)
    if not len(units):
        return units, np.zeros((0,) + tuple(model.image_shape), np.float32)
    gt = model.top
    e = np.zeros((len(units), gt.hs, gt.ws, gt.k), np.float32)
    e[np.arange(len(units)), units[:, 0], units[:, 1], units[:, 2]] = 1.0
    zd = [tf.repeat(z, len(units), axis=0) for z in dense_z(take_images(state, slice(i, i + 1)), model)]
    return units, layer_inputs(tf.constant(e), model, state.d, zd)[0].numpy()


def collapsed_log_prob(state: DeepState, x, model: DeepModel, mask=None) -> np.ndarray:
    """(N,) log p(x_obs, Z of the blocks that see an observed pixel, on | D, gamma_s):
    theta, pi, the top units' weights and gamma_e integrated out (module docstring); the
    sum of :func:`collapsed_log_prob_terms`."""
    t = collapsed_log_prob_terms(state, x, model, mask)
    return t["fit"] + t["codes"] + t["on"]


def collapsed_log_prob_terms(state: DeepState, x, model: DeepModel, mask=None, pi_prior=None) -> dict:
    """:func:`collapsed_log_prob` by factor, each (N,): 'fit' log p(x_obs | Z, on, D,
    gamma_s) (the Gaussian of the units that are on, gamma_e integrated), 'codes' log p(Z)
    of the lower layers (Dirichlet-multinomial), 'on' log p(on) (beta-binomial, under
    ``pi_prior`` = (a, b) if given, else the model's). Which factor a state gains in says
    what makes it more probable."""
    x = np.asarray(x, np.float64)
    n = len(x)
    obs = np.ones(x.shape, bool) if mask is None else np.asarray(mask) > 0
    seen = [~u for u in unseen_blocks(obs.astype(np.float32), model)]
    h = model.hyper
    gs = np.asarray(state.gamma_s, np.float64)  # N, K
    pa, pb = (float(v) for v in np.asarray(model.pi_prior if pi_prior is None else pi_prior))
    resid, s_top, on_all = np.asarray(state.resid), np.asarray(state.s_top), np.asarray(state.on) > 0
    zs = [np.asarray(z) for z in state.z]
    out = {k: np.zeros(n) for k in ("fit", "codes", "on")}
    for i in range(n):
        units, f = unit_images(state, model, i)
        w = s_top[i][units[:, 0], units[:, 1], units[:, 2]] if len(units) else np.zeros(0)
        # the score reads Z and on from the state and x from the caller: a residual that
        # does not match says the two disagree (a stale state, or another image)
        x_hat = np.tensordot(w, f, 1) if len(units) else np.zeros_like(x[i])
        recon = (x[i] - resid[i])[obs[i]]
        if np.max(np.abs(x_hat[obs[i]] - recon), initial=0.0) > 1e-3 * max(1.0, np.max(np.abs(recon), initial=0.0)):
            raise ValueError(f"image {i}: the state's residual is not x minus its top units' images on the "
                             "observed pixels; score the state with the images (and mask) its chain ran on, "
                             "after its residual was rebuilt (topdown.state.residual)")
        # unit u's weight has precision gamma_s[i, k_u]: its image scaled by its sd makes
        # the covariance sum_u F_u F_u^T / gamma_s[i, k_u] + I / gamma_e
        f_obs = f.reshape(len(f), -1)[:, obs[i].ravel()].astype(np.float64)
        f_obs = f_obs / np.sqrt(gs[i, units[:, 2]])[:, None] if len(units) else f_obs
        out["fit"][i] = log_evidence(f_obs, x[i][obs[i]], 1.0, h.a_e, h.b_e)
        for l, g in enumerate(model.geoms[:-1]):
            z = zs[l][i]  # nbh, nbw, K: each block's state
            counts = np.stack([((z == s) & seen[l][i][..., None]).sum((0, 1)) for s in range(g.n_states)], -1)
            out["codes"][i] += log_dirichlet_multinomial(counts, np.asarray(model.alpha[l]))
        out["on"][i] = log_beta_binomial(on_all[i].reshape(-1, on_all.shape[-1]).T, pa, pb)
    return out


def posterior_gain(x, held: Start, *, seed: int, sweeps: int, more_sweeps: int, scan: str = "fixed",
                   top_start=None) -> dict:
    """How far a test-time chain's collected state lies from where the chain is going:
    one chain of :func:`dgdm_tf.topdown.chain.infer_topdown`'s kind (every dictionary of
    ``held`` and its gamma_s held, the top layer started by ``top_start``; an integer
    ``seed``) on images ``x``, its state after ``sweeps`` sweeps and after
    ``more_sweeps`` more, each scored by :func:`collapsed_log_prob`. Returns the median log-probability gain
    per image, the fraction of images whose later state is more probable, and the top
    units on in each. A large gain says the collected state is a transient: an exact
    chain run on leaves it for far more probable states."""
    x = np.asarray(x, np.float32)
    first, last = int(sweeps), int(sweeps) + int(more_sweeps)
    model, states = chain_states(x, held, seed=random.salted(seed, "posterior_check", tf.int32),
                                 sweeps=[first, last], scan=scan, top_start=top_start)
    scores = [collapsed_log_prob(states[t], x, model) for t in (first, last)]
    on = [float(np.mean(np.asarray(states[t].on))) for t in (first, last)]
    gain = scores[1] - scores[0]
    return {"images": len(x), "sweeps": [first, last],
            "median_log_prob_gain": float(np.median(gain)),
            "fraction_more_probable": float(np.mean(gain > 0)), "top_units_on": on}
