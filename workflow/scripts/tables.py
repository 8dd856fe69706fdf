"""rule tables: results/tables.md from every enabled run's metrics.json."""

from _common import plain, progress, start

start(snakemake)

from dgdm_tf.io import atomic as atomic_io  # noqa: E402

from dgdm_tf.report import tables
from dgdm_tf.report.runs import load_metrics

datasets = plain(snakemake.params.datasets)
metrics = load_metrics("results", datasets)
progress(f"metrics found for {sorted(metrics)}")
md = tables.render_tables(datasets, metrics, config_files=snakemake.params.config_files)
atomic_io.write_text(snakemake.output[0], md)
progress("done")
