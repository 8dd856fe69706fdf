"""Does a noise floor at layer 1 let the top layer hold what layer 1 passes up? (issue 17)

Layer 1's noise precision climbs without settling on MNIST (exactly-zero background,
overcomplete D: ``gamma_e_drift.py``), and its posterior means end up carrying each
image's own detail, which the 2 x 2 x 200 top layer cannot explain (``x_next_rank.py``).
Here layer 1's flat Gamma(1e-6, 1e-6) prior on gamma_e is replaced by an informative one,
Gamma(a_e, b_e) with mean ``g0`` and ``strength`` times the pixels' own weight
(a_e = strength * H W C / 2, b_e = a_e / g0): the conditional mean is then held near g0,
i.e. a noise standard deviation near 1 / sqrt(g0). Layer 2 keeps the flat prior.

Per variant, the same pipeline as ``sampler_ablation.py`` (the default sampler: random
scan, ridge start): pretrain layer 1 on the default config's 1000 pretraining images
(60 + 20 sweeps), layer 2 on its x_next, then infer both layers' features of seeded
train / test subsets (5 + 5 sweeps) and read them out with the fixed ridge probe.
Printed: layer 1's gamma_e, relative residual, blocks on, x_next activity-ink and the
held-out PCA residual of x_next (fitted on 800 images, applied to the other 200);
layer-1 features' split probe beside the soft-threshold encoder on the same D; layer 2's
relative residual and blocks on; the top layer's probe.

    python experiments/mixing/noise_prior.py PREPARED LAYER1 1000 500 flat 100:10 1000:10
(LAYER1: any pretrained layer-1 npz of the same data; only its image_indices are used.
Optional env THREADS: TensorFlow's intra-op threads, to run two variants side by side.)
"""
import os
import sys
import time

import numpy as np
import tensorflow as tf

if os.environ.get("THREADS"):
    tf.config.threading.set_intra_op_parallelism_threads(int(os.environ["THREADS"]))
    tf.config.threading.set_inter_op_parallelism_threads(1)

from dgdm_tf.pretrain import chain  # noqa: E402

from dgdm_tf.baselines import encoder

from dgdm_tf.mcmc import diagnostics as mixing
from dgdm_tf.pretrain.features import infer_layer  # noqa: E402
from _subsets import subsets  # noqa: E402

prep = np.load(sys.argv[1])
idx = np.load(sys.argv[2])["image_indices"]
xpre = prep["x_train"][idx].astype(np.float32)
ntr, nte = int(sys.argv[3]), int(sys.argv[4])
xtr, ytr, xte, yte = subsets(sys.argv[1], ntr, nte)
n_pixels = int(np.prod(xpre.shape[1:]))


def probe(f_tr, f_te, split):
    if split:
        f_tr, f_te = mixing.polarity_split(f_tr), mixing.polarity_split(f_te)
    return mixing.ridge_probe(f_tr, ytr, f_te, yte)


def pca_residual(f, n_fit, comps):
    """Relative residual of held-out rows after projection on the top PCA components."""
    f = f.reshape(len(f), -1)
    mu = f[:n_fit].mean(0)
    _, _, vt = np.linalg.svd(f[:n_fit] - mu, full_matrices=False)
    held = f[n_fit:] - mu
    out = []
    for c in comps:
        r = held - (held @ vt[:c].T) @ vt[:c]
        out.append(float(np.sqrt(np.sum(r ** 2) / np.sum(held ** 2))))
    return out


for variant in sys.argv[5:]:
    if variant == "flat":
        hyper1 = None
    else:
        g0, strength = (float(v) for v in variant.split(":"))
        a_e = strength * n_pixels / 2
        hyper1 = dict(a_e=a_e, b_e=a_e / g0)
    t0 = time.time()
    pre = dict(burn_in=60, collect=20, prune_min_usage=0.002, progress=None)
    l1 = chain.run_pretrain_layer(xpre, dict_size=8, n_dict=50, pool=3, seed=1, hyper=hyper1, **pre)
    tr1 = l1["trace"][-1]
    l2 = chain.run_pretrain_layer(l1["x_next"], dict_size=6, n_dict=200, pool=1, seed=2, **pre)
    tr2 = l2["trace"][-1]
    pca = pca_residual(l1["x_next"], 800, (50, 200, 800))
    print(f"[{variant}] pretraining layer 1: gamma_e {np.mean(l1['gamma_e']):.0f}, rel. residual "
          f"{tr1['rel_residual']:.3f}, blocks on {tr1['active_frac']:.3f}, K {l1['D'].shape[-1]}, "
          f"x_next activity-ink {mixing.activity_ink_correlation(l1['x_next'], xpre, 8, 3):.3f}, "
          f"held-out PCA residual (50/200/800) {pca[0]:.3f}/{pca[1]:.3f}/{pca[2]:.3f}; layer 2: "
          f"gamma_e {np.mean(l2['gamma_e']):.0f}, rel. residual {tr2['rel_residual']:.3f}, blocks on "
          f"{tr2['active_frac']:.3f}, K {l2['D'].shape[-1]} ({time.time() - t0:.0f} s)", flush=True)
    kw = dict(burn_in=5, collect=5, batch_size=500, progress=None)
    f1 = [infer_layer(x, l1["D"], 3, gamma_w=float(l1["gamma_w"]), hyper=hyper1,
                      gamma_e_init=float(np.mean(l1["gamma_e"])), seed=s, **kw)
          for x, s in ((xtr, 11), (xte, 12))]
    ref = [encoder.encode(x, l1["D"], 3) for x in (xtr, xte)]
    print(f"[{variant}] layer 1 features: activity-ink "
          f"{mixing.activity_ink_correlation(f1[0], xtr, 8, 3):.3f}, signed probe "
          f"{probe(*f1, False):.2f}%, split {probe(*f1, True):.2f}% (soft-threshold encoder, same "
          f"D: {probe(*ref, False):.2f}%) ({time.time() - t0:.0f} s)", flush=True)
    f2 = [infer_layer(f, l2["D"], 1, gamma_w=float(l2["gamma_w"]),
                      gamma_e_init=float(np.mean(l2["gamma_e"])), seed=s, layer_index=1, **kw)
          for f, s in zip(f1, (21, 22))]
    print(f"[{variant}] top layer: nonzero {np.mean(np.abs(f2[0]) > 1e-3):.3f}, signed probe "
          f"{probe(*f2, False):.2f}%, split {probe(*f2, True):.2f}% ({time.time() - t0:.0f} s)",
          flush=True)
