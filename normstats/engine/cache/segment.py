"""One segment of the record cache on disk: its arrays, its marker, and reading it back.

A segment is a zarr group holding one array per record field (one chunk each) and a
completion marker whose BLAKE2b digest covers the marker's fields and every array's
name, dtype, shape and bytes (see ``docs/cache.md``): a segment counts only when the
arrays read back hash to it, so a half-written, truncated or deleted file is never read
as fill values.

The cache is a folder like any other, and what happens to folders happens to it: a
chunk replaced by a link to ``/dev/zero`` would be read until memory runs out (the
process was killed at 23 GB), a FIFO would block the run forever, a chunk overwritten by
some large file would be read whole before zarr found it wrong. So before a segment is
read, `check_segment_files` reads each array's ``zarr.json`` itself (bounded), checks
that it describes the array the marker promises (its shape follows from the marker's row
and channel counts), and checks every other file of the array: a regular file, no larger
than its data could compress to. Anything else is `DamagedFile`, naming the file. Cost: a
few ``stat`` calls and small reads per segment (a clean cache has one segment). Records
that pass the digest but that no image could have produced (rewritten with a digest to
match) are left out too (`normstats.maths.records.impossible_rows`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from normstats.engine.cache.plan import CachedFailure, SegmentIndex
from normstats.engine.cache.zarr_chunks import read_array
from normstats.errors import SkipKind, numbered
from normstats.maths.records import FloatRecords, IntegerRecords, Records, impossible_rows
from normstats.sources.decoding.file_read import not_regular_reason, read_whole_file

try:  # CPython's own BLAKE2 module, not hashlib: importing hashlib maps OpenSSL's libcrypto,
    # 3.6 MB of the resident memory of the process that runs the pipeline (issue 30's
    # peak goal), and the built-in SHA-256 is 5x slower than BLAKE2 over a warm run's arrays
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - a Python built without its BLAKE2 module
    from hashlib import blake2b

__all__ = ["FORMAT", "LoadedSegment", "DamagedFile", "segment_arrays", "segment_marker",
           "segment_header", "header_digest", "add_to_digest", "DIGEST_NAME", "blake2b",
           "record_layout", "field_dtype",
           "read_segment", "read_cache_json", "check_segment_files", "METADATA_LIMIT",
           "MARKER_LIMIT", "PACKED", "field_shape", "packed_names", "packed_field_range"]

#: 2: files keyed on their stamp too (inode and ctime), groups on every decoder's version.
#: 3: each cached failure carries its kind (a `SkipKind`) after its reason.
#: 4: a segment may hold optional per-image arrays, named in its marker's ``optional``
#: list: the channel cross sums (``cross_sums``) or co-moments (``co_moments``) of a run
#: that asked for the covariance, the valid values per channel (``valid``) of records with
#: nodata left out; and ``raw_units: true`` marks records of rasters reported in raw units.
#: 5: segments are digested with BLAKE2b-256 (``"blake2b:<64 hex>"``) instead of SHA-256.
#: 6: a segment committed during a run (uncompressed) may keep its arrays packed in one
#: uint8 array ``packed`` (its marker says ``"packed": true``; `packed_names`).
FORMAT = 6
#: The one array of a packed segment.
PACKED = "packed"
#: The prefix of a segment's digest in its marker.
DIGEST_NAME = "blake2b:"

_FIELDS = {"IntegerRecords": ("pixels", "minimum", "maximum", "sums", "sums_sq"),
           "FloatRecords": ("pixels", "minimum", "maximum", "means", "residuals", "m2s")}
_KINDS = {"IntegerRecords": IntegerRecords, "FloatRecords": FloatRecords}
#: Per-image arrays a segment holds only when its records have them, (rows, pairs) each.
_OPTIONAL = {"IntegerRecords": ("cross_sums", "valid"), "FloatRecords": ("co_moments", "valid")}


@dataclass(frozen=True, eq=False)
class LoadedSegment:
    """A committed, verified segment: its index for planning and its records.

    ``rejected`` names the files whose records no image could have produced
    (`normstats.maths.records.impossible_rows`): left out of the index, so decoded again.
    """

    index: SegmentIndex
    records: Records | None
    rejected: tuple[str, ...] = ()

def segment_arrays(records: Records | None, sizes: np.ndarray, mtimes: np.ndarray,
                   stamps: np.ndarray) -> dict[str, np.ndarray]:
    """The arrays of one segment, by name (none for no records)."""
    if records is None or len(records) == 0:
        return {}
    blob = "\0".join(records.keys).encode("utf-8", "surrogatepass")
    arrays = {"path_bytes": np.frombuffer(blob, dtype=np.uint8),
              "size": np.asarray(sizes, np.int64), "mtime_ns": np.asarray(mtimes, np.int64),
              "stamp": np.asarray(stamps, np.int64)}
    for field in _FIELDS[type(records).__name__]:
        arrays[field] = np.ascontiguousarray(getattr(records, field))
    for field in _present_optional(records):
        arrays[field] = np.ascontiguousarray(getattr(records, field))
    return arrays


def record_layout(kind: str) -> tuple[type, tuple[str, ...], tuple[str, ...]]:
    """The records class a marker's ``kind`` names, its arrays and its optional arrays
    (`KeyError` for a kind no segment holds)."""
    return _KINDS[kind], _FIELDS[kind], _OPTIONAL[kind]


def field_dtype(name: str) -> str:
    """The dtype of a segment's array ``name``, little-endian (``"<i8"`` for "sums")."""
    return np.dtype(_DTYPES[name]).newbyteorder("<").str


def _present_optional(records: Records) -> list[str]:
    """The optional arrays the records hold (in `_OPTIONAL` order)."""
    return [f for f in _OPTIONAL[type(records).__name__] if getattr(records, f) is not None]


def _digest(header: dict, arrays: dict[str, np.ndarray]) -> str:
    digest = header_digest(header)
    for field in sorted(arrays):
        add_to_digest(digest, field, arrays[field])
    return DIGEST_NAME + digest.hexdigest()


def header_digest(header: dict) -> Any:
    """The running BLAKE2b-256 of a segment, over its header; arrays are added by name order
    (`add_to_digest`), so a segment can be hashed one array at a time."""
    return blake2b(json.dumps(header, sort_keys=True).encode(), digest_size=32)


def add_to_digest(digest: Any, field: str, values: np.ndarray) -> None:
    """Add one array to a segment's running digest (its name, dtype, shape and bytes)."""
    values = np.ascontiguousarray(values)
    digest.update(f"{field}:{values.dtype.str}:{values.shape}".encode())
    digest.update(values.reshape(-1).view(np.uint8))  # the bytes, not a copy of them


def segment_marker(name: str, records: Records | None, arrays: dict[str, np.ndarray],
                   failures: tuple[CachedFailure, ...]) -> dict:
    """The completion marker of a segment: its header and the digest of its arrays."""
    header = segment_header(name, records, failures)
    return {**header, "digest": _digest(header, arrays)}


def segment_header(name: str, records: Records | None, failures: tuple[CachedFailure, ...],
                   rows: int | None = None) -> dict:
    """A marker's header: what the segment holds, of the kind of ``records`` (``rows`` of
    them, by default as many as ``records``)."""
    if rows is None:
        rows = 0 if records is None else len(records)
    header = {"format": FORMAT, "segment": name, "rows": rows}
    if records is not None:
        header.update(kind=type(records).__name__, dtype=records.dtype,
                      channels=list(records.channel_names))
        optional = _present_optional(records)
        if optional:
            header["optional"] = optional
        if records.raw_units:
            header["raw_units"] = True
    header["failures"] = [[f.path, f.size, f.mtime_ns, f.stamp, f.reason, f.kind.value]
                          for f in failures]
    return header


def read_segment(segments_dir: Path, marker_path: Path) -> LoadedSegment | None:
    """The verified segment a marker names, or None for anything damaged or foreign.

    Raises `DamagedFile` (saying what is decoded again) for a file no crash leaves behind.
    """
    if not marker_path.name.endswith(".json") or marker_path.name.startswith("."):
        return None
    rows: int | None = None  # known once the marker is read
    try:
        marker = read_cache_json(marker_path, MARKER_LIMIT)
        digest = marker.pop("digest")
        if marker["format"] != FORMAT or marker["segment"] != marker_path.name[:-5]:
            return None
        rows = int(marker["rows"])
        arrays = _read_arrays(segments_dir / marker["segment"], marker)
        if _digest(marker, arrays) != digest:
            return None
        return _loaded(marker, arrays)
    except DamagedFile as damage:
        files = "the files of its segment are" if rows is None else \
            f"the {numbered(rows, 'file')} of its segment {'is' if rows == 1 else 'are'}"
        raise DamagedFile(damage.path, f"{damage.reason}; {files} decoded again") from None
    except Exception:  # noqa: BLE001 - any damage means "not committed": decode again
        return None


def _read_arrays(folder: Path, marker: dict) -> dict[str, np.ndarray]:
    if marker["rows"] == 0:
        return {}
    names = segment_names(marker)
    rows, channels = int(marker["rows"]), len(marker["channels"])
    if marker.get("packed") is True:
        metadata = check_segment_files(folder, [PACKED], rows, channels, packing=names)
        return _unpacked(_array(folder / PACKED, metadata[PACKED]), names, rows, channels)
    metadata = check_segment_files(folder, names, rows, channels)
    # Each array read by its own (checked) metadata, not through the group's zarr.json.
    return {name: _array(folder / name, metadata[name]) for name in names}


def segment_names(marker: dict) -> tuple[str, ...]:
    """The arrays of the segment a (parsed) marker describes; `ValueError` for optional
    arrays its kind of records does not have."""
    optional = marker.get("optional", [])
    if not isinstance(optional, list) or not set(optional) <= set(_OPTIONAL[marker["kind"]]):
        raise ValueError("the marker names arrays a segment does not hold")
    return ("path_bytes", "size", "mtime_ns", "stamp", *_FIELDS[marker["kind"]], *optional)


def field_shape(name: str, rows: int, channels: int) -> tuple[int, ...]:
    """The shape of a segment's array ``name`` (any but ``path_bytes``, a flat blob) for
    ``rows`` records of ``channels`` channels.

    Examples
    --------
    >>> field_shape("sums", 5, 3), field_shape("pixels", 5, 3), field_shape("cross_sums", 5, 3)
    ((5, 3), (5,), (5, 3))
    """
    if name in _PER_ROW:
        return (rows,)
    return (rows, channels * (channels - 1) // 2 if name in _PER_PAIR else channels)


def packed_names(names: Sequence[str]) -> list[str]:
    """The order a packed segment keeps arrays ``names`` in: the 8-byte arrays by name,
    then ``path_bytes``, the one of variable length; each 8-byte array starts on an
    8-byte boundary, at an offset the marker's row and channel counts fix.

    Examples
    --------
    >>> packed_names(["path_bytes", "size", "mtime_ns", "stamp", "pixels"])
    ['mtime_ns', 'pixels', 'size', 'stamp', 'path_bytes']
    """
    return [*sorted(name for name in names if name != "path_bytes"), "path_bytes"]


def packed_field_range(names: Sequence[str], field: str, rows: int, channels: int
                       ) -> tuple[int, int]:
    """Where array ``field`` (not ``path_bytes``) of a packed segment of arrays ``names``
    lies in its ``packed`` array: (first byte, byte count).

    Examples
    --------
    >>> packed_field_range(["path_bytes", "size", "mtime_ns", "stamp"], "size", 4, 3)
    (32, 32)
    """
    start, shape = _packed_layout(names, rows, channels)[0][field]
    return start, 8 * math.prod(shape)


def _packed_layout(names: Sequence[str], rows: int, channels: int
                   ) -> tuple[dict[str, tuple[int, tuple[int, ...]]], int]:
    """The first byte and shape of each 8-byte array of a packed segment of arrays
    ``names``, in `packed_names` order, and where ``path_bytes`` starts after them."""
    layout, start = {}, 0
    for name in packed_names(names)[:-1]:
        shape = field_shape(name, rows, channels)
        layout[name] = (start, shape)
        start += 8 * math.prod(shape)
    return layout, start


def _unpacked(packed: np.ndarray, names: Sequence[str], rows: int, channels: int
              ) -> dict[str, np.ndarray]:
    """The arrays of a packed segment: views of ``packed`` (read by `_array`, whose size
    `check_segment_files` bounded), the paths being the bytes after the last 8-byte array."""
    layout, paths = _packed_layout(names, rows, channels)
    arrays = {name: packed[start:start + 8 * math.prod(shape)].view(field_dtype(name))
              .reshape(shape) for name, (start, shape) in layout.items()}
    arrays["path_bytes"] = packed[paths:]
    return arrays


#: Records are checked this many rows at a time: the checks' temporaries (a dozen arrays of
#: a block's size) stay in the processor's cache whatever the segment holds (8,192 rows of
#: 3 channels: 6.3 ms per 100,000 rows, against 19 ms in blocks of 65,536).
_CHECK_ROWS = 1 << 13


def _impossible(records: Records) -> np.ndarray:
    """`impossible_rows` of every row, a block of rows at a time."""
    arrays = records.array_fields()
    return np.concatenate([impossible_rows(dataclasses.replace(
        records, keys=(), **{name: getattr(records, name)[start:start + _CHECK_ROWS]
                             for name in arrays}))
        for start in range(0, len(records), _CHECK_ROWS)] or [np.zeros(0, bool)])


def _array(folder: Path, meta: dict) -> np.ndarray:
    """An array of a segment: read here in the layout the cache writes (no zarr import),
    by zarr in any other."""
    values = read_array(folder, meta)
    if values is not None:
        return values
    import zarr

    return np.asarray(zarr.open_array(folder, mode="r", zarr_format=3)[...])


def _loaded(marker: dict, arrays: dict[str, np.ndarray]) -> LoadedSegment:
    failures = tuple(CachedFailure(str(p), int(s), int(m), str(r), int(stamp), SkipKind(k))
                     for p, s, m, stamp, r, k in marker["failures"])
    if not arrays:
        empty = np.zeros(0, np.int64)
        return LoadedSegment(SegmentIndex(marker["segment"], (), empty, empty, failures), None)
    paths = tuple(arrays["path_bytes"].tobytes().decode("utf-8", "surrogatepass").split("\0"))
    if len(paths) != marker["rows"]:
        raise ValueError("path count does not match the marker")
    fields = {f: arrays[f] for f in (*_FIELDS[marker["kind"]], *marker.get("optional", []))}
    records = _KINDS[marker["kind"]](dtype=marker["dtype"], channel_names=tuple(
        marker["channels"]), keys=paths, raw_units=marker.get("raw_units") is True, **fields)
    keep = ~_impossible(records)
    if keep.all():  # the usual case: no row to leave out, no copy
        index = SegmentIndex(marker["segment"], paths, arrays["size"], arrays["mtime_ns"],
                             failures, arrays["stamp"], arrays["path_bytes"])
        return LoadedSegment(index, records)
    rejected = tuple(p for p, kept in zip(paths, keep.tolist()) if not kept)
    records = records.take(keep)
    paths = tuple(p for p, kept in zip(paths, keep.tolist()) if kept)
    index = SegmentIndex(marker["segment"], paths, arrays["size"][keep],
                         arrays["mtime_ns"][keep], failures, arrays["stamp"][keep])
    return LoadedSegment(index, records, rejected)


#: Largest ``zarr.json``, group marker or lock file read (normstats writes < 1 KB).
METADATA_LIMIT = 1 << 20
#: Largest completion marker read: its failures list grows with the broken files cached
#: (~200 bytes each), so this is about a million of them.
MARKER_LIMIT = 256 << 20
#: Bytes of one relative path in ``path_bytes``: PATH_MAX, each byte up to three in UTF-8
#: with surrogatepass, and the separator.
_PATH_BYTES_PER_ROW = 3 * 4096 + 1
#: Per-row arrays; the others are (rows, channels), and ``path_bytes`` is one flat blob.
_PER_ROW = frozenset({"size", "mtime_ns", "stamp", "pixels"})
#: (rows, pairs of channels) arrays.
_PER_PAIR = frozenset({"cross_sums", "co_moments"})
_DTYPES = {"path_bytes": "uint8", "size": "int64", "mtime_ns": "int64", "stamp": "int64",
           "pixels": "int64", "minimum": "float64", "maximum": "float64", "sums": "int64",
           "sums_sq": "int64", "means": "float64", "residuals": "float64", "m2s": "float64",
           "cross_sums": "int64", "co_moments": "float64", "valid": "int64", PACKED: "uint8"}


class DamagedFile(ValueError):
    """A cache file that is not what normstats wrote; ``str()`` names it and says why."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = Path(path), reason


def read_cache_json(path: Path, limit: int = METADATA_LIMIT) -> Any:
    """The JSON in one of the cache's own files, read only if it is a regular file of at
    most ``limit`` bytes.

    Raises
    ------
    DamagedFile
        Not a regular file, over ``limit``, or not JSON.
    OSError
        Missing or unreadable (a file deleted by a concurrent compaction is not damage).

    Examples
    --------
    >>> import tempfile, os
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "zarr.json").write_text('{"zarr_format": 3}')
    >>> read_cache_json(folder / "zarr.json")
    {'zarr_format': 3}
    >>> os.mkfifo(folder / "marker.json")
    >>> read_cache_json(folder / "marker.json")
    Traceback (most recent call last):
    ...
    normstats.engine.cache.segment.DamagedFile: ...marker.json: not a regular file (a FIFO ...
    """
    _check_file(path, limit)
    try:
        data = read_whole_file(os.fspath(path), limit=limit)
        return json.loads(data)
    except ValueError as error:
        raise DamagedFile(path, f"not valid JSON ({error})") from None


def check_segment_files(folder: Path, names: Sequence[str], rows: int,
                        channels: int, packing: Sequence[str] = ()) -> dict[str, Any]:
    """Raise `DamagedFile` unless every file zarr may read for arrays ``names`` of the
    segment ``folder`` is a regular file within the size the marker implies; return each
    array's (checked) ``zarr.json``.

    Examples
    --------
    >>> import tempfile
    >>> check_segment_files(Path(tempfile.mkdtemp()), ["size"], 3, 1)
    Traceback (most recent call last):
    ...
    FileNotFoundError: ...
    """
    metadata = {}
    for name in names:
        array = folder / name
        metadata[name] = read_cache_json(array / "zarr.json")
        limit = _array_bytes(array, metadata[name], name, rows, channels, packing)
        total = 0
        for path in _files_under(array):
            total += _check_file(path, limit - total)
    return metadata


def _array_bytes(array: Path, meta: Any, name: str, rows: int, channels: int,
                 packing: Sequence[str] = ()) -> int:
    """The most bytes the chunks of a (checked) array's metadata can take on disk; for
    the array ``packed``, of a segment of arrays ``packing``."""
    shape = meta.get("shape") if isinstance(meta, dict) else None
    if name == PACKED:
        fixed = _packed_layout(packing, rows, channels)[1]
        fits = isinstance(shape, list) and len(shape) == 1 and isinstance(shape[0], int) \
            and fixed < shape[0] <= fixed + rows * _PATH_BYTES_PER_ROW
    elif name == "path_bytes":
        fits = isinstance(shape, list) and len(shape) == 1 and isinstance(shape[0], int) \
            and 0 < shape[0] <= rows * _PATH_BYTES_PER_ROW
    elif name in _PER_PAIR:
        fits = shape == [rows, channels * (channels - 1) // 2]
    else:
        fits = shape == ([rows] if name in _PER_ROW else [rows, channels])
    if not fits or meta.get("data_type") != _DTYPES.get(name):
        raise DamagedFile(array / "zarr.json", f"describes a {meta.get('data_type')} array "
                          f"of shape {shape}, not the one its segment's marker promises")
    raw = math.prod(shape) * (1 if name in ("path_bytes", PACKED) else 8)
    return raw + raw // 64 + (64 << 10)  # any compressor's worst case, and headers


def _files_under(array: Path) -> Iterator[Path]:
    """Every file below an array's folder but its ``zarr.json``, links not followed."""
    folders = [array]
    while folders:
        with os.scandir(folders.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    folders.append(Path(entry.path))
                elif Path(entry.path) != array / "zarr.json":
                    yield Path(entry.path)


def _check_file(path: Path, limit: int) -> int:
    """The size of ``path`` if it is (or links to) a regular file within ``limit``."""
    info = os.stat(path)
    reason = not_regular_reason(info.st_mode)
    if reason is None and info.st_size > limit:
        reason = f"{info.st_size:,} bytes where at most {max(limit, 0):,} can be valid"
    if reason is not None:
        if os.path.islink(path) and not stat.S_ISREG(info.st_mode):
            reason = f"a link to {os.path.realpath(path)}: {reason}"
        raise DamagedFile(path, reason)
    return info.st_size
