"""Do images drawn from the refined model's prior look like digits? (the mixing work: the
workflow's generated.png showed noise blobs.)

For each way of drawing (the top layer's pi from its Beta(1/K, 1 - 1/K) prior or held at
the refined chain's per-map usage; each lower block at E[Z | theta] or drawn from theta),
``dgdm_tf.core.model.sample_prior_images`` draws N images from a run's refined model
(supplement Sec. 1.1, the paper's Fig. 3). The score of an image is its largest |cosine|
with the first REFERENCE training images (the sign of the top layer's slab is symmetric,
so a digit and its negative count alike): how close the nearest real digit is. Real test
digits give the score's ceiling. With --out, writes each setting's first 64 images to
OUT/<pi>_<unpooling>.png. Inputs: RESULTS/refine/model.npz and RESULTS/data/prepared.npz,
made by `snakemake --cores all results/mnist/refine/model.npz` (RESULTS = results/mnist).

    python experiments/generation/prior_draws.py --results results/mnist --images 500 --out <out>
"""
from __future__ import annotations

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from dgdm_tf.core.model import DeepModel, sample_prior_images  # noqa: E402
from dgdm_tf.data.arrays import load_prepared  # noqa: E402
from dgdm_tf.io import artifacts  # noqa: E402
from dgdm_tf.report import model_plots  # noqa: E402


def unit_rows(images: np.ndarray) -> np.ndarray:
    """Each image flattened, centred (the slab's offset is not shape) and scaled to norm 1."""
    v = images.reshape(len(images), -1).astype(np.float64)
    v -= v.mean(axis=1, keepdims=True)
    return v / (np.linalg.norm(v, axis=1, keepdims=True) + 1e-12)


def quartiles(s: np.ndarray) -> str:
    return (f"nearest training digit |cosine| median {np.median(s):.3f} "
            f"(quartiles {np.quantile(s, 0.25):.3f}-{np.quantile(s, 0.75):.3f})")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--results", required=True, help="results/<dataset> of a run that refined its model")
    p.add_argument("--images", type=int, default=500, help="images drawn per setting")
    p.add_argument("--reference", type=int, default=10000, help="training images the draws are scored against")
    p.add_argument("--out", default=None, help="write each setting's first 64 images here")
    p.add_argument("--smoke", action="store_true", help="tiny sizes, to check the probe runs")
    a = p.parse_args(argv)
    if a.smoke:
        a.images, a.reference = 8, 40
    root = a.results.rstrip("/")
    ref = artifacts.read_refined_model(f"{root}/refine/model.npz")
    prep = load_prepared(f"{root}/data/prepared.npz")
    train = unit_rows(prep["x_train"][:a.reference])
    ds = [np.asarray(d) for d in ref.D]
    model = DeepModel(prep["x_train"].shape[1:], ref.layers, None).with_ks([d.shape[-1] for d in ds])
    score = lambda imgs: np.abs(unit_rows(imgs) @ train.T).max(axis=1)  # noqa: E731
    print(f"real test digits: {quartiles(score(prep['x_test'][:a.images]))}", flush=True)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
    scores = {}
    for pi in ("prior", "usage"):
        for unpooling in ("mean", "draw"):
            imgs = sample_prior_images(model, ds, n=a.images, seed=[0, 0], gamma_s=ref.gamma_s,
                                       theta=[np.asarray(t) for t in ref.theta], unpooling=unpooling,
                                       on_rate=None if pi == "prior" else np.asarray(ref.on_rate))
            scores[pi, unpooling] = s = score(imgs)
            print(f"pi {pi}, unpooling {unpooling}: {quartiles(s)}", flush=True)
            if a.out:
                model_plots.plot_image_grid(imgs[:64], f"{a.out}/{pi}_{unpooling}.png",
                                            f"pi {pi}, unpooling {unpooling}")
    return scores


if __name__ == "__main__":
    main()
