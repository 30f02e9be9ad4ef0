"""Running a folder through the per-image cache: load, plan, decode the rest, commit.

The order of events makes every interruption safe:

1. take the group's writer lock (or, if another run holds it, go on read-only);
2. load the committed segments (each verified against its marker's digest, its files
   checked before they are read, its records for plausibility); damage no crash can
   leave is named on stderr, one line each, and the files concerned are decoded again.
   Steps 1 and 2 need the folder's name, not its listing: `opening_early` does them in a
   thread while the folder is walked (a warm run of 100,000 files spends ~0.1 s loading
   its records, which then overlaps the walk);
3. `normstats.engine.cache.plan.plan` says which records to reuse and which files to decode;
4. the pipeline decodes only those files; as results arrive, a `SegmentWriter`
   (`normstats.engine.cache.writer`) commits them in segments (data first, then the
   marker) every ``flush_seconds``, or once the records it holds reach `FLUSH_BYTES`;
5. after a successful run the group is compacted into one segment holding exactly
   the current files' records, in listing order, written one array at a time
   (`normstats.engine.cache.listed_segment`), and everything else in it is deleted.

A run that asks for the channel covariance reuses only segments whose records hold the
cross sums (those written by such a run); the others count as junk, so their files are
decoded again and the compaction replaces them. A run that does not ask reads the cross
sums of none (its result and its check of the cache are what they would be without them)
but keeps them in what it compacts, as long as every record it writes has them.

A kill at any point leaves committed segments, which the next run reuses, and junk,
which it ignores and the next compaction removes. The cache never fails a
computation: an I/O error while caching is reported once and the run goes on without it.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

import numpy as np

from normstats.engine.cache.listed_segment import RecordRows, write_listed
from normstats.engine.cache.plan import (
    CachePlan,
    needs_compaction,
    plan,
)
from normstats.engine.cache.store import (
    DatasetCache,
    LoadedSegment,
    dataset_root,
    group_identity,
    group_name,
)
from normstats.engine.cache.verify import (
    cached_verdicts,
    choose_checks,
    compare_verdicts,
    fresh_verdicts,
    parse_verify,
)
from normstats.engine.cache.writer import SegmentWriter
from normstats.engine.pipeline import RunOutcome, run
from normstats.errors import input_error
from normstats.maths.records import Records, concat_records, has_cross_sums, without_cross_sums
from normstats.maths.summary import Summary, summarize
from normstats.results.text_report import printable
from normstats.sources.base import TaskResult
from normstats.sources.decoding.policy import DecodePolicy
from normstats.sources.file_list import FileList
from normstats.sources.folder import FolderSource

__all__ = ["run_cached", "SegmentWriter", "LOCK_WAIT_SECONDS", "FLUSH_SECONDS",
           "OpenedCache", "open_cache", "EarlyOpening", "opening_early"]

#: How long a second run waits for the writer lock before going on read-only.
LOCK_WAIT_SECONDS = 2.0
#: Decoded results are committed at least this often (what a kill can lose at most).
FLUSH_SECONDS = 2.0

log = logging.getLogger("normstats.engine.cache")
OnResult = Callable[[TaskResult], None]


def run_cached(source: FolderSource, cache_dir: str | os.PathLike, *,
               lock_wait: float | None = None, flush_seconds: float | None = None,
               on_result: OnResult | None = None, verify_cache: int | str | None = None,
               rng: np.random.Generator | None = None, covariance: bool = False,
               early: EarlyOpening | None = None, **options: Any) -> RunOutcome:
    """Compute ``source`` reusing the records committed in ``cache_dir``.

    ``lock_wait`` and ``flush_seconds`` default to `LOCK_WAIT_SECONDS` and
    `FLUSH_SECONDS`, read at call time. ``verify_cache`` (a number of files, or "all")
    decodes that many of the files the cache would answer again, drawn by ``rng``, and
    reports in ``check`` those whose cached verdict no longer holds
    (`normstats.engine.cache.verify`). ``early``: the group as `opening_early` opened it
    while the folder was walked (used if it is this run's group).

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
    options["covariance"] = covariance
    if early is not None and early.covers(cache_dir, source.root, source.policy):
        opened = early.take()
    else:
        opened = open_cache(cache_dir, source.root, source.policy,
                            LOCK_WAIT_SECONDS if lock_wait is None else lock_wait)
    if opened is None:
        return RunOutcome(run(source, on_result=on_result, **options))
    store, writable, segments, junk = opened.store, opened.writable, opened.segments, opened.junk
    try:
        for problem in store.problems:
            log.warning("normstats: cache %s: %s", store.path, printable(problem))
        if covariance:  # only records with cross sums answer; the rest is decoded again
            answering = [s for s in segments if s.records is None or has_cross_sums(s.records)]
            segments, junk = answering, junk + len(segments) - len(answering)
        indexes = [s.index for s in segments]
        decision = plan(source.walk.files, indexes)
        checks = choose_checks(decision, segments, count, rng)
        expected = cached_verdicts(decision, _as_asked(segments, covariance), checks)
        if checks:
            decision = plan(source.walk.files, indexes, distrust=checks)
        _raise_cached_failure(source, decision)
        cached = _reused_records(segments, decision)  # as stored: what a compaction keeps
        shown = cached if covariance or cached is None else without_cross_sums(cached)
        if on_result is not None and decision.cached:
            on_result(TaskResult(shown, tuple(f.skipped() for f in decision.failures)))
        writer = SegmentWriter(store if writable else None, source.walk.files,
                               FLUSH_SECONDS if flush_seconds is None else flush_seconds,
                               on_result, keep=checks)
        with _decoding(decision):
            try:
                summary = run(_restricted(source, decision.compute), on_result=writer,
                              **options)
            except BaseException:
                writer.close()  # commit what has arrived: Ctrl-C or an error resumes here
                raise
            _finish(store, source, decision, segments, writer, junk)
    finally:
        store.unlock()
    check = compare_verdicts(expected, fresh_verdicts(writer.kept, summary.skipped, checks))
    for path in check.changed:
        log.warning("normstats: %s: the cached record no longer matches the file (changed "
                    "with the same size, mtime, inode and ctime); decoded again", printable(path))
    return RunOutcome(_combine(source, shown, decision, summary), decision.cached,
                      len(decision.compute), True, check)


@dataclasses.dataclass(frozen=True, eq=False)
class OpenedCache:
    """A cache group as a run finds it: locked for writing (or read-only), an earlier
    run's trash emptied, its committed segments loaded and checked."""

    store: DatasetCache
    writable: bool
    segments: list[LoadedSegment]
    junk: int


def open_cache(cache_dir: str | os.PathLike, root: str, policy: DecodePolicy,
               lock_wait: float) -> OpenedCache | None:
    """Steps 1 and 2 of a cached run: the group of ``root`` under ``policy`` in
    ``cache_dir``, created if needed, locked (waiting up to ``lock_wait`` seconds for
    another run) and loaded; None, said on stderr, when the cache cannot be used. The
    caller unlocks ``store`` when done.

    Examples
    --------
    >>> import tempfile
    >>> opened = open_cache(tempfile.mkdtemp(), tempfile.mkdtemp(), DecodePolicy(), 0.0)
    >>> opened.writable, opened.segments, opened.junk
    (True, [], 0)
    >>> opened.store.unlock()
    """
    try:
        store = DatasetCache.open(cache_dir, root, policy)
    except OSError as error:
        log.warning("normstats: cannot use the cache in %s (%s); computing without it",
                    cache_dir, error.strerror or error)
        return None
    writable = _lock(store, lock_wait)
    try:
        if writable:
            store.empty_trash()  # what an earlier run ended before deleting
        segments, junk = store.load()
    except BaseException:
        store.unlock()
        raise
    return OpenedCache(store, writable, segments, junk)


class EarlyOpening:
    """`open_cache` of a folder's existing cache group, in a thread started now: a run
    walks the folder meanwhile. A group not yet made is left to the run (nothing is
    created for a folder that turns out not to be cached, a folder of shards say)."""

    def __init__(self, cache_dir: Path, root: str, policy: DecodePolicy) -> None:
        self._key = (str(cache_dir), dataset_root(root), policy)
        self._tried = False
        self._opened: OpenedCache | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._open, args=(cache_dir, root, policy),
                                        name="normstats-cache-open", daemon=True)
        self._thread.start()

    def _open(self, cache_dir: Path, root: str, policy: DecodePolicy) -> None:
        try:
            if (cache_dir / group_name(group_identity(root, policy))).is_dir():
                self._tried = True
                self._opened = open_cache(cache_dir, root, policy, LOCK_WAIT_SECONDS)
        except BaseException as error:  # noqa: BLE001 - raised where the run takes it
            self._error = error

    def covers(self, cache_dir: str | os.PathLike, root: str, policy: DecodePolicy) -> bool:
        """Whether the thread opened the group of ``root`` under ``policy`` in
        ``cache_dir`` (or found that cache unusable, said so on stderr, or met an error):
        then the run takes what it found (`take`) instead of opening the group again."""
        self._thread.join()
        return self._tried and self._key == (str(cache_dir), dataset_root(root), policy)

    def take(self) -> OpenedCache | None:
        """What the thread found, once (the caller unlocks its store); what it met is
        raised here."""
        self._thread.join()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        opened, self._opened, self._tried = self._opened, None, False
        return opened

    def close(self) -> None:
        """Unlock the group if no run took it."""
        self._thread.join()
        if self._opened is not None:
            self._opened.store.unlock()
            self._opened = None


@contextmanager
def opening_early(folder: str, policy: DecodePolicy | None,
                  cache_dir: Path) -> Iterator[EarlyOpening]:
    """An `EarlyOpening` of the cache of the local ``folder`` of images (read under
    ``policy``, the default if None) in ``cache_dir``, to pass to `run_cached` as
    ``early``; on leaving, a group no run took is unlocked.

    Examples
    --------
    >>> import tempfile
    >>> with opening_early(tempfile.mkdtemp(), None, Path(tempfile.mkdtemp())) as early:
    ...     early.covers(Path("/elsewhere"), "/data", DecodePolicy())
    False
    """
    early = EarlyOpening(cache_dir, folder, policy or DecodePolicy())
    try:
        yield early
    finally:
        early.close()


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


def _as_asked(segments: list[LoadedSegment], covariance: bool) -> list[LoadedSegment]:
    """The segments as a run sees them: without cross sums when it did not ask for them."""
    if covariance:
        return segments
    return [s if s.records is None else dataclasses.replace(
        s, records=without_cross_sums(s.records)) for s in segments]


def _reused_records(segments: list[LoadedSegment], decision: CachePlan) -> Records | None:
    by_name = {s.index.name: s.records for s in segments}
    parts = [by_name[name] if _every_row(rows, len(by_name[name])) else by_name[name].take(rows)
             for name, rows in decision.reuse]
    return (parts[0] if len(parts) == 1 else concat_records(parts)) if parts else None


def _every_row(rows: np.ndarray, count: int) -> bool:
    """Whether sorted, distinct ``rows`` are all ``count`` rows (nothing to take)."""
    return len(rows) == count


def _decoding(decision: CachePlan) -> AbstractContextManager:
    """BLAS on one thread from the decoding through the compaction when files are decoded
    (`normstats.engine.process_pool.one_blas_thread`, whose module only then loads): the
    limit changed as the pool closed restarted OpenBLAS's helper thread, which spun
    through the compaction, taking a core from it."""
    if not len(decision.compute):
        return nullcontext()
    from normstats.engine.process_pool import one_blas_thread

    return one_blas_thread()


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


def _finish(store: DatasetCache, source: FolderSource, decision: CachePlan,
            segments: list[LoadedSegment], writer: SegmentWriter, junk: int) -> None:
    """Compact the group into one segment of exactly the current files' entries when it
    is not already that, with the records that arrived since the run's last commit taken
    from memory; committed as during the run if the compaction fails or is interrupted."""
    live = len(decision.segments_used) + writer.segments + writer.has_pending
    # The run's own commits are packed and uncompressed, cheap to write; the compaction
    # rewrites them as the compressed arrays, one file each, that later runs read. What
    # arrived since the last commit goes straight in, not committed first to be read
    # back at once (a cold run of under FLUSH_SECONDS whose records held stay under
    # FLUSH_BYTES commits nothing before its compaction).
    if writer.store is None or not (writer.segments or writer.has_pending or
                                    needs_compaction(live, decision.stale, junk)):
        writer.close()
        return
    by_name = {s.index.name: s.records for s in segments}
    reused = [RecordRows(by_name[name], listed, rows)
              for (name, rows), listed in zip(decision.reuse, decision.listed)]
    pending, pending_failures = writer.pending()
    try:
        compacted = write_listed(store, source.walk.files, reused + pending, writer.written,
                                 decision.failures + tuple(writer.failures) +
                                 tuple(pending_failures))
    except BaseException as error:
        writer.close()  # a failed compaction leaves a valid cache; a kill loses no more
        if not isinstance(error, Exception):  # Ctrl-C: what arrived is committed
            raise
        log.warning("normstats: could not compact the cache %s (%s)", store.path, error)
        return
    writer.compacted()
    try:
        store.remove_all_but(compacted.name)
    except OSError as error:  # leftovers are junk, removed by the next compaction
        log.warning("normstats: could not tidy the cache %s (%s)", store.path, error)
