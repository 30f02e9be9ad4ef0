"""The cache's arrays as zarr v3 lays them out, written and read without importing zarr.

Every array of a cache segment is a zarr v3 array of one chunk: a ``zarr.json`` and the
chunk file ``c.0`` (``c.0.0`` for two dimensions: zarr's default chunk keys with the "."
separator, so a chunk is a file beside its ``zarr.json``, not two folders down: folders
are what a file system is slowest to make and remove), its bytes little-endian,
compressed with blosc (lz4 after a byte shuffle; zstd in caches written before, and
past blosc's 2 GB). zarr itself reads and writes exactly that, but importing it costs
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

try:  # c-blosc and libzstd, which imagecodecs bundles (a dependency, for PNG)
    from imagecodecs import blosc_decode, blosc_encode, zstd_decode, zstd_encode
except ImportError:  # pragma: no cover - without it, zarr reads and writes every array
    blosc_decode = blosc_encode = zstd_decode = zstd_encode = None

__all__ = ["write_group", "make_group", "write_array", "read_array", "read_written_bytes",
           "array_metadata",
           "ZSTD_LEVEL"]

#: The cache's chunks: blosc (a zarr v3 core codec), lz4 at level 5 after a byte shuffle
#: (each value's bytes grouped by significance: the high bytes of sums and of float64
#: extremes are runs). On the 14.7 MB of records of 100,000 PNGs 16², against zstd level
#: 1 on the bytes as they are (what the cache wrote before): 3.97 MB against 3.88,
#: compressed in 9 ms against 33 and decompressed in 8.5 ms against 22 (one thread).
BLOSC = {"cname": "lz4", "clevel": 5, "blocksize": 0}
#: zstd's level for a chunk past `BLOSC_MAX_BYTES` (1 compresses records to within a
#: few per cent of zarr's default, level 3, at twice its speed).
ZSTD_LEVEL = 1
#: The largest chunk blosc takes (its sizes are 32-bit; a chunk this large holds the
#: sums of ~90 million images): larger ones are zstd's.
BLOSC_MAX_BYTES = 2**31 - 256
#: The bytes of a blosc chunk's header; bytes 4-8 hold its decoded size and 12-16 its own.
_BLOSC_HEADER = 16

_BYTES = {"name": "bytes", "configuration": {"endian": "little"}}


def array_metadata(values: np.ndarray, compress: bool = True) -> dict[str, Any]:
    """The ``zarr.json`` of a one-chunk array of ``values``, as zarr writes it (with the
    zstd codec if ``compress`` and libzstd is at hand).

    Examples
    --------
    >>> meta = array_metadata(np.zeros((2, 3), np.int64))
    >>> meta["shape"], meta["data_type"], [c["name"] for c in meta["codecs"]]
    ([2, 3], 'int64', ['bytes', 'blosc'])
    """
    shape = list(values.shape)
    zero: Any = 0.0 if values.dtype.kind == "f" else 0
    itemsize = values.dtype.itemsize
    codecs = [_BYTES if itemsize > 1 else {"name": "bytes"}]
    if compress and values.nbytes <= BLOSC_MAX_BYTES and blosc_encode is not None:
        codecs.append({"name": "blosc", "configuration": {
            **BLOSC, "shuffle": "shuffle" if itemsize > 1 else "noshuffle",
            "typesize": itemsize}})
    elif compress and zstd_encode is not None:
        codecs.append({"name": "zstd", "configuration": {"level": ZSTD_LEVEL,
                                                          "checksum": False}})
    return {"shape": shape, "data_type": values.dtype.name,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": shape}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "."}},
            "fill_value": zero, "codecs": codecs, "attributes": {}, "zarr_format": 3,
            "node_type": "array", "storage_transformers": []}


def write_array(folder: Path, values: np.ndarray, compress: bool = True) -> None:
    """Write ``values`` (little-endian) as a one-chunk zarr v3 array, its chunk compressed
    (`BLOSC`, or zstd past `BLOSC_MAX_BYTES`) if ``compress``.

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
    codec = meta["codecs"][-1]["name"]
    if codec == "blosc":
        data = blosc_encode(data, level=BLOSC["clevel"], compressor=BLOSC["cname"],
                            shuffle=int(values.dtype.itemsize > 1),
                            typesize=values.dtype.itemsize, numthreads=1)
    elif codec == "zstd":
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
    dtype, shape, separator, codec = layout
    values = np.zeros(shape, dtype)
    if values.size == 0:
        return values
    try:
        with open(folder / _chunk_key(len(shape), separator), "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return values  # not written: every value the fill value, as zarr reads it
    out = values.reshape(-1).view(np.uint8)
    if codec is None:
        if len(data) != out.size:
            raise ValueError(f"{folder}: a chunk of {len(data)} bytes, not {out.size}")
        out[:] = np.frombuffer(data, np.uint8)
        return values
    if codec == "blosc":
        _check_blosc_header(folder, data, out.size)
    try:
        decoded = (blosc_decode(data, out=out, numthreads=1) if codec == "blosc"
                   else zstd_decode(data, out=out))
    except RuntimeError as error:  # imagecodecs' BloscError, ZstdError: damaged, too large
        raise ValueError(f"{folder}: {error}") from None
    if len(decoded) != out.size:
        raise ValueError(f"{folder}: a chunk decoding to {len(decoded)} bytes, not {out.size}")
    return values


def _check_blosc_header(folder: Path, data: bytes, size: int) -> None:
    """Refuse a blosc chunk whose header does not say it decodes to ``size`` bytes from
    exactly its own: c-blosc reads as far as the header says, and is never asked to."""
    if len(data) < _BLOSC_HEADER:
        raise ValueError(f"{folder}: a blosc chunk of {len(data)} bytes, shorter than its "
                         "header")
    decoded, stored = (int.from_bytes(data[at:at + 4], "little") for at in (4, 12))
    if decoded != size or stored != len(data):
        raise ValueError(f"{folder}: a blosc chunk of {len(data)} bytes saying it holds "
                         f"{stored} decoding to {decoded}, not {size}")


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


def _one_chunk_layout(meta: Any) -> tuple[np.dtype, tuple[int, ...], str, str | None] | None:
    """(dtype, shape, chunk key separator, codec: "blosc", "zstd" or None) of metadata in
    the layout `write_array` writes."""
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
        return dtype, tuple(shape), separator, None
    # blosc's own header says how it was shuffled and compressed (any configuration
    # decodes the same way); zstd's frame says the rest
    codec = codecs[1].get("name") if isinstance(codecs[1], dict) else None
    decoders = {"blosc": blosc_decode, "zstd": zstd_decode}
    if decoders.get(codec) is None:
        return None
    return dtype, tuple(shape), separator, codec


#: The data types of the cache's arrays, little-endian.
_DTYPES = {"uint8": "<u1", "int64": "<i8", "float64": "<f8"}
