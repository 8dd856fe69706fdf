"""rules cnn and cnn_at: the CNN baseline "CNN, same shape" (dgdm_tf.baselines.cnn.train_cnn) on
the n_train / n_test subsets the SVM uses (cnn), or on exactly the images of one Gibbs
row (cnn_at: the first `subsets` images of the same subsets, as that row's script takes
them); metrics.json (with the per-epoch curve), curve.csv, predictions.csv and the run's
resolved config (config.yaml) in results/{ds}/cnn/ or results/{ds}/cnn_at/{row}/."""

import json

from _common import elapsed, plain, progress, provenance, start, write_resolved_config

start(snakemake, tensorflow=True)

from dgdm_tf.core.random import seed_for  # noqa: E402
from dgdm_tf.data.subsets import shared_subset  # noqa: E402

import pandas as pd  # noqa: E402
import tensorflow as tf  # noqa: E402

from dgdm_tf.io import atomic as atomic_io  # noqa: E402
from dgdm_tf.report import rows  # noqa: E402
from dgdm_tf.bench.timing import machine_info
from dgdm_tf.baselines import cnn
from dgdm_tf import data

ds = snakemake.wildcards.ds
seed_ds = snakemake.params.seed_name  # an ablation draws as its base does: paired runs
method = snakemake.params.method
run_cfg = plain(snakemake.params.run_config)
seed = int(run_cfg["seed"])
block = run_cfg["block"]
ccfg = block["cnn"]
layers = block["model"]["layers"]

d = data.load_prepared(snakemake.input.data)
n_classes = data.class_count(d)
# cnn_at: the Gibbs row whose images these are, and how many of each subset it takes
row = run_cfg.get("same_images_as")
own = run_cfg.get("subsets") or {}
split = {}
for name, size in (("train", block["n_train"]), ("test", block["n_test"])):
    # the same seeded subsets as the features / SVM of pretrained_svm (then, for a row
    # of its own sizes, their first images, as that row's script takes them)
    split[name] = shared_subset(d, name, size, own.get(name), seed, seed_ds)
    progress(f"{ds}: {len(split[name][2])} of {len(d[f'x_{name}'])} {name} images"
             + (f" (the images of {row})" if row else ""))
del d

(x_train, y_train, _), (x_test, y_test, idx_test) = split["train"], split["test"]
options = cnn.CnnOptions.from_config(ccfg)
out = cnn.train_cnn((x_train, y_train), (x_test, y_test), options, layers=layers,
                    n_classes=n_classes, seed=seed_for(seed, seed_ds, method), progress=progress)
progress(f"{ds}: CNN test error {out['test_error_pct']:.2f}% after {ccfg['epochs']} epochs "
         f"(best {out['best_test_error_pct']:.2f}% at epoch {out['best_epoch']}), train "
         f"error {out['train_error_pct']:.2f}%, {out['train_seconds']:.1f} s training")

curve = pd.DataFrame(out["curve"])
with atomic_io.atomic_path(snakemake.output.curve) as tmp:
    curve[["epoch", "seconds_cumulative", "test_error_pct", "train_loss", "epoch_seconds",
           "eval_seconds"]].to_csv(tmp, index=False, float_format="%.6g")
summary = json.loads(open(snakemake.input.summary).read())
by_step = {"prepare": float(summary.get("seconds", 0.0)), "cnn": elapsed()}
write_resolved_config(snakemake.output.config, snakemake.params.config_files, method, run_cfg)
# the rows' provenance, with the machine and TensorFlow, which its throughput figures depend on
kept = {**provenance(seed, snakemake.params.config_files, run_cfg), "machine": machine_info(),
        "threads": int(snakemake.threads), "tensorflow": tf.__version__}
rows.write_row(rows.RowResult(
    ds, method, y_test, out["test_predictions"], n_classes, n_train=len(y_train), by_step=by_step,
    provenance=kept, train_error_pct=out["train_error_pct"], test_index=idx_test,
    fields={"same_images_as": row, **{k: out[k] for k in (
        "best_test_error_pct", "best_epoch", "n_params", "conv_shapes", "curve", "train_seconds",
        "train_images_per_s", "inference_images_per_s", "peak_rss_mb", "deterministic")}}),
    metrics=snakemake.output.metrics, predictions=snakemake.output.predictions)
progress(f"done in {elapsed():.1f} s")
