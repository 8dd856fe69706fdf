"""Options of an entry point: a frozen dataclass per config block, built from the block
by ``from_config``, which refuses a key it does not know.

The config schema (workflow/schemas/config.schema.yaml) is where a key is described and
its default written; :func:`options` makes a class's docstring the schema's description
of its block, so nothing is written twice. Each package keeps its options beside its
entry point; the machinery shared by all of them is here.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from pathlib import Path
from typing import Any, Mapping

import yaml

#: the schema of a checkout: <repo>/workflow/schemas beside <repo>/src/dgdm_tf
SCHEMA = Path(__file__).resolve().parents[3] / "workflow" / "schemas" / "config.schema.yaml"


@functools.lru_cache(maxsize=1)
def schema() -> dict:
    """The config schema, parsed once."""
    if not SCHEMA.is_file():
        raise FileNotFoundError(
            f"the config schema is not at {SCHEMA}: dgdm_tf reads its options' descriptions "
            "and defaults from its checkout's workflow/schemas/config.schema.yaml; run it from "
            "the repository (pip install -e ., or its src/ first on sys.path)")
    return yaml.safe_load(SCHEMA.read_text())


def _resolve(node: dict) -> dict:
    """The node a ``$ref`` names, with the referring node's own keys over it (a block's
    ``default`` and ``description`` of a shared definition are the block's)."""
    while isinstance(node, dict) and "$ref" in node:
        own = {k: v for k, v in node.items() if k != "$ref"}
        node = {**schema()["$defs"][node["$ref"].split("/")[-1]], **own}
    return node


def block(path: str) -> dict:
    """The schema node of a dotted block path: its first name a top-level key or a
    ``$defs`` entry (``dataset.refine``, ``dataset.supervised.predict``), ``$ref`` followed."""
    first, *rest = path.split(".")
    top = schema()
    node = top["properties"].get(first) or top["$defs"].get(first)
    if node is None:
        raise KeyError(f"the config schema has no block {path!r}")
    node = _resolve(node)
    for key in rest:
        props = node.get("properties", {})
        if key not in props:
            raise KeyError(f"the config schema has no block {path!r} (no {key!r})")
        node = _resolve(props[key])
    return node


def keys(path: str) -> dict[str, dict]:
    """The block's keys -> their schema nodes, in the schema's order."""
    return {k: _resolve(v) for k, v in block(path).get("properties", {}).items()}


def _doc(path: str, cls, own: str) -> str:
    node = block(path)
    lines = [" ".join(node.get("description", "").split()), "",
             f"Config block `{path}` (workflow/schemas/config.schema.yaml); its keys:", ""]
    props = keys(path)
    for key in props:
        if key in cls.OTHER_KEYS:
            lines.append(f"{key} (not an option here: {cls.OTHER_KEYS[key]})")
    for f in dataclasses.fields(cls):
        where = cls.NESTED.get(f.name, f.name)
        if where in cls.LIBRARY_ONLY:
            lines.append(f"{f.name}: {cls.LIBRARY_ONLY[where]} (the library's only)")
            continue
        node = props[where.split(".")[0]]
        for sub in where.split(".")[1:]:
            node = _resolve(node["properties"][sub])
        desc = " ".join(node.get("description", "").split())
        lines.append(f"{f.name}{'' if where == f.name else f' ({where})'}: {desc}")
    return "\n".join(lines + ([""] + own.splitlines() if own else []))


def options(path: str, *, name: str | None = None, other: Mapping[str, str] | None = None,
            nested: Mapping[str, str] | None = None, library_only: Mapping[str, str] | None = None):
    """Class decorator: ``cls`` as a frozen, keyword-only dataclass of the config block
    ``path`` with :meth:`from_config` and the schema's descriptions as its docstring.

    ``other``: keys of the block that are not options of the entry point (the rule script
    reads them), each with why; ``from_config`` accepts and drops them. ``nested``: field
    -> its dotted key inside the block (``{"keep_models": "predict.models"}``; the outer
    key is then one of ``other``). ``library_only``: fields the block has no key for, each
    with why (set by hand, never by ``from_config``). A class's own docstring (derived
    fields, units) is kept after the schema's text."""
    def wrap(cls):
        own = inspect.cleandoc(cls.__dict__.get("__doc__") or "")  # before dataclass writes one
        cls = dataclasses.dataclass(frozen=True, kw_only=True)(cls)
        cls.BLOCK, cls.BLOCK_NAME = path, name or path.split(".")[-1]
        cls.OTHER_KEYS, cls.NESTED = dict(other or {}), dict(nested or {})
        cls.LIBRARY_ONLY = dict(library_only or {})
        cls.from_config = classmethod(_from_config)
        cls.__doc__ = _doc(path, cls, own)
        return cls
    return wrap


def _from_config(cls, cfg: Mapping[str, Any] | None):
    """The options of a config block (a dict of the schema's keys; absent keys take the
    defaults). A key the block does not know is refused by name, with the keys it knows."""
    cfg = dict(cfg or {})
    fields = {f.name for f in dataclasses.fields(cls)} - set(cls.LIBRARY_ONLY) - set(cls.NESTED)
    outer = {where.split(".")[0] for where in cls.NESTED.values()}
    known = fields | set(cls.OTHER_KEYS) | outer
    unknown = [k for k in cfg if k not in known]
    if unknown:
        which = (f"key {unknown[0]!r}" if len(unknown) == 1
                 else "keys " + ", ".join(repr(k) for k in unknown))
        raise ValueError(f"{cls.BLOCK_NAME}: unknown {which}; the block knows: "
                         f"{', '.join(sorted(known))}")
    kw = {k: v for k, v in cfg.items() if k in fields}
    for field, where in cls.NESTED.items():
        node, found = cfg, True
        for part in where.split("."):
            if not isinstance(node, Mapping) or part not in node:
                found = False
                break
            node = node[part]
        if found:
            kw[field] = node
    return cls(**kw)
