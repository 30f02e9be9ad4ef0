"""Reading a folder's cache group while the folder is walked.

A warm run must both list its folder (a stat a file) and read the records the folder's
cache group committed (decompress, hash and check them). Neither needs the other, and the
walk waits on the file system while the reading computes, so on two cores they overlap
(the reading is ~0.1 s of a warm run of 100,000 files). `SegmentPrefetch` reads in a
thread, and creates, locks and removes nothing. `normstats.engine.cache.run.run_cached`
takes the group's lock, then uses what was read only if the group still holds exactly the
markers and segments it held when the reading began (`DatasetCache.contents`), and reads
the group again otherwise.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from normstats.engine.cache.store import DatasetCache, LoadedSegment, group_identity, group_name
from normstats.sources.decoding.policy import DecodePolicy

__all__ = ["SegmentPrefetch"]

#: What a reading found: the group's folder, its contents when the reading began, the
#: committed segments, the junk count and the problems of `DatasetCache.load`.
_Read = tuple[Path, tuple[tuple[str, ...], tuple[str, ...]], list[LoadedSegment], int,
              list[str]]


class SegmentPrefetch:
    """The committed segments of the cache group of ``root`` under ``policy`` in
    ``cache_dir``, read in a thread started here.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from PIL import Image
    >>> from normstats.engine.cache.run import run_cached
    >>> from normstats.sources.folder import FolderSource
    >>> d = pathlib.Path(tempfile.mkdtemp()); Image.new("RGB", (4, 4)).save(d / "a.png")
    >>> cache = tempfile.mkdtemp()
    >>> run_cached(FolderSource(d), cache, workers=1).decoded
    1
    >>> early = SegmentPrefetch(cache, str(d), FolderSource(d).policy)
    >>> outcome = run_cached(FolderSource(d), cache, workers=1, prefetch=early)
    >>> outcome.cached, early.used
    (1, True)
    """

    def __init__(self, cache_dir: str | os.PathLike, root: str, policy: DecodePolicy) -> None:
        self._read: _Read | None = None
        #: Whether `take` gave what was read to the run (for tests and benchmarks).
        self.used = False
        self._thread = threading.Thread(target=self._run, args=(Path(cache_dir), root, policy),
                                        name="normstats-cache-read", daemon=True)
        self._thread.start()

    def _run(self, cache_dir: Path, root: str, policy: DecodePolicy) -> None:
        try:
            identity = group_identity(root, policy)
            store = DatasetCache(cache_dir / group_name(identity), identity)
            contents = store.contents()
            segments, junk = store.load()
            self._read = (store.path, contents, segments, junk, store.problems)
        except Exception:  # noqa: BLE001 - the run reads the group itself, and meets it there
            self._read = None

    def take(self, store: DatasetCache) -> tuple[list[LoadedSegment], int] | None:
        """``store.load()``, as read while the folder was walked, if ``store`` (whose lock
        the caller holds, or which it only reads) is the group read and holds what it held
        then (its `problems` are set as `load` sets them); None when it must be read again.
        """
        self._thread.join()
        read, self._read = self._read, None
        if read is None:
            return None
        path, contents, segments, junk, problems = read
        if path != store.path or store.contents() != contents:
            return None
        store.problems = problems
        self.used = True
        return segments, junk

    def close(self) -> None:
        """Wait for the reading to end (no worker may be forked beside it) and drop it."""
        self._thread.join()
        self._read = None
