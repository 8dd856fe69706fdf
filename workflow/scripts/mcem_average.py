"""rule mcem_average: posterior samples of every D and beta by Gibbs on mini-batches,
starting from the MCEM estimate (dgdm_tf.mcem.averaging.run_averaging); checkpointed
like mcem_train."""

import shutil
from pathlib import Path

from _common import elapsed, plain, progress, start

start(snakemake, tensorflow=True)

from dgdm_tf.core.random import seed_for  # noqa: E402
from dgdm_tf.data.subsets import subset_seeds  # noqa: E402

import numpy as np  # noqa: E402

from dgdm_tf.io import artifacts  # noqa: E402

from dgdm_tf.mcem import averaging as model_averaging
from dgdm_tf.data.minibatches import McemData  # noqa: E402
from dgdm_tf.mcem.options import AveragingOptions, McemStart  # noqa: E402
from dgdm_tf.mcmc.checkpoint import CheckpointDir  # noqa: E402

ds = snakemake.wildcards.ds
seed_ds = snakemake.params.seed_name  # an ablation draws as its base does: paired runs
cfg = plain(snakemake.params.cfg)
mcfg = plain(snakemake.params.mcem)
layers = plain(snakemake.params.layers)
seed = int(snakemake.params.seed)
ckpt = Path(snakemake.params.checkpoint_dir)
ckpt.mkdir(parents=True, exist_ok=True)
m = artifacts.read_mcem_model(snakemake.input.model)
n_layers = m.n_layers
options = AveragingOptions.from_blocks(cfg, mcfg)
data = McemData(snakemake.input.data, seed=seed_for(seed, seed_ds, "averaging_batches"),
                batch_size=int(cfg["batch_size"] or mcfg["batch_size"]),
                stream_cfg=plain(snakemake.params.stream), n_train=snakemake.params.n_train, subset_seeds=subset_seeds(seed, seed_ds))
progress(f"{ds}: model averaging, {cfg['keep']} samples one every {cfg['thin']} iterations, "
         f"batch {data.batch_size} of {data.n_total} images")
res = model_averaging.run_averaging(
    data, McemStart(layers, plain(snakemake.params.hyper), m.D, m.beta, m.mean, m.std), options,
    seed=seed_for(seed, seed_ds, "averaging"), checkpoint=CheckpointDir(ckpt, trace=None),
    progress=progress)
acc = np.asarray(res["accept"])
artifacts.write_mcem_samples(snakemake.output.samples, D=res["D"], beta=res["beta"],
                             mean=res["mean"], std=res["std"], n_layers=n_layers,
                             hmc_accept_mean=acc.mean(0), wall_seconds=elapsed())
if not cfg["keep_checkpoints"]:
    shutil.rmtree(ckpt, ignore_errors=True)
progress(f"{ds}: {len(res['D'])} samples kept; mean HMC acceptance per layer "
         f"{acc.mean(0).round(3).tolist()}; {elapsed():.1f} s")
