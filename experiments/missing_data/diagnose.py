"""Where does the model's imputation fail? One model, rule inpaint's images and chain
(same seeds: the 'workflow' row reproduces its figure), scored with several estimators
of the posterior-mean image from the same draws:

* workflow   : g(E[S_top | rest], Z drawn before the sweep) (infer_topdown);
* draw       : g(S_top, Z) of the state after each sweep (no Rao-Blackwellisation);
* hidden-RB  : as workflow, the Z of blocks whose footprint is wholly hidden replaced by
               its exact conditional mean theta;
and, as a reference, the same chain on the *fully observed* images (bottom half scored:
how well the model's reconstruction itself fits digits). Printed: PSNR on the hidden
pixels, the mean of the estimate on the hidden half against the truth's (amplitude), the
observed-half PSNR (fit), the on-rate of the top units and layer-1 blocks (hidden /
observed rows), theta_off.

    python experiments/missing_data/diagnose.py PREPARED LAYER1 LAYER2 REFINED [model] [n] [burn_in] [collect] [save.npz]

(save.npz: the estimates, for experiments/missing_data/where.py)
"""
import sys

import numpy as np

import _chain as C
from _setup import BATCH, BURN_IN, COLLECT, HYPER, LAYERS, SEED, DS, hidden_stats, inpaint_inputs, models, psnr, seed_for

prep, l1, l2, ref = sys.argv[1:5]
name = sys.argv[5] if len(sys.argv) > 5 else "refined"
n = int(sys.argv[6]) if len(sys.argv) > 6 else 100
burn_in = int(sys.argv[7]) if len(sys.argv) > 7 else BURN_IN
collect = int(sys.argv[8]) if len(sys.argv) > 8 else COLLECT
assert n <= BATCH
x, mask, _ = inpaint_inputs(prep, n)
dicts, gs, ge = models(l1, l2, ref)[name]
print(f"model {name}: gamma_s {gs:.4g}, gamma_e start {ge:.4g}; {n} images, {burn_in} + {collect} sweeps")
seed = seed_for(SEED, DS, "inpaint", name)

from dgdm_tf.core.model import DeepModel  # noqa: E402

model0 = DeepModel(x.shape[1:], LAYERS, HYPER).with_ks([d.shape[-1] for d in dicts])
unseen = C.unseen_blocks(mask, model0)
print(f"layer-1 blocks wholly unseen: {unseen[0].sum()} of {unseen[0].size} per image "
      f"(block rows {sorted(set(np.nonzero(unseen[0])[0]))})")
trace = []


def on_sweep(t, before, after, stats, model):
    g0 = model.geoms[0]
    z = np.asarray(after.z[0])
    on = z != g0.off  # N, nbh, nbw, K
    th_off = np.exp(np.asarray(after.log_theta[0]))[..., -1]  # N, K
    trace.append((t + 1, float(np.mean(np.asarray(after.gamma_e))), float(np.mean(np.asarray(after.on))),
                  float(on[:, ~unseen[0]].mean()), float(on[:, unseen[0]].mean()), float(th_off.mean())))


ests = {"workflow": C.est_workflow, "draw": C.est_draw, "hidden-RB": C.est_hidden_rb(unseen)}
recs, st, sec, model = C.run(x, mask, dicts, LAYERS, seed=seed, burn_in=burn_in, collect=collect,
                             gamma_s=gs, gamma_e=ge, hyper=HYPER, estimators=ests, on_sweep=on_sweep)
print("sweep gamma_e  top-on  l1-on(seen blocks) l1-on(unseen) theta_off")
for r in trace:
    print(f"{r[0]:5d} {r[1]:8.1f} {r[2]:7.4f} {r[3]:10.4f} {r[4]:14.4f} {r[5]:9.4f}")
print(f"masked chain: {sec:.1f} s")
for k, rec in recs.items():
    full = np.where(mask > 0, x, rec)
    print(f"  {k:10s} {hidden_stats(x, full, mask)}  observed-half PSNR {psnr(x, rec, 1 - mask):6.2f} dB")

# the same chain with every pixel observed: the bottom half's fit
recs_full, st_f, sec_f, _ = C.run(x, None, dicts, LAYERS, seed=seed, burn_in=burn_in, collect=collect,
                                  gamma_s=gs, gamma_e=ge, hyper=HYPER,
                                  estimators={"workflow": C.est_workflow})
rec = recs_full["workflow"]
print(f"fully observed chain: {sec_f:.1f} s, final gamma_e {float(np.mean(np.asarray(st_f.gamma_e))):.1f}")
if len(sys.argv) > 9:
    np.savez(sys.argv[9], x=x, mask=mask, full=rec, **{f"masked_{k}": v for k, v in recs.items()})
print(f"  bottom half of the reconstruction: {hidden_stats(x, rec, mask)}; top half PSNR "
      f"{psnr(x, rec, 1 - mask):.2f} dB; whole-image relative residual "
      f"{np.linalg.norm(x - rec) / np.linalg.norm(x):.3f}")
