"""Deciding what the cache can answer: a pure function, no I/O (pooch's "decide, then act").

`plan` takes the files a folder walk listed now and the index of the committed cache
segments (their file keys and recorded failures) and says, file by file, which
committed record to reuse and which files to decode. A record is reused only when its
key matches the file exactly: same relative path, same size, same ``mtime_ns``, same
stamp (the inode and status-change time folded together: `change_stamp`).
Everything about reading or writing the store lives in `normstats.engine.cache.store`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import repeat

import numpy as np

from normstats.errors import SkipKind
from normstats.maths.records import Skipped
from normstats.sources.file_list import FileEntry, FileList

__all__ = ["CachedFailure", "SegmentIndex", "CachePlan", "plan", "is_cacheable_failure",
           "needs_compaction"]

@dataclass(frozen=True)
class CachedFailure:
    """A file that could not be decoded under the group's policy, keyed like a record."""

    path: str
    size: int
    mtime_ns: int
    reason: str
    stamp: int = 0
    kind: SkipKind = SkipKind.UNREADABLE

    @property
    def key(self) -> tuple[int, int, int]:
        return self.size, self.mtime_ns, self.stamp

    def skipped(self) -> Skipped:
        return Skipped(self.path, self.reason, self.kind)


@dataclass(frozen=True, eq=False)
class SegmentIndex:
    """The file keys of one committed segment: one row per record, plus its failures.

    Attributes
    ----------
    name : str
        Segment name; names sort in the order the segments were written.
    paths : tuple of str
        Relative path of each record row.
    sizes, mtimes : numpy.ndarray
        int64 size and ``mtime_ns`` of each record row.
    failures : tuple of CachedFailure
        Files the segment's run could not decode.
    stamps : numpy.ndarray, optional
        int64 `change_stamp` of each record row (zeros when not given).
    path_bytes : numpy.ndarray, optional
        The paths as stored (UTF-8, a NUL between two): compared with the listing's at
        once, they say whether the segment lists exactly the listed paths.
    """

    name: str
    paths: tuple[str, ...]
    sizes: np.ndarray
    mtimes: np.ndarray
    failures: tuple[CachedFailure, ...] = ()
    stamps: np.ndarray | None = None
    path_bytes: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.stamps is None:
            object.__setattr__(self, "stamps", np.zeros(len(self.paths), np.int64))

    @property
    def entries(self) -> int:
        return len(self.paths) + len(self.failures)


@dataclass(frozen=True, eq=False)
class CachePlan:
    """What to reuse and what to decode.

    Attributes
    ----------
    reuse : tuple of (str, numpy.ndarray)
        Per segment name, the sorted row indices whose records are reused.
    failures : tuple of CachedFailure
        Recorded failures that still apply (same size, mtime and stamp).
    compute : FileList
        Files to decode, in walk order.
    stale : int
        Committed rows and failures that nothing reuses (changed, deleted or duplicate).
    listed : tuple of numpy.ndarray
        Per entry of ``reuse``, the row of the listed file each reused row answers.
    """

    reuse: tuple[tuple[str, np.ndarray], ...] = ()
    failures: tuple[CachedFailure, ...] = ()
    compute: FileList = field(default_factory=lambda: FileList.of(()))
    stale: int = 0
    segments_used: frozenset[str] = field(default_factory=frozenset)
    listed: tuple[np.ndarray, ...] = ()

    @property
    def cached(self) -> int:
        """Files answered by the cache (records and recorded failures)."""
        return sum(len(rows) for _, rows in self.reuse) + len(self.failures)


def plan(files: Sequence[FileEntry], segments: Sequence[SegmentIndex],
         distrust: frozenset[str] = frozenset()) -> CachePlan:
    """Match the files listed now against the committed segments.

    The newest segment wins when several hold a matching key (they hold the same
    record, since a file with the same key decodes the same way). Paths in
    ``distrust`` are decoded whatever the cache holds (``--verify-cache``).

    Examples
    --------
    >>> import numpy as np
    >>> seg = SegmentIndex("s1", ("a.png", "b.png"), np.array([10, 20]), np.array([1, 2]))
    >>> p = plan([FileEntry("a.png", 10, 1), FileEntry("b.png", 21, 3),
    ...           FileEntry("c.png", 5, 5)], [seg])
    >>> [f.path for f in p.compute], p.cached, p.stale
    (['b.png', 'c.png'], 1, 1)
    """
    files = FileList.of(files)
    listed = _Listing(files, distrust)
    reuse: list[tuple[str, np.ndarray, np.ndarray]] = []
    failures: list[CachedFailure] = []
    for segment in sorted(segments, key=lambda s: s.name, reverse=True):
        rows, answered = listed.take_matching(segment)
        if len(rows):
            reuse.append((segment.name, rows, answered))
        failures += [f for f in segment.failures if listed.take_failure(f)]
    compute = files.take(np.flatnonzero(~listed.taken)) if listed.taken.any() else files
    stale = sum(s.entries for s in segments) - int(listed.taken.sum())
    used = frozenset(name for name, _, _ in reuse) | _failure_segments(segments, failures)
    reuse.sort(key=lambda r: r[0])
    return CachePlan(tuple((name, rows) for name, rows, _ in reuse),
                     tuple(sorted(failures, key=lambda f: f.path)), compute, stale, used,
                     tuple(answered for _, _, answered in reuse))


class _Listing:
    """The files listed now, and which of them a committed entry has answered so far.

    Matching is vectorised: each segment's rows are looked up once in a dict of the
    listed paths (C loops, no Python call a row) and their keys compared as columns; a
    segment listing exactly the listed paths in order (a compacted group, the usual warm
    run) needs no dict at all.
    """

    def __init__(self, files: FileList, distrust: frozenset[str]) -> None:
        self.files = files
        self.distrust = distrust
        self.taken = np.zeros(len(files), bool)
        self._rows: dict[str, int] | None = None

    @cached_property
    def paths(self) -> list[str]:
        """The listed paths, made only when a segment is matched (not for an empty cache)."""
        return self.files.paths()

    @property
    def rows(self) -> dict[str, int]:
        """Row of each listed path that may be answered (not distrusted)."""
        if self._rows is None:
            self._rows = dict(zip(self.paths, range(len(self.paths))))
            for path in self.distrust:
                self._rows.pop(path, None)
        return self._rows

    def take_matching(self, segment: SegmentIndex) -> tuple[np.ndarray, np.ndarray]:
        """The sorted rows of ``segment`` that answer a listed file not yet answered (its
        first such row, for a path the segment holds twice), and the row of the listed
        file each answers; those files are taken."""
        if not self.distrust and self._lists_exactly(segment):
            listed = np.arange(len(self.files))
        else:
            listed = np.fromiter(map(self.rows.get, segment.paths, repeat(-1)), np.int64,
                                 len(segment.paths))
        rows = np.flatnonzero(listed >= 0)
        listed = listed[rows]
        files = self.files
        same = (files.sizes[listed] == segment.sizes[rows]) & \
            (files.mtimes[listed] == segment.mtimes[rows]) & \
            (files.stamps[listed] == segment.stamps[rows]) & ~self.taken[listed]
        rows, listed = rows[same], listed[same]
        if len(listed) > 1 and not (listed[1:] > listed[:-1]).all():  # a path held twice?
            first = np.sort(np.unique(listed, return_index=True)[1])  # first rows in order
            rows, listed = rows[first], listed[first]
        self.taken[listed] = True
        return rows.astype(np.int64), listed.astype(np.int64)

    def _lists_exactly(self, segment: SegmentIndex) -> bool:
        """Whether ``segment`` holds exactly the listed paths, in the listing's order."""
        if len(segment.paths) != len(self.files):
            return False
        if segment.path_bytes is not None:  # bytes against bytes: no path string made
            return np.array_equal(segment.path_bytes, self.files.joined_paths())
        return segment.paths == tuple(self.paths)

    def take_failure(self, failure: CachedFailure) -> bool:
        """Whether ``failure`` answers a listed file not yet answered (then it is taken)."""
        row = self.rows.get(failure.path)
        if row is None or self.taken[row]:
            return False
        files = self.files
        key = (int(files.sizes[row]), int(files.mtimes[row]), int(files.stamps[row]))
        if key != failure.key:
            return False
        self.taken[row] = True
        return True


def _failure_segments(segments: Sequence[SegmentIndex],
                      failures: list[CachedFailure]) -> frozenset[str]:
    chosen = {id(f) for f in failures}
    return frozenset(s.name for s in segments if any(id(f) in chosen for f in s.failures))


def is_cacheable_failure(kind: SkipKind) -> bool:
    """Whether a decode failure of this kind depends only on the file (so it may be cached).

    Decided by the kind, never by the wording: a damaged file whose reason happens to
    begin "permission denied" is still a verdict on its bytes.

    Examples
    --------
    >>> is_cacheable_failure(SkipKind.UNREADABLE), is_cacheable_failure(SkipKind.REFUSED)
    (True, True)
    >>> is_cacheable_failure(SkipKind.TRANSIENT), is_cacheable_failure(SkipKind.DUPLICATE)
    (False, False)
    """
    return kind in (SkipKind.UNREADABLE, SkipKind.REFUSED)


def needs_compaction(live_segments: int, stale: int, junk: int) -> bool:
    """Whether the group should be rewritten as one segment after a run.

    A clean group is exactly one committed segment, every entry of which is reused,
    with no uncommitted or damaged files beside it.

    Examples
    --------
    >>> needs_compaction(1, 0, 0), needs_compaction(3, 0, 0), needs_compaction(1, 2, 0)
    (False, True, True)
    """
    return live_segments > 1 or stale > 0 or junk > 0
