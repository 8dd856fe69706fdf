# Config validation and the helpers every rule file uses.

import os
import re
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

# the repository's library first (as workflow/scripts/_common.py does for the scripts):
# the rules below ask dgdm_tf.tables which images each row uses (light: no TensorFlow)
sys.path.insert(0, str(Path(workflow.basedir) / "src"))
from dgdm_tf.tables import cnn_peer_runs, row_subsets  # noqa: E402

SCHEMA_FILE = "../schemas/config.schema.yaml"  # relative to this file


def _key_path(path) -> str:
    """`datasets.mnist.model.layers[1].pool` from a jsonschema error path."""
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def _allowed(schema: dict) -> str:
    """What a schema fragment allows, in words."""
    if not isinstance(schema, dict):
        return ""
    parts = []
    if "enum" in schema:
        parts.append("one of " + ", ".join(repr(v) for v in schema["enum"]))
    elif "const" in schema:
        parts.append(f"exactly {schema['const']!r}")
    else:
        t = schema.get("type")
        if t:
            parts.append(" or ".join(t) if isinstance(t, list) else t)
    for kw, word in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="),
                     ("exclusiveMaximum", "<"), ("minItems", "at least items:"),
                     ("minProperties", "at least entries:"), ("pattern", "matching")):
        if kw in schema:
            parts.append(f"{word} {schema[kw]}")
    if schema.get("additionalProperties") is False and "properties" in schema:
        parts.append("keys: " + ", ".join(schema["properties"]))
    text = ", ".join(parts)
    if schema.get("description"):
        text += f" ({schema['description'].strip()})"
    return text


def explain_validation_error(err) -> str:
    """A one-paragraph message naming the offending config key and what is allowed."""
    import jsonschema

    # snakemake.utils.validate raises WorkflowError from inside `except ValidationError`,
    # and WorkflowError flattens its args to text: the original is its __context__.
    ve = err
    while ve is not None and not isinstance(ve, jsonschema.ValidationError):
        ve = ve.__cause__ or ve.__context__
    if ve is None:
        return str(err)
    # descend to the most specific error (e.g. inside anyOf / $ref)
    if ve.context:
        ve = jsonschema.exceptions.best_match(ve.context)
    key = _key_path(ve.absolute_path)
    files = ", ".join(str(f) for f in workflow.configfiles) or "(no config file)"
    if ve.validator == "additionalProperties":
        extra = sorted(set(ve.instance) - set(ve.schema.get("properties", {})))
        return (f"Invalid config ({files}): unknown key(s) {', '.join(map(repr, extra))} "
                f"in `{key}`. Allowed keys: {', '.join(ve.schema.get('properties', {}))}.")
    if ve.validator == "required":
        return f"Invalid config ({files}): `{key}`: {ve.message}."
    return (f"Invalid config ({files}): `{key}` = {ve.instance!r} is not allowed: "
            f"{ve.message}. Allowed: {_allowed(ve.schema)}.")


try:
    validate(config, SCHEMA_FILE)
except WorkflowError as e:
    raise WorkflowError(explain_validation_error(e)) from None


def _config_error(key: str, msg: str):
    files = ", ".join(str(f) for f in workflow.configfiles) or "(no config file)"
    raise WorkflowError(f"Invalid config ({files}): `{key}`: {msg}")


DATASETS: dict = config["datasets"]
for _ds, _block in DATASETS.items():
    _layers = _block["model"]["layers"]
    if _layers[-1]["pool"] != 1:
        _config_error(f"datasets.{_ds}.model.layers[{len(_layers) - 1}].pool",
                      f"the top layer is not pooled: pool must be 1, got {_layers[-1]['pool']}.")
if config["benchmark"]["dataset"] is not None and config["benchmark"]["dataset"] not in DATASETS:
    _config_error("benchmark.dataset",
                  f"{config['benchmark']['dataset']!r} is not one of the configured datasets "
                  f"({', '.join(DATASETS)}), nor null (= the first one).")

# The config file(s) this run used, as recorded in metrics.json and results/tables.md.
def _rel(p) -> str:
    try:
        return os.path.relpath(Path(p).resolve(), Path.cwd())
    except ValueError:
        return str(p)


CONFIG_FILES = [_rel(p) for p in workflow.configfiles]

# Threads for the heavy rules (pretraining, features, SVM, benchmarks): TensorFlow's
# intra-op thread pool is sized from them.
def _all_cores() -> int:
    try:
        return workflow.cores
    except WorkflowError:  # no --cores (e.g. `snakemake --unlock`): no job runs anyway
        return 1


HEAVY_THREADS = config["threads"] if config["threads"] else _all_cores()


wildcard_constraints:
    ds="|".join(re.escape(d) for d in DATASETS),
    l=r"[1-9][0-9]*",


def res(rule_name: str) -> dict:
    """The `resources:` of a rule from config key `resources.<rule>`."""
    r = config["resources"][rule_name]
    # `gpu` is the name Snakemake's executors (SLURM: --gpus) read
    return {"mem_mb": r["mem_mb"], "runtime": r["runtime"], "gpu": r["gpus"]}


def ds_cfg(ds: str) -> dict:
    return DATASETS[ds]


def n_layers(ds: str) -> int:
    return len(DATASETS[ds]["model"]["layers"])


def raw_dir(ds: str) -> str:
    """Where a dataset's raw files live: `datasets.<ds>.raw_dir`, else `<raw_dir>/<ds>`."""
    return DATASETS[ds].get("raw_dir") or os.path.join(config["raw_dir"], ds)


def run_config(ds: str, method: str | None = None) -> dict:
    """What a run of dataset `ds` depends on: recorded in its results, compared on rerun
    (the `methods` list, the CNN baseline's `cnn` block and, except for `method`
    supervised, the `supervised` block are left out: enabling another method or changing
    the CNN or the supervised model must not rerun this one)."""
    skip = ("methods", "cnn") + (() if method == "supervised" else ("supervised",))
    block = {k: v for k, v in DATASETS[ds].items() if k not in skip}
    return {"seed": config["seed"], "hyper": config["hyper"], "dataset": ds, "block": block}


def enabled_runs():
    for ds, block in DATASETS.items():
        for method in block["methods"]:
            yield ds, method


def benchmark_dataset() -> str:
    return config["benchmark"]["dataset"] or next(iter(DATASETS))


def pretrain_layer_input(wc):
    l = int(wc.l)
    if l > n_layers(wc.ds):
        raise WorkflowError(f"dataset {wc.ds} has {n_layers(wc.ds)} layers, not {l}")
    if l == 1:
        return {"x": f"results/{wc.ds}/data/prepared.npz"}
    return {"x": f"results/{wc.ds}/pretrain/layer{l - 1}.npz"}


def all_layer_files(wc) -> list:
    return [f"results/{wc.ds}/pretrain/layer{l}.npz" for l in range(1, n_layers(wc.ds) + 1)]
