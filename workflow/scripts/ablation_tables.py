"""rule ablation_tables: results/<ablation>/tables.md from the ablation's metrics.json
and, where they exist, its base dataset's."""

from _common import plain, progress, start

start(snakemake)

from dgdm_tf.io import atomic as atomic_io  # noqa: E402
from dgdm_tf.report.ablations import render_ablation  # noqa: E402
from dgdm_tf.report.predictions import paired_with_base  # noqa: E402
from dgdm_tf.report.runs import load_metrics  # noqa: E402

name = snakemake.wildcards.ablation
ablation = plain(snakemake.params.ablation)
metrics = load_metrics("results", {name: ablation["block"]})
base = ablation["base"]
# the main run's rows of the same methods, where it has made them (read, not an input:
# the ablation's table must not wait for, or rerun, the main run)
base_metrics = {m: v for (_, m), v in load_metrics("results", {base: ablation["block"]}).items()}
progress(f"{name}: metrics of {sorted(m for _, m in metrics)}; the base {base} has "
         f"{sorted(base_metrics) or 'none yet'}")
paired = paired_with_base("results", name, base, ablation["block"]["methods"])
progress(f"{name}: paired with {base} on shared test images: {sorted(paired) or 'none'}")
md = render_ablation(name, ablation, metrics, base_metrics,
                     config_files=snakemake.params.config_files, paired=paired)
atomic_io.write_text(snakemake.output[0], md)
progress("done")
