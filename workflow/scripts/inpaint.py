"""rule inpaint: missing-data interpolation (supplement Sec. 1.2). Part of each test image
is hidden (`inpaint.mask`); the top-down model infers from the observed pixels only and
reconstructs the whole image. Scored on the hidden pixels: the refined model, the
pretrained dictionaries in the same top-down model, and the training set's mean image."""


from _common import elapsed, plain, progress, start

start(snakemake, tensorflow=True)

from dgdm_tf.core.random import seed_for  # noqa: E402
from dgdm_tf.data.subsets import subset_indices  # noqa: E402

import numpy as np  # noqa: E402

from dgdm_tf.io import artifacts, atomic as atomic_io  # noqa: E402

from dgdm_tf import data

from dgdm_tf.topdown import chain as deep_chain
from dgdm_tf.topdown.options import InpaintOptions, Start  # noqa: E402

from dgdm_tf.report import model_plots as deep_plots

ds = snakemake.wildcards.ds
seed_ds = snakemake.params.seed_name  # an ablation draws as its base does: paired runs
seed = int(snakemake.params.seed)
cfg = plain(snakemake.params.cfg)
layers = plain(snakemake.params.layers)
hyper = plain(snakemake.params.hyper)
d = data.load_prepared(snakemake.input.data)
idx = subset_indices(len(d["x_test"]), int(cfg["n_images"]), seed_for(seed, seed_ds, "inpaint"))
x = np.ascontiguousarray(d["x_test"][idx], np.float32)
mask = deep_chain.missing_mask(x.shape, cfg["mask"], fraction=float(cfg["fraction"]),
                               block=int(cfg["block"]), seed=seed_for(seed, seed_ds, "inpaint_mask"))
peak = float(d["x_train"].max() - min(0.0, float(d["x_train"].min())))
mean_img = d["x_train"].mean(axis=0, keepdims=True)
recons = {"mean fill": np.broadcast_to(mean_img, x.shape)}
scores = {"mean_fill": deep_chain.hidden_error(x, recons["mean fill"], mask, peak)}
refined = artifacts.read_refined_model(snakemake.input.model)
pre = [artifacts.read_pretrained_layer(p) for p in snakemake.input.layers]
models = {"pretrained": ([z.D for z in pre], pre[-1].gamma_w, pre[0].gamma_e_mean),
          "refined": (refined.D, refined.gamma_s, refined.gamma_e_mean)}
options = InpaintOptions.from_config(cfg)
for name, (dicts, gs, ge) in models.items():
    progress(f"{ds}: inpainting {len(x)} test images ({cfg['mask']}) with the {name} model")
    res = deep_chain.infer_topdown(
        x, Start(dicts, layers, hyper, gamma_e_init=ge, gamma_s_init=gs), options,
        seed=seed_for(seed, seed_ds, "inpaint", name), mask=mask, progress=progress)
    rec = np.where(mask > 0, x, res["reconstruction"])  # observed pixels are kept
    recons[name] = rec
    scores[name] = deep_chain.hidden_error(x, rec, mask, peak)
    scores[name]["seconds"] = res["seconds"]
    progress(f"{ds}: {name}: hidden-pixel MSE {scores[name]['mse']:.5f}, "
             f"PSNR {scores[name]['psnr_db']:.2f} dB (mean fill "
             f"{scores['mean_fill']['psnr_db']:.2f} dB)")
deep_plots.plot_inpainting(
    x, mask, {k: recons[k] for k in ("refined", "pretrained", "mean fill")}, snakemake.output.png,
    f"{ds}: missing-data interpolation ({cfg['mask']} hidden); PSNR on the hidden pixels: "
    + ", ".join(f"{k} {v['psnr_db']:.2f} dB" for k, v in scores.items()))
atomic_io.write_json(snakemake.output.metrics, {
    "dataset": ds, "mask": cfg["mask"], "n_images": int(len(x)),
    "hidden_fraction": float(np.mean(mask == 0)), "peak": peak,
    "hidden_pixels": scores, "config": cfg, "wall_seconds": elapsed(),
    "config_file": ", ".join(snakemake.params.config_files)})
progress(f"done in {elapsed():.1f} s")
