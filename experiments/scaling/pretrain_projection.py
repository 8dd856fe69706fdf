"""Seconds per image of batched pretraining at every layer shape of config/paper.yaml's
MNIST and CIFAR-10 models, and the wall time they project for the paper's schedule.

    PYTHONPATH=src python experiments/scaling/pretrain_projection.py [n_images] [batch]

Each layer runs in its own process (dgdm_tf.bench.stream.run_isolated) on random
inputs of its shape, the ridge start of the config then 2 sweeps, one batch of `batch`
images in memory at a time. Projection of one layer, on the machine measured:

    T = N (t_start + (burn_in + collect) t_sweep)

with t_start and t_sweep the measured seconds per image, N the paper's training images
(60000 MNIST, 50000 CIFAR-10) and burn_in + collect = 1000 + 500 (the supplement). The
layers of a model run one after another, so the model's time is the sum.
"""

import sys
import tempfile

import pandas as pd
import yaml

sys.path.insert(0, "src")
from dgdm_tf.bench.report import md_table  # noqa: E402
from dgdm_tf.bench.stream import run_isolated  # noqa: E402

N_PAPER = {"mnist": 60000, "cifar10": 50000}
SHAPES = {  # each layer's input: the image, then the pooled grid of the layer below
    "mnist": [[28, 28, 1], [7, 7, 50]],
    "cifar10": [[32, 32, 3], [14, 14, 48], [5, 5, 128]],
}


def main(n: int = 5000, batch: int = 1000) -> None:
    cfg = yaml.safe_load(open("config/paper.yaml"))
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for ds, shapes in SHAPES.items():
            dcfg = cfg["datasets"][ds]
            sweeps = dcfg["pretrain"]["burn_in"] + dcfg["pretrain"]["collect"]
            for li, (shape, layer) in enumerate(zip(shapes, dcfg["model"]["layers"])):
                spec = {"name": f"{ds}_layer{li + 1}", "image_shape": shape, "layer": layer,
                        "n_images": n, "batch_size": batch, "sweeps": 2, "seed": 0,
                        "hyper": cfg["hyper"], "start": dcfg["pretrain"]["start"],
                        "workdir": work}
                r = run_isolated(spec)
                print(r, flush=True)
                t_start = r["start_and_setup_s"] / n
                t_sweep = r["sweep_s"] / n
                rows.append({**r, "t_start_ms": 1e3 * t_start, "t_sweep_ms": 1e3 * t_sweep,
                             "paper_images": N_PAPER[ds], "paper_sweeps": sweeps,
                             "projected_h": N_PAPER[ds] * (t_start + sweeps * t_sweep) / 3600})
    df = pd.DataFrame(rows)
    print(md_table(df.round(3)))
    print(df.assign(model=df["name"].str.split("_").str[0]).groupby("model")["projected_h"].sum())


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
