"""dgdm_tf.io.run_inputs: a run's config block and pretrained model, read from its
results/<dataset> folder."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from dgdm_tf.io import artifacts
from dgdm_tf.io.run_inputs import read_pretrained_model, read_run_config

LAYERS = [{"dict_size": 3, "n_dict": 4, "pool": 2}, {"dict_size": 2, "n_dict": 5, "pool": 1}]


def _run(tmp_path):
    """A repository-shaped folder: config/config.yaml and results/toy/pretrain/."""
    (tmp_path / "config").mkdir()
    cfg = {"seed": 7, "datasets": {"toy": {"model": {"layers": LAYERS}, "n_train": 10}}}
    (tmp_path / "config" / "config.yaml").write_text(yaml.safe_dump(cfg))
    root = tmp_path / "results" / "toy"
    (root / "pretrain").mkdir(parents=True)
    for l, (c, k, gamma_w, gamma_e) in enumerate([(1, 4, 2.0, [1.0, 3.0]), (4, 5, 5.0, [9.0])]):
        artifacts.write_pretrained_layer(
            root / "pretrain" / f"layer{l + 1}.npz", artifacts.PretrainedLayer(
                D=np.full((2, 2, c, k), l + 1.0), kept=np.arange(k),
                usage=np.ones(k), x_next=np.zeros((2, 1, 1, k)), gamma_e=np.array(gamma_e, np.float32),
                gamma_w=np.float32(gamma_w), sweeps=2, chain_seconds=0.0, wall_seconds=0.0, n_input=2,
                activity_ink=0.0, layer_config=LAYERS[l], pretrain_config={}))
    return root


def test_the_config_defaults_to_the_repositorys_and_names_the_block(tmp_path):
    root = _run(tmp_path)
    run = read_run_config(root)
    assert (run.dataset, run.seed, run.block["n_train"]) == ("toy", 7, 10)
    assert run.layers == LAYERS
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump({"seed": 1, "datasets": {"toy": {"model": {"layers": []}}}}))
    assert read_run_config(root, other).seed == 1
    other.write_text(yaml.safe_dump({"seed": 1, "datasets": {"mnist": {}}}))
    with pytest.raises(KeyError, match="'toy' is not in .*'mnist'"):
        read_run_config(root, other)


def test_the_pretrained_model_starts_gamma_s_at_the_top_gamma_w_and_gamma_e_at_layer_1s_mean(tmp_path):
    model = read_pretrained_model(_run(tmp_path), 2)
    assert [d.shape for d in model.dictionaries] == [(2, 2, 1, 4), (2, 2, 4, 5)]
    assert all(d.dtype == np.float32 for d in model.dictionaries)
    assert model.dictionaries[1][0, 0, 0, 0] == 2.0
    assert (model.gamma_s, model.gamma_e) == (5.0, 2.0)
