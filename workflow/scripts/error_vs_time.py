"""rule error_vs_time: results/{ds}/figures/error_vs_time.png, test error against wall
time of every run of the dataset that exists (dgdm_tf.report.plots.plot_error_vs_time)."""

from _common import plain, progress, start

start(snakemake)

from dgdm_tf.report import plots  # noqa: E402
from dgdm_tf.report.runs import runs_of_dataset  # noqa: E402
from dgdm_tf.report.paper import METHOD_LABELS  # noqa: E402

ds = snakemake.wildcards.ds
runs, missing = runs_of_dataset("results", ds, plain(snakemake.params.block))
progress(f"{ds}: runs {sorted(runs)}; not shown: {missing}")
# the machine the runs were measured on, as the CNN run recorded it; else this one
machine = next((m["machine"] for m in runs.values() if m.get("machine")), None)
if machine is None:
    from dgdm_tf.bench.timing import machine_info

    machine = machine_info()
plots.plot_error_vs_time(
    runs, snakemake.output[0],
    f"{ds}: test error vs wall time (same train / test subsets, same machine)",
    labels=METHOD_LABELS, missing=missing, machine=machine)
progress("done")
