"""Independent chains averaged, and the noise precision held fixed.

M chains of rule inpaint's inference (chain 0 seeded as the workflow's; chain m by
fold-in of m), each scored alone and their running average (a better estimate of the
posterior mean if the chains freeze in different explanations: exact). With
``gamma_e`` > 0 every chain holds gamma_e at that value instead of sampling it (the
posterior at a given noise level: an approximation, said so in the output).
Saves the per-chain estimates when given an output path (for where.py). With ``permute``
= 1, chain m > 0 also runs on the model with the maps of both layers randomly permuted
(D1's maps with D2's input channels, D2's maps): the same model, so the same posterior,
visited in another scan order (the top layer is drawn map by map, in map order).

    python experiments/missing_data/chains.py PREPARED LAYER1 LAYER2 REFINED model n M burn_in collect [gamma_e] [save.npz|-] [permute]
"""
import sys

import numpy as np

import _chain as C
from _setup import DS, HYPER, LAYERS, SEED, hidden_stats, inpaint_inputs, models, psnr, seed_for
from dgdm_tf.core.model import DeepModel

prep, l1, l2, ref, name = sys.argv[1:6]
n, m_chains, burn_in, collect = (int(v) for v in sys.argv[6:10])
fix = float(sys.argv[10]) if len(sys.argv) > 10 else 0.0
save = sys.argv[11] if len(sys.argv) > 11 and sys.argv[11] != "-" else None
permute = len(sys.argv) > 12 and int(sys.argv[12]) == 1
x, mask, _ = inpaint_inputs(prep, n)
dicts, gs, ge = models(l1, l2, ref)[name]
if fix > 0:
    ge = fix
print(f"model {name}, {n} images, {m_chains} chains of {burn_in} + {collect} sweeps, gamma_e "
      + (f"held at {ge:g} (approximation)" if fix > 0 else f"sampled (start {ge:.4g})")
      + ("; maps permuted per chain" if permute else ""))
unseen = C.unseen_blocks(mask, DeepModel(x.shape[1:], LAYERS, HYPER).with_ks([d.shape[-1] for d in dicts]))
ests = {"workflow": C.est_workflow, "hidden-RB": C.est_hidden_rb(unseen)}
base = seed_for(SEED, DS, "inpaint", name)
sums = {k: 0.0 for k in ests}
per_chain = {k: [] for k in ests}
total = 0.0
for m in range(m_chains):
    seed = base if m == 0 else int((base + 7919 * m) % 0x7FFFFFFF)
    dm = dicts
    if permute and m > 0:
        rng = np.random.default_rng(m)
        p1, p2 = rng.permutation(dicts[0].shape[-1]), rng.permutation(dicts[1].shape[-1])
        dm = [dicts[0][..., p1], dicts[1][:, :, p1, :][..., p2]]
    recs, st, sec, _ = C.run(x, mask, dm, LAYERS, seed=seed, burn_in=burn_in, collect=collect,
                             gamma_s=gs, gamma_e=ge, hyper=HYPER, estimators=ests,
                             fix_gamma_e=fix > 0)
    total += sec
    for k in ests:
        sums[k] = sums[k] + recs[k]
        per_chain[k].append(recs[k])
    line = [f"chain {m}: {sec:5.1f} s, gamma_e end {float(np.mean(np.asarray(st.gamma_e))):7.1f}"]
    for k in ests:
        one = np.where(mask > 0, x, recs[k])
        avg = np.where(mask > 0, x, sums[k] / (m + 1))
        line.append(f"{k}: alone {psnr(x, one, mask):5.2f}, mean of {m + 1} {psnr(x, avg, mask):5.2f} dB")
    print(" | ".join(line), flush=True)
for k in ests:
    avg = np.where(mask > 0, x, sums[k] / m_chains)
    print(f"average of {m_chains} chains, {k}: {hidden_stats(x, avg, mask)}; observed-half PSNR "
          f"{psnr(x, sums[k] / m_chains, 1 - mask):.2f} dB; {total:.0f} s in all")
if save:
    np.savez(save, x=x, mask=mask, **{k: np.stack(v) for k, v in per_chain.items()})
