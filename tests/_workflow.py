"""Helpers of the workflow tests: a copy of the repository, a Snakemake run in it,
configs read and written, the offline smoke config on a generated MNIST-shaped set."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]

#: whether two or more pytest-xdist workers share the cores (xdist sets the count in each
#: worker's environment before it loads tests/conftest.py, which then gives TensorFlow one
#: thread a worker)
SHARED_CORES = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1
#: the cores a test's workflow run takes: one when the workers share the cores (each
#: job's TensorFlow then runs one thread), two in a test run alone. Runs a test compares
#: bit for bit take the same count.
CORES = "1" if SHARED_CORES else "2"

# copy_repo copies named top-level entries, so the outputs (results/) and raw data (data/)
# are never among them; src/dgdm_tf/data/ is code and must be copied
_IGNORE = shutil.ignore_patterns(".snakemake", ".git", "__pycache__", "*.egg-info", ".pytest_cache",
                                 "build")


def copy_repo(dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("Snakefile", "workflow", "config", "profiles", "src", "pyproject.toml"):
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=_IGNORE)
        else:
            shutil.copy2(src, dest / name)
    return dest


def snakemake(cwd: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def planned_jobs(repo: Path, target: str, config) -> dict:
    """`snakemake -n target`: how many jobs of each rule it would run (its job stats)."""
    r = snakemake(repo, "-n", target, "--configfile", str(config))
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", out, re.M)}


def write_config(path: Path, cfg: dict) -> Path:
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def load_config(name: str) -> dict:
    return yaml.safe_load((REPO / "config" / name).read_text())


def dry_run_error(repo: Path, tmp_path: Path, edit) -> str:
    """Dry run of the default config after ``edit(cfg)``: it must fail; its output."""
    cfg = load_config("config.yaml")
    edit(cfg)
    path = write_config(tmp_path / "bad.yaml", cfg)
    r = snakemake(repo, "-n", "results/tables.md", "--configfile", str(path))
    assert r.returncode != 0
    return r.stdout + r.stderr


def fake_mnist(path: Path, n_train: int = 600, n_test: int = 300, seed: int = 0) -> Path:
    """An MNIST-shaped set (28x28x1 in [0, 1], 10 classes): each class a fixed random
    pattern of a few strokes, shifted by up to 2 pixels, with noise. Learnable, tiny."""
    rng = np.random.default_rng(seed)
    templates = np.zeros((10, 28, 28), np.float32)
    for c in range(10):
        for _ in range(3):
            r0, c0 = rng.integers(6, 22, size=2)
            dr, dc = rng.integers(-1, 2, size=2)
            for t in range(8):
                r, cc = np.clip(r0 + dr * t, 4, 23), np.clip(c0 + dc * t, 4, 23)
                templates[c, r - 1:r + 2, cc - 1:cc + 2] = 1.0

    def make(n):
        y = rng.integers(0, 10, size=n)
        x = np.zeros((n, 28, 28), np.float32)
        for i, c in enumerate(y):
            sr, sc = rng.integers(-2, 3, size=2)
            x[i] = np.roll(np.roll(templates[c], sr, axis=0), sc, axis=1)
        x = np.clip(x + 0.1 * rng.standard_normal(x.shape).astype(np.float32), 0, 1)
        return (x * 255).astype(np.uint8), y.astype(np.int64)

    x_train, y_train = make(n_train)
    x_test, y_test = make(n_test)
    np.savez(path, x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test)
    return path


def smoke_config(tmp: Path, **pretrain) -> Path:
    """config/smoke.yaml on the fake MNIST .npz (offline), as `mnist_smoke`."""
    cfg = load_config("smoke.yaml")
    block = cfg["datasets"]["mnist_smoke"]
    block.update(kind="npz", path=str(fake_mnist(tmp / "fake_mnist.npz")), raw_dir=str(tmp))
    block["pretrain"].update(pretrain)
    return write_config(tmp / "smoke_offline.yaml", cfg)


# The default tier's one end-to-end run (tests/conftest.py `tiny_run`): config/smoke.yaml
# cut to the paper's Gibbs rows and the CNN, small dictionaries, a few images and sweeps,
# no benchmark rules (results/tables.md only). Refinement and the supervised chain run in
# chunks of 20 images, so that a 2-worker refinement of the same run is possible.
TINY_BLOCK = {
    "n_train": 80, "n_test": 40,  # every row on these images: the CNN is each row's peer, no cnn_at
    "methods": ["pretrained_svm", "unsupervised_svm", "supervised", "cnn"],
    "model": {"layers": [{"dict_size": 8, "n_dict": 6, "pool": 3},
                         {"dict_size": 6, "n_dict": 8, "pool": 1}]},
    "pretrain": {"n_images": 60, "burn_in": 2, "collect": 1, "batch_size": None, "checkpoint_every": 1},
    "features": {"burn_in": 1, "collect": 1, "batch_size": 40},
    "refine": {"n_images": 40, "chunk": 20, "burn_in": 2, "collect": 1, "n_leapfrog": 2, "checkpoint_every": 1},
    "topdown_features": {"n_train": None, "n_test": None, "batch_size": 20,
                         "alg2": {"burn_in": 1, "max_iterations": 2, "tol": 1.0e-3, "batch_size": 20,
                                  "rmsprop_lr": 0.001, "rmsprop_decay": 0.95, "rmsprop_steps": 1},
                         "posterior_check": {"images": 4, "sweeps": 2}},
    "supervised": {"n_train": None, "n_test": None, "chunk": 20, "burn_in": 1, "collect": 1, "n_leapfrog": 2,
                   "svm_warmup": 2, "svm_average": 2, "checkpoint_every": 1},
    "svm": {"burn_in": 10, "collect": 10},
    "learning_curve": {"sizes": [20], "methods": ["pretrained_svm", "cnn"]},
    "cnn": {"epochs": 1, "fc_units": 32},
}


def _merge(base: dict, changes: dict) -> dict:
    out = dict(base)
    for k, v in changes.items():
        out[k] = _merge(base[k], v) if isinstance(v, dict) and isinstance(base.get(k), dict) else v
    return out


def tiny_config(tmp: Path, **top) -> Path:
    """The default tier's config (TINY_BLOCK over config/smoke.yaml) on the fake MNIST
    .npz, dataset `mnist_smoke`; ``top``: top-level keys to set (``shards=2``)."""
    cfg = yaml.safe_load(smoke_config(tmp).read_text())
    cfg["datasets"]["mnist_smoke"] = _merge(cfg["datasets"]["mnist_smoke"], TINY_BLOCK)
    cfg.update(top)
    return write_config(tmp / "tiny.yaml", cfg)
