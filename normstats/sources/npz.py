""".npz archives (``np.savez`` / ``np.savez_compressed``), read without pickle.

`numpy.load` allocates whatever a member's ``.npy`` header claims before reading, so
the header is parsed here first and checked against the member's size in the zip
directory (and, for compressed members, against what deflate can expand to) before a
byte is allocated. Object dtypes are refused. Stored (uncompressed) members are
memory-mapped; compressed ones are inflated into memory. ``path.npz:member`` or a
manifest's ``member`` picks a member; otherwise a single member, or one of the usual
image names (``images``, ``x_train``, ``x``, ``data``, ``arr_0``), is used.
"""

from __future__ import annotations

import struct
import zipfile

import numpy as np

from normstats.errors import NormstatsError
from normstats.sources.packed import MAX_DEFLATE_RATIO, MappedRecords, PackedSource
from normstats.sources.path_patterns import split_member

__all__ = ["open_npz", "split_member"]

_PREFERRED = ("images", "x_train", "x", "data", "arr_0")
_LOCAL_HEADER = struct.Struct("<4s22xHH")


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
        with zipfile.ZipFile(path) as archive:
            info = _member_info(archive, path, member)
            with archive.open(info) as stream:
                dtype, shape, header_len = _read_npy_header(stream, path, info.filename)
                _check_claim(info, dtype, shape, header_len, path)
                if info.compress_type == zipfile.ZIP_STORED and shape:
                    data = _mapped(path, info, dtype, shape, header_len)
                else:
                    data = _inflate(stream, dtype, shape, path, info.filename)
    except zipfile.BadZipFile as error:
        raise NormstatsError(f"not a readable .npz (zip) file ({error})", path=path) from None
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


def _read_npy_header(stream, path: str, name: str) -> tuple[np.dtype, tuple[int, ...], int]:
    fmt = np.lib.format
    try:
        version = fmt.read_magic(stream)
        if version == (1, 0):
            shape, fortran, dtype = fmt.read_array_header_1_0(stream)
        else:
            shape, fortran, dtype = fmt.read_array_header_2_0(stream)
    except ValueError as error:
        raise NormstatsError(f"member {name} has no valid .npy header ({error})",
                             path=path) from None
    if dtype.hasobject:
        raise NormstatsError(f"member {name} holds Python objects (dtype {dtype}), which "
                             "would need pickle; refused", path=path)
    if fortran and len(shape) > 1:
        raise NormstatsError(f"member {name} is Fortran-ordered; save it C-ordered",
                             path=path)
    return dtype, tuple(shape), stream.tell()


def _check_claim(info: zipfile.ZipInfo, dtype: np.dtype, shape: tuple[int, ...],
                 header_len: int, path: str) -> None:
    claimed = int(np.prod(shape, dtype=object)) * dtype.itemsize
    if header_len + claimed != info.file_size:
        raise NormstatsError(f"member {info.filename} header claims {shape} {dtype} = "
                             f"{claimed:,} bytes but the member holds "
                             f"{info.file_size - header_len:,}", path=path)
    if info.file_size > info.compress_size * MAX_DEFLATE_RATIO + (1 << 16):
        raise NormstatsError(f"member {info.filename} claims {info.file_size:,} bytes from "
                             f"{info.compress_size:,} compressed: more than deflate can hold",
                             path=path)


def _mapped(path: str, info: zipfile.ZipInfo, dtype: np.dtype, shape: tuple[int, ...],
            header_len: int) -> MappedRecords:
    with open(path, "rb") as handle:
        handle.seek(info.header_offset)
        magic, name_len, extra_len = _LOCAL_HEADER.unpack(handle.read(_LOCAL_HEADER.size))
    if magic != b"PK\x03\x04":
        raise NormstatsError(f"member {info.filename} has a corrupt local header", path=path)
    offset = info.header_offset + _LOCAL_HEADER.size + name_len + extra_len + header_len
    return MappedRecords(path, offset, shape[0], dtype.str, shape[1:])


def _inflate(stream, dtype: np.dtype, shape: tuple[int, ...], path: str,
             name: str) -> np.ndarray:
    data = np.empty(shape, dtype)
    view = memoryview(data.reshape(-1).view(np.uint8))
    total = 0
    while total < len(view):
        count = stream.readinto(view[total:total + (1 << 24)])
        if not count:
            raise NormstatsError(f"member {name} ends after {total:,} of {len(view):,} bytes",
                                 path=path)
        total += count
    return data
