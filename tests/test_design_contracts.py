"""docs/design.md's contract block against the code.

The block (a fence opened with ```python contract) lists the entry points the workflow
scripts call, one signature each: the dotted name, then the parameters in order, with
`*` and `/` where Python puts them and `=default` where the parameter has one (`=...`
when the default is not a literal). A signature that drifts from the code fails here,
so the page cannot silently describe an interface that no longer exists.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

DESIGN = Path(__file__).resolve().parents[1] / "docs" / "design.md"
FENCE = re.compile(r"^```python contract\n(.*?)^```", re.S | re.M)

_KINDS = inspect.Parameter


def contract_entries(text: str) -> list[tuple[str, str]]:
    """(dotted name, parameter list) for every signature of the contract block."""
    blocks = FENCE.findall(text)
    assert len(blocks) == 1, "docs/design.md needs exactly one ```python contract block"
    body = "\n".join(line.split("#", 1)[0] for line in blocks[0].splitlines())
    entries, depth, current = [], 0, ""
    for ch in body:
        current += ch
        depth += ch == "("
        depth -= ch == ")"
        if ch == ")" and depth == 0:
            name, params = current.strip().split("(", 1)
            entries.append((name.strip(), params[:-1]))
            current = ""
    assert not current.strip(), f"unbalanced entry in the contract block: {current!r}"
    return entries


def documented(params: str) -> list[tuple[str, inspect._ParameterKind, object]]:
    """(name, kind, default node or None) of each documented parameter, in order."""
    args = ast.parse(f"def _f({params}): pass").body[0].args
    out = []
    positional = [(a, _KINDS.POSITIONAL_ONLY) for a in args.posonlyargs]
    positional += [(a, _KINDS.POSITIONAL_OR_KEYWORD) for a in args.args]
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    out += [(a.arg, kind, d) for (a, kind), d in zip(positional, defaults)]
    if args.vararg:
        out.append((args.vararg.arg, _KINDS.VAR_POSITIONAL, None))
    out += [(a.arg, _KINDS.KEYWORD_ONLY, d) for a, d in zip(args.kwonlyargs, args.kw_defaults)]
    if args.kwarg:
        out.append((args.kwarg.arg, _KINDS.VAR_KEYWORD, None))
    return out


def resolve(dotted: str):
    """The object a dotted name points to: the longest importable module, then attributes."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for part in parts[i:]:
            obj = getattr(obj, part)
        return obj
    raise ImportError(dotted)


def default_matches(node: ast.expr, actual) -> bool:
    if isinstance(node, ast.Constant) and node.value is Ellipsis:
        return True  # documented as "has a default", value not spelled out
    if isinstance(node, ast.Name):
        return getattr(actual, "__name__", None) == node.id
    return ast.literal_eval(node) == actual


ENTRIES = contract_entries(DESIGN.read_text())


def test_the_block_lists_the_workflow_entry_points():
    names = {name for name, _ in ENTRIES}
    for needed in ("dgdm_tf.pretrain.chain.run_pretrain_layer", "dgdm_tf.topdown.refine.run_refine",
                   "dgdm_tf.topdown.chain.infer_topdown", "dgdm_tf.mcem.test_time.infer_map",
                   "dgdm_tf.mcem.classify.classify", "dgdm_tf.supervised.svm_classifier.BayesianSVM"):
        assert needed in names


@pytest.mark.parametrize("name,params", ENTRIES, ids=[name for name, _ in ENTRIES])
def test_documented_signature_matches_the_code(name, params):
    actual = list(inspect.signature(resolve(name)).parameters.values())
    doc = documented(params)
    assert [(n, k) for n, k, _ in doc] == [(p.name, p.kind) for p in actual], (
        f"{name}: docs/design.md says ({params}), the code says {inspect.signature(resolve(name))}")
    for (n, _, node), p in zip(doc, actual):
        has_default = p.default is not inspect.Parameter.empty
        assert (node is not None) == has_default, f"{name}: `{n}` default documented wrongly"
        if node is not None:
            assert default_matches(node, p.default), (
                f"{name}: `{n}` defaults to {p.default!r}, docs/design.md says {ast.unparse(node)}")


#: the library's subpackages: a backticked `pkg.name...` in the prose names one of them
PACKAGES = sorted(p.name for p in (Path(__file__).resolve().parents[1] / "src" / "dgdm_tf").iterdir()
                  if (p / "__init__.py").is_file())
NAME = re.compile(r"`(?:dgdm_tf\.)?((?:%s)\.[A-Za-z_][A-Za-z0-9_.]*)`" % "|".join(PACKAGES))


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module("dgdm_tf." + ".".join(parts[:i]))
        except ImportError:
            continue
        for p in parts[i:]:
            if not hasattr(obj, p):
                return False
            obj = getattr(obj, p)
        return True
    return False


def _config_key(dotted: str, config: dict) -> bool:
    """A key path of config/config.yaml: top level or under a dataset (`pretrain.batch_size`)."""
    for root in (config, *config["datasets"].values()):
        node = root
        for p in dotted.split("."):
            if not isinstance(node, dict) or p not in node:
                break
            node = node[p]
        else:
            return True
    return False


def test_every_library_name_in_the_prose_exists():
    """A backticked name that starts with one of the library's subpackages (outside the
    contract block) names a module or attribute that exists, or a config key; the page
    once named `pretrain.sweep` long after it moved. A name under no subpackage (the page
    also named `deep_model.Colouring`) is not checked."""
    import yaml

    text = FENCE.sub("", DESIGN.read_text())
    config = yaml.safe_load((DESIGN.parents[1] / "config" / "config.yaml").read_text())
    names = sorted(set(NAME.findall(text)))
    assert len(names) > 30, names  # the page's map names the library's functions
    missing = [n for n in names if not _resolves(n) and not _config_key(n, config)]
    assert missing == []
