"""The schema is where a default is written: a library function that a rule calls with a
config block, and that keeps a default of its own for a key of that block, must keep the
schema's value, so that calling the library without the workflow gives what the workflow
gives. The exceptions are listed with their reason: a default that switches a feature
off in the library (the schema turns it on), or a function that serves two blocks whose
defaults differ (the rules always pass the value)."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest
import yaml

SCHEMA = Path(__file__).resolve().parents[1] / "workflow" / "schemas" / "config.schema.yaml"

#: (module:function, the config block whose keys it takes), as the rule scripts call them;
#: an entry point that takes options (dgdm_tf.core.options) is checked by
#: tests/test_core_options.py instead
CALLS = [
    ("dgdm_tf.baselines.cnn:train_cnn", "dataset.cnn"),
    ("dgdm_tf.baselines.encoder:encode", "dataset.encoder"),
    ("dgdm_tf.pretrain.block_posterior:block_posterior_features", "dataset.block_features"),
    ("dgdm_tf.pretrain.ridge_start:RidgeStart", "start"),
    ("dgdm_tf.data.minibatches:McemData", "dataset.stream"),
    ("dgdm_tf.topdown.chain:missing_mask", "dataset.inpaint"),
]

EXEMPT = {
    ("missing_mask", "block"): "the library's block size is the figure's default; inpaint.block a config choice",
}


def _blocks() -> dict:
    schema = yaml.safe_load(SCHEMA.read_text())

    def walk(node, path):
        if isinstance(node, dict) and "$ref" in node:
            yield from walk(schema["$defs"][node["$ref"].split("/")[-1]], path)
        if isinstance(node, dict) and "properties" in node:
            yield path, node["properties"]
            for key, sub in node["properties"].items():
                yield from walk(sub, f"{path}.{key}")

    out = dict(walk(schema["$defs"]["dataset"], "dataset"))
    out.update(walk(schema["$defs"]["start"], "start"))
    return out


def _as_library(param: str, value):
    """A config value as the library takes it (a start block is a RidgeStart, or None)."""
    if param == "start" and isinstance(value, dict):
        from dgdm_tf.pretrain.ridge_start import RidgeStart

        return RidgeStart.from_config(value)
    return value


@pytest.mark.parametrize("call, block", CALLS, ids=[f"{c.split(':')[1]}-{b}" for c, b in CALLS])
def test_library_defaults_are_the_schemas(call, block):
    module, name = call.split(":")
    params = inspect.signature(getattr(importlib.import_module(module), name)).parameters
    props = _blocks()[block]
    differ = []
    for p in params.values():
        if p.default is inspect.Parameter.empty or p.name not in props or "default" not in props[p.name]:
            continue
        if (name, p.name) in EXEMPT:
            continue
        if _as_library(p.name, props[p.name]["default"]) != p.default:
            differ.append(f"{name}({p.name}={p.default!r}) against {block}.{p.name}: "
                          f"{props[p.name]['default']!r}")
    assert not differ, "library defaults that are not the schema's:\n" + "\n".join(differ)


def test_every_exemption_is_still_needed():
    """An exemption whose parameter no longer has a default of its own, or whose default
    became the schema's, must go."""
    blocks = _blocks()
    for (name, param), _why in EXEMPT.items():
        calls = [(c, b) for c, b in CALLS if c.endswith(":" + name)]
        assert calls, f"{name} is not among CALLS"
        fn = getattr(importlib.import_module(calls[0][0].split(":")[0]), name)
        default = inspect.signature(fn).parameters[param].default
        assert default is not inspect.Parameter.empty, f"{name}({param}) has no default now"
        assert any(_as_library(param, blocks[b][param]["default"]) != default
                   for _c, b in calls if param in blocks[b]), (
            f"{name}({param}) now has the schema's default: drop the exemption")
