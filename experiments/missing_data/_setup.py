"""The missing-data experiments' shared inputs: the very test images, mask and models of
the workflow's rule ``inpaint`` (workflow/scripts/inpaint.py, default config, seed 0).

The seeds are derived as the rule derives them (``dgdm_tf.core.random.seed_for``).
"""
from __future__ import annotations

import os
import time

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from dgdm_tf.topdown import chain as deep_chain  # noqa: E402
from dgdm_tf.data import select_subset  # noqa: E402
from dgdm_tf.core.random import seed_for  # noqa: E402

LAYERS = [{"dict_size": 8, "n_dict": 50, "pool": 3}, {"dict_size": 6, "n_dict": 200, "pool": 1}]
HYPER = {"a_e": 1e-6, "b_e": 1e-6, "a_w": 1e-6, "b_w": 1e-6, "dict_prior_precision": 1.0}
SEED, DS = 0, "mnist"
BURN_IN, COLLECT, BATCH = 8, 8, 100  # config inpaint block


def inpaint_inputs(prepared: str, n_images: int = 100):
    """(x_test subset, mask, x_train) exactly as rule inpaint draws them (first
    ``n_images`` of its 100 when fewer are asked for)."""
    d = np.load(prepared)
    x_test = d["x_test"]
    idx, _ = select_subset(np.arange(len(x_test)), None, 100, seed_for(SEED, DS, "inpaint"))
    x = np.ascontiguousarray(x_test[np.asarray(idx)[:n_images]], np.float32)
    mask = deep_chain.missing_mask(x.shape, "half", seed=seed_for(SEED, DS, "inpaint_mask"))
    return x, mask, np.asarray(d["x_train"], np.float32)


def models(layer1: str, layer2: str, refined: str) -> dict:
    """{'pretrained': (dicts, gamma_s, gamma_e), 'refined': (...)} as rule inpaint builds them."""
    pre = [np.load(p) for p in (layer1, layer2)]
    out = {"pretrained": ([np.asarray(z["D"], np.float32) for z in pre], float(pre[-1]["gamma_w"]),
                          float(np.mean(pre[0]["gamma_e"])))}
    with np.load(refined) as z:
        out["refined"] = ([np.asarray(z[f"D{l + 1}"], np.float32) for l in range(int(z["n_layers"]))],
                          float(z["gamma_s"]), float(np.mean(z["gamma_e"])))
    return out


def psnr(x, rec, mask) -> float:
    return deep_chain.hidden_error(x, rec, mask)["psnr_db"]


def hidden_stats(x, rec, mask) -> str:
    """PSNR and the amplitude of the hidden half: mean of the estimate vs the truth."""
    hid = mask == 0
    return (f"PSNR {psnr(x, rec, mask):6.2f} dB  hidden mean est {rec[hid].mean():.4f} "
            f"truth {x[hid].mean():.4f}")


class Timer:
    def __enter__(self):
        self.t0 = time.time()
        return self

    def __exit__(self, *a):
        self.s = time.time() - self.t0


def oracle_args(argv):
    """The oracle probes' command line: PREPARED LAYER1 LAYER2 REFINED [model] [n]
    [burn_in] [collect] -> (x, mask, model name, n, burn_in, collect, (dicts, gamma_s,
    gamma_e))."""
    prep, l1, l2, ref = argv[1:5]
    name = argv[5] if len(argv) > 5 else "refined"
    n = int(argv[6]) if len(argv) > 6 else 50
    burn_in = int(argv[7]) if len(argv) > 7 else 8
    collect = int(argv[8]) if len(argv) > 8 else 8
    x, mask, _ = inpaint_inputs(prep, n)
    return x, mask, name, n, burn_in, collect, models(l1, l2, ref)[name]
