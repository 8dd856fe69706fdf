"""Where the error of saved estimates (chains.py's save.npz) sits: PSNR by hidden row
(the model, its average over chains, the mean image), the MSE split into the chains'
spread and the error of their mean, the amplitude by row, and how much of the estimate's
variation follows the truth (regression of truth on the estimate, hidden pixels; for
diagnosis only, it is fitted on the test images).

    python experiments/missing_data/where.py PREPARED SAVED.npz [key]
"""
import sys

import numpy as np

from _setup import inpaint_inputs

z = np.load(sys.argv[2])
key = sys.argv[3] if len(sys.argv) > 3 else "workflow"
x, mask = z["x"], z["mask"]
_, _, xtr = inpaint_inputs(sys.argv[1], len(x))
mean_img = xtr.mean(0, keepdims=True)
chains = z[key]  # M, N, H, W, C
avg = chains.mean(0)
hid = mask == 0


def p(a, b):
    return 10 * np.log10(1 / np.mean((a - b) ** 2))


print(f"{len(x)} images, {len(chains)} chains, estimator {key}")
print(f"hidden PSNR: one chain {np.mean([p(x[hid], c[hid]) for c in chains]):.2f} dB (mean over chains), "
      f"mean of chains {p(x[hid], avg[hid]):.2f}, mean image {p(x[hid], np.broadcast_to(mean_img, x.shape)[hid]):.2f}")
e_h = avg[hid]
print(f"mean of chains on the hidden pixels: {np.mean(e_h < 0):.1%} below 0, {np.mean(e_h > 1):.1%} above 1 "
      f"(range {e_h.min():.2f} .. {e_h.max():.2f}); clipped to [0, 1]: {p(x[hid], np.clip(e_h, 0, 1)):.2f} dB")
spread = np.mean([np.mean((c[hid] - avg[hid]) ** 2) for c in chains])
print(f"MSE of one chain {np.mean([np.mean((c[hid] - x[hid]) ** 2) for c in chains]):.4f} = error of the "
      f"mean of chains {np.mean((avg[hid] - x[hid]) ** 2):.4f} + spread between chains {spread:.4f}")
print("row  PSNR(one chain) PSNR(mean of chains) PSNR(mean image)  mean est  mean truth  est std  truth std")
for r in range(x.shape[1] // 2, x.shape[1]):
    xr, ar = x[:, r], avg[:, r]
    one = np.mean([p(xr, c[:, r]) for c in chains])
    print(f"{r:3d} {one:12.2f} {p(xr, ar):18.2f} {p(xr, np.broadcast_to(mean_img, x.shape)[:, r]):16.2f}"
          f" {ar.mean():10.4f} {xr.mean():10.4f} {ar.std():9.4f} {xr.std():9.4f}")
e, t, mu = avg[hid], x[hid], np.broadcast_to(mean_img, x.shape)[hid]
a = np.vstack([e - mu, np.ones_like(e)]).T
coef, *_ = np.linalg.lstsq(a, t - mu, rcond=None)
blend = mu + a @ coef
print(f"truth - mean ~ {coef[0]:.3f} (estimate - mean) + {coef[1]:.4f}: PSNR {p(t, blend):.2f} dB "
      f"(corr(est - mean, truth - mean) = {np.corrcoef(e - mu, t - mu)[0, 1]:.3f})")
