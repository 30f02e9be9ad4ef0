"""MNIST-style IDX files (``train-images-idx3-ubyte``), raw or gzip-compressed.

The IDX header is two zero bytes, a type code, the number of dimensions and one
big-endian uint32 per dimension; the data follows in C order. The header is checked
against the file size before anything is allocated: raw files are memory-mapped,
``.gz`` files are decompressed into exactly the size the header claims (and refused
when the claim is more than the compressed size can hold, or the stream ends early).
"""

from __future__ import annotations

import gzip
import math
import struct
from dataclasses import dataclass

import numpy as np

from normstats.errors import NormstatsError, UnreadableInputError
from normstats.sources.archives import is_gzip
from normstats.sources.decoding.file_read import open_regular
from normstats.sources.packed import MappedRecords, PackedSource, file_size, read_gzip

__all__ = ["IdxHeader", "parse_idx_header", "open_idx", "looks_like_idx", "IDX_TYPES"]

#: IDX type codes and the (big-endian) numpy dtypes they name.
IDX_TYPES = {0x08: "u1", 0x09: "i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


@dataclass(frozen=True)
class IdxHeader:
    """What an IDX header says: element dtype, dimensions, and its own length in bytes."""

    dtype: str
    shape: tuple[int, ...]

    @property
    def length(self) -> int:
        return 4 + 4 * len(self.shape)

    @property
    def dims(self) -> str:
        """The dimensions as a message writes them: ``"10 x 28 x 28"``."""
        return " x ".join(str(d) for d in self.shape)

    @property
    def data_bytes(self) -> int:
        return math.prod(self.shape) * np.dtype(self.dtype).itemsize


def parse_idx_header(head: bytes, path: str) -> IdxHeader:
    """Parse the magic number and dimensions at the start of an IDX file.

    Examples
    --------
    >>> parse_idx_header(bytes([0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 28, 0, 0, 0, 28]), "x")
    IdxHeader(dtype='u1', shape=(2, 28, 28))
    """
    if len(head) < 4 or head[:2] != b"\0\0" or head[2] not in IDX_TYPES or not 1 <= head[3] <= 8:
        raise NormstatsError(f"wrong magic number {head[:4].hex() or '(empty file)'}: not an "
                             "IDX file (expected 0000 then a type code 08-0e and 1-8 "
                             "dimensions)", path=path)
    ndim = head[3]
    if len(head) < 4 + 4 * ndim:
        raise NormstatsError(f"file ends inside the IDX header ({ndim} dimensions announced)",
                             path=path)
    shape = struct.unpack(f">{ndim}I", head[4:4 + 4 * ndim])
    return IdxHeader(IDX_TYPES[head[2]], tuple(int(d) for d in shape))


def looks_like_idx(head: bytes) -> bool:
    """True when ``head`` starts with a plausible IDX magic number."""
    return len(head) >= 8 and head[:2] == b"\0\0" and head[2] in IDX_TYPES and 1 <= head[3] <= 8


def _read_head(path: str, compressed: bool) -> bytes:
    """The first 36 bytes of the IDX data (the longest header); a FIFO is refused unread."""
    try:
        with open_regular(path) as handle:
            if not compressed:
                return handle.read(36)
            with gzip.GzipFile(fileobj=handle, mode="rb") as stream:
                return stream.read(36)
    except EOFError:
        raise NormstatsError("truncated .gz file (the compressed stream ends early)",
                             path=path) from None
    except OSError as error:
        raise NormstatsError(f"cannot read file ({error})", path=path) from None


def open_idx(path: str, layout: str | None = None,
             channel_names: tuple[str, ...] | None = None) -> PackedSource:
    """The images of an IDX file (``.gz`` or raw) as a source.

    Raises
    ------
    NormstatsError
        Naming the file: wrong magic, a 1-d label file, dimensions that disagree
        with the file size, a truncated ``.gz``.

    Examples
    --------
    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "t10k-images-idx3-ubyte")
    >>> _ = open(p, "wb").write(bytes([0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2]) + bytes(8))
    >>> len(open_idx(p)), open_idx(p).channel_names
    (2, ('L',))
    """
    try:
        compressed = is_gzip(path)  # by content: browsers save it decompressed as .gz
    except OSError as error:
        raise NormstatsError(f"cannot read file ({error})", path=path) from None
    header = parse_idx_header(_read_head(path, compressed), path)
    if len(header.shape) == 1:
        raise NormstatsError(f"a 1-d IDX file of {header.shape[0]} entries holds labels, not "
                             "images", path=path)
    if 0 in header.shape[1:]:  # zero-pixel images: no statistic exists; say so, naming it
        raise UnreadableInputError(f"IDX dimensions {header.dims} describe images of no "
                                   "pixels", path)
    if compressed:
        raw = _read_head(path, True)[:header.length]
        data = read_gzip(path, raw, header.data_bytes).view(np.dtype(header.dtype))
        data = data.reshape(header.shape)
    else:
        _check_raw_size(path, header)
        data = MappedRecords(path, header.length, header.shape[0], header.dtype,
                             header.shape[1:])
    grey = len(header.shape) == 3  # (N, H, W) by the format: never one image's shape
    names = channel_names or (("L",) if grey else None)
    return PackedSource(data, path, layout or ("NHW" if grey else None), names, "IDX")


def _check_raw_size(path: str, header: IdxHeader) -> None:
    size = file_size(path)
    expected = header.length + header.data_bytes
    if size != expected:
        raise NormstatsError(f"IDX dimensions {header.dims} ({header.dtype}) need "
                             f"{expected:,} bytes but the file has {size:,}", path=path)
