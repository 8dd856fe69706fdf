"""A small known model and its data for the stochastic MCEM tests."""

import numpy as np
import tensorflow as tf

from dgdm_tf.core.model import DeepModel, generate

HYPER = {"a_e": 1.0, "b_e": 1.0, "a_w": 1.0, "b_w": 1.0, "dict_prior_precision": 1.0}

LAYERS = [{"dict_size": 3, "n_dict": 2, "pool": 2}, {"dict_size": 2, "n_dict": 2, "pool": 1}]


def known_model_data(n, seed=0, noise=0.05):
    model = DeepModel((10, 10, 1), LAYERS, HYPER)
    rng = np.random.default_rng(seed)
    d = [rng.normal(size=(g.dh, g.dw, g.c, g.k)).astype(np.float32) for g in model.geoms]
    d = [v / np.linalg.norm(v.reshape(-1, v.shape[-1]), axis=0) for v in d]
    gt, g0 = model.top, model.geoms[0]
    s = (rng.random((n, gt.hs, gt.ws, gt.k)) < 0.5) * rng.normal(size=(n, gt.hs, gt.ws, gt.k)) * 2
    z = rng.integers(0, g0.n_states - 1, size=(n, g0.nbh, g0.nbw, g0.k)).astype(np.int32)
    x = np.asarray(generate(tf.constant(s, tf.float32), model, [tf.constant(v) for v in d],
                            [tf.constant(z)]))
    return model, d, (x + noise * rng.normal(size=x.shape)).astype(np.float32)


def labelled(n, seed):
    """Images of the tiny model; the label says which layer-2 element is the stronger."""
    model, d_true, x = known_model_data(n, seed=seed)
    proj = np.einsum("nhwc,hwck->nk", x[:, :3, :3, :], d_true[0][:, :, :, :])
    return d_true, x, (proj[:, 0] > proj[:, 1]).astype(np.int64)


SVM = {"hyper": {"gamma": 1.0, "kappa": 0.5, "bias_var": 100.0}, "start": 1, "step_power": 0.7}

#: the supervised MCEM run of the resumption tests (the random scan; the SVM from iteration 1)
MCEM = dict(iterations=5, batch_size=16, sweeps=2, lr=0.02, checkpoint_every=2, scan="random",
            svm=SVM["hyper"], supervise_from=SVM["start"], beta_step_power=SVM["step_power"])
#: model averaging from it
AVERAGING = dict(keep=2, thin=2, sweeps=1, gamma_s=1.0, svm=SVM["hyper"], n_leapfrog=3,
                 checkpoint_every=1, scan="random")
