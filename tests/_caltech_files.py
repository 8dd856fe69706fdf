"""Caltech-shaped archives for the data tests: class folders of PNG images in a tar."""

import numpy as np


def png_bytes(rng, h, w, gray=False):
    import tensorflow as tf

    img = rng.integers(0, 256, (h, w, 1 if gray else 3), dtype=np.uint8)
    return tf.io.encode_png(img).numpy()


def caltech_members(rng, classes):
    """{archive path: png bytes} for classes {folder: n images}, varied sizes, some grey."""
    return {f"{folder}/{folder.rsplit('/', 1)[-1].split('.')[-1]}_{i:04d}.png": png_bytes(rng, 20 + 3 * i, 25 - 2 * i, gray=i == 1)
            for folder, n in classes.items() for i in range(n)}


def write_tar(target, members, mode="w"):
    """A tar at ``target`` (a path or a binary file object)."""
    import io
    import tarfile

    kw = {"fileobj": target} if hasattr(target, "write") else {"name": target}
    with tarfile.open(mode=mode, **kw) as tar:
        for name, payload in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
