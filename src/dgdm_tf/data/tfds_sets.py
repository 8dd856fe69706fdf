"""The other TFDS data sets (CIFAR, Caltech 101, ImageNet): where their raw files come
from, and presence checks that say what to download and where to put it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dgdm_tf.data.errors import DatasetMissingError
from dgdm_tf.data.files import check_file, tfds_prepared_version
from dgdm_tf.data.spec import spec_source, tfds_data_dir


# size: bytes expected (None = not checked). Versions are TFDS 4.9's.
TFDS_SETS: dict[str, dict[str, Any]] = {
    "cifar10": dict(
        tfds_name="cifar10", version="3.0.2", host="www.cs.toronto.edu",
        files=[("cifar-10-binary.tar.gz",
                "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz", 170052171,
                "c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd")]),
    "cifar100": dict(
        tfds_name="cifar100", version="3.0.2", host="www.cs.toronto.edu",
        files=[("cifar-100-binary.tar.gz",
                "https://www.cs.toronto.edu/~kriz/cifar-100-binary.tar.gz", 168513733,
                "58a81ae192c23a4be8b1804d68e518ed807d710a4eb253b1f2a199162a40d8ec")]),
    "caltech101": dict(
        tfds_name="caltech101", version="3.0.2", host="data.caltech.edu",
        files=[("caltech-101.zip",
                "https://data.caltech.edu/records/mzrjq-6wc02/files/caltech-101.zip?download=1",
                137414764,
                "331234750fc7f77520e50d9565e8b6907b03565e30320da1401130db08c61f91")]),
    "imagenet2012": dict(
        tfds_name="imagenet2012", version="5.1.0", host=None,
        files=[("ILSVRC2012_img_train.tar", "https://image-net.org/download-images "
                "(log in, accept the terms, 'ILSVRC2012' > 'Training images (Task 1 & 2)')",
                147897477120,
                "b08200a27a8e34218a0e58fde36b0fe8f73bc377f4acea2d91602057c3ca45bb"),
               ("ILSVRC2012_img_val.tar", "https://image-net.org/download-images "
                "(same page, 'Validation images (all tasks)')", 6744924160,
                "c7e06a6c0baccf06d8dbeb6577d71efff84673a5dbdd50633ab44f8ea0456ae0")],
        planned="short side to 256, 224x224 crops at random places, colour alteration, "
                "horizontal flips; 1.28M train / 50000 validation images"),
}


def check_tfds_set(name: str, kind: str, spec: dict, raw: Path) -> str:
    info = TFDS_SETS[kind]
    spec_source(name, spec, ("auto", "tfds", "folder") if kind == "imagenet2012" else ("auto", "tfds"))
    tfds_dir = tfds_data_dir(spec, raw)
    ver = tfds_prepared_version(tfds_dir, info["tfds_name"], info["version"])
    if ver is not None:
        return str(tfds_dir / info["tfds_name"] / ver)
    default_manual = tfds_dir / "downloads" / "manual"
    if kind == "imagenet2012" and spec.get("manual_dir"):
        manual, manual_key = Path(spec["manual_dir"]), f"datasets.{name}.manual_dir"
    else:
        manual = default_manual
        manual_key = (f"datasets.{name}.manual_dir, default <tfds_data_dir>/downloads/manual"
                      if kind == "imagenet2012" else
                      f"datasets.{name}.tfds_data_dir (+ downloads/manual), default "
                      f"<raw dir>/tfds")
    present = [f for f in info["files"] if (manual / f[0]).is_file()]
    for fname, _url, size, _sha in present:
        check_file(manual / fname, size)  # size only: hashing 150 GB takes too long
    if len(present) == len(info["files"]):
        return str(manual)
    missing = [f for f in info["files"] if f not in present]
    lines = "\n".join(
        f"  - {fname} ({size} bytes, sha256 {sha}) from {url}"
        for fname, url, size, sha in missing)
    prepared = tfds_dir / info["tfds_name"] / info["version"]
    if kind == "imagenet2012":
        alt = (f"ImageNet cannot be downloaded automatically (registration needed). "
               f"Alternatively copy a TFDS folder prepared elsewhere "
               f"({info['tfds_name']}/{info['version']}/) to {prepared.resolve()}/.")
    else:
        alt = (f"Alternatively, on a machine with internet run `python -c \"import "
               f"tensorflow_datasets as tfds; tfds.builder('{info['tfds_name']}', "
               f"data_dir='tfds').download_and_prepare()\"` and copy tfds/"
               f"{info['tfds_name']}/{info['version']}/ to {prepared.resolve()}/ "
               f"(or point datasets.{name}.tfds_data_dir at a TFDS data_dir that has it).")
    raise DatasetMissingError(
        f"dataset {name!r} ({kind}) is not on disk: no prepared TFDS folder "
        f"{prepared.resolve()} and the raw archive(s) are missing. Download:\n{lines}\n"
        f"and put them in {manual.resolve()}/ (config key {manual_key}). TFDS builds the "
        f"dataset from there without the network. {alt}")


def check_imagenet_folder(name: str, spec: dict) -> str:
    """``source: folder``: ``path`` holds ``train/<class>/`` and ``val/<class>/`` images."""
    path = spec.get("path")
    if not path:
        raise DatasetMissingError(
            f"dataset {name!r} (imagenet2012, source folder): set config key "
            f"datasets.{name}.path to the folder holding train/<class>/*.JPEG and "
            f"val/<class>/*.JPEG (the extracted ILSVRC2012 archives, validation images "
            f"sorted into class folders).")
    p = Path(path).expanduser()
    missing = [sub for sub in ("train", "val") if not (p / sub).is_dir()]
    if missing:
        raise DatasetMissingError(
            f"dataset {name!r}: {p.resolve()} has no {' and no '.join(missing)} folder; it "
            f"must hold train/<class>/ and val/<class>/ image folders (config key "
            f"datasets.{name}.path).")
    return str(p)
