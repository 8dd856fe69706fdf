# Config validation and the names every rule file uses. The helpers themselves live in
# workflow/lib/dgdm_workflow.py (plain Python), so the rule files only wire.

import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

_LIB = str(Path(workflow.basedir) / "workflow" / "lib")
if _LIB not in sys.path:
    sys.path.insert(0, _LIB)
import dgdm_workflow  # noqa: E402

SCHEMA_FILE = "../schemas/config.schema.yaml"  # relative to this file

try:
    validate(config, SCHEMA_FILE)
except WorkflowError as e:
    raise WorkflowError(
        dgdm_workflow.explain_validation_error(e, workflow.configfiles)
    ) from None
dgdm_workflow.check_config(config, workflow.configfiles)

DATASETS: dict = config["datasets"]
# config/ablations/<name>.yaml: a dataset of the config varied, run as dataset <name>
# under results/<name>/ (`snakemake --cores all results/<name>/tables.md`); not part of
# results/tables.md. Those whose base this config lacks say so when asked for.
ABLATIONS, UNAVAILABLE_ABLATIONS = dgdm_workflow.load_ablations(
    config, Path(workflow.basedir) / "config" / "ablations",
    lambda c: validate(c, SCHEMA_FILE))
# The config file(s) this run used, as recorded in metrics.json and results/tables.md.
CONFIG_FILES = dgdm_workflow.relative_config_files(workflow.configfiles)
# Threads for the heavy rules: `threads`, else all cores given to Snakemake.
HEAVY_THREADS = dgdm_workflow.heavy_threads(config, lambda: workflow.cores)
# `snakemake --report`: the category of each figure and table (captions: workflow/report/)
CATEGORY = dgdm_workflow.REPORT_CATEGORIES
# its front page (workflow/report/workflow.rst) inlines figures with `.. base64-figure::`
dgdm_workflow.register_report_directives()


wildcard_constraints:
    ds=dgdm_workflow.dataset_regex([*DATASETS, *ABLATIONS]),
    ablation=dgdm_workflow.dataset_regex([*ABLATIONS, *UNAVAILABLE_ABLATIONS]) or "(?!)",
    l=r"[1-9][0-9]*",
    split="train|test|mismatch",
    i=r"[0-9]+",
    n=r"[1-9][0-9]*",


# The helpers the rule files call, bound to this run's config.
_wiring = dgdm_workflow.Wiring(config, ABLATIONS, UNAVAILABLE_ABLATIONS)
res = _wiring.res
ds_cfg = _wiring.ds_cfg
n_layers = _wiring.n_layers
raw_dir = _wiring.raw_dir
data_spec = _wiring.data_spec
run_config = _wiring.run_config
seed_name = _wiring.seed_name
hyper_of = _wiring.hyper
ablation_inputs = _wiring.ablation_inputs
enabled_runs = _wiring.enabled_runs
benchmark_dataset = _wiring.benchmark_dataset
benchmark_params = _wiring.benchmark_params
pretrain_layer_input = _wiring.pretrain_layer_input
all_layer_files = _wiring.all_layer_files
svm_inputs = _wiring.svm_inputs
svm_settings = _wiring.svm_settings
svm_view = _wiring.svm_view
is_reference = _wiring.is_reference
learning_curve_methods = _wiring.learning_curve_methods
learning_curve_inputs = _wiring.learning_curve_inputs
learning_curve_rows = _wiring.learning_curve_rows
refined_start = _wiring.refined_start
shard_inputs = _wiring.shard_inputs
training_cfg = dgdm_workflow.training_cfg
cnn_run_config = _wiring.cnn_run_config
cnn_at_rows = _wiring.cnn_at_rows
cnn_at_row = _wiring.cnn_at_row
encoder_at_rows = _wiring.encoder_at_rows
encoder_subsets = _wiring.encoder_subsets
mcem_data = _wiring.mcem_data
mcem_n_train = _wiring.mcem_n_train
tfds_data_dir = _wiring.tfds_data_dir
mcem_predict_inputs = _wiring.mcem_predict_inputs
transfer_source = _wiring.transfer_source
enabled_metrics = _wiring.enabled_metrics
