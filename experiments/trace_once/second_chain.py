"""Small chains of the steps issue 53 item 4 moved to cached builders (batched pretraining, a supervised chunked refinement, supervised and data-parallel stochastic MCEM, the EM and Gibbs SVM), each run twice in one process; the arrays of their outputs saved (lists of dicts, such as the kept models, are not).

Usage: python experiments/trace_once/second_chain.py CHECKOUT OUT.npz (CHECKOUT: the repository whose src/ and tests/ to import). Compare two such files with numpy.array_equal, key by key (the keys ending in /seconds are wall times)."""
import sys, tempfile
root, out = sys.argv[1], sys.argv[2]
sys.path[:0] = [root + "/src", root + "/tests"]
import numpy as np
from dgdm_tf.pretrain import chain
from dgdm_tf.topdown import refine
from dgdm_tf.mcem import stochastic as M
from dgdm_tf.supervised.svm_classifier import BayesianSVM
from _topdown_model import LAYERS as TL, draw
import _smcem_model as SM

res = {}
def put(name, d):
    for k, v in d.items():
        if isinstance(v, (list, tuple)):
            for i, e in enumerate(v):
                if isinstance(e, (np.ndarray, np.generic, float, int)):
                    res[f"{name}/{k}/{i}"] = np.asarray(e)
                elif isinstance(e, (list, tuple)):
                    for j, ee in enumerate(e):
                        res[f"{name}/{k}/{i}/{j}"] = np.asarray(ee)
        elif isinstance(v, (np.ndarray, np.generic, float, int)):
            res[f"{name}/{k}"] = np.asarray(v)

rng = np.random.default_rng(0)
xp = rng.random((10, 12, 12, 1)).astype(np.float32) * (rng.random((10, 12, 12, 1)) < 0.3)
ARGS = dict(dict_size=3, n_dict=4, pool=2, seed=5, burn_in=4, collect=3, thin=2,
            prune_min_usage=0.3, progress=None, batch_size=4)
_, d_true, x = draw(7, seed=5)
KW = dict(seed=1, burn_in=2, collect=2, gamma_e_init=50.0, gamma_s_init=0.25, n_leapfrog=3,
          chunk=3, checkpoint_every=2, progress=None)
SUP = dict(n_classes=3, svm_hyper={"steps": 2}, keep_models=2, svm_warmup=2, svm_average=2)
d_m, xm, ym = SM.labelled(32, seed=5)
mk = dict(seed=3, iterations=4, batch_size=16, sweeps=2, lr=0.02, hyper=SM.HYPER, y=ym,
          n_classes=2, svm=SM.SVM, dictionaries=d_m, progress=None)
fx = rng.normal(size=(40, 6)); fy = rng.integers(0, 3, 40)
for run in range(2):
    with tempfile.TemporaryDirectory() as tmp:
        put(f"pre{run}", chain.run_pretrain_layer(xp, checkpoint_dir=tmp + "/p", **ARGS))
        put(f"ref{run}", refine.run_refine(x, d_true, TL, **KW, **SUP, labels=np.arange(7) % 3,
                                           checkpoint_dir=tmp + "/r"))
    put(f"mcem{run}", M.run_mcem(xm, SM.LAYERS, **mk))
    put(f"mcemdev{run}", M.run_mcem(xm, SM.LAYERS, devices=["/cpu:0"], **{**mk, "y": None, "n_classes": None, "svm": None}))
    for meth in ("em", "gibbs"):
        m = BayesianSVM(3, method=meth, burn_in=3, collect=3, em_iters=4, em_tol=0.0, seed=2).fit(fx, fy)
        res[f"svm_{meth}{run}/betas"] = m.betas
np.savez(out, **res)
print(len(res), "arrays")
