"""Fixed-size image records packed in one file (IDX, CIFAR, STL-10, ``.npz``), as array sources.

A format module checks a file's header against its size, then describes its pixels
either as `MappedRecords` (a picklable recipe for a read-only memory map, so a task
ships a path and offsets, never pixels) or as an array decoded into memory (a ``.gz``
file, a pickle). `PackedSource` hands either to the uniform `ArraySource` machinery,
so records are computed vectorised per task exactly as for any array.
"""

from __future__ import annotations

import gzip
import math
import os
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from normstats.errors import IncompatibleImagesError, NormstatsError
from normstats.maths.image_moments import MAX_INTEGER_BITS
from normstats.maths.records import WIDE_INTEGERS_REASON
from normstats.sources.arrays import ArraySource
from normstats.sources.base import Task
from normstats.sources.decoding.file_read import open_regular

__all__ = ["MappedRecords", "Window", "PackedSource", "file_size", "read_gzip",
           "MAX_DEFLATE_RATIO"]

#: Deflate cannot expand data by more than ~1032:1, so a header that claims more
#: pixels than that from the compressed size is a lie, refused before allocating.
MAX_DEFLATE_RATIO = 1032


@dataclass(frozen=True)
class MappedRecords:
    """``count`` records of ``skip + prod(shape)`` items of ``dtype`` at ``offset`` in a file.

    Behaves as a read-only array of shape ``(count, *shape)`` whose slices are memory
    maps opened on demand, so it pickles as a few numbers.

    Examples
    --------
    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "r.bin")
    >>> _ = open(p, "wb").write(bytes([9, 1, 2, 9, 3, 4]))
    >>> MappedRecords(p, 0, 2, "u1", (1, 2), skip=1)[0:2].tolist()
    [[[1, 2]], [[3, 4]]]
    """

    path: str
    offset: int
    count: int
    dtype: str
    image_shape: tuple[int, ...]
    skip: int = 0

    def __post_init__(self) -> None:
        # it pickles as its path: a dask.distributed worker would resolve a relative one
        # in its own folder, naming another file or none
        object.__setattr__(self, "path", os.path.abspath(self.path))

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.count, *self.image_shape)

    @property
    def ndim(self) -> int:
        return 1 + len(self.image_shape)

    @property
    def item_dtype(self) -> np.dtype:
        return np.dtype(self.dtype)

    def __getitem__(self, index: slice) -> np.ndarray:
        start, stop, _ = index.indices(self.count)
        width = self.skip + math.prod(self.image_shape)
        itemsize = self.item_dtype.itemsize
        rows = max(0, stop - start)
        if rows == 0:
            return np.empty((0, *self.image_shape), self.item_dtype.newbyteorder("="))
        # Through the one door: the path could name a FIFO by the time a task runs.
        with open_regular(self.path) as handle:
            mapped = np.memmap(handle, self.item_dtype, "r",
                               offset=self.offset + start * width * itemsize,
                               shape=(rows, width))
        block = mapped[:, self.skip:].reshape(rows, *self.image_shape)
        return native(block)


def native(block: np.ndarray) -> np.ndarray:
    """``block`` in native byte order (IDX stores big-endian), copying only when needed."""
    if block.dtype.byteorder in ("=", "|") or block.dtype.isnative:
        return block
    return block.astype(block.dtype.newbyteorder("="))


@dataclass(frozen=True)
class Window:
    """Rows ``start:start + len(block)`` of an in-memory array, indexed as the whole array.

    A task over decoded (not memory-mapped) pixels carries only its own rows.
    """

    block: np.ndarray = field(repr=False)
    start: int = 0

    def __getitem__(self, index: slice) -> np.ndarray:
        return self.block[index.start - self.start:index.stop - self.start]


class _ShapedRecords:
    """Adapter giving `MappedRecords` the ``shape``/``dtype`` that `ArraySource` expects."""

    def __init__(self, records: MappedRecords) -> None:
        self.records = records
        self.shape = records.shape
        self.dtype = records.item_dtype.newbyteorder("=")

    def __getitem__(self, index: slice) -> np.ndarray:
        # rows read in place (vectors, an (N, d) IDX file, are read by slicing the array)
        return self.records[index]


class PackedSource(ArraySource):
    """An `ArraySource` over records of one file, described by the file's path.

    Parameters
    ----------
    data : MappedRecords or numpy.ndarray
        The images, memory-mapped or already decoded.
    path : str
        The file, for reports and error messages.
    layout, channel_names
        As for `ArraySource`.
    mode : str
        What the report calls the decode policy (``"IDX"``, ``"CIFAR-10 binary"``, ...).

    Examples
    --------
    >>> source = PackedSource(np.zeros((4, 2, 2), np.uint8), "x.idx", "NHW", ("L",), "IDX")
    >>> len(source), source.description, len(source.tasks(task_size=3))
    (4, 'x.idx', 2)
    """

    def __init__(self, data: MappedRecords | np.ndarray, path: str, layout: str | None,
                 channel_names: tuple[str, ...] | None, mode: str) -> None:
        array = _ShapedRecords(data) if isinstance(data, MappedRecords) else native(data)
        try:
            super().__init__(array, layout=layout, channel_names=channel_names)
        except NormstatsError as error:  # a shape that is not images: name the file
            raise type(error)(error.reason, path) from None
        if self.kind == "images" and self.array.dtype.kind in "iu" and \
                self.array.dtype.itemsize * 8 > MAX_INTEGER_BITS:  # said before any task
            raise IncompatibleImagesError(f"{self.array.dtype} {WIDE_INTEGERS_REASON}", path)
        self.path = path
        self.description = path
        self.mode = mode

    def tasks(self, task_size: int | None = None, workers: int = 1) -> list[Task]:
        tasks = super().tasks(task_size, workers)
        if isinstance(self.array, _ShapedRecords):
            return [replace(t, array=self.array.records) for t in tasks]
        if self.layout in ("HWC", "CHW", "HW"):
            return tasks
        return [replace(t, array=Window(self.array[t.start:t.stop], t.start)) for t in tasks]


def file_size(path: str) -> int:
    """The size of ``path`` in bytes, or an error naming it."""
    try:
        return os.stat(path).st_size
    except OSError as error:
        raise NormstatsError(f"cannot read file: {error.strerror or error}", path=path) from None


def read_gzip(path: str, header: bytes, claimed: int) -> np.ndarray:
    """The ``claimed`` payload bytes that follow ``header`` in gzip file ``path``.

    The claim is checked against what the compressed size can hold before anything is
    allocated; a stream that ends early, or goes on past the claim, is an error.
    """
    limit = file_size(path) * MAX_DEFLATE_RATIO + (1 << 16)
    if len(header) + claimed > limit:
        raise NormstatsError(f"header claims {claimed:,} bytes of data, more than a "
                             f"{file_size(path):,}-byte .gz file can hold", path=path)
    payload = np.empty(claimed, np.uint8)
    try:
        with open_regular(path) as handle, gzip.GzipFile(fileobj=handle, mode="rb") as stream:
            stream.read(len(header))
            got = _read_into(stream, memoryview(payload))
            extra = stream.read(1)
    except EOFError:
        raise NormstatsError("truncated .gz file (the compressed stream ends early)",
                             path=path) from None
    except (OSError, gzip.BadGzipFile) as error:
        raise NormstatsError(f"not a readable .gz file ({error})", path=path) from None
    if got != claimed or extra:
        raise NormstatsError(f"header dimensions say {claimed:,} bytes of data but the file "
                             f"holds {'more' if extra else f'{got:,}'}", path=path)
    return payload


def _read_into(stream: Any, buffer: memoryview) -> int:
    total = 0
    while total < len(buffer):
        count = stream.readinto(buffer[total:total + (1 << 24)])
        if not count:
            break
        total += count
    return total
