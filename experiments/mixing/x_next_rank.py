"""Can any 2 x 2 x K2 top layer explain layer 1's output? Its held-out PCA residual.

Layer 2 (6 x 6 x K1 elements on a 7 x 7 x K1 input, pool 1) has 2 x 2 positions, so its
codes are 4 K2 numbers per image: at best a linear map of rank 4 K2. This fits PCA to
the first 80 % of pretraining's x_next (layer 1's pooled posterior means) and prints,
for k components, the relative residual ||x - P_k x|| / ||x|| on the held-out 20 %, beside
x_next's scale and density. A representation whose 800 leading components leave most of
held-out x_next unexplained is mostly per-image detail that no 800-number top layer
carries (docs/findings/x_next_rank.md).

    python experiments/mixing/x_next_rank.py results/mnist/pretrain/layer1.npz 50 200 800
    python experiments/mixing/x_next_rank.py LAYER1 --block PREPARED 50 200 800
(``--block``: the same for the block posteriors of the same images under the same D,
gamma_w and mean gamma_e, ``block_posterior.block_posterior_layer``.)
"""
import sys

import numpy as np

layer = np.load(sys.argv[1])
args = sys.argv[2:]
if args[0] == "--block":
    from dgdm_tf.pretrain.block_posterior import block_posterior_layer
    images = np.load(args[1])["x_train"][layer["image_indices"]].astype(np.float32)
    x = block_posterior_layer(images, layer["D"], 3, gamma_w=float(layer["gamma_w"]),
                              gamma_e=float(np.mean(layer["gamma_e"])))
    args = args[2:]
else:
    x = layer["x_next"]
x = x.reshape(len(x), -1).astype(np.float64)
print(f"x_next {x.shape}: sd {x.std():.4g}, fraction |x| > 1e-3 {np.mean(np.abs(x) > 1e-3):.3f}")
cut = int(0.8 * len(x))
train, test = x[:cut], x[cut:]
mean = train.mean(axis=0)
_, _, vt = np.linalg.svd(train - mean, full_matrices=False)
for k in (int(v) for v in args):
    if k > vt.shape[0]:
        print(f"{k} components: more than the {vt.shape[0]} training images allow")
        continue
    fit = (test - mean) @ vt[:k].T @ vt[:k]
    rel = np.linalg.norm(test - mean - fit) / np.linalg.norm(test - mean)
    print(f"{k:5d} components: held-out relative residual {rel:.3f}")
