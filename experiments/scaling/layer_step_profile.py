"""Where a layer-wise sweep's time goes at the default MNIST shapes, per step and per
compilation mode (config `pretrain.jit_compile` / `features.jit_compile`): the (z, W)
step in graph mode and under XLA, the D draw by each route (:mod:`dgdm_tf.pretrain.dictionary`;
the sweep takes the one ``route_for`` picks), the rest (theta, gamma_w, gamma_e), the
whole sweep as pretraining runs it (D drawn) and as the feature chains run it (D fixed),
and the floor (one generative pass and its adjoint over the batch). Random inputs at each
layer's shape (a sweep's cost does not depend on the values); median of 3 after a warm-up.

    PYTHONPATH=src python experiments/scaling/layer_step_profile.py [batch ...]

Default batches: 1000 (pretraining's images) and 2500 (features.batch_size).
"""

import sys

import numpy as np
import pandas as pd
import tensorflow as tf
import yaml

from dgdm_tf.bench.report import md_table
from dgdm_tf.bench.timing import median_seconds
from dgdm_tf.core.compiled import compiled
from dgdm_tf.core.hyper import Hyper
from dgdm_tf.core.layout import layer_geometries
from dgdm_tf.core.ops import full_conv, full_conv_adjoint
from dgdm_tf.pretrain import dictionary as PD, kernel as P
from dgdm_tf.pretrain.layer_model import LayerModel, init_state

# the default config's MNIST layers
LAYERS = yaml.safe_load(open("config/config.yaml"))["datasets"]["mnist"]["model"]["layers"]


def median_s(fn):
    fn()  # warm-up: trace and compile
    return median_seconds(fn, 3)


def profile(batch: int) -> list[dict]:
    rows = []
    rng = np.random.default_rng(0)
    for li, g in enumerate(layer_geometries((28, 28, 1), LAYERS)):
        x = rng.random((batch, g.hx, g.wx, g.c), dtype=np.float32)
        xt = tf.constant(x)
        model = LayerModel(g, Hyper.from_dict(None), top=(g.p == 1), n_images=batch)
        st = init_state(x, model, tf.constant([0, li], tf.int32))
        seed = tf.constant([1, 2], tf.int32)
        row = {"layer": str(li + 1), "batch": str(batch)}
        for jit in (False, True):
            zw = compiled(lambda s, sd: P.resample_zw(s, xt, model, sd, True), jit_compile=jit)
            row["zw XLA s" if jit else "zw graph s"] = median_s(lambda: zw(st, seed))
        for route in ("loop", "statistics"):  # the sweep takes PD.route_for's
            d_step = compiled(lambda s, sd: PD.resample_d(s, xt, model, sd, route))
            row[f"D {route} s"] = median_s(lambda: d_step(st, seed))
        row["D route"] = PD.route_for(g)

        def rest(s, sd):
            s = P.resample_theta(s, xt, model, sd)
            s = P.resample_gamma_w(s, xt, model, sd)
            return P.resample_gamma_e(s, xt, model, sd)

        rest_fn = compiled(rest)
        row["theta, gammas s"] = median_s(lambda: rest_fn(st, seed))
        for jit in (False, True):
            for update_d, name in ((True, "pretraining"), (False, "features")):
                fn = P.make_sweep_fn(model, update_d=update_d, update_gamma_w=update_d,
                                     jit_compile=jit, return_expected_pool=True)
                row[f"{name} sweep {'XLA' if jit else 'graph'} s"] = median_s(lambda: fn(st, xt))
        s = tf.constant(rng.normal(size=(batch, g.hs, g.ws, g.k)).astype(np.float32))
        d = tf.constant(rng.normal(size=(g.dh, g.dw, g.c, g.k)).astype(np.float32))
        floor = compiled(lambda s, d: full_conv_adjoint(full_conv(s, d), d))
        row["floor s"] = median_s(lambda: floor(s, d))
        rows.append(row)
        print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}, flush=True)
    return rows


if __name__ == "__main__":
    batches = [int(b) for b in sys.argv[1:]] or [1000, 2500]
    rows = [r for b in batches for r in profile(b)]
    print(md_table(pd.DataFrame(rows)))
