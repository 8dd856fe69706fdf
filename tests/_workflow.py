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
