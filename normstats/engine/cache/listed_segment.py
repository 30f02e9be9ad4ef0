"""Writing a segment of listed files' records, one array at a time: commits and compaction.

A segment written here holds records of files of the listing, in the order of the
listing, keyed with the listing's own paths, sizes, mtimes and stamps (a record is
written or reused only for a listed file with exactly its key). Its records come from
memory (the results a run has received since its last commit; the rows of the segments it
loaded that it keeps) or from disk (the segments the run committed as it went, which a
compaction gathers into one). Each array is made from every part, put in listing order,
added to the digest, written and dropped: a compaction of a million images holds two
arrays at a time (~30 MB each: one compressed and written by a second thread while the
next is gathered), never all the records (~250 MB with their paths). Arrays follow
`normstats.maths.records.concat_records`: the channel cross sums only when every part
holds them, valid-value counts when any part does (every pixel counted for the others).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from normstats.engine.cache.plan import CachedFailure
from normstats.engine.cache.segment import (
    DIGEST_NAME,
    MARKER_LIMIT,
    PACKED,
    add_to_digest,
    field_dtype,
    field_shape,
    header_digest,
    packed_field_range,
    packed_names,
    read_cache_json,
    record_layout,
    segment_header,
    segment_names,
)
from normstats.engine.cache.store import DatasetCache, new_segment_name
from normstats.engine.cache.zarr_chunks import make_group, read_written_bytes, write_array
from normstats.maths.records import Records, has_cross_sums
from normstats.sources.file_list import FileList

if TYPE_CHECKING:  # loaded by the first compaction only: a warm run loads no executor
    from concurrent.futures import Future, ThreadPoolExecutor

__all__ = ["RecordRows", "WrittenSegment", "write_listed"]


@dataclass(frozen=True, eq=False)
class RecordRows:
    """Records in memory (``rows`` of them, or all), and the listed file each answers."""

    records: Records
    listed: np.ndarray
    rows: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class WrittenSegment:
    """A segment committed by this run (packed: `write_listed` without ``compress``), and
    the listed file each of its rows answers."""

    name: str
    listed: np.ndarray


@dataclass(frozen=True, eq=False)
class _Part:
    """One source of rows: records in memory, or a segment on disk and its marker."""

    listed: np.ndarray
    memory: RecordRows | None = None
    folder: Path | None = None
    marker: dict | None = None

    @property
    def signature(self) -> tuple:
        if self.memory is not None:
            records = self.memory.records
            return (type(records).__name__, records.dtype, tuple(records.channel_names),
                    records.raw_units)
        marker = self.marker
        return (marker["kind"], marker["dtype"], tuple(marker["channels"]),
                marker.get("raw_units") is True)

    def holds(self, field: str) -> bool:
        if self.memory is not None:
            records = self.memory.records
            return records.valid is not None if field == "valid" else has_cross_sums(records)
        return field in self.marker.get("optional", [])

    def column(self, field: str, channels: int) -> np.ndarray:
        """The part's values of a record field, in its row order."""
        if field == "valid" and not self.holds("valid"):  # every pixel counted
            pixels = self.column("pixels", channels).astype(np.int64)
            return np.broadcast_to(pixels[:, None], (len(pixels), channels))
        if self.memory is not None:
            values = getattr(self.memory.records, field)
            return values if self.memory.rows is None else values[self.memory.rows]
        # a commit of this run, packed: only this array's bytes of its one file
        start, size = packed_field_range(segment_names(self.marker), field,
                                         len(self.listed), channels)
        data = read_written_bytes(self.folder / PACKED, start, size)
        return np.frombuffer(data, field_dtype(field)).reshape(
            field_shape(field, len(self.listed), channels))


def write_listed(store: DatasetCache, files: FileList, in_memory: Sequence[RecordRows],
                 on_disk: Sequence[WrittenSegment], failures: Sequence[CachedFailure],
                 compress: bool = True) -> WrittenSegment:
    """Commit one segment of the records ``in_memory``, those of the segments ``on_disk``
    and ``failures``, in the order of ``files``; return it (the others are untouched).
    ``compress``: its arrays compressed (zstd), one zarr array each, as a compaction
    writes them for every later run to read; otherwise (a commit during a run, whose
    records only this run's compaction reads again) uncompressed and packed into one zarr
    array (`packed_names`): 3 files where ~30 cost the file system up to a millisecond each.

    Raises `ValueError` when the parts cannot make one segment (records that cannot be
    pooled, a file answered twice); nothing is committed then.
    """
    parts = [_Part(part.listed, memory=part) for part in in_memory if len(part.listed)]
    for segment in on_disk:
        marker = read_cache_json(store.markers_dir / f"{segment.name}.json", MARKER_LIMIT)
        if marker["rows"]:
            parts.append(_Part(segment.listed, folder=store.segments_dir / segment.name,
                               marker=marker))
    name = new_segment_name()
    if not parts:
        header = segment_header(name, None, tuple(failures))
        store.commit(name, {**header, "digest": DIGEST_NAME + header_digest(header).hexdigest()})
        return WrittenSegment(name, np.zeros(0, np.int64))
    kinds = {part.signature for part in parts}
    if len(kinds) > 1:
        raise ValueError("records of different kinds cannot be one segment")
    (kind, dtype, channels, raw_units), = kinds
    # Row numbers in four bytes where they fit: the writer keeps them for every record.
    index = np.int32 if len(files) < 2**31 else np.int64
    listed = np.concatenate([part.listed for part in parts]).astype(index, copy=False)
    order = np.argsort(listed, kind="stable")
    rows = listed[order]
    if len(rows) > 1 and (rows[1:] == rows[:-1]).any():
        raise ValueError("a file answered twice")
    rank = np.empty(len(order), index)  # where each part's row goes
    rank[order] = np.arange(len(order), dtype=index)
    places = _places(rank, [len(part.listed) for part in parts])
    del listed, order, rank
    fields, optional = _fields(kind, parts)
    header = segment_header(name, _template(kind, dtype, channels, raw_units, optional),
                            tuple(failures), rows=len(rows))
    if not compress:
        header["packed"] = True  # in the digested header: how the arrays are kept
    digest = header_digest(header)
    folder = store.segments_dir / name
    make_group(folder)
    kept = files if len(rows) == len(files) else files.take(rows)
    packed: dict[str, np.ndarray] = {}
    with _Compressing() as compressing:
        for field in sorted(fields):
            values = _listing_column(kept, field)
            if values is None:
                values = _gathered(parts, field, len(channels), places)
            add_to_digest(digest, field, values)
            if compress:
                compressing.write(folder / field, values)
            else:  # a commit's few thousand rows: held until the one write
                packed[field] = np.ascontiguousarray(values).reshape(-1).view(np.uint8)
            del values
    if packed:
        write_array(folder / PACKED, np.concatenate([packed[f] for f in packed_names(fields)]),
                    compress=False)
    store.commit(name, {**header, "digest": DIGEST_NAME + digest.hexdigest()})
    return WrittenSegment(name, rows)


class _Compressing:
    """Arrays compressed and written by a second thread while the caller gathers and
    digests the next (zstd and BLAKE2b both release the GIL: a compaction ends a run, when
    a core the decoding workers used is free); at most one array waits, so a compaction
    holds two arrays, not one. The thread starts with the first array (a commit, which
    packs its arrays into one, starts none). A second thread took the compaction of
    100,000 PNGs 16² 63.6-70.9 ms against 66.7-69.7 (three runs each), holding one array
    more."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._pending: Future | None = None

    def write(self, folder: Path, values: np.ndarray) -> None:
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(1, thread_name_prefix="normstats-cache-compress")
        self._wait()
        self._pending = self._pool.submit(write_array, folder, values)

    def _wait(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.result()  # its error, raised here

    def __enter__(self) -> _Compressing:
        return self

    def __exit__(self, *error: object) -> None:
        if self._pool is not None:
            try:
                if error[0] is None:
                    self._wait()
            finally:
                self._pool.shutdown(wait=True)


def _places(rank: np.ndarray, lengths: list[int]) -> list[slice | np.ndarray]:
    """Where the rows of each part go, the parts' rows one after the other in ``rank``: a
    slice for a part whose rows land in one consecutive run (a task's files, a commit of
    tasks that finished in order: copied 5x faster than through an index), else the
    part's ranks."""
    places: list[slice | np.ndarray] = []
    start = 0
    for length in lengths:
        ranks = rank[start:start + length]
        consecutive = length > 0 and bool((np.diff(ranks) == 1).all())
        places.append(slice(int(ranks[0]), int(ranks[0]) + length) if consecutive else ranks)
        start += length
    return places


def _gathered(parts: list[_Part], field: str, channels: int,
              places: list[slice | np.ndarray]) -> np.ndarray:
    """A record field of every part, each part's rows at its ``places``, in the segment's
    dtype for the field (parts in memory may hold narrower ones: `writer.held`): one part
    read at a time."""
    rows = sum(len(part.listed) for part in parts)
    values = np.empty(field_shape(field, rows, channels), field_dtype(field))
    for part, place in zip(parts, places):
        values[place] = part.column(field, channels)
    return values


def _fields(kind: str, parts: list[_Part]) -> tuple[list[str], list[str]]:
    """Every array of the segment, and its optional ones."""
    _, required, optional_fields = record_layout(kind)
    optional = [f for f in optional_fields
                if (any if f == "valid" else all)(part.holds(f) for part in parts)]
    return ["path_bytes", "size", "mtime_ns", "stamp", *required, *optional], optional


def _listing_column(kept: FileList, field: str) -> np.ndarray | None:
    """The arrays the listing itself gives (the key of every row), or None."""
    if field == "path_bytes":
        return kept.joined_paths()
    columns = {"size": kept.sizes, "mtime_ns": kept.mtimes, "stamp": kept.stamps}
    return np.ascontiguousarray(columns[field], np.int64) if field in columns else None


def _template(kind: str, dtype: str, channels: tuple[str, ...], raw_units: bool,
              optional: list[str]) -> Records:
    """Records of no image of the segment's kind: what its marker's header describes."""
    kind_class, required, _ = record_layout(kind)
    count = len(channels)
    arrays = {f: np.zeros((0,) if f == "pixels" else (0, count)) for f in required}
    arrays.update({f: np.zeros((0, count if f == "valid" else count * (count - 1) // 2))
                   for f in optional})
    return kind_class(dtype=dtype, channel_names=channels, keys=(), raw_units=raw_units,
                      **arrays)
