"""rule tables: results/tables.md from every enabled run's metrics.json, each row paired
with the pretrained row on the test images both predicted (their predictions.csv), and
results/rows.json, the same rows and paired figures as data (tables.rows_summary)."""

from _common import plain, progress, start

start(snakemake)

from dgdm_tf.io import atomic as atomic_io  # noqa: E402

from dgdm_tf.report import tables  # noqa: E402
from dgdm_tf.report.predictions import paired_against_reference  # noqa: E402
from dgdm_tf.report.runs import load_metrics  # noqa: E402

datasets = plain(snakemake.params.datasets)
metrics = load_metrics("results", datasets)
progress(f"metrics found for {sorted(metrics)}")
paired = paired_against_reference("results", datasets)
progress(f"rows paired with the pretrained row on shared test images: {sorted(paired)}")
md = tables.render_tables(datasets, metrics, config_files=snakemake.params.config_files,
                          paired=paired)
atomic_io.write_text(snakemake.output[0], md)
atomic_io.write_json(snakemake.output.rows, tables.rows_summary(
    datasets, metrics, paired, config_files=snakemake.params.config_files))
progress("done")
