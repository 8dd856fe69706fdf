"""Does the refinement chain settle on the tests' tiny model (tests/_topdown_model.py)?
Started from the true dictionaries; prints run_refine's settlement verdict and a few
sweeps of the traced scalars.

    python experiments/settle/tiny_refine.py 6 200 400
"""

import sys
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[2] / p) for p in ("src", "tests")]

from _topdown_model import LAYERS, draw  # noqa: E402

from dgdm_tf.topdown import refine  # noqa: E402

n, burn_in, collect = (int(a) for a in sys.argv[1:4])
model, d_true, x = draw(n, seed=5)
out = refine.run_refine(x, d_true, LAYERS, seed=1, burn_in=burn_in, collect=collect,
                        gamma_e_init=400.0, gamma_s_init=0.25, progress=None)
print(refine.settlement_message("refinement", out["settlement"]))
at = np.linspace(0, len(out["trace"]) - 1, 8).astype(int)
for k in refine.settle_columns(model):
    print(k, np.round([out["trace"][i][k] for i in at], 3))
