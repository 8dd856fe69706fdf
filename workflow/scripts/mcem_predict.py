"""rule mcem_predict: classify the test images (supplement Algorithm 2: MCEM MAP of each
image's top layer given D, then beta^T s) with the MCEM estimate (method mcem_map) or
with each posterior sample, decision values averaged (model_averaging); top-1 / top-5
error, predictions with every class's score.

Rule mcem_predict_shard (config `shards` > 1) classifies one shard of the test chunks
(`mcem_predict.chunk` images each, seeded by the chunk's index); this rule then gathers
the shards (the same bits)."""

import dataclasses
import json

from _common import (elapsed, gathered, plain, progress, provenance, shard_job, start,
                     write_resolved_config)

start(snakemake, tensorflow=True)

from dgdm_tf.core.random import seed_for  # noqa: E402
from dgdm_tf.core.shards import concat_parts  # noqa: E402
from dgdm_tf.data.subsets import subset_seeds  # noqa: E402

import numpy as np  # noqa: E402

from dgdm_tf.io import artifacts  # noqa: E402
from dgdm_tf.report import rows  # noqa: E402

from dgdm_tf.mcem.classify import KeptModels, classify  # noqa: E402
from dgdm_tf.mcem.options import MapOptions  # noqa: E402
from dgdm_tf.data.minibatches import McemData  # noqa: E402
from dgdm_tf.report.scores import topk_errors  # noqa: E402

ds = snakemake.wildcards.ds
seed_ds = snakemake.params.seed_name  # an ablation draws as its base does: paired runs
method = snakemake.wildcards.method
pcfg = plain(snakemake.params.cfg)
mcfg = plain(snakemake.params.mcem)
layers = plain(snakemake.params.layers)
run_cfg = plain(snakemake.params.run_config)
seed = int(run_cfg["seed"])

mcem = artifacts.read_mcem_model(snakemake.input.model)
models = [(mcem.D, mcem.beta)]
mean, std = mcem.mean, mcem.std
train_seconds, n_train = mcem.wall_seconds, mcem.n_total
avg_seconds = 0.0
if method == "model_averaging":
    samples = artifacts.read_mcem_samples(snakemake.input.samples)
    models, avg_seconds = samples.models(), samples.wall_seconds
data = McemData(snakemake.input.data, seed=0, batch_size=1, stream_cfg=plain(snakemake.params.stream),
                n_test=pcfg["n_test"], subset_seeds=subset_seeds(seed, seed_ds))
progress(f"{ds}: {method}: {data.n_test} test images, {len(models)} model(s), {pcfg}")

n_chunks = -(-data.n_test // int(pcfg["chunk"]))
kept = KeptModels([dk for dk, _ in models], [b for _, b in models], mean, std, layers,
                  gamma_s_init=float(mcfg["gamma_s"]))
options = dataclasses.replace(MapOptions.from_config(pcfg), scan=mcfg["scan"])


def predict_chunks(chunks) -> dict:
    """The decision values and labels of test chunks [start, stop) (None: all), each
    chunk's models seeded by its index, so a shard of chunks draws what the whole does."""
    lo, hi = chunks if chunks is not None else (0, n_chunks)
    scores, labels, seconds = [], [], 0.0
    for c, (x, y) in enumerate(data.test_chunks(int(pcfg["chunk"]))):
        if c < lo:
            continue
        if c >= hi:
            break
        res = classify(x, kept, options,
                       seeds=[seed_for(seed, seed_ds, method, "predict", c, j) for j in range(len(models))])
        seconds += res.seconds
        scores.append(res.scores)
        labels.append(np.asarray(y))
        done = sum(len(s) for s in scores)
        progress(f"{ds}: {done} test images of chunks {lo}:{hi}, running top-1 error "
                 f"{100 * np.mean(np.argmax(np.concatenate(scores), 1) != np.concatenate(labels)):.2f}%, "
                 f"{done * len(models) / seconds:.2f} image-models/s")
    return {"scores": np.concatenate(scores), "labels": np.concatenate(labels), "seconds": seconds}


if snakemake.rule == "mcem_predict_shard":  # one shard of the test chunks
    shard_job(snakemake, n_chunks, 1, predict_chunks, what="test chunks")
    progress(f"done in {elapsed():.1f} s")
    raise SystemExit(0)
res = gathered(snakemake, "test", n_chunks, predict_chunks, concat_parts, "mcem_predict_shard")
scores, labels, infer_seconds = res["scores"], res["labels"], res["seconds"]
pred = np.argmax(scores, 1)
err = topk_errors(scores, labels)
progress(f"{ds}: {method}: top-1 error {err['top1_error_pct']:.2f}%, top-5 error "
         f"{err['top5_error_pct']:.2f}%")

write_resolved_config(snakemake.output.config, snakemake.params.config_files, method, run_cfg)
by_step = {"stream": float(json.loads(open(snakemake.input.data).read()).get("seconds", 0.0))
           if str(snakemake.input.data).endswith(".json") else 0.0,
           "mcem_train": train_seconds, "mcem_average": avg_seconds, "predict": elapsed()}
rows.write_row(rows.RowResult(
    ds, method, labels, pred, data.n_classes, n_train=n_train, by_step=by_step,
    provenance=provenance(seed, snakemake.params.config_files, run_cfg), scores=scores, topk=True,
    fields={"n_models_averaged": len(models),
            "test_images_per_second": float(len(labels) / max(infer_seconds, 1e-9))}),
    metrics=snakemake.output.metrics, predictions=snakemake.output.predictions)
progress(f"done in {elapsed():.1f} s")
