"""Do images drawn from the refined model's prior look like digits? (issue 17: the
workflow's generated.png showed noise blobs.)

For each way of drawing (the top layer's pi from its Beta(1/K, 1 - 1/K) prior or held at
the refined chain's per-map usage; each lower block at E[Z | theta] or drawn from theta),
``dgdm_tf.core.model.sample_prior_images`` draws n images from a default run's refined
model. The score of an image is its largest |cosine| with the first 10000 training images
(the sign of the top layer's slab is symmetric, so a digit and its negative count alike):
how close the nearest real digit is. Real test digits give the score's ceiling. Writes
each setting's first 64 images to OUT/<pi>_<unpooling>.png.

    python experiments/generation/prior_draws.py results/mnist 500 /tmp/gen
"""
import os
import sys

import numpy as np
import yaml

from dgdm_tf.core.model import DeepModel, sample_prior_images
from dgdm_tf.io import artifacts
from dgdm_tf.report import model_plots

root, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
os.makedirs(out, exist_ok=True)
ref = artifacts.read_refined_model(f"{root}/refine/model.npz")
layers = yaml.safe_load(open(f"{root}/pretrained_svm/config.yaml"))["block"]["model"]["layers"]
prep = np.load(f"{root}/data/prepared.npz")
train = prep["x_train"][:10000].reshape(10000, -1).astype(np.float64)
train /= np.linalg.norm(train, axis=1, keepdims=True) + 1e-12
ds = [np.asarray(d) for d in ref.D]
model = DeepModel(prep["x_train"].shape[1:], layers, None).with_ks([d.shape[-1] for d in ds])


def score(imgs):
    v = imgs.reshape(len(imgs), -1).astype(np.float64)
    v -= v.mean(axis=1, keepdims=True)  # the slab's offset is not shape
    v /= np.linalg.norm(v, axis=1, keepdims=True) + 1e-12
    t = train - train.mean(axis=1, keepdims=True)
    t /= np.linalg.norm(t, axis=1, keepdims=True) + 1e-12
    return np.abs(v @ t.T).max(axis=1)


real = score(prep["x_test"][:n])
print(f"real test digits: nearest training digit |cosine| median {np.median(real):.3f} "
      f"(quartiles {np.quantile(real, 0.25):.3f}-{np.quantile(real, 0.75):.3f})", flush=True)
for pi in ("prior", "usage"):
    for unpooling in ("mean", "draw"):
        imgs = sample_prior_images(model, ds, n=n, seed=[0, 0], gamma_s=ref.gamma_s,
                                   theta=[np.asarray(t) for t in ref.theta], unpooling=unpooling,
                                   on_rate=None if pi == "prior" else np.asarray(ref.on_rate))
        s = score(imgs)
        print(f"pi {pi}, unpooling {unpooling}: nearest training digit |cosine| median "
              f"{np.median(s):.3f} (quartiles {np.quantile(s, 0.25):.3f}-{np.quantile(s, 0.75):.3f})",
              flush=True)
        model_plots.plot_image_grid(imgs[:64], f"{out}/{pi}_{unpooling}.png",
                                    f"pi {pi}, unpooling {unpooling}")
