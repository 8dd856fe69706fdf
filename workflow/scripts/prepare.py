"""rule prepare: preprocess one dataset into prepared.npz (dgdm_tf.data.prepare_dataset)."""

from _common import elapsed, plain, progress, start

start(snakemake)

from dgdm_tf.io import atomic as atomic_io  # noqa: E402

from dgdm_tf import data

ds = snakemake.wildcards.ds
spec = plain(snakemake.params.spec)
progress(f"preparing {ds!r} (kind {spec['kind']}) from {snakemake.params.raw_dir}")
summary = data.prepare_dataset(ds, spec, snakemake.params.raw_dir, snakemake.output.npz,
                               seed=int(snakemake.params.seed))
summary = dict(summary or {})
summary.update(dataset=ds, kind=spec["kind"], seconds=elapsed())
atomic_io.write_json(snakemake.output.summary, summary)
progress(f"summary: {summary}")
progress(f"done in {elapsed():.1f} s")
