"""CIFAR-10 / CIFAR-100 batches (binary and python versions) and STL-10 binary files.

Binary batches are fixed-size records: CIFAR-10 one label byte then 3,072 pixel bytes
(3,073), CIFAR-100 a coarse and a fine label byte (3,074); pixels are the R, G and B
planes of a 32 x 32 image. The file size must divide evenly and labels must be in
range, so a file of the other kind is named rather than misread. STL-10's
``*_X.bin`` holds 3 x 96 x 96 uint8 planes with no label (column-major, which does
not change per-channel statistics).

Python batches (``data_batch_1``, CIFAR-100 ``train``) are pickles of a dict holding
a ``(N, 3072)`` uint8 array; they are read through `normstats.sources.safepickle`, which
runs no code from the file: it builds only plain values, and arrays that normstats makes
itself from a checked description (a plain numeric dtype, a shape that covers exactly the
bytes the file holds), refusing everything else with the file's name.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from normstats.errors import NormstatsError
from normstats.sources.decoding.file_read import open_regular
from normstats.sources.packed import MappedRecords, PackedSource, file_size
from normstats.sources.safepickle import safe_load

__all__ = ["RecordFormat", "RECORD_FORMATS", "open_records", "open_cifar_python",
           "cifar_binary_kind"]

_RGB = ("R", "G", "B")
#: The largest python batch read (one of ImageNet 64 x 64's ten, 128,117 images of 12,288
#: bytes, is ~1.6 GB).
_MAX_PICKLE_BYTES = 1 << 31


@dataclass(frozen=True)
class RecordFormat:
    """A binary file of fixed-size records: label bytes, then one CHW uint8 image."""

    name: str
    label_bytes: int
    image_shape: tuple[int, int, int]
    label_limits: tuple[int, ...] = ()

    @property
    def record_bytes(self) -> int:
        return self.label_bytes + int(np.prod(self.image_shape))


RECORD_FORMATS = {
    "cifar10-bin": RecordFormat("CIFAR-10 binary", 1, (3, 32, 32), (10,)),
    "cifar100-bin": RecordFormat("CIFAR-100 binary", 2, (3, 32, 32), (20, 100)),
    "stl10-bin": RecordFormat("STL-10 binary", 0, (3, 96, 96)),
}


def cifar_binary_kind(path: str) -> str | None:
    """The record format a ``.bin`` file's name and size point to, or None.

    Examples
    --------
    >>> cifar_binary_kind("cifar-10-batches-bin/data_batch_1.bin")
    'cifar10-bin'
    """
    name = os.path.basename(path).lower()
    if name.startswith(("data_batch", "test_batch")):
        return "cifar10-bin"
    if name in ("train.bin", "test.bin"):
        return "cifar100-bin"
    if name.endswith("_x.bin") or name == "unlabeled_x.bin":
        return "stl10-bin"
    size = file_size(path)
    for kind in ("cifar10-bin", "cifar100-bin"):
        if size and size % RECORD_FORMATS[kind].record_bytes == 0:
            return kind
    return None


def open_records(path: str, kind: str) -> PackedSource:
    """The images of a CIFAR-10, CIFAR-100 or STL-10 binary file, memory-mapped.

    Raises
    ------
    NormstatsError
        Naming the file when its size is not a whole number of records or a label is
        out of range for ``kind``.

    Examples
    --------
    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "data_batch_1.bin")
    >>> _ = open(p, "wb").write(bytes(2 * 3073))
    >>> source = open_records(p, "cifar10-bin")
    >>> len(source), source.channel_names, source.layout
    (2, ('R', 'G', 'B'), 'NCHW')
    """
    spec = RECORD_FORMATS[kind]
    size = file_size(path)
    count, left = divmod(size, spec.record_bytes)
    if left or not count:
        raise NormstatsError(f"size {size:,} bytes is not a whole number of {spec.name} "
                             f"records of {spec.record_bytes:,} bytes ({count:,} records and "
                             f"{left:,} bytes left over)", path=path)
    _check_labels(path, spec, count)
    data = MappedRecords(path, 0, count, "u1", spec.image_shape, skip=spec.label_bytes)
    return PackedSource(data, path, "NCHW", _RGB, spec.name)


def _check_labels(path: str, spec: RecordFormat, count: int) -> None:
    if not spec.label_bytes:
        return
    table = np.memmap(path, np.uint8, "r", shape=(count, spec.record_bytes))
    for column, limit in enumerate(spec.label_limits):
        labels = np.asarray(table[:, column])
        bad = np.flatnonzero(labels >= limit)
        if bad.size:
            raise NormstatsError(f"record {bad[0]} has label {labels[bad[0]]} (must be below "
                                 f"{limit}): not a {spec.name} file (try --format)", path=path)


def open_cifar_python(path: str) -> PackedSource:
    """The images of a CIFAR-10 or CIFAR-100 python batch (a restricted-unpickled dict).

    Raises
    ------
    NormstatsError
        Naming the file: what the pickle asked for that was refused (never run), or
        content that is not a batch (no ``data`` array of N x 3072 uint8, labels that
        are not one per image).

    Examples
    --------
    >>> import pickle, tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "data_batch_1")
    >>> batch = {b"data": np.zeros((2, 3072), np.uint8), b"labels": [3, 5]}
    >>> _ = open(p, "wb").write(pickle.dumps(batch, protocol=2))
    >>> len(open_cifar_python(p))
    2
    """
    try:
        with open_regular(path) as handle:  # a FIFO named data_batch_1 is refused unread
            data = handle.read(_MAX_PICKLE_BYTES + 1)
    except OSError as error:
        raise NormstatsError(f"cannot read file: {error.strerror or error}", path=path) from None
    if len(data) > _MAX_PICKLE_BYTES:
        raise NormstatsError("over 2 GiB: not a CIFAR python batch", path=path)
    batch = safe_load(data, path)
    pixels = _batch_pixels(batch, path)
    return PackedSource(pixels.reshape(-1, 3, 32, 32), path, "NCHW", _RGB, "CIFAR python")


def _batch_pixels(batch: object, path: str) -> np.ndarray:
    if not isinstance(batch, dict):
        raise NormstatsError(f"unpickled a {type(batch).__name__}, not a CIFAR batch dict",
                             path=path)
    entries = {k.decode("latin1") if isinstance(k, bytes) else str(k): v
               for k, v in batch.items()}
    pixels = entries.get("data")
    if not isinstance(pixels, np.ndarray) or pixels.dtype != np.uint8 or pixels.ndim != 2 \
            or pixels.shape[1] != 3072:
        found = getattr(pixels, "shape", type(pixels).__name__)
        raise NormstatsError(f"no 'data' array of N x 3072 uint8 pixels (found {found})",
                             path=path)
    labels = entries.get("labels", entries.get("fine_labels"))
    if labels is not None and not isinstance(labels, list | tuple | np.ndarray):
        raise NormstatsError(f"its labels are a {type(labels).__name__}, not a list",
                             path=path)
    if labels is not None and len(labels) != len(pixels):
        raise NormstatsError(f"{len(labels)} labels for {len(pixels)} images", path=path)
    return pixels
