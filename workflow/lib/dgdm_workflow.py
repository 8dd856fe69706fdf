"""The Python helpers of the Snakemake rule files: config checks and messages, paths,
input functions and the settings each rule hands its script.

Plain Python (no Snakemake globals), so that the rule files only wire and
`snakemake --lint` finds no functions beside rules. `workflow/rules/common.smk`
imports this module and builds one :class:`Wiring` from the run's config; the rule
files call its methods through the names common.smk binds (``ds_cfg``, ``res``, ...).
"""

from __future__ import annotations

import base64
import mimetypes
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from docutils.parsers.rst import directives
from docutils.parsers.rst.directives.images import Figure
from snakemake.exceptions import WorkflowError

# the repository's library first (as workflow/scripts/_common.py does for the scripts):
# the wiring asks dgdm_tf.report.runs which images each row uses (light: no TensorFlow)
_SRC = Path(__file__).resolve().parents[2] / "src"
if str(_SRC) not in sys.path:
    sys.path.insert(0, str(_SRC))

from dgdm_tf.report.runs import (ENCODER_METHOD, cnn_peer_runs, curve_methods,  # noqa: E402
                                 reference_peer_runs, row_subsets)


#: the categories of `snakemake --report`, in the workflow's order (the report sorts
#: them by name, hence the numbers); each figure's subcategory is its dataset
REPORT_CATEGORIES = {
    "tables": "1. Tables",
    "data": "2. Data",
    "pretraining": "3. Pretraining",
    "topdown": "4. Top-down model",
    "supervised": "5. Supervised model",
    "baselines": "6. Baselines",
    "benchmarks": "7. Benchmarks",
}


class Base64Figure(Figure):
    """``.. base64-figure:: path``: docutils' figure with the file inlined as a base64
    data URI, so the report's front page (workflow/report/workflow.rst) shows it in the
    .html and the .zip report alike. Snakemake's own ``embeddedfigure`` leaves the path
    as it is. A percent-encoded data URI, wrapped for docutils' limit of 10000
    characters a line, shows nothing: Chromium keeps the line breaks in the bytes."""

    def run(self):
        path = Path(directives.uri(self.arguments[0]))
        mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        self.options.setdefault("alt", path.name)
        self.arguments[0] = f"data:{mime};base64," + base64.b64encode(path.read_bytes()).decode()
        return super().run()


def register_report_directives() -> None:
    """The reStructuredText directives of the report's front page; `snakemake --report`
    renders it with docutils in the process that read the Snakefile."""
    directives.register_directive("base64-figure", Base64Figure)


# ------------------------------------------------------------- config messages
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


def _files_text(configfiles: Iterable) -> str:
    return ", ".join(str(f) for f in configfiles) or "(no config file)"


def explain_validation_error(err, configfiles: Iterable) -> str:
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
    files = _files_text(configfiles)
    if ve.validator == "additionalProperties":
        extra = sorted(set(ve.instance) - set(ve.schema.get("properties", {})))
        return (f"Invalid config ({files}): unknown key(s) {', '.join(map(repr, extra))} "
                f"in `{key}`. Allowed keys: {', '.join(ve.schema.get('properties', {}))}.")
    if ve.validator == "required":
        return f"Invalid config ({files}): `{key}`: {ve.message}."
    return (f"Invalid config ({files}): `{key}` = {ve.instance!r} is not allowed: "
            f"{ve.message}. Allowed: {_allowed(ve.schema)}.{_string_hint(ve)}")


def _string_hint(ve) -> str:
    """Why a number (or true / null) may arrive as text: Snakemake's ``--config`` parses
    a top-level value, but the values nested in a mapping given there stay strings."""
    import yaml

    if ve.validator != "type" or not isinstance(ve.instance, str):
        return ""
    try:
        parsed = yaml.safe_load(ve.instance)
    except yaml.YAMLError:
        return ""
    if isinstance(parsed, str):
        return ""
    return (f" The value is the text {ve.instance!r}: a value nested in a mapping given to "
            "--config reaches the config as a string. Write the override into a YAML file "
            "and pass it after the default config: --configfile config/config.yaml FILE.")


def config_error(configfiles: Iterable, key: str, msg: str):
    raise WorkflowError(f"Invalid config ({_files_text(configfiles)}): `{key}`: {msg}")


def check_config(config: dict, configfiles: Iterable) -> None:
    """What the schema cannot say: the top layer is not pooled, a per-layer `jit_compile`
    list has one flag per layer, a data-parallel refinement has a chunk per worker, and
    `benchmark.dataset` names a configured dataset (or is null)."""
    datasets = config["datasets"]
    for ds, block in datasets.items():
        check_refine_workers(ds, block, configfiles)
        layers = block["model"]["layers"]
        if layers[-1]["pool"] != 1:
            config_error(configfiles, f"datasets.{ds}.model.layers[{len(layers) - 1}].pool",
                         f"the top layer is not pooled: pool must be 1, got "
                         f"{layers[-1]['pool']}.")
        for part in ("pretrain", "features"):
            flag = block.get(part, {}).get("jit_compile", False)
            if isinstance(flag, list) and len(flag) != len(layers):
                config_error(configfiles, f"datasets.{ds}.{part}.jit_compile",
                             f"a list needs one flag per layer ({len(layers)}, layer 1 first), "
                             f"got {len(flag)}: {flag!r}. Or give true / false for every layer, or "
                             f"top for the top layer alone.")
    bench = config["benchmark"]["dataset"]
    if bench is not None and bench not in datasets:
        config_error(configfiles, "benchmark.dataset",
                     f"{bench!r} is not one of the configured datasets "
                     f"({', '.join(datasets)}), nor null (= the first one).")


def check_refine_workers(ds: str, block: dict, configfiles: Iterable) -> None:
    """refine.workers > 1 splits the images by chunks (dgdm_tf.topdown.refine.run_refine):
    say so before any job runs, not when the refine job starts on the cluster."""
    ref = block["refine"]
    workers = int(ref["workers"])
    if workers == 1:
        return
    sizes = [int(v) for v in (ref["n_images"], block["pretrain"]["n_images"]) if v is not None]
    n, chunk = (min(sizes) if sizes else None), ref["chunk"]
    if chunk is None or (n is not None and -(-n // int(chunk)) < workers):
        images = "all the refined images" if n is None else f"the {n} refined images"
        fix = "" if n is None else f" at most {-(-n // workers)},"
        config_error(configfiles, f"datasets.{ds}.refine.chunk",
                     f"refine.workers is {workers}, which splits {images} by chunks, at least "
                     f"one chunk per worker; chunk is {chunk}. Set chunk to{fix} or workers to 1.")


# ------------------------------------------------------------ run-wide values
def relative_config_files(configfiles: Iterable) -> list[str]:
    """The config file(s) this run used, relative to the working directory where
    possible: as recorded in metrics.json and results/tables.md."""
    def rel(p) -> str:
        try:
            return os.path.relpath(Path(p).resolve(), Path.cwd())
        except ValueError:
            return str(p)

    return [rel(p) for p in configfiles]


def heavy_threads(config: dict, cores: Callable[[], int]) -> int:
    """Threads for the heavy rules (pretraining, features, SVM, benchmarks): `threads`
    from the config, else all cores given to Snakemake (`cores()`, Snakemake's
    `workflow.cores`); TensorFlow's intra-op thread pool is sized from them. Inside a
    Slurm job, the CPUs Slurm gave the job: the submitting Snakemake sized the job from
    its own cores, and the job step (run with --cores all) must not ask for the node's."""
    if config["threads"]:
        return config["threads"]
    if os.environ.get("SLURM_CPUS_PER_TASK"):
        return int(os.environ["SLURM_CPUS_PER_TASK"])
    try:
        return cores()
    except WorkflowError:  # no --cores (e.g. `snakemake --unlock`): no job runs anyway
        return 1


def dataset_regex(datasets: Iterable[str]) -> str:
    """The `{ds}` wildcard's constraint: exactly one of the configured datasets."""
    return "|".join(re.escape(d) for d in datasets)


def training_cfg(sup: dict) -> dict:
    """The supervised block without its test-time settings (all but predict.models)."""
    return {**{k: v for k, v in sup.items() if k != "predict"},
            "predict": {"models": sup["predict"]["models"]}}


# ------------------------------------------------------------------ ablations
#: the keys of an ablation file's `ablation:` block
ABLATION_KEYS = ("base", "description", "hyper", "changes")
ABLATION_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


def deep_merge(base: dict, changes: dict) -> dict:
    """``base`` with ``changes`` written over it, mappings merged key by key."""
    out = dict(base)
    for k, v in changes.items():
        both = isinstance(v, dict) and isinstance(out.get(k), dict)
        out[k] = deep_merge(out[k], v) if both else v
    return out


def load_ablations(config: dict, folder: Path,
                   validate: Callable[[dict], None]) -> tuple[dict, dict]:
    """The ablation files ``<folder>/<name>.yaml``: each varies one dataset of the run's
    config (``base``) and runs as a dataset of its own, ``<name>``, under
    ``results/<name>/``, so it never writes into the base's results. Returns
    ({name: {"base", "description", "hyper", "changes", "block", "file"}} for the files
    whose base this config defines, {name: why not} for the others). ``validate``
    checks a config against the schema (and fills its defaults)."""
    import yaml

    ready, unavailable = {}, {}
    for path in sorted(Path(folder).glob("*.yaml")):
        name = path.stem
        where = f"ablation file {path}"
        if not ABLATION_NAME.fullmatch(name):
            raise WorkflowError(f"{where}: the file name is the ablation's name and its results "
                                f"folder: letters, digits and _, starting with a letter.")
        spec = (yaml.safe_load(path.read_text()) or {}).get("ablation")
        if not isinstance(spec, dict) or "base" not in spec or "changes" not in spec:
            raise WorkflowError(f"{where}: needs a block `ablation:` with `base` (a dataset of "
                                f"the config) and `changes` (keys of that dataset's block).")
        extra = set(spec) - set(ABLATION_KEYS)
        if extra:
            raise WorkflowError(f"{where}: unknown key(s) {sorted(extra)} in `ablation:`; "
                                f"allowed: {', '.join(ABLATION_KEYS)}.")
        base = spec["base"]
        if name in config["datasets"]:
            raise WorkflowError(f"{where}: {name!r} is already a dataset of the config; rename "
                                f"the file (its name is the results folder).")
        if base not in config["datasets"]:
            unavailable[name] = (f"ablation {name!r} ({path}) varies dataset {base!r}, which this "
                                 f"config does not define (it has: {', '.join(config['datasets'])}); "
                                 f"run it with the config that defines {base!r} (config/config.yaml "
                                 f"for mnist).")
            continue
        block = deep_merge(config["datasets"][base], spec["changes"] or {})
        # the base's raw files, not a download of their own under <raw_dir>/<name>
        block["raw_dir"] = block.get("raw_dir") or os.path.join(config["raw_dir"], base)
        hyper = deep_merge(config["hyper"], spec.get("hyper") or {})
        trial = {**config, "hyper": hyper, "datasets": {name: block},
                 "benchmark": {**config["benchmark"], "dataset": None}}
        try:
            validate(trial)
        except WorkflowError as e:
            raise WorkflowError(explain_validation_error(e, [path])) from None
        check_config(trial, [path])
        ready[name] = {"base": base, "description": spec.get("description") or "",
                       "hyper": trial["hyper"], "hyper_changes": spec.get("hyper") or {},
                       "changes": spec["changes"] or {},
                       "block": trial["datasets"][name],
                       "file": relative_config_files([path])[0]}
    return ready, unavailable


# ------------------------------------------------------- the rules' helpers
def _check_peer_at(row: str, rows_with_peer: Iterable, ds: str, run: str, peer: str,
                   full_run: str) -> None:
    """A run at a row's own images (`results/<ds>/<run>/`) exists only for the rows that
    take fewer images than the dataset; asking for another says why and where to look."""
    if row not in rows_with_peer:
        raise WorkflowError(
            f"results/{ds}/{run}/: {row} of {ds} has no {peer} at its own sizes (it is not "
            f"enabled, the dataset does not run {full_run}, or the row uses the dataset's "
            f"n_train / n_test subsets: see results/{ds}/{full_run}/)")


class Wiring:
    """The helpers that need the run's config: one instance per workflow."""

    def __init__(self, config: dict, ablations: dict | None = None,
                 unavailable: dict | None = None):
        self.config = config
        self.ablations: dict = ablations or {}
        self.unavailable: dict = unavailable or {}
        # the config's datasets and the ablations, each a dataset of its own
        self.datasets: dict = {**config["datasets"],
                               **{n: a["block"] for n, a in self.ablations.items()}}

    # --- config lookups
    def res(self, rule_name: str) -> dict:
        """The `resources:` of a rule from config key `resources.<rule>`, replaced for a
        dataset's jobs by `resources_by_dataset.<ds>.<rule>` where that is given."""
        base = self.config["resources"][rule_name]
        by_ds = {ds: rules[rule_name] for ds, rules in
                 (self.config.get("resources_by_dataset") or {}).items() if rule_name in rules}
        # `gpu` is the name Snakemake's executors (SLURM: --gpus) read
        names = {"mem_mb": "mem_mb", "runtime": "runtime", "gpu": "gpus"}
        if not by_ds:
            return {res: base[key] for res, key in names.items()}

        def of(key: str):
            def value(wildcards) -> int:
                return by_ds.get(getattr(wildcards, "ds", None), {}).get(key, base[key])
            return value
        return {res: of(key) for res, key in names.items()}

    def ds_cfg(self, ds: str) -> dict:
        return self.datasets[ds]

    def n_layers(self, ds: str) -> int:
        return len(self.datasets[ds]["model"]["layers"])

    def raw_dir(self, ds: str) -> str:
        """Where a dataset's raw files live: `datasets.<ds>.raw_dir`, else `<raw_dir>/<ds>`."""
        return self.datasets[ds].get("raw_dir") or os.path.join(self.config["raw_dir"], ds)

    def data_spec(self, ds: str) -> dict:
        """The keys of datasets.<ds> the data rules read: not `methods` nor the settings
        blocks of the methods (model, pretrain, features, svm, cnn, ...: every mapping),
        so that changing how a method runs does not prepare the data again (which would
        rerun every method of the dataset)."""
        return {k: v for k, v in self.ds_cfg(ds).items()
                if k != "methods" and not isinstance(v, dict)}

    def seed_name(self, wc) -> str:
        """The dataset name a run of ``wc.ds`` seeds its draws by (images, chains, SVMs):
        an ablation's base, so that it draws the same images and random numbers as the
        main run and the two compare paired; the dataset itself otherwise."""
        ab = self.ablations.get(wc.ds)
        return ab["base"] if ab else wc.ds

    def run_config(self, ds: str, method: str | None = None) -> dict:
        """What a run of dataset `ds` depends on: recorded in its results, compared on
        rerun (the `methods` list, the CNN baseline's `cnn` block, the `learning_curve`
        block and, except for `method` supervised, the `supervised` block are left out:
        enabling another method or changing the CNN, the learning curves or the
        supervised model must not rerun this one)."""
        skip = (("methods", "cnn", "learning_curve")
                + (() if method == "supervised" else ("supervised",)))
        block = {k: v for k, v in self.datasets[ds].items() if k not in skip}
        out = {"seed": self.config["seed"], "hyper": self.hyper(ds), "dataset": ds,
               "block": block}
        if ds in self.ablations:
            out["ablation_of"] = self.ablations[ds]["base"]
        return out

    def ablation_inputs(self, wc) -> list:
        """An ablation's table reads the metrics.json of each of its methods; an ablation
        whose base this config lacks says which config to run it with."""
        if wc.ablation in self.unavailable:
            raise WorkflowError(self.unavailable[wc.ablation])
        return [f"results/{wc.ablation}/{m}/metrics.json"
                for m in self.datasets[wc.ablation]["methods"]]

    def hyper(self, ds: str) -> dict:
        """The prior hyperparameters of dataset ``ds``: the config's, or its ablation's."""
        a = self.ablations.get(ds)
        return a["hyper"] if a else self.config["hyper"]

    def enabled_runs(self) -> Iterator[tuple[str, str]]:
        for ds, block in self.config["datasets"].items():  # not the ablations
            for method in block["methods"]:
                yield ds, method

    def benchmark_dataset(self) -> str:
        return self.config["benchmark"]["dataset"] or next(iter(self.config["datasets"]))

    def benchmark_params(self, wc) -> dict:
        """The benchmarked dataset's layers and CNN settings."""
        block = self.ds_cfg(self.benchmark_dataset())
        return {"layers": block["model"]["layers"], "cnn": block["cnn"]}

    # --- pretraining
    def pretrain_layer_input(self, wc) -> dict:
        l = int(wc.l)
        if l > self.n_layers(wc.ds):
            raise WorkflowError(f"dataset {wc.ds} has {self.n_layers(wc.ds)} layers, not {l}")
        if l == 1:
            return {"x": f"results/{wc.ds}/data/prepared.npz"}
        return {"x": f"results/{wc.ds}/pretrain/layer{l - 1}.npz"}

    def all_layer_files(self, wc) -> list:
        return [f"results/{wc.ds}/pretrain/layer{l}.npz"
                for l in range(1, self.n_layers(wc.ds) + 1)]

    # --- shards of the per-image rules (config `shards`)
    def shard_inputs(self, rule: str):
        """The input function of a per-image rule that can be split: with `shards` n > 1,
        the shard files ``results/{ds}/<folder>/shards/<split>_<i>of<n>.npz`` of its
        splits, written by rule ``<rule>_shard``, which the rule gathers; with 1 (or a
        route that is not split) none, and the rule does the per-image work itself."""
        def files(wc) -> list:
            n, block = int(self.config["shards"]), self.ds_cfg(wc.ds)
            if n <= 1:
                return []
            if rule == "features" and block["features"]["route"] != "topdown":
                return []  # the layer-wise chains are not split
            splits = ("train", "test")
            if rule == "supervised_predict" and int(block["supervised"]["predict"]["mismatch_images"]) > 0:
                splits = ("test", "mismatch")  # the mismatch check's training images
            elif rule in ("supervised_predict", "mcem_predict"):
                splits = ("test",)
            folder = {"features": "pretrained_svm", "topdown_features": "unsupervised_svm",
                      "block_features": "pretrained_block_svm", "supervised_predict": "supervised",
                      "mcem_predict": getattr(wc, "method", None)}[rule]
            return [f"results/{wc.ds}/{folder}/shards/{s}_{i}of{n}.npz" for s in splits for i in range(n)]
        return files

    # --- the SVM rows
    def svm_inputs(self, wc) -> dict:
        """The features of method {method}, plus what produced them (for the wall time)."""
        out = {"features": f"results/{wc.ds}/{wc.method}/features.npz",
               "summary": f"results/{wc.ds}/data/summary.json",
               "layers": self.all_layer_files(wc)}
        if self.is_reference(wc.method):  # the reference row encodes with layer 1 alone
            out["layers"] = out["layers"][:1]
        if wc.method == "unsupervised_svm":
            out["refine"] = f"results/{wc.ds}/refine/model.npz"
            # the same SVM on the pretrained features of the same images: what refinement adds
            out["pretrained_features"] = f"results/{wc.ds}/pretrained_svm/features.npz"
            # on the same images that fit is the pretrained_svm row itself: reused, not refitted
            out["pretrained_metrics"] = f"results/{wc.ds}/pretrained_svm/metrics.json"
        return out

    def svm_settings(self, wc) -> dict:
        """The Bayesian SVM's block (its SvmOptions.from_config): the dataset's `svm`, except that
        the reference row encoder_svm is fitted by `encoder.svm_method` (the same model
        and prior / hinge settings; default em, the MAP: Gibbs at its 4900 features
        would take hours, see the schema)."""
        return self._svm_settings(wc.ds, wc.method)

    def _svm_settings(self, ds: str, method: str) -> dict:
        kw = dict(self.ds_cfg(ds)["svm"])
        if self.is_reference(method):
            kw["method"] = (self.ds_cfg(ds).get("encoder") or {}).get("svm_method", "em")
        return kw

    def svm_view(self, wc) -> str:
        """How the SVM reads the row's features (dataset key `svm_view`); encoder_svm's
        are nonnegative already and are read as they are."""
        return self._svm_view(wc.ds, wc.method)

    def _svm_view(self, ds: str, method: str) -> str:
        return "signed" if self.is_reference(method) else self.ds_cfg(ds)["svm_view"]

    # --- the learning curves (rule learning_curve)
    def learning_curve_methods(self, ds: str) -> list:
        """The rows on `ds`'s learning curve (dgdm_tf.report.runs.curve_methods)."""
        return curve_methods(self.ds_cfg(ds))

    def learning_curve_inputs(self, wc) -> dict:
        """Each SVM curve row's features and metrics.json (its own fit: the point at its
        size), in the order of :meth:`learning_curve_rows`; the CNN's curve (rule
        cnn_learning_curve) where `cnn` is on it."""
        methods = self.learning_curve_methods(wc.ds)
        if not methods:
            raise WorkflowError(
                f"results/{wc.ds}/learning_curve.csv: {wc.ds} has no learning curve "
                f"(datasets.{wc.ds}.learning_curve.sizes is empty, or none of its "
                f"learning_curve.methods is in datasets.{wc.ds}.methods)")
        svm_rows = [m for m in methods if m != "cnn"]
        return {"features": [f"results/{wc.ds}/{m}/features.npz" for m in svm_rows],
                "metrics": [f"results/{wc.ds}/{m}/metrics.json" for m in svm_rows],
                "cnn": [f"results/{wc.ds}/cnn/learning_curve.csv"] if "cnn" in methods else []}

    def learning_curve_rows(self, wc) -> dict:
        """SVM curve row -> the svm rule's settings for it: {"svm": keyword arguments,
        "view": svm_view}."""
        return {m: {"svm": self._svm_settings(wc.ds, m), "view": self._svm_view(wc.ds, m)}
                for m in self.learning_curve_methods(wc.ds) if m != "cnn"}

    # --- the reference row (encoder_svm) and its runs at the Gibbs rows' images
    @staticmethod
    def is_reference(run: str) -> bool:
        """encoder_svm, or encoder_at/<row>: the reference row at a Gibbs row's images."""
        return run == ENCODER_METHOD or run.startswith("encoder_at/")

    def encoder_at_rows(self, ds: str) -> list:
        """The Gibbs rows of `ds` whose same-images reference is an encoder_at run (not
        the encoder_svm row itself)."""
        return [m for m, run in reference_peer_runs(self.datasets[ds]).items()
                if run == f"encoder_at/{m}"]

    def encoder_subsets(self, wc) -> dict:
        """The images the reference run `wc.run` encodes: the dataset's n_train / n_test
        subsets, then, for encoder_at/<row>, their first images as the row takes them."""
        block = self.ds_cfg(wc.ds)
        own = {"train": None, "test": None}
        if wc.run != ENCODER_METHOD:
            row = wc.run.split("/", 1)[1]
            _check_peer_at(row, self.encoder_at_rows(wc.ds), wc.ds, wc.run, "reference row",
                           ENCODER_METHOD)
            own = row_subsets(block, row)
        return {"n_train": block["n_train"], "n_test": block["n_test"],
                "own_train": own["train"], "own_test": own["test"]}

    # --- the supervised model
    def refined_start(self, wc) -> list:
        """The refinement's model when the supervised chain starts from it
        (`supervised.start_from: refined`); nothing when it starts from the pretrained
        layers, so asking for the supervised row alone does not run the refinement."""
        if self.ds_cfg(wc.ds)["supervised"]["start_from"] == "refined":
            return [f"results/{wc.ds}/refine/model.npz"]
        return []

    # --- the CNN baseline
    def cnn_run_config(self, ds: str, row: str | None = None) -> dict:
        """What the CNN run of `ds` depends on, recorded in its results and compared on
        rerun: the seed, the data subsets, the model's layers and the `cnn` block (not
        the Gibbs settings: changing those does not rerun the CNN). For the CNN at row
        `row`'s images, also the row and the first how many images of each subset it
        uses (dgdm_tf.report.runs.row_subsets: only those keys of the row's settings)."""
        block = self.datasets[ds]
        keep = ("kind", "paper_table", "n_train", "n_test", "model", "cnn")
        out: dict[str, Any] = {"seed": self.config["seed"], "dataset": ds,
                               "block": {k: block[k] for k in keep if k in block}}
        if row is not None:
            out["same_images_as"] = row
            out["subsets"] = row_subsets(block, row)
        return out

    def cnn_at_rows(self, ds: str) -> list:
        """The Gibbs rows of `ds` whose CNN peer is a cnn_at run (not the cnn run itself)."""
        return [m for m, run in cnn_peer_runs(self.datasets[ds]).items()
                if run == f"cnn_at/{m}"]

    def cnn_at_row(self, wc) -> str:
        _check_peer_at(wc.method, self.cnn_at_rows(wc.ds), wc.ds, f"cnn_at/{wc.method}", "CNN",
                       "cnn")
        return wc.method

    # --- the large-data route (stochastic MCEM, model averaging, transfer)
    def is_streamed(self, ds: str) -> bool:
        return self.ds_cfg(ds)["kind"] == "imagenet2012"

    def mcem_data(self, wc) -> str:
        return (f"results/{wc.ds}/data/stream.json" if self.is_streamed(wc.ds)
                else f"results/{wc.ds}/data/prepared.npz")

    def mcem_n_train(self, ds: str):
        return None if self.is_streamed(ds) else self.ds_cfg(ds)["n_train"]

    def tfds_data_dir(self, ds: str) -> str:
        return self.ds_cfg(ds).get("tfds_data_dir") or os.path.join(self.raw_dir(ds), "tfds")

    def mcem_predict_inputs(self, wc) -> dict:
        out = {"data": self.mcem_data(wc), "model": f"results/{wc.ds}/mcem/model.npz"}
        if wc.method == "model_averaging":
            out["samples"] = f"results/{wc.ds}/mcem/averaging_samples.npz"
        return out

    def transfer_source(self, ds: str) -> str:
        src = self.ds_cfg(ds)["transfer"]["source"]
        if src not in self.datasets:
            raise WorkflowError(
                f"datasets.{ds}.transfer.source = {src!r} is not a configured dataset "
                f"({', '.join(self.datasets)}); add it (methods may be empty) or remove "
                f"imagenet_transfer from datasets.{ds}.methods")
        return src

    # --- figures and tables
    def enabled_metrics(self, wc) -> list:
        return [f"results/{wc.ds}/{m}/metrics.json" for m in self.datasets[wc.ds]["methods"]]
