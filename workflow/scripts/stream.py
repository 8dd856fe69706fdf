"""rule stream: where an ImageNet-style dataset is streamed from (dgdm_tf.data.imagenet), its
sizes and classes; builds the TFDS folder from the manual archives when needed."""

import json

from _common import elapsed, plain, progress, start

start(snakemake, tensorflow=True)

from dgdm_tf.io import atomic as atomic_io  # noqa: E402

from dgdm_tf.data import imagenet

ds = snakemake.wildcards.ds
spec = plain(snakemake.params.spec)
scfg = plain(snakemake.params.stream)
fetch = json.loads(open(snakemake.input[0]).read())
where = imagenet.locate(spec, fetch["raw_path"], snakemake.params.tfds_data_dir)
view = imagenet.View.from_dict(scfg)
stream = imagenet.open_stream(where, view, int(scfg["shuffle_buffer"]))
info = {"dataset": ds, **where, "n_train": stream.count("train"), "n_test": stream.count("test"),
        "n_classes": stream.n_classes, "class_names": stream.class_names,
        "image_shape": [view.crop, view.crop, 3], "seconds": elapsed()}
if spec.get("n_classes") and int(spec["n_classes"]) != stream.n_classes:
    raise ValueError(f"datasets.{ds}.n_classes is {spec['n_classes']} but the data have "
                     f"{stream.n_classes} classes: fix the key (or set it to null)")
atomic_io.write_json(snakemake.output[0], info)
progress(f"{ds}: {info['n_train']} training / {info['n_test']} test images, "
         f"{info['n_classes']} classes, from {where}")
