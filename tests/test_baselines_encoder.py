"""dgdm_tf.baselines.encoder (the soft-threshold encoder of method encoder_svm) against a plain
NumPy implementation, its shapes with partial pooling blocks, its translation
behaviour, and the workflow's plan for the encoder_svm row."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

from dgdm_tf.baselines import encoder


def reference_encode(x: np.ndarray, d: np.ndarray, p: int, alpha: float) -> np.ndarray:
    """Loops over positions, atoms and blocks, float64: the encoder as the docstring says."""
    n, h, w, c = x.shape
    dh, dw, _, k = d.shape
    hs, ws = h - dh + 1, w - dw + 1
    norms = np.sqrt((d.astype(np.float64) ** 2).sum(axis=(0, 1, 2)))
    corr = np.zeros((n, hs, ws, k))
    for i in range(hs):
        for j in range(ws):
            patch = x[:, i:i + dh, j:j + dw, :].astype(np.float64)  # (n, dh, dw, c)
            corr[:, i, j, :] = np.einsum("nabc,abck->nk", patch, d) / norms
    maps = np.concatenate([np.maximum(corr - alpha, 0), np.maximum(-corr - alpha, 0)], axis=-1)
    nbh, nbw = math.ceil(hs / p), math.ceil(ws / p)
    pooled = np.zeros((n, nbh, nbw, 2 * k))
    for bi in range(nbh):
        for bj in range(nbw):
            block = maps[:, bi * p:(bi + 1) * p, bj * p:(bj + 1) * p, :]  # partial at the edge
            pooled[:, bi, bj, :] = block.max(axis=(1, 2))
    return pooled.reshape(n, -1)


@pytest.mark.parametrize("shape, d_shape, p, alpha", [
    ((5, 12, 12, 1), (4, 4, 1, 6), 3, 0.25),   # Hs = 9: whole blocks
    ((4, 13, 11, 3), (3, 2, 3, 5), 4, 0.1),    # Hs = 11, Ws = 10: partial blocks
    ((3, 9, 9, 2), (5, 5, 2, 4), 1, 0.0),      # no pooling, no threshold
])
def test_encoder_matches_numpy(shape, d_shape, p, alpha):
    rng = np.random.default_rng(0)
    x = rng.normal(size=shape).astype(np.float32)
    d = (rng.normal(size=d_shape) * rng.uniform(0.1, 3.0, size=d_shape[-1])).astype(np.float32)
    got = encoder.encode(x, d, p, alpha=alpha, batch_size=2)  # uneven batches
    want = reference_encode(x, d, p, alpha)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert np.all(got >= 0) and np.any(got > 0)


def test_feature_shape_with_partial_blocks():
    # MNIST, layer 1 of the default model: 28 - 8 + 1 = 21 = 7 blocks of 3
    assert encoder.feature_shape((28, 28, 1), (8, 8, 1, 40), 3) == (7, 7, 80)
    # 22 - 8 + 1 = 15 rows -> 4 blocks of 4 (the last one 3 rows); 17 cols -> 5 (last: 1)
    assert encoder.feature_shape((22, 24, 3), (8, 8, 3, 5), 4) == (4, 5, 10)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, 22, 24, 3)).astype(np.float32)
    d = rng.normal(size=(8, 8, 3, 5)).astype(np.float32)
    f = encoder.encode(x, d, 4, alpha=0.25)
    assert f.shape == (3, 4 * 5 * 10)
    # the last (partial) column of cells pools only the one last column of maps
    np.testing.assert_allclose(f, reference_encode(x, d, 4, 0.25), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="smaller than the dictionary"):
        encoder.encode(x[:, :5, :5], d, 4)


def test_atom_scale_and_batching_do_not_matter():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(7, 16, 16, 1)).astype(np.float32)
    d = rng.normal(size=(5, 5, 1, 8)).astype(np.float32)
    a = encoder.encode(x, d, 2, alpha=0.25, batch_size=7)
    b = encoder.encode(x, d * np.linspace(0.5, 4.0, 8, dtype=np.float32), 2, alpha=0.25,
                       batch_size=3)
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    assert encoder.feature_shape((16, 16, 1), d.shape, 2) == (6, 6, 16) and a.shape == (7, 6 * 6 * 16)
    # a zero atom gives zero maps, not NaN
    d0 = d.copy()
    d0[..., 3] = 0.0
    f = encoder.encode(x, d0, 2, alpha=0.25).reshape(7, 6, 6, 16)
    assert np.all(np.isfinite(f)) and np.all(f[..., 3] == 0) and np.all(f[..., 8 + 3] == 0)


@pytest.mark.parametrize("p", [2, 3])
def test_shift_by_one_block_shifts_features_by_one_cell(p):
    """An object on a zero background moved p pixels down and right moves its features
    one cell down and right: exact wherever neither cell touches the image's border."""
    rng = np.random.default_rng(3)
    h = 30
    x = np.zeros((2, h, h, 2), np.float32)
    x[:, 8:18, 9:20, :] = rng.normal(size=(2, 10, 11, 2))
    shifted = np.zeros_like(x)
    shifted[:, p:, p:, :] = x[:, :-p, :-p, :]
    d = rng.normal(size=(4, 4, 2, 6)).astype(np.float32)
    nbh, nbw, k2 = encoder.feature_shape(x.shape[1:], d.shape, p)
    f = encoder.encode(x, d, p, alpha=0.25).reshape(2, nbh, nbw, k2)
    g = encoder.encode(shifted, d, p, alpha=0.25).reshape(2, nbh, nbw, k2)
    assert np.any(f > 0)
    # cells away from the border: drop the last row / column of cells (partial blocks)
    np.testing.assert_allclose(g[:, 1:nbh - 1, 1:nbw - 1], f[:, 0:nbh - 2, 0:nbw - 2],
                               rtol=1e-5, atol=1e-6)
    # and a one-pixel shift (less than a block) does change them
    one = np.zeros_like(x)
    one[:, 1:, 1:, :] = x[:, :-1, :-1, :]
    assert not np.allclose(encoder.encode(one, d, p).reshape(f.shape)[:, 1:nbh - 1, 1:nbw - 1],
                           f[:, 0:nbh - 2, 0:nbw - 2])


def test_encoder_rejects_bad_arguments():
    x = np.zeros((2, 10, 10, 1), np.float32)
    d = np.ones((3, 3, 1, 2), np.float32)
    with pytest.raises(ValueError, match="alpha"):
        encoder.encode(x, d, 2, alpha=-0.1)
    with pytest.raises(ValueError, match="channels"):
        encoder.encode(np.zeros((2, 10, 10, 3), np.float32), d, 2)
    assert encoder.encode(x[..., 0], d, 2).shape == (2, 4 * 4 * 4)  # (N, H, W): one channel


# --------------------------------------------------------------------------- workflow
@pytest.mark.slow
def test_workflow_plans_the_encoder_row_and_the_same_image_peers(tmp_path_factory):
    """Dry run of the smoke config: the encoder's features and its SVM, and the reference
    row and the CNN at the sizes of each Gibbs row whose images differ from the dataset's
    subsets."""
    from _workflow import REPO, copy_repo, planned_jobs, snakemake, write_config

    repo = copy_repo(tmp_path_factory.mktemp("repo_encoder"))
    jobs = planned_jobs(repo, "results/tables.md", repo / "config" / "smoke.yaml")
    # encoder_svm, and encoder_at/unsupervised_svm, encoder_at/supervised
    assert jobs.get("encoder_features") == 3, jobs
    assert jobs.get("block_features") == 1, jobs
    # pretrained_svm, pretrained_block_svm, encoder_svm, unsupervised_svm, the two encoder_at
    assert jobs.get("svm") == 6, jobs
    assert jobs.get("cnn") == 1 and jobs.get("cnn_at") == 2, jobs  # unsupervised, supervised
    r = snakemake(repo, "-n", "results/mnist_smoke/encoder_svm/metrics.json",
                  "--configfile", "config/smoke.yaml")
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "rule encoder_features:" in out and "rule svm:" in out
    # layer 1 only: the encoder row does not wait for layer 2 nor the Gibbs features
    assert "layer2.npz" not in out and "rule features:" not in out, out
    # without the CNN, no CNN peers; a row on the dataset's own subsets needs none either
    cfg = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    block = cfg["datasets"]["mnist_smoke"]
    block["topdown_features"].update(n_train=None, n_test=None)
    jobs = planned_jobs(repo, "results/tables.md", write_config(tmp_path_factory.mktemp("c") / "a.yaml", cfg))
    assert jobs.get("cnn_at") == 1, jobs  # supervised only
    assert jobs.get("encoder_features") == 2 and jobs.get("svm") == 5, jobs
    block["methods"] = [m for m in block["methods"] if m != "cnn"]
    jobs = planned_jobs(repo, "results/tables.md", write_config(tmp_path_factory.mktemp("c") / "b.yaml", cfg))
    assert "cnn_at" not in jobs and "cnn" not in jobs and jobs.get("encoder_features") == 2, jobs
    # without the reference row, no reference peers
    block["methods"] = [m for m in block["methods"] if m != "encoder_svm"]
    no_reference = write_config(tmp_path_factory.mktemp("c") / "c.yaml", cfg)
    jobs = planned_jobs(repo, "results/tables.md", no_reference)
    assert "encoder_features" not in jobs, jobs
    # asked for anyway, the reference at a row's images says why there is none
    r = snakemake(repo, "-n", "results/mnist_smoke/encoder_at/supervised/metrics.json",
                  "--configfile", str(no_reference))
    assert r.returncode != 0 and "has no reference row at its own sizes" in r.stdout + r.stderr
