"""The cache's arrays as zarr v3 lays them out, written and read without importing zarr.

Every array of a cache segment is a zarr v3 array of one chunk: a ``zarr.json`` and the
chunk file ``c.0`` (``c.0.0`` for two dimensions: zarr's default chunk keys with the "."
separator, so a chunk is a file beside its ``zarr.json``, not two folders down: folders
are what a file system is slowest to make and remove), its bytes little-endian,
compressed with zstd. zarr itself reads and writes exactly that, but importing it costs
more than a warm run of ten thousand files (0.15–0.2 s), and a run that only reads
records from its cache or writes them needs none of it. So the cache writes these files
itself (as zarr writes them, so zarr reads them too) and reads any array in this layout
(or with the "/" separator, which caches written through zarr have) itself; metadata in
any other layout (another codec, a chunk grid of several chunks) is left to zarr.
A chunk file zarr did not write because every value was the fill value reads as
zeros, as zarr reads it: the segment's digest, checked after reading, says whether
that was right.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from normstats.sources.decoding.file_read import open_regular

try:  # libzstd, which imagecodecs bundles (a dependency, for PNG)
    from imagecodecs import zstd_decode, zstd_encode
except ImportError:  # pragma: no cover - without it, zarr reads and writes every array
    zstd_decode = zstd_encode = None

__all__ = ["write_group", "make_group", "write_array", "read_array", "read_written_bytes",
           "array_metadata",
           "ZSTD_LEVEL"]

#: zstd's level for the cache's chunks: 1 compresses records to within a few per cent
#: of zarr's default (level 3) at twice its speed, and a run writes every record once.
ZSTD_LEVEL = 1

_BYTES = {"name": "bytes", "configuration": {"endian": "little"}}


def array_metadata(values: np.ndarray, compress: bool = True) -> dict[str, Any]:
    """The ``zarr.json`` of a one-chunk array of ``values``, as zarr writes it (with the
    zstd codec if ``compress`` and libzstd is at hand).

    Examples
    --------
    >>> meta = array_metadata(np.zeros((2, 3), np.int64))
    >>> meta["shape"], meta["data_type"], [c["name"] for c in meta["codecs"]]
    ([2, 3], 'int64', ['bytes', 'zstd'])
    """
    shape = list(values.shape)
    zero: Any = 0.0 if values.dtype.kind == "f" else 0
    codecs = [_BYTES if values.dtype.itemsize > 1 else {"name": "bytes"}]
    if compress and zstd_encode is not None:
        codecs.append({"name": "zstd", "configuration": {"level": ZSTD_LEVEL,
                                                          "checksum": False}})
    return {"shape": shape, "data_type": values.dtype.name,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": shape}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "."}},
            "fill_value": zero, "codecs": codecs, "attributes": {}, "zarr_format": 3,
            "node_type": "array", "storage_transformers": []}


def write_array(folder: Path, values: np.ndarray, compress: bool = True) -> None:
    """Write ``values`` (little-endian) as a one-chunk zarr v3 array, its chunk compressed
    with zstd if ``compress``.

    Examples
    --------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp()) / "sums"
    >>> write_array(folder, np.arange(6, dtype=np.int64).reshape(2, 3))
    >>> read_array(folder, json.loads((folder / "zarr.json").read_text())).tolist()
    [[0, 1, 2], [3, 4, 5]]
    """
    meta = array_metadata(values, compress)
    folder.mkdir()
    if values.size == 0:  # (images, 0 pairs of channels): no chunk holds anything
        (folder / "zarr.json").write_text(json.dumps(meta))
        return
    data = np.ascontiguousarray(values).reshape(-1).view(np.uint8)  # no copy of the bytes
    if len(meta["codecs"]) > 1:
        data = zstd_encode(data, level=ZSTD_LEVEL)
    with open(folder / _chunk_key(values.ndim, "."), "wb") as handle:
        handle.write(data)
    (folder / "zarr.json").write_text(json.dumps(meta))


def write_group(folder: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write a zarr v3 group at ``folder`` holding one `write_array` array per name."""
    make_group(folder)
    for name, values in arrays.items():
        write_array(folder / name, values)


def make_group(folder: Path) -> None:
    """Make the (new) folder ``folder`` an empty zarr v3 group."""
    folder.mkdir(parents=True)
    (folder / "zarr.json").write_text(json.dumps({"attributes": {}, "zarr_format": 3,
                                                  "node_type": "group"}))


def read_array(folder: Path, meta: Any) -> np.ndarray | None:
    """The values of the one-chunk array at ``folder`` whose ``zarr.json`` is ``meta``,
    or None when ``meta`` describes another layout (zarr can read it).

    The chunk decodes into a buffer of exactly the array's size: a chunk that decodes to
    more or fewer bytes is a `ValueError`, never a larger allocation.
    """
    layout = _one_chunk_layout(meta)
    if layout is None:
        return None
    dtype, shape, separator, compressed = layout
    values = np.zeros(shape, dtype)
    if values.size == 0:
        return values
    try:
        with open(folder / _chunk_key(len(shape), separator), "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return values  # not written: every value the fill value, as zarr reads it
    out = values.reshape(-1).view(np.uint8)
    if not compressed:
        if len(data) != out.size:
            raise ValueError(f"{folder}: a chunk of {len(data)} bytes, not {out.size}")
        out[:] = np.frombuffer(data, np.uint8)
        return values
    try:
        decoded = zstd_decode(data, out=out)
    except RuntimeError as error:  # imagecodecs' ZstdError: damaged or too large
        raise ValueError(f"{folder}: {error}") from None
    if len(decoded) != out.size:
        raise ValueError(f"{folder}: a chunk decoding to {len(decoded)} bytes, not {out.size}")
    return values


def read_written_bytes(folder: Path, start: int, size: int) -> bytes:
    """Bytes ``start`` to ``start + size`` of the chunk of a one-dimensional uint8 array this
    process wrote uncompressed (`write_array` with ``compress=False``): a regular file of at
    least that many bytes (else `OSError` or `ValueError`), checked before anything is read.

    Examples
    --------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp()) / "packed"
    >>> write_array(folder, np.arange(10, dtype=np.uint8), compress=False)
    >>> read_written_bytes(folder, 2, 3)
    b'\\x02\\x03\\x04'
    """
    with open_regular(os.fspath(folder / _chunk_key(1, "."))) as handle:  # no FIFO waits
        info = os.fstat(handle.fileno())
        if info.st_size < start + size:
            raise ValueError(f"{folder}: a chunk of {info.st_size:,} bytes, not the "
                             f"{start + size:,} or more its segment's marker implies")
        data = os.pread(handle.fileno(), size, start)
    if len(data) != size:
        raise ValueError(f"{folder}: {len(data)} bytes read at {start}, not {size}")
    return data


def _chunk_key(dimensions: int, separator: str) -> str:
    """The file name of an array's only chunk (zarr's default chunk key encoding)."""
    return separator.join(["c"] + ["0"] * dimensions)


def _one_chunk_layout(meta: Any) -> tuple[np.dtype, tuple[int, ...], str, bool] | None:
    """(dtype, shape, chunk key separator, zstd-compressed) of metadata in the layout
    `write_array` writes."""
    if not isinstance(meta, dict):
        return None
    shape = meta.get("shape")
    encoding = meta.get("chunk_key_encoding")
    separator = encoding.get("configuration", {}).get("separator") \
        if isinstance(encoding, dict) and isinstance(encoding.get("configuration"), dict) \
        else None
    if separator not in (".", "/"):
        return None
    plain = {key: meta.get(key) for key in ("chunk_grid", "chunk_key_encoding", "fill_value")}
    expected = {"chunk_grid": {"name": "regular", "configuration": {"chunk_shape": shape}},
                "chunk_key_encoding": {"name": "default",
                                       "configuration": {"separator": separator}},
                "fill_value": 0}
    codecs = meta.get("codecs")
    if not (isinstance(shape, list) and shape and all(type(n) is int and n >= 0 for n in shape)
            and plain == expected and meta.get("storage_transformers", []) == []
            and isinstance(codecs, list) and 1 <= len(codecs) <= 2
            and codecs[0] in (_BYTES, {"name": "bytes"})
            and meta.get("data_type") in _DTYPES):
        return None
    dtype = np.dtype(_DTYPES[meta["data_type"]])
    if codecs[0] == {"name": "bytes"} and dtype.itemsize > 1:
        return None
    if len(codecs) == 1:
        return dtype, tuple(shape), separator, False
    zstd = codecs[1]
    if not (isinstance(zstd, dict) and zstd.get("name") == "zstd") or zstd_decode is None:
        return None
    return dtype, tuple(shape), separator, True


#: The data types of the cache's arrays, little-endian.
_DTYPES = {"uint8": "<u1", "int64": "<i8", "float64": "<f8"}
