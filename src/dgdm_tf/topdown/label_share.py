"""The labels' share of the top units' full conditionals in the supervised model
(supplement eq. SampleS with the SVM terms; :func:`dgdm_tf.topdown.top_units.resample_top`).

Given z_u = 1, the slab weight of top unit u of image n is Gaussian with

    precision           P  = gamma_e ||F||^2 + gamma_s + gamma sum_l c_lu^2 / lambda_nl
    precision x mean    Pm = gamma_e <F, R0>         + gamma sum_l c_lu (y_nl (1 + lambda_nl) - a_nlu) / lambda_nl

(F the unit's data-plane image through the current Z and D, R0 the residual without the
unit, c_lu its coefficient in class l's margin, a_nlu the margin without it). The first
term of each is the image's part, the sum the labels' (the SVM's). Per unit and image:

    label share of the precision  = P_svm / (P_image + P_svm)
    label share of the mean       = |Pm_svm| / (|Pm_image| + |Pm_svm|)

(gamma_s, the prior, is in neither). Evaluated at a state of the chain with nothing
drawn (a reader: the chain is unchanged); the conditionals are those the next sweep's top
step would see before it moves the first unit.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from dgdm_tf.core.compiled import cached_builder, compiled
from dgdm_tf.core.model import DeepModel
from dgdm_tf.supervised import joint_svm as deep_svm
from dgdm_tf.topdown.scan import per_colour
from dgdm_tf.topdown.state import residual, take_images
from dgdm_tf.topdown.top_units import top_unit_terms

#: the trace's columns of :func:`summarise`, in order
COLUMNS = ("label_share_median", "label_share_p90", "label_share_margin",
           "label_mean_share_median", "label_mean_share_p90")


def unit_parts(state, model: DeepModel, svm_terms, fast: bool = True) -> dict:
    """Each top unit's image and SVM parts of its conditional (module docstring), each
    (N, hs, ws, K) float32: ``prec_image``, ``prec_svm``, ``lin_image``, ``lin_svm``;
    NaN where a unit does not exist (the top layer's padding). ``svm_terms``:
    :func:`dgdm_tf.supervised.joint_svm.unit_terms` of the same images. ``state.resid``
    must be the residual of ``state`` (as after a sweep)."""
    col = model.colourings[-1]
    if col.n_h * col.n_w != 1:
        raise ValueError("the labels' share needs the supervised model's colouring (one top "
                         "unit per colour): DeepModel(..., supervised=True)")
    k_top = model.top.k
    colour_terms = top_unit_terms(state, model, None, fast)
    ge = state.gamma_e[:, None, None]
    coef = svm_terms["coef"]  # C, hs, ws, K
    marg = svm_terms["offset"][None] + tf.einsum("nhwk,chwk->nc", state.s_top, coef)
    tgt, wgt = svm_terms["target"], svm_terms["weight"]  # N, C
    s_k = tf.transpose(state.s_top, [3, 0, 1, 2])  # K, N, hs, ws
    nan = tf.fill(tf.shape(s_k), np.float32(np.nan))
    acc = [nan] * 4
    members = np.stack([col.member_mask(a, b) for a, b in col.colours()])
    reals = np.stack([col.real(a, b) for a, b in col.colours()])
    for ci in range(col.g_h * col.g_w):  # nothing moves, so any order gives the same values
        a, b = ci // col.g_w, ci % col.g_w
        member, real = per_colour(members, ci)[None], per_colour(reals, ci)[None]
        cache0, terms = colour_terms(ci, ci, None)

        def body(k, cache, *acc, a=a, b=b, member=member, real=real, terms=terms):
            cur = col.take(s_k[k], a, b)  # N, 1, 1
            bsum, asum, _, cache = terms(k, k, state.resid, cur, cache)
            cu = coef[:, a, b, k][None]  # 1, C
            rest = marg - cur[:, :, 0] * cu
            vals = (ge * asum, tf.reduce_sum(wgt * cu * cu, axis=1)[:, None, None],
                    ge * bsum, tf.reduce_sum(wgt * cu * (tgt - rest), axis=1)[:, None, None])
            out = []
            for acc_i, v in zip(acc, vals):
                v = tf.where(real, v, np.float32(np.nan))
                put = tf.where(member, col.put(v, a, b), acc_i[k])
                out.append(tf.tensor_scatter_nd_update(acc_i, [[k]], put[None]))
            return (k + 1, cache, *out)

        _, _, *acc = tf.while_loop(lambda k, *_: k < k_top, body, (tf.constant(0), cache0, *acc),
                                   parallel_iterations=1)
    names = ("prec_image", "prec_svm", "lin_image", "lin_svm")
    return {n: tf.transpose(v, [1, 2, 3, 0]) for n, v in zip(names, acc)}


@cached_builder()
def make_unit_parts(model: DeepModel, fast: bool = True):
    """A compiled :func:`unit_parts`: ``f(state, svm_terms) -> dict``."""
    return compiled(lambda st, terms: unit_parts(st, model, terms, fast), reduce_retracing=True)


def shares(parts: dict) -> tuple[np.ndarray, np.ndarray]:
    """(precision share, mean share), each (N, hs, ws, K) float64 (module docstring); NaN
    where the unit does not exist or both parts are 0."""
    p_img, p_svm = (np.asarray(parts[k], np.float64) for k in ("prec_image", "prec_svm"))
    l_img, l_svm = (np.abs(np.asarray(parts[k], np.float64)) for k in ("lin_image", "lin_svm"))
    with np.errstate(invalid="ignore", divide="ignore"):
        return p_svm / (p_img + p_svm), l_svm / (l_img + l_svm)


def within_margin(margins, y) -> np.ndarray:
    """(N,) bool: the images whose hinge is active for some class, y_nl margin_nl < 1
    (``margins`` (N, C), ``y`` (N, C) of +-1): the support vectors of at least one of the
    one-vs-all SVMs, where 1/lambda is large."""
    return np.min(np.asarray(y) * np.asarray(margins), axis=1) < 1.0


def summarise(parts: dict, margin_images) -> dict:
    """The trace's :data:`COLUMNS`: the median and 90th percentile over (image, unit) of
    the labels' precision share and of their mean share, and the median precision share
    over the units of the images ``margin_images`` ((N,) bool: :func:`within_margin`;
    NaN where there are none)."""
    prec, mean = shares(parts)
    inside = prec[np.asarray(margin_images, bool)]

    def q(v, p):
        v = v[np.isfinite(v)]
        return float(np.percentile(v, p)) if v.size else float("nan")
    return {"label_share_median": q(prec, 50), "label_share_p90": q(prec, 90),
            "label_share_margin": q(inside, 50),
            "label_mean_share_median": q(mean, 50), "label_mean_share_p90": q(mean, 90)}


def trace_shares(state, svm, x, y, model: DeepModel, svm_hyper, n_images: int) -> dict:
    """:func:`summarise` on the first ``n_images`` images of the chain (all of them when
    it has fewer): the supervised chain's trace. ``x`` the chain's images, ``y`` their
    (C, N) targets (:func:`dgdm_tf.supervised.joint_svm.targets`)."""
    n = min(int(n_images), int(state.s_top.shape[0]))
    sl = slice(0, n)
    st = take_images(state, sl)
    st = st._replace(resid=residual(st, x[sl], model))
    svm_n = svm._replace(lam=svm.lam[:, sl])
    y_n = y[:, sl]
    terms = deep_svm.unit_terms(svm_n, y_n, st.s_top.shape[1:], svm_hyper)
    parts = make_unit_parts(model)(st, terms)
    inside = within_margin(deep_svm.margins(svm_n, st.s_top), np.asarray(y_n).T)
    return summarise(parts, inside)


def trace_summary(rows: list[dict]) -> dict:
    """A chain's traced shares for its mixing summary: each of :data:`COLUMNS` at the
    last sweep (``last``) and its mean over the collected sweeps (``collected``), with
    the images they were read on left to the trace; {} when none was traced."""
    traced = [r for r in rows if np.isfinite(r.get(COLUMNS[0], np.nan))]
    if not traced:
        return {}
    coll = [r for r in traced if r.get("phase") == "collect"] or traced[-1:]
    return {"sweep": int(traced[-1]["sweep"]),
            "last": {c: float(traced[-1][c]) for c in COLUMNS},
            "collected": {c: float(np.nanmean([r[c] for r in coll])) for c in COLUMNS}}
