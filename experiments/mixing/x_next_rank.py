"""Can any 2 x 2 x K2 top layer explain layer 1's output? Its held-out PCA residual.

Layer 2 (6 x 6 x K1 elements on a 7 x 7 x K1 input, pool 1) has 2 x 2 positions, so its
codes are 4 K2 numbers per image: at best a linear map of rank 4 K2. This fits PCA to
the first 80 % of pretraining's x_next (layer 1's pooled posterior means) and prints,
for k components, the relative residual ||x - P_k x|| / ||x|| on the held-out 20 %, beside
x_next's scale and density. A representation whose 800 leading components leave most of
held-out x_next unexplained is mostly per-image detail that no 800-number top layer
carries (docs/findings/x_next_rank.md). With --block: the same for the block posteriors
of the same images under the same D, gamma_w and mean gamma_e
(``dgdm_tf.pretrain.block_posterior.block_posterior_layer``). Inputs:
RESULTS/pretrain/layer1.npz (and RESULTS/data/prepared.npz for --block), made by
`snakemake --cores all results/mnist/pretrain/layer1.npz` (RESULTS = results/mnist).

    python experiments/mixing/x_next_rank.py --results results/mnist --components 50,200,800
    python experiments/mixing/x_next_rank.py --results results/mnist --components 50,200,800 --block
"""
from __future__ import annotations

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from dgdm_tf.data.arrays import load_prepared  # noqa: E402
from dgdm_tf.io import artifacts  # noqa: E402


def held_out_residuals(x: np.ndarray, components) -> dict[int, float]:
    """k -> ||t - P_k t|| / ||t|| over the last 20 % of the rows of x, P_k the projection
    on the k leading principal components of the first 80 % (None: more than they allow)."""
    x = x.reshape(len(x), -1).astype(np.float64)
    cut = int(0.8 * len(x))
    train, test = x[:cut], x[cut:]
    mean = train.mean(axis=0)
    _, _, vt = np.linalg.svd(train - mean, full_matrices=False)
    out = {}
    for k in components:
        if k > vt.shape[0]:
            out[k] = None
            continue
        fit = (test - mean) @ vt[:k].T @ vt[:k]
        out[k] = float(np.linalg.norm(test - mean - fit) / np.linalg.norm(test - mean))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--results", required=True, help="results/<dataset> of a run that pretrained layer 1")
    p.add_argument("--components", default="50,200,800", help="k, comma-separated")
    p.add_argument("--block", action="store_true", help="the block posteriors instead of x_next")
    p.add_argument("--smoke", action="store_true", help="few components, to check the probe runs")
    a = p.parse_args(argv)
    if a.smoke:
        a.components = "2,4"
    root = a.results.rstrip("/")
    layer = artifacts.read_pretrained_layer(f"{root}/pretrain/layer1.npz", x_next=True)
    if a.block:
        from dgdm_tf.pretrain.block_posterior import block_posterior_layer  # TensorFlow: only here
        images = load_prepared(f"{root}/data/prepared.npz")["x_train"][layer.image_indices]
        x = block_posterior_layer(images.astype(np.float32), layer.D, layer.layer_config["pool"],
                                  gamma_w=layer.gamma_w, gamma_e=layer.gamma_e_mean)
    else:
        x = layer.x_next
    x = np.asarray(x)
    print(f"{'block posteriors' if a.block else 'x_next'} {x.shape}: sd {x.std():.4g}, "
          f"fraction |x| > 1e-3 {np.mean(np.abs(x) > 1e-3):.3f}")
    residuals = held_out_residuals(x, [int(k) for k in a.components.split(",")])
    for k, rel in residuals.items():
        print(f"{k} components: more than the training images allow" if rel is None else
              f"{k:5d} components: held-out relative residual {rel:.3f}")
    return residuals


if __name__ == "__main__":
    main()
