"""rule encoder_features: features of the reference row encoder_svm -- pretraining's
layer-1 dictionary as a fixed filter bank, the soft-threshold encoder of Coates & Ng
(dgdm_tf.baselines.encoder.encode), layer 1's max-pooling -- for the train / test subsets of
pretrained_svm (the same seeded subsets: `dgdm_tf.data.subsets.shared_subset`), or for
encoder_at/<row> their first images as Gibbs row <row> takes them."""

from _common import elapsed, plain, progress, start

start(snakemake, tensorflow=True)

from dgdm_tf.data.subsets import shared_subset  # noqa: E402

from dgdm_tf.io import artifacts  # noqa: E402

from dgdm_tf import data

from dgdm_tf.baselines import encoder

ds = snakemake.wildcards.ds
seed_ds = snakemake.params.seed_name  # an ablation draws as its base does: paired runs
seed = int(snakemake.params.seed)
cfg = plain(snakemake.params.encoder)
pool = int(snakemake.params.pool)
dictionary = artifacts.read_pretrained_layer(snakemake.input.layer).D
progress(f"{ds}: layer-1 dictionary {dictionary.shape}, pool {pool}, {cfg}")

d = data.load_prepared(snakemake.input.data)
out = {}
sub = snakemake.params.subsets
for split in ("train", "test"):
    x, y, idx = shared_subset(d, split, sub[f"n_{split}"], sub[f"own_{split}"], seed, seed_ds)
    progress(f"{ds}: encoding {len(idx)} {split} images")
    out[split] = artifacts.FeatureSplit(
        encoder.encode(x, dictionary, pool, alpha=float(cfg["alpha"]),
                       batch_size=int(cfg["batch_size"]), progress=progress), y, idx)
    progress(f"{ds}: {split} features {out[split].f.shape} ({elapsed():.1f} s so far)")
    del x

n_classes = data.class_count(d)
artifacts.write_features(snakemake.output[0], out["train"], out["test"], n_classes=n_classes,
                         wall_seconds=elapsed(), config=cfg)
progress(f"done in {elapsed():.1f} s")
