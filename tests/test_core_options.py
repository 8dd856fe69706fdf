"""The entry points' options (dgdm_tf.core.options) against the config schema: key for
key, default for default, the docstring the schema's, and an unknown key refused by name."""

from __future__ import annotations

import dataclasses

import pytest

from dgdm_tf.baselines.cnn import CnnOptions
from dgdm_tf.core import options as core_options
from dgdm_tf.pretrain.options import FeatureOptions, PretrainOptions
from dgdm_tf.pretrain.ridge_start import RidgeStart
from dgdm_tf.supervised.options import SvmOptions
from dgdm_tf.topdown.options import RefineOptions, SupervisedOptions
from dgdm_tf.topdown.options import InpaintOptions, TopdownOptions
from dgdm_tf.mcem.options import (Alg2Options, AveragingOptions, MapOptions, McemOptions,
                                  PredictOptions, TransferOptions)

#: every options class (one per config block of an entry point)
OPTIONS = [RefineOptions, SupervisedOptions, PretrainOptions, FeatureOptions]
OPTIONS += [TopdownOptions, InpaintOptions, MapOptions, Alg2Options, PredictOptions, McemOptions,
            AveragingOptions, SvmOptions, TransferOptions, CnnOptions]


def _schema_default(cls, where: str):
    node = core_options.keys(cls.BLOCK)[where.split(".")[0]]
    for part in where.split(".")[1:]:
        node = core_options._resolve(node["properties"][part])
    assert "default" in node, f"{cls.BLOCK}.{where} has no default in the schema"
    return node["default"]


def _from_schema(cls, field: str):
    """The field as from_config makes it of the schema's default (a start block is a
    RidgeStart there)."""
    where = cls.NESTED.get(field, field)
    block = _schema_default(cls, where)
    for part in reversed(where.split(".")):
        block = {part: block}
    return getattr(cls.from_config(block), field)


@pytest.mark.parametrize("cls", OPTIONS, ids=lambda c: c.__name__)
def test_the_fields_are_the_blocks_keys(cls):
    """Every key of the block is a field or a named non-option key (or holds a nested
    field), every field a key of the block (or named as the library's own)."""
    keys = set(core_options.keys(cls.BLOCK))
    fields = {f.name for f in dataclasses.fields(cls)}
    direct = fields - set(cls.NESTED) - set(cls.LIBRARY_ONLY)
    outer = {where.split(".")[0] for where in cls.NESTED.values()}
    assert not set(cls.OTHER_KEYS) & direct, "a key both an option and not"
    assert keys == direct | set(cls.OTHER_KEYS) | outer, (
        f"schema only: {sorted(keys - direct - set(cls.OTHER_KEYS) - outer)}; "
        f"class only: {sorted((direct | set(cls.OTHER_KEYS) | outer) - keys)}")
    assert outer <= set(cls.OTHER_KEYS)
    assert not set(cls.LIBRARY_ONLY) & keys, "a library-only field that the block has"
    assert set(cls.LIBRARY_ONLY) <= fields


@pytest.mark.parametrize("cls", OPTIONS, ids=lambda c: c.__name__)
def test_the_defaults_are_the_schemas(cls):
    made = cls()
    differ = [f"{f.name}={getattr(made, f.name)!r}, schema {cls.NESTED.get(f.name, f.name)}: "
              f"{_schema_default(cls, cls.NESTED.get(f.name, f.name))!r}"
              for f in dataclasses.fields(cls) if f.name not in cls.LIBRARY_ONLY
              and getattr(made, f.name) != _from_schema(cls, f.name)]
    assert not differ, f"{cls.__name__} defaults that are not the schema's: {differ}"
    assert cls.from_config({}) == made


@pytest.mark.parametrize("cls", OPTIONS, ids=lambda c: c.__name__)
def test_the_docstring_is_the_schemas(cls):
    described = " ".join(core_options.block(cls.BLOCK)["description"].split())
    assert cls.__doc__.startswith(described)
    for key in core_options.keys(cls.BLOCK):
        assert f"\n{key}" in cls.__doc__, key


def test_a_misspelt_key_is_refused_by_name_with_the_known_keys():
    with pytest.raises(ValueError) as err:
        RefineOptions.from_config({"burnin": 3, "collect": 2})
    known = sorted(core_options.keys("dataset.refine"))
    assert str(err.value) == f"refine: unknown key 'burnin'; the block knows: {', '.join(known)}"
    with pytest.raises(ValueError, match=r"^supervised: unknown keys 'models', 'svm_step'; the "
                                         r"block knows: a_kappa, b_kappa, "):
        SupervisedOptions.from_config({"models": 3, "svm_step": 2})
    with pytest.raises(ValueError, match="unknown key 'workers'"):  # the library's only
        SupervisedOptions.from_config({"workers": 2})


def test_from_config_translates_the_block():
    """Non-option keys are dropped, nested ones read, the derived fields computed once."""
    o = RefineOptions.from_config({"n_images": 9, "keep_checkpoints": True, "burn_in": 3,
                                   "collect": 4, "thin": 2, "workers": 2})
    assert (o.burn_in, o.sweeps, o.distribute) == (3, 11, True)
    s = SupervisedOptions.from_config({"predict": {"models": 3, "features": "gibbs"}, "svm_steps": 2,
                                       "scale": "unit", "n_train": None})
    assert s.keep_models == 3 and not s.distribute
    assert (s.svm_hyper.steps, s.svm_hyper.scale, s.svm_hyper.bias_var) == (2, "unit", 100.0)
    assert SupervisedOptions.from_config({"predict": {}}).keep_models == 2
    with pytest.raises(ValueError, match="chains must be at least 1"):
        RefineOptions.from_config({"chains": 0})
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.burn_in = 4


@pytest.mark.parametrize("cls, key", [
    (TopdownOptions, "collects"), (InpaintOptions, "chains"), (MapOptions, "tol"),
    (Alg2Options, "iterations"), (PredictOptions, "scan"), (McemOptions, "step_power"),
    (AveragingOptions, "gamma_s"), (SvmOptions, "seed")], ids=lambda v: getattr(v, "__name__", v))
def test_the_test_time_and_mcem_blocks_refuse_a_key_they_do_not_know(cls, key):
    """A misspelt key, or a field the block has no key for (the library's only), is
    refused by name with the block's keys."""
    known = ", ".join(sorted(set(core_options.keys(cls.BLOCK)) | set(cls.OTHER_KEYS)))
    with pytest.raises(ValueError) as err:
        cls.from_config({key: 1})
    assert str(err.value) == f"{cls.BLOCK_NAME}: unknown key {key!r}; the block knows: {known}"


def test_the_test_time_and_mcem_options_derive_their_settings_once():
    t = TopdownOptions.from_config({"n_train": 5, "route": "alg2", "alg2": {"tol": 0}, "burn_in": 2,
                                    "collect": 3, "start": {"kind": "ridge", "iterations": 9}})
    assert (t.sweeps, t.chains, t.ridge_start.iterations) == (5, 2, 9)
    assert TopdownOptions().ridge_start is None and InpaintOptions().ridge_start.threshold == 0.1
    assert InpaintOptions.from_config({"mask": "blocks", "block": 4}).chains == 1
    a = dataclasses.replace(Alg2Options.from_config({"max_iterations": 3}), scan="random").map
    assert a == MapOptions(burn_in=1, iterations=3, tol=0.01, batch_size=256, scan="random")
    p = PredictOptions.from_supervised({"scan": "random", "predict": {"features": "gibbs", "chains": 2,
                                                                       "models": 4}})
    assert p.route == TopdownOptions(burn_in=1, collect=1, chains=2, batch_size=128, scan="random",
                                     start=None)
    assert PredictOptions(tol=0.5).route == MapOptions(burn_in=1, iterations=1, tol=0.5, batch_size=128,
                                                       scan="fixed")
    m = McemOptions.from_config({"svm": {"kappa": 0.25}, "distribute": True, "keep_checkpoints": False})
    assert (m.svm_hyper.kappa, m.svm_hyper.gamma) == (0.25, 1.0)
    v = AveragingOptions.from_blocks({"keep": 3, "thin": 4, "keep_checkpoints": True},
                                     {"gamma_s": 2.0, "svm": {"gamma": 3.0}, "scan": "random"})
    assert (v.total, v.gamma_s, v.svm_hyper.gamma, v.scan) == (12, 2.0, 3.0, "random")
    for bad, says in ((lambda: TopdownOptions(chains=0), "chains must be >= 1"),
                      (lambda: TopdownOptions(chain_orders="reversed"), "chain_orders"),
                      (lambda: MapOptions(iterations=0), "iterations >= 1"),
                      (lambda: PredictOptions(features="map"), "'mcem' or 'gibbs'"),
                      (lambda: McemOptions(beta_step_power=0.5), r"\(0.5, 1\]"),
                      (lambda: AveragingOptions(thin=0), "thin >= 1")):
        with pytest.raises(ValueError, match=says):
            bad()


def test_a_missing_schema_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setattr(core_options, "SCHEMA", tmp_path / "nowhere.yaml")
    core_options.schema.cache_clear()
    try:
        with pytest.raises(FileNotFoundError, match="its checkout's workflow/schemas/config.schema.yaml"):
            core_options.block("dataset.refine")
    finally:
        monkeypatch.undo()
        core_options.schema.cache_clear()


def test_the_layerwise_options_refuse_a_misspelt_key_and_derive_their_settings():
    """pretrain and features: an unknown key by name, the rule's keys dropped, the start
    block a RidgeStart (kind off: None), the tempered sweeps and the batches derived."""
    with pytest.raises(ValueError) as err:
        PretrainOptions.from_config({"burn_in": 3, "anneal_fractoin": 0.5})
    known = sorted(core_options.keys("dataset.pretrain"))
    assert str(err.value) == (f"pretrain: unknown key 'anneal_fractoin'; the block knows: "
                              f"{', '.join(known)}")
    with pytest.raises(ValueError, match=r"^features: unknown key 'dict_init'; the block knows: "
                                         r"anneal_fraction, anneal_ratio, "):
        FeatureOptions.from_config({"dict_init": "prior"})  # the library's only
    p = PretrainOptions.from_config({"n_images": 9, "keep_checkpoints": True, "burn_in": 10,
                                     "collect": 3, "thin": 2, "anneal_fraction": 0.25,
                                     "jit_compile": [False, True], "batch_size": 4,
                                     "start": {"kind": "ridge", "iterations": 7}})
    assert (p.sweeps, p.anneal_sweeps, p.jit_compile) == (16, 2, (False, True))  # round(2.5)
    assert (p.jit_for(0, 2), p.jit_for(1, 2), p.start) == (False, True, RidgeStart(iterations=7))
    assert p.batch_bounds(10) == [(0, 4), (4, 8), (8, 10)]
    assert PretrainOptions().batch_bounds(10) == [(0, 10)]
    f = FeatureOptions.from_config({"route": "layerwise", "burn_in": 4, "collect": 2,
                                    "start": {"kind": "off"}})
    assert (f.sweeps, f.start, f.jit_for(0, 2), f.jit_for(1, 2)) == (6, None, False, True)
    with pytest.raises(ValueError, match="one per layer"):
        PretrainOptions(jit_compile=[True]).jit_for(0, 2)
    with pytest.raises(ValueError, match="pruning happens at the end of burn-in"):
        PretrainOptions.from_config({"burn_in": 0})
