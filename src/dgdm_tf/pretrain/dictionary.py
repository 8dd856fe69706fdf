"""D | - in the layer-wise pretraining model (supplement, conditional of D): each map D_k
jointly over its dh*dw*C entries from its exact Gaussian, the maps one after another.

Both routes take the correlations in the Fourier domain (FFT length Hx x Wx, so nothing
wraps around), with f_s the transform of S_nk and f_r of the residual
R_n = X_n - sum_k D_k * S_nk. Map k needs corr_k = sum_n gamma_e[n] R_excl,n (*) S_nk and
S_k's weighted autocorrelation; after D_k moves by Delta_k, every later map's
correlation moves with it. They differ in how that is kept current:

* ``loop``: the residual itself, (N, C, Hx, Wx/2+1) values read and rewritten per map;
* ``statistics``: the sums over images, once per sweep,
      F[k]    = sum_n gamma_e[n] f_r[n] conj(f_s[n, k])      (Hx, Wx/2+1, K, C)
      Q[k, j] = sum_n gamma_e[n] f_s[n, k] conj(f_s[n, j])   (Hx, Wx/2+1, K, K)
  then F[j] -= FFT(Delta_k) Q[k, j] per map, independent of N; the residual is rebuilt
  from X and the new D at the end. Batched pretraining (:mod:`dgdm_tf.pretrain.batched`)
  accumulates F and Q batch by batch.

The same maps in the same order with the same seeds: the routes' draws agree to
round-off (``tests/test_pretrain_dictionary.py``). Which is faster depends on the shapes:
the loop touches 2 N C values per map and frequency (memory-bound), the statistics cost
N K (K + C) multiply-adds per frequency once (dense matmuls). :func:`route_for` picks
by K against C (measured in ``docs/findings/layerwise_d_route.md``).
"""

from __future__ import annotations

import tensorflow as tf

from dgdm_tf.core.layout import LayerGeometry
from dgdm_tf.pretrain.blocks import blocks_to_nhwc, pad_input, reconstruction
from dgdm_tf.pretrain.layer_model import LayerModel, PretrainState

ROUTES = ("auto", "loop", "statistics")

#: ``auto`` takes the statistics while K < this x C: at MNIST's layer 2 (C = 50,
#: K = 200) they are the faster route, at its layer 1 (C = 1, K = 50) the slower
#: (docs/findings/layerwise_d_route.md).
STATISTICS_MAX_K_PER_CHANNEL = 16


def route_for(geom: LayerGeometry, route: str = "auto") -> str:
    """``loop`` or ``statistics`` for a layer of this geometry (``auto``: by K against C)."""
    if route not in ROUTES:
        raise ValueError(f"D's route must be one of {ROUTES}, got {route!r}")
    if route != "auto":
        return route
    return "statistics" if geom.k < STATISTICS_MAX_K_PER_CHANNEL * geom.c else "loop"


def resample_d(state: PretrainState, x: tf.Tensor, model: LayerModel, seed,
               route: str = "auto") -> PretrainState:
    """D_k | - ~ N(mu, Lambda^-1), jointly over its dh*dw entries (each channel alike).

    Lambda = dict_prior_precision I + sum_n gamma_e[n] A_nk, with A_nk[t, t'] the
    autocorrelation of S_nk at lag t' - t; Lambda mu = sum_n gamma_e[n] (R_excl (*) S_nk)
    with R_excl the residual without map k. ``route``: see the module docstring; the
    residual comes back current either way.
    """
    g = model.geom
    if route_for(g, route) == "statistics":
        f_corr, f_gram = d_statistics(state.s, x, state.d, state.gamma_e, model)
        d = draw_d(state.d, f_corr, f_gram, model, seed)
        return state._replace(d=d, resid=pad_input(x - reconstruction(state.s, d, g), g))
    fl = [g.hx, g.wx]
    s = blocks_to_nhwc(state.s, g)  # N, hs, ws, K
    f_s = tf.signal.rfft2d(tf.transpose(s, [3, 0, 1, 2]), fft_length=fl)  # K, N, hx, wf
    f_x = tf.signal.rfft2d(tf.transpose(x, [0, 3, 1, 2]), fft_length=fl)  # N, C, hx, wf
    f_d = tf.signal.rfft2d(tf.transpose(state.d, [3, 2, 0, 1]), fft_length=fl)  # K, C, hx, wf
    f_r = f_x - tf.einsum("knhw,kchw->nchw", f_s, f_d)
    ge = state.gamma_e
    ge_c = tf.cast(ge, tf.complex64)
    power = tf.einsum("n,knhw->khw", ge, tf.math.real(f_s * tf.math.conj(f_s)))
    ac = tf.reshape(tf.signal.irfft2d(tf.cast(power, tf.complex64), fft_length=fl), [g.k, -1])
    f_sw = tf.math.conj(f_s) * ge_c[None, :, None, None]  # gamma_e-weighted, conjugated
    d_out = tf.TensorArray(tf.float32, size=g.k)

    def body(k, f_r, d_out):
        corr = tf.signal.irfft2d(tf.einsum("nchw,nhw->chw", f_r, f_sw[k]), fft_length=fl)
        d_new, f_delta = draw_map(state.d, k, corr, ac[k], model, seed)
        f_r = f_r - f_s[k][:, None] * f_delta[None]
        return k + 1, f_r, d_out.write(k, d_new)

    _, f_r, d_out = tf.while_loop(lambda k, *_: k < g.k, body, (tf.constant(0), f_r, d_out),
                                  parallel_iterations=1)
    d = tf.transpose(d_out.stack(), [2, 3, 1, 0])  # dh, dw, C, K
    resid = tf.transpose(tf.signal.irfft2d(f_r, fft_length=fl), [0, 2, 3, 1])
    return state._replace(d=d, resid=pad_input(resid, g))


def draw_map(d, k, corr, ac_k, model: LayerModel, seed):
    """Map k's draw: ``corr`` (C, Hx, Wx) the gamma_e-weighted correlation of the residual
    with S_k (lag 0 at the origin), ``ac_k`` (Hx Wx,) S_k's weighted autocorrelation.
    Returns (D_k new as (C, dh, dw), FFT of its change)."""
    g = model.geom
    d2 = g.dh * g.dw
    d_old = tf.reshape(tf.transpose(d[..., k], [2, 0, 1]), [g.c, d2])  # C, d2
    corr = tf.reshape(corr[:, : g.dh, : g.dw], [g.c, d2])
    a_lik = tf.gather(ac_k, model.lag_index)  # d2, d2
    chol = tf.linalg.cholesky(a_lik + model.hyper.dict_prior_precision * tf.eye(d2))
    rhs = tf.transpose(corr + d_old @ a_lik)  # d2, C  (a_lik is symmetric)
    mu = tf.linalg.cholesky_solve(chol, rhs)
    eps = tf.random.stateless_normal([d2, g.c], tf.random.experimental.stateless_fold_in(seed, k))
    d_new = tf.transpose(mu + tf.linalg.triangular_solve(chol, eps, lower=True, adjoint=True))
    f_delta = tf.signal.rfft2d(tf.reshape(d_new - d_old, [g.c, g.dh, g.dw]),
                               fft_length=[g.hx, g.wx])
    return tf.reshape(d_new, [g.c, g.dh, g.dw]), f_delta


def d_statistics(s, x, d, gamma_e, model: LayerModel):
    """(F, Q) above for a set of images, complex64, frequency-major: F (Hx, Wf, K, C) and
    Q (Hx, Wf, K, K), so that every sum over the images is one batched matmul per
    frequency (one transpose of the blocks' transform, no others)."""
    g = model.geom
    fl = [g.hx, g.wx]
    f_s = tf.signal.rfft2d(tf.transpose(blocks_to_nhwc(s, g), [3, 0, 1, 2]), fft_length=fl)
    f_s = tf.transpose(f_s, [2, 3, 0, 1])  # hx, wf, K, N
    f_x = tf.transpose(tf.signal.rfft2d(tf.transpose(x, [0, 3, 1, 2]), fft_length=fl),
                       [2, 3, 0, 1])  # hx, wf, N, C
    f_d = tf.transpose(tf.signal.rfft2d(tf.transpose(d, [3, 2, 0, 1]), fft_length=fl),
                       [2, 3, 0, 1])  # hx, wf, K, C
    f_r = f_x - tf.linalg.matmul(f_s, f_d, transpose_a=True)  # hx, wf, N, C
    f_sw = tf.math.conj(f_s) * tf.cast(gamma_e, tf.complex64)  # gamma_e-weighted, conjugated
    return tf.linalg.matmul(f_sw, f_r), tf.linalg.matmul(f_s, f_sw, transpose_b=True)


def draw_d(d, f_corr, f_gram, model: LayerModel, seed) -> tf.Tensor:
    """D | - from the summed statistics: :func:`draw_map` for each map in the loop's order
    and seeds, with corr_k = IFFT(F[k]) and the autocorrelation IFFT(Q[k, k]); after
    each map, F[j] -= FFT(Delta_k) Q[k, j]."""
    g = model.geom
    fl = [g.hx, g.wx]
    f_corr = tf.cast(f_corr, tf.complex64)
    f_gram = tf.cast(f_gram, tf.complex64)
    diag = tf.math.real(tf.linalg.diag_part(f_gram))  # hx, wf, K
    ac = tf.reshape(tf.signal.irfft2d(tf.cast(tf.transpose(diag, [2, 0, 1]), tf.complex64),
                                      fft_length=fl), [g.k, -1])
    # map-major for the loop: F (K, C, hx, wf), Q (K, K, hx, wf); small, moved once
    f_corr = tf.transpose(f_corr, [2, 3, 0, 1])
    f_gram = tf.transpose(f_gram, [2, 3, 0, 1])
    d_out = tf.TensorArray(tf.float32, size=g.k)

    def body(k, f_corr, d_out):
        corr = tf.signal.irfft2d(f_corr[k], fft_length=fl)
        d_new, f_delta = draw_map(d, k, corr, ac[k], model, seed)
        f_corr = f_corr - f_delta[None] * f_gram[k][:, None]
        return k + 1, f_corr, d_out.write(k, d_new)

    _, _, d_out = tf.while_loop(lambda k, *_: k < g.k, body, (tf.constant(0), f_corr, d_out),
                                parallel_iterations=1)
    return tf.transpose(d_out.stack(), [2, 3, 1, 0])
