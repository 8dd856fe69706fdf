# dgdm: reproduction of Pu et al., "A Deep Generative Deconvolutional Image Model",
# AISTATS 2016. Main job:  snakemake --cores all results/tables.md
# Other configs:           snakemake --cores all --configfile config/paper.yaml results/tables.md
# All math lives in src/dgdm_tf; the rules below only wire it (see README.md).

from snakemake.utils import min_version

min_version("9.0")

# config/config.yaml is the default. A --configfile given on the command line REPLACES
# it (Snakemake would otherwise deep-merge the two, so a smaller config would silently
# keep the default's datasets).
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


# `snakemake --report results/report.html` after a run: every table and figure, with
# captions (workflow/report/); this is its front page.
report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/pretrain.smk"
include: "workflow/rules/features.smk"
include: "workflow/rules/encoder.smk"
include: "workflow/rules/block.smk"
include: "workflow/rules/svm.smk"
include: "workflow/rules/learning_curve.smk"
include: "workflow/rules/refine.smk"
include: "workflow/rules/supervised.smk"
include: "workflow/rules/cnn.smk"
include: "workflow/rules/mcem.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/tables.smk"
include: "workflow/rules/benchmark.smk"


rule all:
    default_target: True
    input:
        "results/tables.md",
        "results/benchmarks.md",
