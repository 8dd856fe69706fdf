"""Labelled images drawn from a known two-layer model, at a chosen layer-1 density and
noise level: data whose generating model is known, to test whether the chains find it.

The model is the workflow's (:class:`dgdm_tf.core.model.DeepModel`, drawn through
:func:`dgdm_tf.core.model.generate`): D[1] (d1 x d1 x 1 x K1) and D[2] (d2 x d2 x K1 x
K2) from their prior N(0, I); the top layer S[2] (h x w x K2, pool 1) holds the class
structure; each layer-1 block is on with probability ``on_fraction``, at a position
drawn uniformly among its p^2, and off otherwise (the model's Mult(1, theta) with theta
= (on/p^2, ..., on/p^2, 1 - on)).

Classes: class c switches on its own ``maps_per_class`` top maps (disjoint sets, maps c
m ... c m + m - 1), each unit of them on with probability ``unit_on``; the other maps
are off. The slab weights are drawn N(1, ``weight_sd``^2), not the prior's N(0, 1 /
gamma_s): a sign-symmetric slab gives every class a mean image of zero, which no linear
read-out of any feature separates, where a digit's ink is positive. Each clean image
is then scaled to a pixel range (max - min) of 1, as MNIST's [0, 1] (g is linear in
S[2], so the scaled image is the model's image of the scaled top layer, which is what
``s_top`` holds), and noise N(0, ``noise``^2) is added: noise sd ``noise`` of the
image's range.

Density: ``on_fraction`` from :func:`on_fraction`, either the fraction of blocks on
("f0.97": MNIST's pretrained layer 1 had 97 % of its blocks on) or the mean number of
atoms covering a pixel ("c1.5": each pixel under 1.5 atoms on average, a sparse code).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from dgdm_tf.core.model import DeepModel, generate


@dataclasses.dataclass(frozen=True)
class Shapes:
    """The model's shapes (MNIST's by default: 28 x 28 images, 8 x 8 atoms pooled 3 x 3,
    then 6 x 6 atoms to a 2 x 2 top layer)."""
    k1: int = 12
    k2: int = 20
    image: int = 28
    d1: int = 8
    pool: int = 3
    d2: int = 6

    def layers(self, k1: int | None = None, k2: int | None = None) -> list[dict]:
        return [{"dict_size": self.d1, "n_dict": int(k1 or self.k1), "pool": self.pool},
                {"dict_size": self.d2, "n_dict": int(k2 or self.k2), "pool": 1}]

    def model(self) -> DeepModel:
        return DeepModel((self.image, self.image, 1), self.layers())


def coverage_per_fraction(shapes: Shapes) -> float:
    """Mean atoms covering a pixel when every layer-1 block is on (edge atoms counted in
    full; they stay inside the image)."""
    g = shapes.model().geoms[0]
    return g.k * g.nbh * g.nbw * g.dh * g.dw / float(shapes.image * shapes.image)


def on_fraction(density: str, shapes: Shapes) -> float:
    """The fraction of layer-1 blocks on for a density spec: "f<fraction>" as it is,
    "c<atoms per pixel>" through :func:`coverage_per_fraction`."""
    kind, value = density[:1], float(density[1:])
    if kind == "f":
        frac = value
    elif kind == "c":
        frac = value / coverage_per_fraction(shapes)
    else:
        raise ValueError(f"density {density!r}: 'f<fraction of blocks on>' or 'c<atoms per pixel>'")
    if not 0.0 < frac <= 1.0:
        raise ValueError(f"density {density!r} asks for {frac:.3g} of the blocks on: not in (0, 1]")
    return frac


def draw(shapes: Shapes, *, on: float, noise: float, n: int, n_classes: int = 10,
         maps_per_class: int = 2, unit_on: float = 0.75, weight_sd: float = 0.5,
         seed: int = 0) -> dict:
    """``n`` labelled images (module docstring), classes balanced in turn then shuffled.

    Returns {'x' (n, H, W, 1) float32, 'y' (n,), 'clean', 'd' [D1, D2], 's_top' (n, h,
    w, K2), 'z' (n, nbh, nbw, K1) block states (p^2 = off), 'noise_rel' ||E|| / ||X||,
    'on' the fraction of layer-1 blocks on, 'coverage' mean atoms per pixel}."""
    if n_classes * maps_per_class > shapes.k2:
        raise ValueError(f"{n_classes} classes of {maps_per_class} maps need K2 >= "
                         f"{n_classes * maps_per_class}, got {shapes.k2}")
    model = shapes.model()
    g1, gt = model.geoms[0], model.top
    rng = np.random.default_rng(seed)
    d = [rng.normal(size=(g.dh, g.dw, g.c, g.k)).astype(np.float32) for g in model.geoms]
    y = rng.permutation(np.arange(n) % n_classes)
    s = np.zeros((n, gt.hs, gt.ws, gt.k), np.float32)
    for c in range(n_classes):
        rows = np.flatnonzero(y == c)
        maps = slice(c * maps_per_class, (c + 1) * maps_per_class)
        shape = (len(rows), gt.hs, gt.ws, maps_per_class)
        s[rows, :, :, maps] = (rng.random(shape) < unit_on) * rng.normal(1.0, weight_sd, shape)
    # an image with every unit of its class off: one unit on, so each image has its class
    blank = ~s.reshape(n, -1).any(1)
    for i in np.flatnonzero(blank):
        s[i, rng.integers(gt.hs), rng.integers(gt.ws), y[i] * maps_per_class] = rng.normal(1.0, weight_sd)
    p2 = g1.p * g1.p
    z = np.where(rng.random((n, g1.nbh, g1.nbw, g1.k)) < on,
                 rng.integers(0, p2, (n, g1.nbh, g1.nbw, g1.k)), p2).astype(np.int32)
    clean = np.asarray(generate(tf.constant(s), model, [tf.constant(v) for v in d], [tf.constant(z)]))
    rng_px = clean.reshape(n, -1).max(1) - clean.reshape(n, -1).min(1)
    scale = 1.0 / np.maximum(rng_px, 1e-12)
    clean = clean * scale[:, None, None, None]
    s = s * scale[:, None, None, None]
    e = noise * rng.normal(size=clean.shape)
    x = (clean + e).astype(np.float32)
    return {"x": x, "y": y.astype(np.int64), "clean": clean.astype(np.float32), "d": d,
            "s_top": s.astype(np.float32), "z": z, "noise_rel": float(np.linalg.norm(e) / np.linalg.norm(x)),
            "on": float(np.mean(z < p2)), "coverage": float(np.mean(z < p2)) * coverage_per_fraction(shapes)}
