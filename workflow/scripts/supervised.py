"""rule supervised: train the supervised model (Sec. 2.3) -- every layer of the top-down
model and the C one-vs-all Bayesian SVMs by Gibbs jointly on labelled images
(dgdm_tf.topdown.chain.run_refine with labels).

The images are the first `supervised.n_train` of the other methods' training subset.
The chain checkpoints into `params.checkpoint_dir` (not an output: it survives a kill and
`--rerun-incomplete` resumes from it); removed when done unless `keep_checkpoints`.
"""

import shutil
from pathlib import Path

from _common import elapsed, plain, progress, start

start(snakemake, tensorflow=True)

from dgdm_tf.core.random import seed_for  # noqa: E402
from dgdm_tf.data.subsets import shared_subset  # noqa: E402

import numpy as np  # noqa: E402

from dgdm_tf.report.scores import error_pct  # noqa: E402

from dgdm_tf.io import artifacts  # noqa: E402

from dgdm_tf import data

from dgdm_tf.mcmc.checkpoint import CheckpointDir
from dgdm_tf.topdown import refine

from dgdm_tf.report import model_plots as deep_plots

from dgdm_tf.supervised import joint_svm as deep_svm
from dgdm_tf.core.model import DeepModel, project_top_to_data  # noqa: E402

ds = snakemake.wildcards.ds
seed_ds = snakemake.params.seed_name  # an ablation draws as its base does: paired runs
cfg = plain(snakemake.params.cfg)
layers = plain(snakemake.params.layers)
hyper = plain(snakemake.params.hyper)
seed = int(snakemake.params.seed)
ckpt = Path(snakemake.params.checkpoint_dir)
ckpt.mkdir(parents=True, exist_ok=True)

pre = [artifacts.read_pretrained_layer(p) for p in snakemake.input.layers]
if cfg["start_from"] == "refined":  # the rule asks for the refinement only then
    z = artifacts.read_refined_model(snakemake.input.refine[0])
    dictionaries, start_usage = z.D, np.asarray(z.on_rate)
    gamma_s0, gamma_e0 = z.gamma_s, z.gamma_e_mean
else:
    dictionaries = [z.D for z in pre]
    start_usage = np.asarray(pre[-1].usage, np.float64)
    gamma_e0, gamma_s0 = pre[0].gamma_e_mean, pre[-1].gamma_w

d = data.load_prepared(snakemake.input.data)
x, labels, idx = shared_subset(d, "train", snakemake.params.n_train, cfg["n_train"], seed, seed_ds)
n_classes = data.class_count(d)
progress(f"{ds}: supervised model on {x.shape}, {n_classes} classes, from the {cfg['start_from']} "
         f"dictionaries {[v.shape for v in dictionaries]}; {cfg}")

out = refine.run_refine(
    x, refine.Start(dictionaries, layers, hyper, gamma_e_init=gamma_e0, gamma_s_init=gamma_s0,
                    n_classes=n_classes),
    refine.SupervisedOptions.from_config(cfg), seed=seed_for(seed, seed_ds, "supervised"),
    labels=labels, checkpoint=CheckpointDir(ckpt), progress=progress)

model = DeepModel(x.shape[1:], layers, hyper, supervised=True).with_ks([v.shape[-1] for v in dictionaries])
top_shape = (model.top.hs, model.top.ws, model.top.k)
# training error of the averaged decision values on the chain's own (RB) features
dv = deep_svm.decision_values(out["samples"]["beta"], out["svm_mean"], out["svm_std"],
                              out["features"].reshape((-1,) + top_shape))
train_err = error_pct(np.argmax(dv, 1), labels)
progress(f"{ds}: training error of the supervised model {train_err:.2f}%")
refine.write_trace_csv(snakemake.output.trace, out["trace"], refine.trace_columns(model))
artifacts.write_supervised_model(
    snakemake.output.model, artifacts.SupervisedModel(
        D=out["D"], samples_D=out["samples"]["D"], theta=out["theta"],
        samples_beta=out["samples"]["beta"], svm_mean=out["svm_mean"], svm_std=out["svm_std"],
        n_classes=n_classes, gamma_s=out["gamma_s"], gamma_e=out["gamma_e"], on_rate=out["on_rate"],
        image_indices=idx, labels=labels, train_error_pct=train_err, sweeps=out["sweeps"],
        chain_seconds=out["seconds"], wall_seconds=elapsed(), config=cfg, layers=layers,
        settlement=out["settlement"]))
deep_plots.plot_refine_trace(out["trace"], snakemake.output.trace_png,
                             f"{ds}: supervised model (top-down model + Bayesian SVM)")
# Fig. 2: top-layer elements in the data plane, most used first
order_sup = np.argsort(-out["on_rate"])
proj_sup = project_top_to_data(model, out["D"])[order_sup]
deep_plots.plot_image_grid(proj_sup, snakemake.output.top_png,
                           f"{ds}: top-layer elements in the data plane, supervised (most used first)")
# the unsupervised model the chain started from, beside it
proj_uns = project_top_to_data(model, dictionaries)[np.argsort(-start_usage)]
deep_plots.plot_image_pair(proj_uns, proj_sup, (f"unsupervised ({cfg['start_from']})", "supervised"),
                           snakemake.output.compare_png,
                           f"{ds}: top-layer elements in the data plane (Fig. 2), most used first")
if not cfg["keep_checkpoints"]:
    shutil.rmtree(ckpt, ignore_errors=True)
progress(f"done in {elapsed():.1f} s")
