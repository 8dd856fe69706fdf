"""rule refine: joint Gibbs refinement of the top-down model from the pretrained
dictionaries (dgdm_tf.topdown.chain.run_refine).

The images are the first `refine.n_images` of the pretraining subset. The chain
checkpoints into `params.checkpoint_dir` (not an output: it survives a kill and
`--rerun-incomplete` resumes from it); removed when done unless `keep_checkpoints`.

With `refine.workers` > 1 this job runs the script again as that many workers
(dgdm_tf.core.cluster.run_as_workers: srun's tasks under Slurm, local processes
elsewhere) and waits; each worker runs the chain data-parallel, and worker 0 writes the
outputs.
"""

import shutil
import sys
from pathlib import Path

from _common import elapsed, plain, progress, start

start(snakemake, tensorflow=True)

from dgdm_tf.core import cluster  # noqa: E402

n_workers = int(plain(snakemake.params.refine)["workers"])
if n_workers > 1 and not cluster.is_worker():
    progress(f"refining with {n_workers} workers")
    cluster.run_as_workers([sys.executable, sys.argv[0]], n_workers, threads=int(snakemake.threads))
    progress(f"done in {elapsed():.1f} s")
    raise SystemExit(0)
team = cluster.workers() if n_workers > 1 else cluster.Workers()  # before TensorFlow runs

from dgdm_tf.core.random import seed_for  # noqa: E402

import numpy as np  # noqa: E402

from dgdm_tf.io import artifacts  # noqa: E402

from dgdm_tf import data

from dgdm_tf.mcmc.checkpoint import CheckpointDir
from dgdm_tf.topdown import refine

from dgdm_tf.report import model_plots as deep_plots
from dgdm_tf.core.model import DeepModel, project_top_to_data  # noqa: E402

ds = snakemake.wildcards.ds
seed_ds = snakemake.params.seed_name  # an ablation draws as its base does: paired runs
cfg = plain(snakemake.params.refine)
layers = plain(snakemake.params.layers)
hyper = plain(snakemake.params.hyper)
seed = int(snakemake.params.seed)
ckpt = Path(snakemake.params.checkpoint_dir)
ckpt.mkdir(parents=True, exist_ok=True)

pre = [artifacts.read_pretrained_layer(p) for p in snakemake.input.layers]
dictionaries = [z.D for z in pre]
idx = np.asarray(pre[0].image_indices)
if cfg["n_images"] is not None:
    idx = idx[: int(cfg["n_images"])]
x = np.ascontiguousarray(data.load_prepared(snakemake.input.data)["x_train"][idx], np.float32)
gamma_e0 = pre[0].gamma_e_mean
gamma_s0 = pre[-1].gamma_w
progress(f"{ds}: refining {[d.shape for d in dictionaries]} on {x.shape}, {cfg}; start "
         f"gamma_e {gamma_e0:.4g}, gamma_s {gamma_s0:.4g}")

out = refine.run_refine(
    x, refine.Start(dictionaries, layers, hyper, gamma_e_init=gamma_e0, gamma_s_init=gamma_s0),
    refine.RefineOptions.from_config(cfg), seed=seed_for(seed, seed_ds, "refine"),
    checkpoint=CheckpointDir(ckpt), progress=progress)
if not team.chief:  # the chief writes the outputs
    raise SystemExit(0)

model = DeepModel(x.shape[1:], layers, hyper).with_ks([d.shape[-1] for d in dictionaries])
cols = refine.trace_columns(model)
refine.write_trace_csv(snakemake.output.trace, out["trace"], cols)
artifacts.write_refined_model(
    snakemake.output.model, artifacts.RefinedModel(
        D=out["D"], theta=out["theta"], gamma_s=out["gamma_s"],
        gamma_e=out["gamma_e"], on_rate=out["on_rate"], image_indices=idx, sweeps=out["sweeps"],
        chain_seconds=out["seconds"], wall_seconds=elapsed(), config=cfg, layers=layers,
        settlement=out["settlement"]))
deep_plots.plot_refine_trace(out["trace"], snakemake.output.trace_png,
                             f"{ds}: joint refinement of the {len(layers)}-layer model")
# Fig. 2: top-layer elements in the data plane, most used first
order = np.argsort(-out["on_rate"])
for key, ds_list in (("refined", out["D"]), ("pretrained", dictionaries)):
    proj = project_top_to_data(model, ds_list)
    deep_plots.plot_image_grid(
        proj[order], snakemake.output[f"top_{key}_png"],
        f"{ds}: top-layer elements in the data plane, {key} (most used in refinement first)")
if not cfg["keep_checkpoints"]:
    shutil.rmtree(ckpt, ignore_errors=True)
progress(f"done in {elapsed():.1f} s")
