"""Simple fills of the hidden pixels from the training images (baselines.py's, with the
hyper-parameters it selected on held-out training images: ridge 1e-4, k = 20)."""
import numpy as np


def fill(kind: str, x, mask, xtr):
    """(N, H, W, C): x with its hidden pixels filled by ``kind``: 'zero', 'mean',
    'gauss' (conditional Gaussian mean, clipped to [0, 1]), 'knn' (mean of the 20 nearest
    training images on the observed half)."""
    n = len(x)
    obs = mask[0].ravel() > 0
    hid = ~obs
    xt = x.reshape(n, -1).astype(np.float64)
    X = xtr.reshape(len(xtr), -1)
    if kind == "zero":
        out = np.where(obs, xt, 0.0)
    elif kind == "mean":
        out = np.where(obs, xt, X.mean(0))
    elif kind == "gauss":
        Xd = X.astype(np.float64)
        mu = Xd.mean(0)
        cov = np.cov(Xd, rowvar=False)
        a = np.linalg.solve(cov[np.ix_(obs, obs)] + 1e-4 * np.eye(obs.sum()), (xt[:, obs] - mu[obs]).T)
        out = xt.copy()
        out[:, hid] = np.clip(mu[hid] + (cov[np.ix_(hid, obs)] @ a).T, 0, 1)
    elif kind == "knn":
        fo = X[:, obs].astype(np.float32)
        d2 = (fo ** 2).sum(1)[None] - 2 * xt[:, obs].astype(np.float32) @ fo.T
        nn = np.argpartition(d2, 20, axis=1)[:, :20]
        out = xt.copy()
        out[:, hid] = X[nn][:, :, hid].mean(1)
    else:
        raise ValueError(kind)
    return out.reshape(x.shape).astype(np.float32)
