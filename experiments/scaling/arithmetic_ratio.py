"""Multiply-adds of one exact top-down sweep per image against the floor's, at
config/paper.yaml's MNIST and CIFAR-10 shapes: how far issue 18's "within 5x of the floor"
is from the exact conditionals' arithmetic, before any kernel runs.

    PYTHONPATH=src python experiments/scaling/arithmetic_ratio.py

The floor: one generative pass of every layer and its adjoint
(dgdm_tf.bench.projection.floor_macs). Three or more layers: the windowed passes' count
(dgdm_tf.bench.mcem.sweep_cost). Two layers (MNIST), the top units' step: each unit's image
through layer 1's unpooling, counted sparsely (each of its dh dw K0 values placed at one
position of its block and spread by an 8 x 8 atom: no zeros, no block outside the
footprint), which is what the exact conditional needs at least once a sweep (its norm
changes with layer 1's unpooling), and as the sampler builds it (each image's 49 blocks'
pixel frames, (frame x K0) @ (K0 x units)).
"""

import sys

import yaml

sys.path.insert(0, "src")
from dgdm_tf.bench.mcem import sweep_cost  # noqa: E402
from dgdm_tf.bench.projection import floor_macs  # noqa: E402
from dgdm_tf.core.model import DeepModel  # noqa: E402


def main() -> None:
    cfg = yaml.safe_load(open("config/paper.yaml"))
    for name in ("mnist", "cifar10"):
        ds = cfg["datasets"][name]
        model = DeepModel(tuple(ds["image_shape"]), ds["model"]["layers"])
        floor = floor_macs(model, 1)
        print(f"{name}: floor {floor / 1e6:.1f} M multiply-adds an image")
        if model.n_layers == 2:
            g0, g1 = model.geoms
            units = model.top.hs * model.top.ws * g1.k
            sparse = units * g1.dh * g1.dw * g1.c * g0.dh * g0.dw * g0.c
            frame = g0.p - 1 + g0.dh
            dense = g0.nbh * g0.nbw * frame * frame * g0.c * g0.k * units
            for what, m in (("sparse, the least", sparse), ("as built (pixel frames)", dense)):
                print(f"  top units' images, {what}: {m / 1e6:.0f} M = {m / floor:.1f}x the floor")
        else:
            total = 0
            for r in sweep_cost(model):
                total += r["macs"]
                print(f"  layer {r['layer']} {r['what']}: {r['macs'] / 1e9:.2f} G = {r['macs'] / floor:.0f}x")
            print(f"  one sweep above layer 1: {total / 1e9:.2f} G = {total / floor:.0f}x the floor")


if __name__ == "__main__":
    main()
