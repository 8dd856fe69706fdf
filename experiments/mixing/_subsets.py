"""The probes' shared images: seeded random train / test subsets of a prepared data set
(seed 0, the same images in every probe)."""
import numpy as np


def subsets(prepared: str, n_train: int, n_test: int):
    """(x_train, y_train, x_test, y_test) as float32 images and integer labels."""
    prep = np.load(prepared)
    rng = np.random.default_rng(0)
    itr = rng.choice(len(prep["x_train"]), n_train, replace=False)
    ite = rng.choice(len(prep["x_test"]), n_test, replace=False)
    return (prep["x_train"][itr].astype(np.float32), prep["y_train"][itr],
            prep["x_test"][ite].astype(np.float32), prep["y_test"][ite])


def read_out(features, y_train, y_test, split: bool) -> float:
    """Test error (%) of the fixed ridge read-out (``mixing.ridge_probe``) on a (train,
    test) pair of feature arrays, flattened per image; ``split``: polarity-split first."""
    from dgdm_tf.mcmc import diagnostics as mixing

    f = [v.reshape(len(v), -1) for v in features]
    if split:
        f = [mixing.polarity_split(v) for v in f]
    return mixing.ridge_probe(f[0], y_train, f[1], y_test)


def layer1_feature_chain(x, seed: int, d1, gamma_w: float, gamma_e: float):
    """A default layer-1 feature chain on MNIST-shaped ``x`` with the learned ``d1`` held:
    (model, its compiled sweep with D and gamma_w fixed and x_next returned, the images
    as a tensor, the state after the ridge start (20 CG iterations))."""
    import tensorflow as tf

    from dgdm_tf.core.hyper import Hyper
    from dgdm_tf.core.layout import LayerGeometry
    from dgdm_tf.pretrain.kernel import make_sweep_fn
    from dgdm_tf.pretrain.layer_model import LayerModel, init_state
    from dgdm_tf.pretrain.ridge_start import RidgeStart, ridge_start

    geom = LayerGeometry(hx=28, wx=28, c=1, dh=8, dw=8, k=d1.shape[3], p=3)
    model = LayerModel(geom, Hyper(), top=False, n_images=len(x), scan="random")
    fn = make_sweep_fn(model, update_d=False, update_gamma_w=False, return_expected_pool=True)
    xt = tf.constant(x)
    st = init_state(xt, model, tf.constant([seed, 0]), gamma_e_init=gamma_e)
    st = st._replace(d=tf.constant(d1), gamma_w=tf.constant(np.float32(gamma_w)))
    st = ridge_start(st, xt, model, RidgeStart(iterations=20), tf.constant([seed, 1]),
                     fixed_gamma_w=True)
    return model, fn, xt, st


def pretrained_row(root: str, n_train: int, n_test: int):
    """A default run's `pretrained_svm` row as the probes of its top-down features read it:
    (its resolved config, the pretrained layers' npz files, their dictionaries (float32),
    the row's features.npz, images {'train', 'test'}: the first n_train / n_test of the
    row's subsets, labels alike). ``root``: the run's results/<dataset>."""
    import yaml

    resolved = yaml.safe_load(open(f"{root}/pretrained_svm/config.yaml"))
    n_layers = len(resolved["block"]["model"]["layers"])
    layers = [np.load(f"{root}/pretrain/layer{l + 1}.npz") for l in range(n_layers)]
    feats = np.load(f"{root}/pretrained_svm/features.npz")
    prep = np.load(f"{root}/data/prepared.npz")
    sizes = {"train": n_train, "test": n_test}
    x = {s: prep[f"x_{s}"][feats[f"idx_{s}"][:n]].astype(np.float32) for s, n in sizes.items()}
    y = {s: feats[f"y_{s}"][:n] for s, n in sizes.items()}
    return resolved, layers, [a["D"].astype(np.float32) for a in layers], feats, x, y


def row_chain_features(x, z, ds, run: dict, seed: int, chains: int, **kw):
    """Each of ``chains`` top-down chains' own features of images ``x`` (chains, N, F),
    under a :func:`pretrained_row`'s layers ``z`` / dictionaries ``ds`` and its resolved
    config block ``run`` (the `topdown_features` sweeps); ``kw`` to ``infer_topdown``."""
    from dgdm_tf.topdown import chain as deep_chain

    cfg = run["topdown_features"]
    return deep_chain.infer_topdown(
        x, ds, run["model"]["layers"], seed=seed, burn_in=int(cfg["burn_in"]),
        collect=int(cfg["collect"]), batch_size=int(cfg["batch_size"]),
        gamma_s=float(z[-1]["gamma_w"]), gamma_e_init=float(np.mean(z[0]["gamma_e"])),
        scan=cfg["scan"], chains=chains, keep_chains=True, progress=None, **kw)["chain_features"]


def read_chain_averages(label: str, per: dict, y: dict, feats, run: dict):
    """For m = 1 .. chains: the row's Bayesian SVM (seed 3) trained on the average of the
    first m chains' training features (``per['train']``: (chains, N, F)) and tested on the
    test images' average of the same m; prints one line per m."""
    import time

    from dgdm_tf.supervised.svm_classifier import BayesianSVM

    n_train, n_test = per["train"].shape[1], per["test"].shape[1]
    for m in range(1, len(per["train"]) + 1):
        f_train, f_test = per["train"][:m].mean(0), per["test"][:m].mean(0)
        t = time.perf_counter()
        svm = BayesianSVM(int(feats["n_classes"]), seed=3, progress=None, **run["svm"]).fit(
            f_train, y["train"])
        err = 100.0 * float(np.mean(np.asarray(svm.predict(f_test)) != y["test"]))
        tr = 100.0 * float(np.mean(np.asarray(svm.predict(f_train)) != y["train"]))
        on = float(np.mean(np.abs(f_test) > 1e-3 * np.abs(f_test).max()))
        print(f"{label}, {m} chain(s): test error {err:.2f} % (train {tr:.2f} %), units above "
              f"1e-3 of the largest {on:.3f}, on {n_train} / {n_test} images "
              f"(SVM {time.perf_counter() - t:.0f} s)", flush=True)


def topdown_start(root: str, n: int, chunk: int | None = None):
    """The top-down chain's start on the first ``n`` training images of a default run's
    `pretrained_svm` row, its pretrained layers and their gamma_e / gamma_w, the random
    scan: (the row's resolved config, the layers' npz files, their dictionaries, images,
    labels (as :func:`pretrained_row`), the model, the training images as a tensor, the
    start state, seed [0, 1]). ``chunk``: the start built that many images at a time (the
    same state, less memory)."""
    import tensorflow as tf

    from dgdm_tf.core.model import DeepModel
    from dgdm_tf.topdown.state import init_state

    resolved, z, ds, _, x, y = pretrained_row(root, n, 1)
    layers = resolved["block"]["model"]["layers"]
    model = DeepModel(x["train"].shape[1:], layers, None, scan="random").with_ks(
        [int(d.shape[-1]) for d in ds])
    st = init_state(x["train"], model, ds, [0, 1], gamma_e_init=float(np.mean(z[0]["gamma_e"])),
                    gamma_s_init=float(z[-1]["gamma_w"]), chunk=chunk)
    return resolved, z, ds, x, y, model, tf.constant(x["train"]), st
