"""workflow/lib/dgdm_workflow.explain_validation_error: the message names the key and what
is allowed, and says why a number given through ``--config`` arrived as text."""

from __future__ import annotations

import sys
from pathlib import Path

import jsonschema
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow" / "lib"))
from dgdm_workflow import explain_validation_error  # noqa: E402

SCHEMA = {"type": "object", "properties": {"datasets": {"type": "object", "properties": {
    "n_train": {"type": ["integer", "null"], "minimum": 1},
    "scan": {"enum": ["random", "fixed"]}}}}}


def _message(config: dict) -> str:
    err = next(jsonschema.Draft7Validator(SCHEMA).iter_errors(config))
    return explain_validation_error(err, ["config/config.yaml"])


@pytest.mark.parametrize("text", ["4000", "null", "0.5"])
def test_a_number_given_as_text_says_why_and_what_to_do(text):
    out = _message({"datasets": {"n_train": text}})
    assert "`datasets.n_train`" in out and "integer or null" in out
    assert "--config" in out and "--configfile config/config.yaml FILE" in out


@pytest.mark.parametrize("config", [{"datasets": {"n_train": "many"}},
                                    {"datasets": {"n_train": 0}},
                                    {"datasets": {"scan": "diagonal"}}])
def test_other_errors_carry_no_hint(config):
    out = _message(config)
    assert "Invalid config (config/config.yaml)" in out and "--configfile" not in out
