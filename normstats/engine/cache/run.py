"""Running a folder through the per-image cache: load, plan, decode the rest, commit.

The order of events makes every interruption safe:

1. take the group's writer lock (or, if another run holds it, go on read-only);
2. load the committed segments (each verified against its marker's digest, its files
   checked before they are read, its records for plausibility); damage no crash can
   leave is named on stderr, one line each, and the files concerned are decoded again;
3. `normstats.engine.cache.plan.plan` says which records to reuse and which files to decode;
4. the pipeline decodes only those files; as results arrive, a `SegmentWriter` commits
   them in segments (data first, then the marker) at most every ``flush_seconds``;
5. after a successful run the group is compacted into one segment holding exactly
   the current files' records, and everything else in it is deleted.

A kill at any point leaves committed segments, which the next run reuses, and junk,
which it ignores and the next compaction removes. The cache never fails a
computation: an I/O error while caching is reported once and the run goes on without it.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import os
import time
from collections.abc import Callable, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from normstats.engine.cache.plan import (
    CachedFailure,
    CachePlan,
    is_cacheable_failure,
    needs_compaction,
    plan,
)
from normstats.engine.cache.store import DatasetCache, LoadedSegment
from normstats.engine.cache.verify import (
    cached_verdicts,
    choose_checks,
    compare_verdicts,
    fresh_verdicts,
    parse_verify,
)
from normstats.engine.pipeline import RunOutcome, run
from normstats.errors import input_error
from normstats.maths.records import Records, concat_records
from normstats.maths.summary import Summary, summarize
from normstats.results.text_report import printable
from normstats.sources.base import TaskResult
from normstats.sources.file_list import FileEntry, FileList
from normstats.sources.folder import FolderSource

__all__ = ["run_cached", "SegmentWriter", "LOCK_WAIT_SECONDS", "FLUSH_SECONDS"]

#: How long a second run waits for the writer lock before going on read-only.
LOCK_WAIT_SECONDS = 2.0
#: Decoded results are committed at least this often (what a kill can lose at most).
FLUSH_SECONDS = 2.0

log = logging.getLogger("normstats.engine.cache")
OnResult = Callable[[TaskResult], None]


def run_cached(source: FolderSource, cache_dir: str | os.PathLike, *,
               lock_wait: float | None = None, flush_seconds: float | None = None,
               on_result: OnResult | None = None, verify_cache: int | str | None = None,
               rng: np.random.Generator | None = None, **options: Any) -> RunOutcome:
    """Compute ``source`` reusing the records committed in ``cache_dir``.

    ``lock_wait`` and ``flush_seconds`` default to `LOCK_WAIT_SECONDS` and
    `FLUSH_SECONDS`, read at call time. ``verify_cache`` (a number of files, or "all")
    decodes that many of the files the cache would answer again, drawn by ``rng``, and
    reports in ``check`` those whose cached verdict no longer holds
    (`normstats.engine.cache.verify`).

    Cached records and failures are passed to ``on_result`` first (one `TaskResult`),
    then each decoded task's result as it finishes, so a caller sees every record.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from PIL import Image
    >>> d = pathlib.Path(tempfile.mkdtemp()); Image.new("RGB", (4, 4)).save(d / "a.png")
    >>> cache = tempfile.mkdtemp()
    >>> first = run_cached(FolderSource(d), cache, workers=1)
    >>> second = run_cached(FolderSource(d), cache, workers=1)
    >>> (first.cached, first.decoded), (second.cached, second.decoded)
    ((0, 1), (1, 0))
    """
    count = parse_verify(verify_cache)
    store = _open_store(Path(cache_dir), source)
    if store is None:
        return RunOutcome(run(source, on_result=on_result, **options))
    writable = _lock(store, LOCK_WAIT_SECONDS if lock_wait is None else lock_wait)
    try:
        segments, junk = store.load()
        for problem in store.problems:
            log.warning("normstats: cache %s: %s", store.path, printable(problem))
        indexes = [s.index for s in segments]
        decision = plan(source.walk.files, indexes)
        checks = choose_checks(decision, segments, count, rng or np.random.default_rng())
        expected = cached_verdicts(decision, segments, checks)
        if checks:
            decision = plan(source.walk.files, indexes, distrust=checks)
        _raise_cached_failure(source, decision)
        cached = _reused_records(segments, decision)
        if on_result is not None and decision.cached:
            on_result(TaskResult(cached, tuple(f.skipped() for f in decision.failures)))
        writer = SegmentWriter(store if writable else None, source.walk.files,
                               FLUSH_SECONDS if flush_seconds is None else flush_seconds,
                               on_result)
        try:
            summary = run(_restricted(source, decision.compute), on_result=writer, **options)
        except BaseException:
            writer.close()  # commit what has arrived: Ctrl-C or an error resumes from here
            raise
        _finish(store, decision, cached, writer, junk)
    finally:
        store.unlock()
    check = compare_verdicts(expected, fresh_verdicts(writer.records, summary.skipped, checks))
    for path in check.changed:
        log.warning("normstats: %s: the cached record no longer matches the file (changed "
                    "with the same size, mtime, inode and ctime); decoded again", printable(path))
    return RunOutcome(_combine(source, cached, decision, summary), decision.cached,
                      len(decision.compute), True, check)


def _open_store(cache_dir: Path, source: FolderSource) -> DatasetCache | None:
    try:
        return DatasetCache.open(cache_dir, source.root, source.policy)
    except OSError as error:
        log.warning("normstats: cannot use the cache in %s (%s); computing without it",
                    cache_dir, error.strerror or error)
        return None


def _lock(store: DatasetCache, wait: float) -> bool:
    try:
        if store.try_lock(wait):
            return True
        reason = f"another normstats run (pid {store.holder()}) is writing it"
    except OSError as error:
        reason = f"cannot lock it: {error.strerror or error}"
    log.warning("normstats: cache %s: %s; reusing its committed records but not writing "
                "to it", store.path, reason)
    return False


def _raise_cached_failure(source: FolderSource, decision: CachePlan) -> None:
    if source.fail_fast and decision.failures:
        first = decision.failures[0]
        raise input_error(first.kind, first.reason, first.path)


def _reused_records(segments: list[LoadedSegment], decision: CachePlan) -> Records | None:
    by_name = {s.index.name: s for s in segments}
    parts = [by_name[name].records.take(rows) for name, rows in decision.reuse]
    return concat_records(parts) if parts else None


def _restricted(source: FolderSource, files: FileList) -> FolderSource:
    """The same folder source, listing only the files left to decode."""
    rest = copy.copy(source)
    rest.walk = dataclasses.replace(source.walk, files=files, skipped=())
    rest.skipped = ()
    return rest


def _combine(source: FolderSource, cached: Records | None, decision: CachePlan,
             decoded: Summary) -> Summary:
    """Merge cached and decoded parts; skipped files in the order a cold run lists them."""
    total = summarize(cached).merge(decoded)
    failures = [f.skipped() for f in decision.failures] + list(decoded.skipped)
    failures.sort(key=lambda s: s.path)
    return dataclasses.replace(total, skipped=tuple(source.skipped) + tuple(failures))


def _finish(store: DatasetCache, decision: CachePlan, cached: Records | None,
            writer: SegmentWriter, junk: int) -> None:
    """Commit the rest of a successful run, compacting the group into one segment of
    exactly the current files' entries when it is not already that (one write either way).
    """
    live = len(decision.segments_used) + writer.segments + writer.has_pending
    if writer.store is None or not needs_compaction(live, decision.stale, junk):
        writer.close()
        return
    parts = ([cached] if cached is not None else []) + writer.records
    failures = decision.failures + tuple(writer.failures)
    try:
        records = concat_records(parts) if parts else None
        name = writer.write(records, failures)
    except Exception as error:  # noqa: BLE001 - a failed compaction leaves a valid cache
        log.warning("normstats: could not compact the cache %s (%s)", store.path, error)
        writer.close()
        return
    writer.discard_pending()  # the compacted segment holds them
    try:
        store.remove_all_but(name)
    except OSError as error:  # leftovers are junk, removed by the next compaction
        log.warning("normstats: could not tidy the cache %s (%s)", store.path, error)


class SegmentWriter:
    """Receives each decoded task's result and commits them to the cache in segments.

    Parameters
    ----------
    store : DatasetCache or None
        Where to write; None keeps results in memory only (read-only run).
    files : sequence of FileEntry
        The walk's files, for the size, mtime and stamp of each record's key.
    flush_seconds : float
        Commit buffered results once this much time has passed since the last commit.
    downstream : callable, optional
        Also receives every result (the caller's ``on_result``).
    """

    def __init__(self, store: DatasetCache | None, files: Sequence[FileEntry],
                 flush_seconds: float = FLUSH_SECONDS, downstream: OnResult | None = None):
        self.store = store
        self.files = FileList.of(files)
        self.flush_seconds = flush_seconds
        self.downstream = downstream
        self.records: list[Records] = []
        self.failures: list[CachedFailure] = []
        self.segments = 0
        self._pending: list[TaskResult] = []
        self._last = time.monotonic()

    def __call__(self, result: TaskResult) -> None:
        if self.downstream is not None:
            self.downstream(result)
        if result.records is not None:
            self.records.append(result.records)
        self.failures += self._failures(result)
        self._pending.append(result)
        if time.monotonic() - self._last >= self.flush_seconds:
            self.flush()

    @cached_property
    def rows(self) -> dict[str, int]:
        """Row of each path in ``files``.

        Built on first use, when results arrive from the decoding workers: they are forked
        before it exists, so they do not each carry this per-file dict.
        """
        return dict(zip(self.files.paths(), range(len(self.files))))

    def _failures(self, result: TaskResult) -> list[CachedFailure]:
        return [CachedFailure(s.path, int(self.files.sizes[self.rows[s.path]]),
                              int(self.files.mtimes[self.rows[s.path]]), s.reason,
                              int(self.files.stamps[self.rows[s.path]]), s.kind)
                for s in result.skipped
                if s.path in self.rows and is_cacheable_failure(s.kind)]

    def flush(self) -> None:
        """Commit the buffered results: one segment per kind of record."""
        pending, self._pending = self._pending, []
        self._last = time.monotonic()
        if self.store is None or not pending:
            return
        groups: dict[tuple, list[Records]] = {}
        for result in pending:
            if result.records is not None:
                groups.setdefault(result.records.signature, []).append(result.records)
        failures = tuple(f for r in pending for f in self._failures(r))
        if not groups and not failures:
            return
        batches = [concat_records(parts) for parts in groups.values()] or [None]
        try:
            for index, records in enumerate(batches):
                self.write(records, failures if index == 0 else ())
                self.segments += 1
        except Exception as error:  # noqa: BLE001 - caching must never fail the run
            log.warning("normstats: stopped writing to the cache %s (%s); the result is "
                        "unaffected", self.store.path, error)
            self.store = None

    def write(self, records: Records | None, failures: tuple[CachedFailure, ...]) -> str:
        """Write one segment of ``records`` and ``failures``; return its name."""
        keys = records.keys if records is not None else ()
        rows = np.array([self.rows[k] for k in keys], dtype=np.intp)
        return self.store.write_segment(records, self.files.sizes[rows],
                                        self.files.mtimes[rows], failures,
                                        self.files.stamps[rows])

    @property
    def has_pending(self) -> bool:
        """Whether buffered results hold anything a flush would write."""
        return any(r.records is not None or self._failures(r) for r in self._pending)

    def discard_pending(self) -> None:
        self._pending = []

    def close(self) -> None:
        """Commit whatever is still buffered (also after Ctrl-C or an error)."""
        self.flush()
