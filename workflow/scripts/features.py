"""rule features: top-layer features of the train/test subsets (dgdm_tf.pretrain.features).

The subsets (`n_train`, `n_test`; null = all) are the methods' shared seeded subsets
(dgdm_tf.data.subsets), the same for every method run with the same seed."""

import json

from _common import elapsed, load_layers, plain, progress, start

start(snakemake, tensorflow=True)

from dgdm_tf.core.random import seed_for  # noqa: E402
from dgdm_tf.data.subsets import shared_subset  # noqa: E402

import numpy as np  # noqa: E402

from dgdm_tf.io import artifacts, atomic as atomic_io  # noqa: E402

from dgdm_tf import data

from dgdm_tf.pretrain import features

from dgdm_tf.mcmc import diagnostics as mixing

from dgdm_tf.report import plots
from dgdm_tf.pretrain.ridge_start import RidgeStart  # noqa: E402

ds = snakemake.wildcards.ds
seed = int(snakemake.params.seed)
fcfg = plain(snakemake.params.features)
hyper = plain(snakemake.params.hyper)
pools = [int(p) for p in snakemake.params.pools]

# each chain starts at the layer's mean pretrained noise precision
dictionaries, gamma_ws, gamma_e_inits = load_layers(snakemake.input.layers)
progress(f"{ds}: dictionaries {[d.shape for d in dictionaries]}, pools {pools}, "
         f"gamma_w {gamma_ws}")

# tempered burn-in (dgdm_tf.mcmc.anneal): the first fraction of each chain's burn-in
anneal_sweeps = int(round(float(fcfg["anneal_fraction"]) * int(fcfg["burn_in"])))
d = data.load_prepared(snakemake.input.data)
out = {}
for split, size in (("train", snakemake.params.n_train), ("test", snakemake.params.n_test)):
    x, y, idx = shared_subset(d, split, size, None, seed, ds)
    progress(f"{ds}: inferring features of {len(idx)} of {len(d[f'x_{split}'])} {split} images")
    per_layer, per_layer_stats = [], []
    f = features.infer_features(
        x, dictionaries, pools, gamma_ws=gamma_ws, gamma_e_inits=gamma_e_inits,
        seed=seed_for(seed, ds, "features", split),
        burn_in=int(fcfg["burn_in"]), collect=int(fcfg["collect"]),
        batch_size=int(fcfg["batch_size"]), hyper=hyper,
        jit_compile=fcfg["jit_compile"], anneal_sweeps=anneal_sweeps,
        anneal_ratio=float(fcfg["anneal_ratio"]), anneal_start=float(fcfg["anneal_start"]),
        layer_outputs=per_layer, chains=int(fcfg["chains"]), layer_stats=per_layer_stats,
        scan=str(fcfg["scan"]), start=RidgeStart.from_config(fcfg["start"]), progress=progress)
    if split == "train":  # does layer 1's activity follow the ink, or the scan order?
        diag = mixing.layer1_diagnostics(per_layer[0], x, dictionaries[0].shape[0], pools[0])
        r = diag["activity_ink_layer1"]
        diag["chains"] = int(fcfg["chains"])
        diag["half_distance_per_layer"] = [s_.get("half_distance") for s_ in per_layer_stats]
        progress(f"{ds}: layer-1 activity-ink correlation {r:.3f} ({len(x)} train images)")
        plots.plot_activity(np.array(diag["activity_map_layer1"]), np.array(diag["ink_map_layer1"]),
                            r, snakemake.output.activity_png,
                            f"{ds}: layer-1 features (pretrained_svm), {len(x)} train images")
    f = np.asarray(f, dtype=np.float32)
    progress(f"{ds}: {split} features {f.shape} ({elapsed():.1f} s so far)")
    out[split] = artifacts.FeatureSplit(f, y, idx)

n_classes = len(d["class_names"]) if "class_names" in d else int(
    max(d["y_train"].max(), d["y_test"].max()) + 1)
atomic_io.write_text(snakemake.output.mixing, json.dumps(diag, indent=1) + "\n")
artifacts.write_features(snakemake.output.features, out["train"], out["test"], n_classes=n_classes,
                         wall_seconds=elapsed(), config=fcfg)
progress(f"done in {elapsed():.1f} s")
