"""rule learning_curve: each curve row's SVM refitted at each training size
(dgdm_tf.report.learning_curves.learning_curve) and the CNN's curve (rule
cnn_learning_curve), results/{ds}/learning_curve.csv and the figure (plot_learning_curves)."""

import json

from _common import elapsed, plain, progress, start

start(snakemake, tensorflow=True)

import pandas as pd  # noqa: E402

from dgdm_tf.core.random import seed_for  # noqa: E402
from dgdm_tf.data.subsets import subset_seeds  # noqa: E402
from dgdm_tf.io import artifacts, atomic as atomic_io  # noqa: E402
from dgdm_tf.report import learning_curves as lc  # noqa: E402
from dgdm_tf.report.paper import METHOD_LABELS, PAPER_TABLES  # noqa: E402
from dgdm_tf.supervised.options import SvmOptions  # noqa: E402

ds = snakemake.wildcards.ds
seed_ds = snakemake.params.seed_name  # an ablation draws as its base does: paired runs
seed = int(snakemake.params.seed)
settings = plain(snakemake.params.rows)  # method -> {"svm": ..., "view": ...}
sizes = [int(n) for n in snakemake.params.sizes]
progress(f"{ds}: learning curves of {list(settings)} at {sizes} training images")

rows = []
for (method, s), feat_path, metrics_path in zip(settings.items(), snakemake.input.features,
                                                 snakemake.input.metrics):
    feats = artifacts.read_features(feat_path)
    progress(f"{method}: {len(feats.train.y)} / {len(feats.test.y)} images, "
             f"{feats.train.f.shape[1]} features ({s['view']}), SVM {s['svm']}")
    rows += lc.learning_curve(
        feats.train.f, feats.train.y, feats.test.f, feats.test.y, method=method,
        n_classes=feats.n_classes, sizes=sizes, svm=SvmOptions.from_config(s["svm"]), view=s["view"],
        seed=seed_for(seed, seed_ds, method, "svm"),  # the svm rule's seed for this row
        idx_train=feats.train.idx, subset_seed=subset_seeds(seed, seed_ds)["train"],
        row_metrics=json.loads(open(metrics_path).read()), progress=progress)

for path in snakemake.input.cnn:  # the CNN's curve (rule cnn_learning_curve)
    rows += pd.read_csv(path).astype(object).where(lambda df: df.notna(), None).to_dict("records")
    progress(f"cnn: its curve from {path}")

with atomic_io.atomic_path(snakemake.output.csv) as tmp:
    pd.DataFrame(rows, columns=list(lc.COLUMNS)).to_csv(tmp, index=False, float_format="%.6g")

key = snakemake.params.paper_table
not_run = list(snakemake.params.not_run)
notes = [f"Not drawn (not in datasets.{ds}.methods): {', '.join(not_run)}."] if not_run else []
lc.plot_learning_curves(
    rows, snakemake.output.png, f"{ds}: test error against training images (each row's "
    "features fixed, its SVM refitted)", paper=lc.paper_test_errors(key), labels=METHOD_LABELS,
    paper_metric=PAPER_TABLES[key].metric if key in PAPER_TABLES else "error", notes=notes)
progress(f"done in {elapsed():.1f} s")
