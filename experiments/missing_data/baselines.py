"""Baselines that calibrate the missing-data target (bottom half of rule inpaint's 100
MNIST test digits hidden, PSNR on the hidden pixels, peak 1).

* zero fill, mean fill (the training set's mean image: the workflow's reference);
* conditional Gaussian: mean and covariance of the training images, the hidden half
  predicted by its conditional mean given the observed half, E[x_h | x_o] =
  mu_h + S_ho (S_oo + lam I)^-1 (x_o - mu_o) (ridge lam chosen on held-out training
  images, never on the test images), also clipped to [0, 1];
* probabilistic PCA with k components (the same conditional mean under a rank-k + noise
  covariance);
* k nearest neighbours on the observed half (mean of their hidden halves).

    python experiments/missing_data/baselines.py /tmp/defrun/results/mnist/data/prepared.npz
"""
import sys

import numpy as np

from _setup import Timer, hidden_stats, inpaint_inputs, psnr

x, mask, xtr_all = inpaint_inputs(sys.argv[1])
n_tr = len(xtr_all)
obs = mask[0].ravel() > 0
hid = ~obs
X = xtr_all.reshape(n_tr, -1).astype(np.float64)
fit, val = X[:-5000], X[-5000:]  # lam / k / neighbours chosen on `val` (training images)
xt = x.reshape(len(x), -1).astype(np.float64)
rows = []


def report(name, rec_flat, sec):
    rec = rec_flat.reshape(x.shape).astype(np.float32)
    rec = np.where(mask > 0, x, rec)
    rows.append((name, psnr(x, rec, mask)))
    print(f"{name:48s} {hidden_stats(x, rec, mask)}  {sec:6.1f} s", flush=True)


def hidden_psnr(a, b):
    return 10 * np.log10(1.0 / np.mean((a[:, hid] - b[:, hid]) ** 2))


with Timer() as t:
    pass
report("zero fill", np.zeros_like(xt), t.s)
with Timer() as t:
    mu_all = X.mean(0)
report("mean fill (60000 training images)", np.broadcast_to(mu_all, xt.shape), t.s)

# conditional Gaussian
with Timer() as t:
    mu = fit.mean(0)
    cov = np.cov(fit, rowvar=False)
    s_oo, s_ho = cov[np.ix_(obs, obs)], cov[np.ix_(hid, obs)]

    def cond_mean(data, lam):
        a = np.linalg.solve(s_oo + lam * np.eye(obs.sum()), (data[:, obs] - mu[obs]).T)
        out = data.copy()
        out[:, hid] = mu[hid] + (s_ho @ a).T
        return out

    lams = [1e-4, 1e-3, 1e-2, 3e-2, 1e-1, 3e-1]
    scores = {lam: hidden_psnr(val, np.clip(cond_mean(val, lam), 0, 1)) for lam in lams}
    lam = max(scores, key=scores.get)
    pred = cond_mean(xt, lam)
print("  conditional Gaussian, held-out training PSNR by ridge lam: "
      + ", ".join(f"{k:g}: {v:.2f}" for k, v in scores.items()))
report(f"conditional Gaussian (lam {lam:g})", pred, t.s)
report(f"conditional Gaussian (lam {lam:g}), clipped [0,1]", np.clip(pred, 0, 1), t.s)

# probabilistic PCA (Tipping & Bishop): rank-k covariance + sigma^2 I
with Timer() as t:
    evals, evecs = np.linalg.eigh(cov)
    evals, evecs = evals[::-1], evecs[:, ::-1]

    def ppca(data, k):
        s2 = evals[k:].mean()
        c = (evecs[:, :k] * (evals[:k] - s2)) @ evecs[:, :k].T + s2 * np.eye(len(mu))
        a = np.linalg.solve(c[np.ix_(obs, obs)], (data[:, obs] - mu[obs]).T)
        out = data.copy()
        out[:, hid] = mu[hid] + (c[np.ix_(hid, obs)] @ a).T
        return np.clip(out, 0, 1)

    ks = [5, 10, 20, 50, 100, 200]
    kscores = {k: hidden_psnr(val, ppca(val, k)) for k in ks}
    kbest = max(kscores, key=kscores.get)
    pred = ppca(xt, kbest)
print("  PPCA, held-out training PSNR by k: " + ", ".join(f"{k}: {v:.2f}" for k, v in kscores.items()))
report(f"PPCA k={kbest}, clipped [0,1]", pred, t.s)

# k nearest neighbours on the observed half
with Timer() as t:
    fo = fit[:, obs].astype(np.float32)
    fo2 = (fo ** 2).sum(1)

    def knn(data, k):
        q = data[:, obs].astype(np.float32)
        d2 = fo2[None] - 2 * q @ fo.T
        nn = np.argpartition(d2, k, axis=1)[:, :k]
        out = data.copy()
        out[:, hid] = fit[nn][:, :, hid].mean(1)
        return out

    kk = [1, 5, 10, 20, 50]
    nscores = {k: hidden_psnr(val[:1000], knn(val[:1000], k)) for k in kk}
    kn = max(nscores, key=nscores.get)
    pred = knn(xt, kn)
print("  kNN, held-out training PSNR (1000 images) by k: " + ", ".join(f"{k}: {v:.2f}" for k, v in nscores.items()))
report(f"kNN on the observed half, k={kn}", pred, t.s)
print(f"target: mean fill + 2 dB = {rows[1][1] + 2:.2f} dB")
