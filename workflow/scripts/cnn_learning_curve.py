"""rule cnn_learning_curve: the CNN baseline trained afresh at each learning-curve size
(dgdm_tf.report.learning_curves.cnn_learning_curve) on the images the SVM rows' curves take
at that size, tested on all of the cnn rule's test images; results/{ds}/cnn/learning_curve.csv."""

import json

from _common import elapsed, plain, progress, start

start(snakemake, tensorflow=True)

import pandas as pd  # noqa: E402

from dgdm_tf import data  # noqa: E402
from dgdm_tf.baselines import cnn  # noqa: E402
from dgdm_tf.core.random import seed_for  # noqa: E402
from dgdm_tf.data.subsets import shared_subset, subset_seeds  # noqa: E402
from dgdm_tf.io import atomic as atomic_io  # noqa: E402
from dgdm_tf.report import learning_curves as lc  # noqa: E402

ds = snakemake.wildcards.ds
seed_ds = snakemake.params.seed_name  # an ablation draws as its base does: paired runs
run_cfg = plain(snakemake.params.run_config)
seed = int(run_cfg["seed"])
block = run_cfg["block"]
sizes = [int(n) for n in snakemake.params.sizes]

d = data.load_prepared(snakemake.input.data)
n_classes = data.class_count(d)
# the cnn rule's subsets (rule cnn: the same seeded subsets as the SVM rows)
x_train, y_train, idx_train = shared_subset(d, "train", block["n_train"], None, seed, seed_ds)
x_test, y_test, _ = shared_subset(d, "test", block["n_test"], None, seed, seed_ds)
del d
progress(f"{ds}: the CNN's learning curve at {sizes} of {len(y_train)} training images, "
         f"tested on {len(y_test)}")
rows = lc.cnn_learning_curve(
    x_train, y_train, x_test, y_test, n_classes=n_classes, sizes=sizes,
    options=cnn.CnnOptions.from_config(block["cnn"]), layers=block["model"]["layers"],
    seed=seed_for(seed, seed_ds, "cnn"),  # the cnn rule's seed
    idx_train=idx_train, subset_seed=subset_seeds(seed, seed_ds)["train"],
    row_metrics=json.loads(open(snakemake.input.metrics).read()), progress=progress)
with atomic_io.atomic_path(snakemake.output.csv) as tmp:
    pd.DataFrame(rows, columns=list(lc.COLUMNS)).to_csv(tmp, index=False, float_format="%.6g")
progress(f"done in {elapsed():.1f} s")
