"""Committing a run's records to the cache as they arrive, a segment at a time.

A `SegmentWriter` receives each decoded task's result in the process that runs the
pipeline and commits what has arrived every ``flush_seconds``, or once the records it
holds reach `FLUSH_BYTES`, whichever comes first: a kill loses at most that much work.
These commits are not compressed: the compaction that ends the run (and compresses) reads
them back at once, with what arrived since the last commit taken from memory (`pending`).
A result is reduced on arrival to its record arrays, each in the narrowest dtype that
holds its values exactly (`held`), and the listed row each record answers (its path
strings are dropped: the listing has them). An RGB PNG 16² then takes 30 bytes: 26 of
record (104 as a run computes them) and 4 of listed row. A run of 100,000 of them holds
3 MB and commits nothing before its compaction unless it lasts ``flush_seconds``; a
commit and its reading back cost ~1 ms of the process's time per 1,000 images.
Segments are written by `normstats.engine.cache.listed_segment.write_listed`.

Each record is keyed by the listed file it came from. A task's files are consecutive in
the listing, which the walk makes in the order of the paths, so a result is looked up in
its own window of the listing, found by binary search on its smallest path; a dict of
every listed path (~150 bytes a file) is built only if that fails (a listing in another
order).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from functools import cached_property
from itertools import count, repeat

import numpy as np

from normstats.engine.cache.listed_segment import RecordRows, WrittenSegment, write_listed
from normstats.engine.cache.plan import CachedFailure, is_cacheable_failure
from normstats.engine.cache.store import DatasetCache
from normstats.maths.records import Records
from normstats.sources.base import TaskResult
from normstats.sources.file_list import FileEntry, FileList

__all__ = ["SegmentWriter", "FLUSH_BYTES", "held"]

#: Results are committed at least when the records held reach this many bytes: what a run
#: holds at most (`held`). A cold run of 100,000 PNGs 16² committed every 16,384 images
#: (1.8 MB as computed) and filling the cache added 9-12% to it; it holds all of them now
#: (3 MB with their listed rows; 11 MB as computed took the parent's peak to 1.45x a run
#: without the cache), commits nothing before its compaction, and filling the cache adds
#: 6-8% (peak 1.25x).
FLUSH_BYTES = 4 << 20

log = logging.getLogger("normstats.engine.cache")
OnResult = Callable[[TaskResult], None]


class SegmentWriter:
    """Receives each decoded task's result and commits them to the cache in segments.

    Parameters
    ----------
    store : DatasetCache or None
        Where to write; None writes nothing (read-only run).
    files : sequence of FileEntry
        The walk's files, for the size, mtime and stamp of each record's key.
    flush_seconds : float
        Commit buffered results once this much time has passed since the last commit.
    downstream : callable, optional
        Also receives every result (the caller's ``on_result``).
    keep : frozenset of str
        Paths whose records are kept (``kept``): the files ``--verify-cache`` decodes again.
    """

    def __init__(self, store: DatasetCache | None, files: Sequence[FileEntry],
                 flush_seconds: float, downstream: OnResult | None = None,
                 keep: frozenset[str] = frozenset()) -> None:
        self.store = store
        self.files = FileList.of(files)
        self.flush_seconds = flush_seconds
        self.downstream = downstream
        self.keep = keep
        #: Records of the ``keep`` paths, as decoded.
        self.kept: list[Records] = []
        #: The cacheable failures committed so far.
        self.failures: list[CachedFailure] = []
        #: The segments committed so far, with the listed row of each record.
        self.written: list[WrittenSegment] = []
        self._pending: list[RecordRows] = []
        self._pending_failures: list[CachedFailure] = []
        self._pending_bytes = 0
        self._last = time.monotonic()

    def __call__(self, result: TaskResult) -> None:
        if self.downstream is not None:
            self.downstream(result)
        records = result.records
        if self.keep and records is not None:
            rows = [i for i, key in enumerate(records.keys) if key in self.keep]
            if rows:
                self.kept.append(records.take(np.asarray(rows)))
        if self.store is not None:
            self._receive(result)
        if self._pending_bytes >= FLUSH_BYTES or \
                time.monotonic() - self._last >= self.flush_seconds:
            self.flush()

    def _receive(self, result: TaskResult) -> None:
        """Hold the result's record arrays and listed rows, and its cacheable failures."""
        try:
            records = result.records
            if records is not None:
                listed = _narrowest(self._rows_of(records.keys,
                                                  result.images + len(result.skipped)))
                kept = held(records)
                self._pending.append(RecordRows(kept, listed))
                self._pending_bytes += listed.nbytes + sum(
                    getattr(kept, name).nbytes for name in kept.array_fields())
            self._pending_failures += self._failures(result)
        except Exception as error:  # noqa: BLE001 - caching must never fail the run
            self._stop(error)

    @property
    def segments(self) -> int:
        """Segments committed so far."""
        return len(self.written)

    @property
    def has_pending(self) -> bool:
        """Whether results have arrived that a commit would write."""
        return bool(self._pending or self._pending_failures)

    def flush(self) -> None:
        """Commit what has arrived: one segment per kind of record, in listing order."""
        pending, failures = self._pending, self._pending_failures
        self._pending, self._pending_failures, self._pending_bytes = [], [], 0
        self._last = time.monotonic()
        if self.store is None or not (pending or failures):
            return
        groups: dict[tuple, list[RecordRows]] = {}
        for part in pending:
            groups.setdefault(part.records.signature, []).append(part)
        try:
            for index, parts in enumerate(groups.values() or [[]]):
                self.written.append(write_listed(self.store, self.files, parts, (),
                                                 failures if index == 0 else (),
                                                 compress=False))
            self.failures += failures
        except Exception as error:  # noqa: BLE001 - caching must never fail the run
            self._stop(error)

    def close(self) -> None:
        """Commit whatever is still buffered (also after Ctrl-C or an error)."""
        self.flush()

    def pending(self) -> tuple[list[RecordRows], list[CachedFailure]]:
        """What has arrived since the last commit, still held: the records and failures a
        compaction can take from memory instead of committing them first."""
        return list(self._pending), list(self._pending_failures)

    def compacted(self) -> None:
        """Let go of what `pending` gave: a compaction has committed it."""
        self.failures += self._pending_failures
        self._pending, self._pending_failures, self._pending_bytes = [], [], 0

    def _stop(self, error: Exception) -> None:
        if self.store is not None:
            log.warning("normstats: stopped writing to the cache %s (%s); the result is "
                        "unaffected", self.store.path, error)
        self.store = None
        self._pending, self._pending_failures, self._pending_bytes = [], [], 0

    def _failures(self, result: TaskResult) -> list[CachedFailure]:
        failures = []
        for skipped in result.skipped:
            row = self._row(skipped.path) if is_cacheable_failure(skipped.kind) else None
            if row is not None:
                files = self.files
                failures.append(CachedFailure(skipped.path, int(files.sizes[row]),
                                              int(files.mtimes[row]), skipped.reason,
                                              int(files.stamps[row]), skipped.kind))
        return failures

    def _rows_of(self, keys: Sequence[str], span: int) -> np.ndarray:
        """The listed row of each key, looked up among the ``span`` files from the
        smallest key's (a task's files); `KeyError` for a key not listed."""
        first = self.files.find_sorted(min(keys)) if keys else None
        if first is not None:
            files = self.files[first:first + span]
            if files.has_paths(keys):
                # the task's files, every one, in listing order: compared as bytes,
                # without a path string or a dict made
                return np.arange(first, first + len(keys), dtype=np.int64)
            window = dict(zip(files.paths(), count(first)))
            rows = np.fromiter(map(window.get, keys, repeat(-1)), np.int64, len(keys))
            if rows.min() >= 0:
                return rows
        rows = np.fromiter(map(self.rows.get, keys, repeat(-1)), np.int64, len(keys))
        if len(rows) and rows.min() < 0:
            raise KeyError(f"{keys[int(np.argmin(rows))]} is not a listed file")
        return rows

    def _row(self, path: str) -> int | None:
        """The listed row of ``path``, or None."""
        found = self.files.find_sorted(path)
        return found if found is not None else self.rows.get(path)

    @cached_property
    def rows(self) -> dict[str, int]:
        """Row of each path in ``files``, built only for a listing not in path order."""
        return dict(zip(self.files.paths(), count()))


def held(records: Records) -> Records:
    """``records`` as a `SegmentWriter` holds them until they are written: without their
    keys, each array in the narrowest dtype that holds its values exactly (an 8-bit
    image's minima and maxima in one byte, not a float64's eight). Only a segment's
    writing reads them (`normstats.engine.cache.listed_segment`, which widens each array
    back to its segment's dtype): an RGB PNG 16²'s record takes 26 bytes so, not 104.

    Examples
    --------
    >>> from normstats.maths.records import records_from_stack
    >>> records = records_from_stack(np.full((2, 4, 4, 3), 200, np.uint8))
    >>> kept = held(records)
    >>> kept.maximum.dtype, kept.sums.dtype, kept.sums_sq.dtype, kept.keys
    (dtype('uint8'), dtype('uint16'), dtype('uint32'), ())
    >>> bool((kept.sums_sq == records.sums_sq).all())
    True
    """
    arrays = {name: _narrowest(getattr(records, name)) for name in records.array_fields()}
    return records.replaced(keys=(), **arrays)


_UNSIGNED = (np.uint8, np.uint16, np.uint32)
_SIGNED = (np.int8, np.int16, np.int32)


def _narrowest(values: np.ndarray) -> np.ndarray:
    """``values`` (int64 or float64) in the narrowest integer dtype that holds every value
    exactly, bit for bit once widened again; as they are when none does (a fraction, a
    NaN, -0.0, a value past 32 bits)."""
    if values.size == 0 or values.dtype.itemsize <= 1:
        return values
    if values.dtype.kind in "iu":
        low, high = int(values.min()), int(values.max())
        for dtype in _UNSIGNED if low >= 0 else _SIGNED:
            limits = np.iinfo(dtype)
            if limits.min <= low and high <= limits.max:
                return values.astype(dtype)
        return values
    if values.dtype.kind != "f":
        return values
    low, high = values.min(), values.max()
    if not (low >= 0 and high <= np.iinfo(np.uint16).max):  # NaN fails both
        return values
    narrow = values.astype(np.uint8 if high <= np.iinfo(np.uint8).max else np.uint16)
    if np.array_equal(narrow, values) and not np.signbit(values).any():
        return narrow
    return values
