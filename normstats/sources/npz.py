""".npz archives (``np.savez`` / ``np.savez_compressed``), read without pickle.

`numpy.load` allocates whatever a member's ``.npy`` header claims and inflates whatever
the zip stream holds, so here the member's header is read first and its claim (shape x
item size) checked, before a byte of data is allocated, against

- the member's uncompressed size in the zip directory (they must agree exactly);
- its compressed size, which must lie inside the file (the directory can lie too);
- `MAX_INFLATE_RATIO`: a compressed member is inflated into memory, so one claiming
  more than that many bytes for each compressed byte (past the first 16 MiB) is
  refused -- zeros deflate ~1000:1, and a 2 MB file would take 2 GB -- with the advice
  to save it uncompressed.

Deflated members are inflated here, straight from the file, never more than one byte
past the declared size, and checked to end there and against their CRC; stored members
are memory-mapped. Only plain numeric dtypes are read (no objects, fields or dates).
``path.npz:member`` or a manifest's ``member`` picks a member; otherwise a single member,
or one of the usual image names (``images``, ``x_train``, ``x``, ``data``, ``arr_0``).
"""

from __future__ import annotations

import math
import os
import struct
import zipfile
import zlib
from typing import BinaryIO

import numpy as np

from normstats.errors import NormstatsError
from normstats.sources.decoding.file_read import open_regular
from normstats.sources.packed import MappedRecords, PackedSource
from normstats.sources.path_patterns import split_member

__all__ = ["open_npz", "split_member", "MAX_INFLATE_RATIO"]

#: Bytes a compressed member may inflate to for each compressed byte (past
#: `_INFLATE_FREE`). Image arrays deflate 1.5-10:1; masks and padding more.
MAX_INFLATE_RATIO = 100
_INFLATE_FREE = 16 << 20
_PREFERRED = ("images", "x_train", "x", "data", "arr_0")
_LOCAL_HEADER = struct.Struct("<4s22xHH")
_CHUNK = 1 << 24
#: The most a member's magic, length and header may take (numpy's own header limit is 10,000).
_MAX_HEADER = 12 + (1 << 16)


def open_npz(path: str, member: str | None = None, layout: str | None = None,
             channel_names: tuple[str, ...] | None = None) -> PackedSource:
    """One array of a ``.npz`` file as a source, its header checked before allocating.

    Examples
    --------
    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "d.npz")
    >>> np.savez(p, x_train=np.zeros((5, 4, 4, 3), np.uint8), y_train=np.zeros(5))
    >>> len(open_npz(p))
    5
    """
    path, given = split_member(path)
    member = member or given
    try:
        with open_regular(path) as handle, zipfile.ZipFile(handle) as archive:
            info = _member_info(archive, path, member)
            data = _read_member(handle, info, path)
    except zipfile.BadZipFile as error:
        raise NormstatsError(f"not a readable .npz (zip) file ({error})", path=path) from None
    except zlib.error as error:
        raise NormstatsError(f"not a readable .npz (zip) file (member {info.filename}: "
                             f"{error})", path=path) from None
    except OSError as error:
        raise NormstatsError(f"cannot read .npz file ({error})", path=path) from None
    label = f"{path}:{info.filename.removesuffix('.npy')}"
    return PackedSource(data, label, layout, channel_names, "npz")


def _member_info(archive: zipfile.ZipFile, path: str, member: str | None) -> zipfile.ZipInfo:
    names = [n.removesuffix(".npy") for n in archive.namelist() if n.endswith(".npy")]
    if member is None:
        chosen = names if len(names) == 1 else [n for n in _PREFERRED if n in names][:1]
        if not chosen:
            raise NormstatsError(f"holds {len(names)} arrays ({', '.join(names) or 'none'}); "
                                 "name one as PATH.npz:NAME", path=path)
        member = chosen[0]
    if member not in names:
        raise NormstatsError(f"no array {member!r} (it holds {', '.join(names) or 'none'})",
                             path=path)
    return archive.getinfo(member + ".npy")


def _read_member(handle: BinaryIO, info: zipfile.ZipInfo,
                 path: str) -> MappedRecords | np.ndarray:
    """The member's array: memory-mapped if stored, inflated if deflated."""
    offset = _data_offset(handle, info, path)
    stored = info.compress_type == zipfile.ZIP_STORED
    if info.flag_bits & 1 or not (stored or info.compress_type == zipfile.ZIP_DEFLATED):
        raise NormstatsError(f"member {info.filename} is encrypted or compressed with method "
                             f"{info.compress_type}; only np.savez and np.savez_compressed "
                             "members are read", path=path)
    if stored and info.file_size != info.compress_size:
        raise NormstatsError(f"member {info.filename} is stored with {info.compress_size:,} "
                             f"bytes but claims {info.file_size:,}: a lying zip directory",
                             path=path)
    stream = _Member(handle, offset, info, stored)
    dtype, shape, header_len = _read_npy_header(stream, path, info.filename)
    _check_claim(info, dtype, shape, header_len, path)
    stream.cap = info.file_size + 1  # the claim is checked: its bytes, and one to see the end
    if stored and shape:
        return MappedRecords(path, offset + header_len, shape[0], dtype.str, shape[1:])
    data = np.empty(shape, dtype)
    stream.fill(memoryview(data.reshape(-1).view(np.uint8)), path)
    return data


def _data_offset(handle: BinaryIO, info: zipfile.ZipInfo, path: str) -> int:
    """Where the member's bytes start; the directory's compressed size must fit the file."""
    handle.seek(info.header_offset)
    head = handle.read(_LOCAL_HEADER.size)
    magic, name_len, extra_len = _LOCAL_HEADER.unpack(head.ljust(_LOCAL_HEADER.size, b"\0"))
    if magic != b"PK\x03\x04":
        raise NormstatsError(f"member {info.filename} has a corrupt local header", path=path)
    offset = info.header_offset + _LOCAL_HEADER.size + name_len + extra_len
    size = os.fstat(handle.fileno()).st_size
    if offset + info.compress_size > size:
        raise NormstatsError(f"member {info.filename} claims {info.compress_size:,} "
                             f"compressed bytes but the file holds {max(0, size - offset):,} "
                             "after its start: a lying zip directory", path=path)
    return offset


class _Member:
    """A member's bytes read from the file: stored as they are, or inflated as asked.

    Reads never yield more than asked nor past ``cap`` in all: the header's bound until the
    header's claim is checked, then the claim and one byte (`fill` asks for it to prove the
    stream ends there), so a member never inflates more than that whatever it holds.
    """

    def __init__(self, handle: BinaryIO, offset: int, info: zipfile.ZipInfo,
                 stored: bool) -> None:
        handle.seek(offset)
        self.handle, self.left, self.info = handle, info.compress_size, info
        self.inflate = None if stored else zlib.decompressobj(-zlib.MAX_WBITS)
        self.pending, self.crc, self.position, self.cap = b"", 0, 0, _MAX_HEADER

    def read(self, count: int) -> bytes:
        count = max(0, min(count, self.cap - self.position))
        if self.inflate is None:
            data = self.handle.read(min(count, self.left))
            self.left, self.position = self.left - len(data), self.position + len(data)
            return data
        pieces = []
        while count > 0 and not self.inflate.eof and (self.pending or self.left):
            if not self.pending:
                self.pending = self.handle.read(min(self.left, 1 << 16))
                self.left -= len(self.pending)
            pieces.append(self.inflate.decompress(self.pending, count))
            self.pending = self.inflate.unconsumed_tail
            count -= len(pieces[-1])
        data = b"".join(pieces)
        self.crc, self.position = zlib.crc32(data, self.crc), self.position + len(data)
        return data

    def fill(self, view: memoryview, path: str) -> None:
        """Read exactly ``len(view)`` bytes into ``view``; a deflated member must end there."""
        total, name = 0, self.info.filename
        while total < len(view):
            data = self.read(min(_CHUNK, len(view) - total))
            if not data:
                raise NormstatsError(f"member {name} ends after {total:,} of {len(view):,} "
                                     "bytes", path=path)
            view[total:total + len(data)] = data
            total += len(data)
        if self.inflate is not None and (self.read(1) or not self.inflate.eof):
            raise NormstatsError(f"member {name} holds more than the {self.info.file_size:,} "
                                 "bytes its header and size declare (or is cut)", path=path)
        if self.inflate is not None and self.crc != self.info.CRC:
            raise NormstatsError(f"member {name} fails its CRC-32 check: damaged", path=path)


def _read_npy_header(stream: _Member, path: str,
                     name: str) -> tuple[np.dtype, tuple[int, ...], int]:
    fmt = np.lib.format
    try:
        version = fmt.read_magic(stream)
        if version == (1, 0):
            shape, fortran, dtype = fmt.read_array_header_1_0(stream)
        else:
            shape, fortran, dtype = fmt.read_array_header_2_0(stream)
    except Exception as error:  # noqa: BLE001 - numpy's parser of damaged text raises many kinds
        raise NormstatsError(f"member {name} has no valid .npy header "
                             f"({type(error).__name__}: {str(error)[:200]})", path=path) from None
    if dtype.hasobject:
        raise NormstatsError(f"member {name} holds Python objects (dtype {dtype}), which "
                             "would need pickle; refused", path=path)
    if dtype.kind not in "biuf" or dtype.fields or dtype.subdtype or min(shape, default=0) < 0:
        raise NormstatsError(f"member {name} is not an array of plain numbers (shape "
                             f"{shape}, dtype {dtype})", path=path)
    if fortran and len(shape) > 1:
        raise NormstatsError(f"member {name} is Fortran-ordered; save it C-ordered",
                             path=path)
    return dtype, tuple(shape), stream.position


def _check_claim(info: zipfile.ZipInfo, dtype: np.dtype, shape: tuple[int, ...],
                 header_len: int, path: str) -> None:
    claimed = math.prod(shape) * dtype.itemsize
    if header_len + claimed != info.file_size:
        raise NormstatsError(f"member {info.filename} header claims {shape} {dtype} = "
                             f"{claimed:,} bytes but the member holds "
                             f"{info.file_size - header_len:,}", path=path)
    if info.compress_type != zipfile.ZIP_STORED \
            and claimed > info.compress_size * MAX_INFLATE_RATIO + _INFLATE_FREE:
        raise NormstatsError(f"member {info.filename} would inflate {info.compress_size:,} "
                             f"compressed bytes into {claimed:,} in memory (over "
                             f"{MAX_INFLATE_RATIO}:1); save it with np.savez (uncompressed "
                             "members are memory-mapped, not inflated)", path=path)
