"""The paper's CNN baseline, "CNN, same shape" (Sec. 4, Caltech; Tables 1-6).

"Three convolutional layers [...] the same as our model [...] two fully-connected layers
of 1024 neurons each [...] trained with dropout", then a softmax. Here the convolutional
part is built from the same config keys as the deep model of a dataset
(``datasets.<ds>.model.layers``): for each layer a ``dict_size x dict_size`` convolution
with ``n_dict`` filters (VALID padding, ReLU), then ``pool x pool`` max-pooling with
stride ``pool`` and SAME padding (partial edge blocks are pooled, as the model's
``ceil(H / p)`` pooled maps; no pooling where ``pool == 1``); then flatten, two
fully-connected ReLU layers of ``fc_units`` with dropout, and a softmax. Trained with
Adam on the cross-entropy. ``n_dict`` is the number of dictionary elements the model
*starts* pretraining with; pruning may keep fewer (MNIST: 50, 200 -> the paper's 39,
117), so the CNN can be a little wider than the pruned model.

Determinism: :func:`train_cnn` seeds Python, NumPy and TensorFlow from ``seed``
(``keras.utils.set_random_seed``: weight initialisation, dropout masks), shuffles the
training set every epoch with its own NumPy generator seeded from ``seed``, and (with
``deterministic=True``, the default) turns on TensorFlow's op determinism for the
duration of the call (and restores the previous setting afterwards). On one machine,
with the same TensorFlow build and thread count, the same seed then gives the same
weights, losses, predictions and test errors. Wall times and throughputs are
measurements and differ from run to run. Across machines or thread counts the
floating-point reduction order can differ, and so can the results in the last digits.
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

import numpy as np
import tensorflow as tf

from dgdm_tf.core.options import options

#: keys of one layer of ``datasets.<ds>.model.layers`` that shape the CNN
LAYER_KEYS = ("dict_size", "n_dict", "pool")


def conv_shapes(image_shape: Sequence[int], layers: Sequence[dict]) -> list[dict]:
    """Spatial shapes through the convolutional part: one dict per layer with the
    input, convolution output and pooled output sides. Raises ValueError, naming the
    layer, when a filter does not fit its input (VALID convolution)."""
    h, w = int(image_shape[0]), int(image_shape[1])
    out = []
    for i, layer in enumerate(layers):
        missing = [k for k in LAYER_KEYS if k not in layer]
        if missing:
            raise ValueError(f"CNN layer {i}: missing key(s) {missing} "
                             f"(each layer needs {', '.join(LAYER_KEYS)})")
        d, k, p = int(layer["dict_size"]), int(layer["n_dict"]), int(layer["pool"])
        if min(d, k, p) < 1:
            raise ValueError(f"CNN layer {i}: dict_size, n_dict and pool must be >= 1, "
                             f"got {layer}")
        if d > min(h, w):
            raise ValueError(
                f"CNN layer {i}: a {d}x{d} filter does not fit its {h}x{w} input (VALID "
                f"convolution); image shape {tuple(image_shape)}, layers {list(layers)}. "
                "Use smaller dict_size or pool in datasets.<ds>.model.layers.")
        ch, cw = h - d + 1, w - d + 1
        ph, pw = -(-ch // p), -(-cw // p)
        out.append({"layer": i + 1, "input": (h, w), "conv": (ch, cw, k), "pooled": (ph, pw, k)})
        h, w = ph, pw
    return out


def build_cnn(image_shape: Sequence[int], layers: Sequence[dict], n_classes: int, *,
              fc_units: int = 1024, dropout: float = 0.5,
              learning_rate: float = 1e-3) -> tf.keras.Model:
    """The compiled Keras model (Adam, sparse categorical cross-entropy, softmax output).
    Seed the random state (``keras.utils.set_random_seed``) before calling it for
    reproducible initial weights."""
    if n_classes < 2:
        raise ValueError(f"CNN: need at least 2 classes, got n_classes={n_classes}")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"CNN: dropout must be in [0, 1), got {dropout}")
    conv_shapes(image_shape, layers)  # raises a clear error if the shapes do not fit
    kl = tf.keras.layers
    inp = tf.keras.Input(shape=tuple(int(s) for s in image_shape), name="image")
    h = inp
    for i, layer in enumerate(layers, start=1):
        d, p = int(layer["dict_size"]), int(layer["pool"])
        h = kl.Conv2D(int(layer["n_dict"]), d, padding="valid", activation="relu",
                      name=f"conv{i}")(h)
        if p > 1:
            h = kl.MaxPooling2D(pool_size=p, strides=p, padding="same", name=f"pool{i}")(h)
    h = kl.Flatten(name="flatten")(h)
    for j in (1, 2):
        h = kl.Dense(int(fc_units), activation="relu", name=f"fc{j}")(h)
        h = kl.Dropout(float(dropout), name=f"dropout{j}")(h)
    out = kl.Dense(int(n_classes), activation="softmax", name="softmax")(h)
    model = tf.keras.Model(inp, out, name="cnn_same_shape")
    model.compile(optimizer=tf.keras.optimizers.Adam(learning_rate=float(learning_rate)),
                  loss="sparse_categorical_crossentropy")
    return model


def _op_determinism(enable: bool | None) -> bool:
    """Turn TensorFlow's op determinism on / off (None: leave it); returns whether it
    was on before. The public API can only turn it on, so the setting is restored
    through ``tensorflow.python.framework.config`` where that module has it."""
    from tensorflow.python.framework import config as tf_config

    before = bool(getattr(tf_config, "is_op_determinism_enabled", lambda: False)())
    if enable is True:
        tf.config.experimental.enable_op_determinism()
    elif enable is False and hasattr(tf_config, "disable_op_determinism"):
        tf_config.disable_op_determinism()
    return before


def _train_epoch(model: tf.keras.Model, x: np.ndarray, y: np.ndarray, order: np.ndarray,
                 batch_size: int) -> float:
    """One pass over ``x[order]`` in mini-batches (the last one may be smaller); the
    mean training loss, weighted by batch size. ``train_on_batch`` runs the compiled
    Keras step on each array directly (no tf.data pipeline)."""
    total = 0.0
    for i in range(0, len(order), batch_size):
        idx = order[i:i + batch_size]
        loss = model.train_on_batch(x[idx], y[idx])
        total += float(np.asarray(loss).reshape(-1)[0]) * len(idx)
    return total / len(order)


def _predict(model: tf.keras.Model, x: np.ndarray, batch_size: int) -> np.ndarray:
    """Class probabilities (dropout off), batch after batch."""
    return np.concatenate([np.asarray(model.predict_on_batch(x[i:i + batch_size]))
                           for i in range(0, len(x), batch_size)])


def error_pct(probs: np.ndarray, y: np.ndarray) -> float:
    return 100.0 * float(np.mean(np.argmax(probs, axis=1) != np.asarray(y)))


def _check_arrays(x_train, y_train, x_test, y_test, n_classes: int) -> None:
    for name, x, y in (("train", x_train, y_train), ("test", x_test, y_test)):
        if x.ndim != 4:
            raise ValueError(f"CNN: x_{name} must be (N, H, W, C), got shape {x.shape}")
        if len(x) != len(y) or len(x) == 0:
            raise ValueError(f"CNN: x_{name} has {len(x)} images but y_{name} "
                             f"{len(y)} labels (need the same, > 0)")
        if y.min() < 0 or y.max() >= n_classes:
            raise ValueError(f"CNN: y_{name} must lie in [0, {n_classes}), "
                             f"got [{y.min()}, {y.max()}]")
    if x_train.shape[1:] != x_test.shape[1:]:
        raise ValueError(f"CNN: train images {x_train.shape[1:]} and test images "
                         f"{x_test.shape[1:]} differ in shape")


@options("dataset.cnn", library_only={
    "deterministic": "TensorFlow's op determinism for the call (then restored)",
    "eval_batch_size": "images a batch when scoring (memory, not the result)"})
class CnnOptions:
    """Validated: ``epochs`` and ``batch_size`` at least 1."""
    epochs: int = 25
    batch_size: int = 128
    fc_units: int = 1024
    dropout: float = 0.5
    learning_rate: float = 0.001
    deterministic: bool = True
    eval_batch_size: int = 1000

    def __post_init__(self):
        if self.epochs < 1 or self.batch_size < 1:
            raise ValueError(f"CNN: epochs and batch_size must be >= 1, got {self.epochs}, {self.batch_size}")


def train_cnn(train: tuple, test: tuple, options: CnnOptions, *, layers: Sequence[dict],
              n_classes: int, seed: int = 0, progress: Callable[[str], None] = print) -> dict:
    """Train the CNN on ``train`` = (x, y) for ``options.epochs`` and score ``test`` = (x, y)
    after every epoch.

    Returns a dict:

    * ``test_error_pct``, ``train_error_pct``: after the last epoch (dropout off);
      ``best_test_error_pct`` and ``best_epoch`` over the epochs;
    * ``curve``: one dict per epoch: ``epoch``, ``epoch_seconds`` (training only),
      ``seconds_cumulative`` (training time up to the end of this epoch, the per-epoch
      test scoring left out), ``train_loss`` (mean over the epoch's batches, dropout
      on), ``test_error_pct``, ``eval_seconds``;
    * ``train_images_per_s``: training throughput, the median over epochs after the
      first (which includes tracing), or the first when ``epochs == 1``;
      ``inference_images_per_s``: the same for scoring the test set;
    * ``train_seconds`` (sum of the epochs), ``seconds`` (the whole call),
      ``peak_rss_mb`` (this process so far), ``n_params``, ``conv_shapes``,
      ``test_predictions`` (int64, ``(n_test,)``), ``deterministic``.

    The test set is scored after each epoch only to draw the time-to-accuracy curve;
    nothing is selected on it (the final model is the last epoch's).
    """
    from dgdm_tf.core.memory import peak_rss_mb

    t_start = time.perf_counter()
    o = options
    epochs, batch_size, deterministic, eval_batch_size = (o.epochs, o.batch_size, o.deterministic,
                                                          o.eval_batch_size)
    fc_units, dropout, learning_rate = o.fc_units, o.dropout, o.learning_rate
    (x_train, y_train), (x_test, y_test) = train, test
    x_train = np.asarray(x_train, dtype=np.float32)
    x_test = np.asarray(x_test, dtype=np.float32)
    y_train = np.asarray(y_train, dtype=np.int64)
    y_test = np.asarray(y_test, dtype=np.int64)
    _check_arrays(x_train, y_train, x_test, y_test, n_classes)

    was_deterministic = _op_determinism(None)
    if deterministic and not was_deterministic:
        _op_determinism(True)
    try:
        tf.keras.utils.set_random_seed(int(seed))
        model = build_cnn(x_train.shape[1:], layers, n_classes, fc_units=fc_units,
                          dropout=dropout, learning_rate=learning_rate)
        shapes = conv_shapes(x_train.shape[1:], layers)
        progress(f"CNN: {len(layers)} conv layer(s) {[s['pooled'] for s in shapes]} "
                 f"(pooled outputs), 2 x FC {fc_units}, dropout {dropout}, "
                 f"{model.count_params()} parameters; {len(x_train)} train / "
                 f"{len(x_test)} test images, {epochs} epoch(s) of batch {batch_size}")
        rng = np.random.default_rng(int(seed))
        curve: list[dict] = []
        cum = 0.0
        best = (np.inf, 0)
        test_probs = None
        for epoch in range(1, epochs + 1):
            perm = rng.permutation(len(x_train))
            t0 = time.perf_counter()
            loss = _train_epoch(model, x_train, y_train, perm, batch_size)
            ep_s = time.perf_counter() - t0
            cum += ep_s
            t0 = time.perf_counter()
            test_probs = _predict(model, x_test, eval_batch_size)
            ev_s = time.perf_counter() - t0
            err = error_pct(test_probs, y_test)
            if err < best[0]:
                best = (err, epoch)
            curve.append({"epoch": epoch, "epoch_seconds": ep_s, "seconds_cumulative": cum,
                          "train_loss": loss, "test_error_pct": err, "eval_seconds": ev_s})
            progress(f"CNN epoch {epoch}/{epochs}: loss {loss:.4f}, test error {err:.2f}%, "
                     f"{ep_s:.1f} s training ({cum:.1f} s so far), {ev_s:.1f} s scoring")
        train_err = error_pct(_predict(model, x_train, eval_batch_size), y_train)
    finally:
        if deterministic and not was_deterministic:
            _op_determinism(False)

    steady = curve[1:] or curve
    train_ips = float(np.median([len(x_train) / c["epoch_seconds"] for c in steady]))
    infer_ips = float(np.median([len(x_test) / c["eval_seconds"] for c in steady]))
    return {
        "test_error_pct": curve[-1]["test_error_pct"],
        "train_error_pct": train_err,
        "best_test_error_pct": float(best[0]),
        "best_epoch": int(best[1]),
        "curve": curve,
        "train_images_per_s": train_ips,
        "inference_images_per_s": infer_ips,
        "train_seconds": cum,
        "seconds": time.perf_counter() - t_start,
        "peak_rss_mb": peak_rss_mb(),
        "n_params": int(model.count_params()),
        "conv_shapes": shapes,
        "test_predictions": np.argmax(test_probs, axis=1).astype(np.int64),
        "deterministic": bool(deterministic),
    }
