"""rule download: fetch the raw files of one dataset (dgdm_tf.data.fetch_raw)."""

from _common import elapsed, plain, progress, start

start(snakemake)

from dgdm_tf.io import atomic as atomic_io  # noqa: E402

from dgdm_tf import data

ds = snakemake.wildcards.ds
spec = plain(snakemake.params.spec)
raw_dir = snakemake.params.raw_dir
progress(f"fetching raw data of {ds!r} (kind {spec['kind']}) into {raw_dir}")
found = data.fetch_raw(ds, spec, raw_dir)
progress(f"raw data of {ds!r}: {found}")
info = {"dataset": ds, "kind": spec["kind"], "raw_dir": raw_dir, "raw_path": str(found),
        "seconds": elapsed()}
atomic_io.write_json(snakemake.output[0], info)
progress(f"done in {elapsed():.1f} s")
