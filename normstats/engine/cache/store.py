"""The zarr v3 store of per-image records: one group per dataset root and decode policy.

Layout of a cache directory (see ``docs/cache.md``)::

    <cache>/<name>-<mode>-<hash>/      zarr group; attributes say which root and policy
        normstats-group.json           says "this folder is a normstats cache group"
        lock                           flock'ed by the run that may write
        segments/<segment>/            zarr group: one array per record field, one chunk each
        markers/<segment>.json         completion marker, written after the data

A segment counts only when its marker exists and the BLAKE2b digest in the marker
matches the arrays read back, so a half-written, truncated or deleted chunk or
metadata file is never read as fill values: its files are simply decoded again
(`normstats.engine.cache.segment` reads segments, refusing files that are not regular
or larger than their data can be). Markers are written to a temporary file and renamed
into place.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from normstats.engine.cache.location import (  # re-exported: the cache's public face
    CACHE_ENV,
    cache_enabled_by_default,
    default_cache_dir,
    resolve_cache_dir,
)
from normstats.engine.cache.lock import lock_holder, release_lock, take_lock
from normstats.engine.cache.plan import CachedFailure
from normstats.engine.cache.segment import (  # FORMAT and LoadedSegment: re-exported
    FORMAT,
    DamagedFile,
    LoadedSegment,
    blake2b,
    read_cache_json,
    read_segment,
    segment_arrays,
    segment_marker,
)
from normstats.engine.cache.zarr_chunks import write_group
from normstats.maths.records import Records
from normstats.sources.decoding.policy import DecodePolicy
from normstats.sources.remote import is_url

if TYPE_CHECKING:  # the thread module is loaded only when there is trash to delete
    import threading

__all__ = ["CACHE_ENV", "FORMAT", "GROUP_MARKER", "read_group_marker", "DatasetCache",
           "LoadedSegment", "default_cache_dir", "resolve_cache_dir", "cache_enabled_by_default",
           "group_identity", "dataset_root"]

GROUP_MARKER = "normstats-group.json"
#: Where a group's replaced segment folders wait to be deleted (`DatasetCache.empty_trash`).
TRASH = "trash"
_GROUP_MARKER_CONTENT = {"normstats": "cache-group", "format": FORMAT}
_counter = itertools.count()


def read_group_marker(path: Path) -> dict | None:
    """The group marker of a cache group folder, or None if ``path`` holds none.

    Only folders carrying this file (or normstats' identity in their ``zarr.json``) are
    cache groups: `cache clear` removes nothing else.

    Examples
    --------
    >>> import tempfile
    >>> read_group_marker(Path(tempfile.mkdtemp())) is None
    True
    """
    try:
        marker = read_cache_json(Path(path) / GROUP_MARKER)
    except (OSError, ValueError):  # DamagedFile is a ValueError
        return None
    if not isinstance(marker, dict) or marker.get("normstats") != "cache-group":
        return None
    return marker


def group_identity(root: str, policy: DecodePolicy) -> dict:
    """Everything that changes the records of a file: root (a resolved folder, or a URL
    as given), decode policy and the version of every decoder that may produce its pixels
    (Pillow, libjpeg-turbo through simplejpeg, libpng through imagecodecs).
    """
    return {"format": FORMAT, "root": dataset_root(root),
            "policy": dataclasses.asdict(policy), "decoders": decoder_versions()}


def dataset_root(root: str) -> str:
    """How a cache group names its dataset: a local folder resolved (links, ``..``), a URL
    without a trailing slash.

    Examples
    --------
    >>> dataset_root("s3://bucket/train/")
    's3://bucket/train'
    """
    return root.rstrip("/") if is_url(root) else os.path.realpath(root)


def decoder_versions() -> dict[str, str]:
    """The version of each decoding package ("absent" for a missing one), and of
    normstats' own rules for what a raster's valid values are (`raster.READING_RULES`).

    Asked of the modules the decoders already imported (reading the installed
    distributions' metadata instead costs ~65 ms a run); tifffile, which only rasters
    import, by the name of its installed metadata folder (`raster.tifffile_version`).

    Examples
    --------
    >>> sorted(decoder_versions())
    ['imagecodecs', 'pillow', 'rasters', 'simplejpeg', 'tifffile']
    """
    import PIL

    from normstats.sources.decoding import jpeg_fast, png_fast, raster

    def version(module: Any) -> str:
        return "absent" if module is None else str(getattr(module, "__version__", "?"))

    return {"pillow": PIL.__version__, "simplejpeg": version(jpeg_fast._simplejpeg),
            "imagecodecs": version(png_fast._imagecodecs),
            "tifffile": raster.tifffile_version(), "rasters": raster.READING_RULES}


def group_name(identity: dict) -> str:
    """A readable, unique folder name: ``<root name>-<mode>-<16 hex digits>``."""
    text = json.dumps(identity, sort_keys=True)
    digest = blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", os.path.basename(identity["root"]))[:40] or "root"
    return f"{slug}-{identity['policy'].get('mode', 'x')}-{digest}"


class DatasetCache:
    """The cache group of one dataset root under one decode policy.

    Examples
    --------
    >>> import tempfile
    >>> cache = DatasetCache.open(tempfile.mkdtemp(), "/data/train", DecodePolicy())
    >>> cache.path.name.startswith("train-RGB-"), cache.load()[0]
    (True, [])
    """

    def __init__(self, path: Path, identity: dict) -> None:
        self.path = Path(path)
        self.identity = identity
        self.segments_dir = self.path / "segments"
        self.markers_dir = self.path / "markers"
        self._lock_fd: int | None = None
        self._emptying: threading.Thread | None = None  # `empty_trash`'s, joined by `unlock`
        #: What the last `load` found damaged, one line each (relative paths).
        self.problems: list[str] = []

    @classmethod
    def open(cls, cache_dir: str | os.PathLike, root: str,
             policy: DecodePolicy) -> DatasetCache:
        """Create (if needed) and return the group for ``root`` under ``policy``."""
        identity = group_identity(root, policy)
        cache = cls(Path(cache_dir) / group_name(identity), identity)
        cache.markers_dir.mkdir(parents=True, exist_ok=True)
        cache.segments_dir.mkdir(exist_ok=True)
        cache.ensure_metadata()
        return cache

    def ensure_metadata(self) -> None:
        """(Re)write the group's zarr.json files and marker if they are missing or damaged."""
        group = {"zarr_format": 3, "node_type": "group",
                 "attributes": {"normstats": self.identity}}
        for path, wanted in ((self.path / GROUP_MARKER, _GROUP_MARKER_CONTENT),
                             (self.path / "zarr.json", group),
                             (self.segments_dir / "zarr.json",
                              {"zarr_format": 3, "node_type": "group", "attributes": {}})):
            try:
                if read_cache_json(path) == wanted:
                    continue
            except (OSError, ValueError):
                pass  # missing or damaged: rewrite it
            write_json_atomic(path, wanted)

    # -- locking -------------------------------------------------------------------
    def try_lock(self, wait: float) -> bool:
        """Take the writer lock, polling for up to ``wait`` seconds; False if still busy.

        A dead run's lock is free at once: see `normstats.engine.cache.lock`.
        """
        self._lock_fd = take_lock(self.path / "lock", wait)
        return self._lock_fd is not None

    def holder(self) -> str:
        """The process id written by the current lock holder, for messages."""
        return lock_holder(self.path / "lock")

    def unlock(self) -> None:
        """Wait for `empty_trash`'s deletions, then release the group's lock: when a run
        returns, nothing of it is still changing the cache folder (a caller may copy,
        move or delete it next)."""
        if self._emptying is not None:
            self._emptying.join()
            self._emptying = None
        if self._lock_fd is not None:
            release_lock(self._lock_fd)
            self._lock_fd = None

    # -- reading -------------------------------------------------------------------
    def load(self) -> tuple[list[LoadedSegment], int]:
        """Every committed segment whose data matches its marker, and a count of junk.

        Junk is what a crash or damage left behind: markers that do not parse or whose
        data fails the digest, temporary files, and segment folders without a marker.
        Damage no crash can leave (a file that is not a regular file or larger than its
        data can be, a record no image could produce) is also described in `problems`.
        """
        segments, junk, named = [], 0, set()
        self.problems = []
        for marker_path in sorted(_listing(self.markers_dir)):
            try:
                loaded = read_segment(self.segments_dir, marker_path)
            except DamagedFile as damage:
                loaded = None
                self.problems.append(f"{_relative(damage.path, self.path)}: {damage.reason}")
            if loaded is None or loaded.rejected:
                junk += 1  # a rejected record is rewritten by the compaction
            if loaded is not None:
                segments.append(loaded)
                named.add(loaded.index.name)
                self.problems += [f"the cached record of {p} is impossible (its pixel count, "
                                  "moments, minimum and maximum contradict one another); "
                                  "decoded again" for p in loaded.rejected]
        junk += sum(1 for d in _listing(self.segments_dir) if d.is_dir() and d.name not in named)
        return segments, junk

    # -- writing -------------------------------------------------------------------
    def write_segment(self, records: Records | None, sizes: np.ndarray, mtimes: np.ndarray,
                      failures: tuple[CachedFailure, ...], stamps: np.ndarray | None = None
                      ) -> str:
        """Write one segment's arrays, then its marker; return the segment name."""
        name = new_segment_name()
        if stamps is None:
            stamps = np.zeros(len(sizes), np.int64)
        arrays = segment_arrays(records, sizes, mtimes, stamps)
        if arrays:
            write_group(self.segments_dir / name, arrays)
        self.commit(name, segment_marker(name, records, arrays, failures))
        return name

    def commit(self, name: str, marker: dict) -> None:
        """Write the completion marker of segment ``name``, whose arrays are written: from
        now on the segment counts."""
        write_json_atomic(self.markers_dir / f"{name}.json", marker)

    def remove_all_but(self, keep: str) -> None:
        """Delete every marker, then every segment folder, except ``keep``'s.

        The folders are moved into ``trash/<keep>/`` (a rename each) and deleted from there
        by a background thread (`empty_trash`) that `unlock` waits for: removing folders is
        what a file system is slowest at (~3 ms each on some). What a process ends before
        deleting (killed), the next run that writes deletes.
        """
        for path in self.markers_dir.iterdir():
            if path.name != f"{keep}.json":
                path.unlink(missing_ok=True)
        trash = self.path / TRASH / keep
        for path in self.segments_dir.iterdir():
            if path.is_dir() and path.name != keep:
                trash.mkdir(parents=True, exist_ok=True)
                os.replace(path, trash / path.name)
        self.empty_trash()

    def empty_trash(self) -> None:
        """Delete what `remove_all_but` moved aside, in a background thread (it waits on
        the disk, not the processor) that `unlock` joins: at the start of a run it
        overlaps the run's work."""
        folders = _listing(self.path / TRASH)
        if folders:  # left by a compaction: a warm run has none, and loads neither module
            import shutil
            import threading

            if self._emptying is not None:
                self._emptying.join()
            self._emptying = threading.Thread(
                target=lambda: [shutil.rmtree(f, ignore_errors=True) for f in folders],
                name="normstats-cache-trash", daemon=True)
            self._emptying.start()


def new_segment_name() -> str:
    """A name no other segment has; names sort in the order segments are written."""
    return f"{time.time_ns():020d}-{os.getpid()}-{next(_counter):05d}"


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _listing(folder: Path) -> list[Path]:
    try:
        return list(folder.iterdir())
    except OSError:  # deleted by `cache clear` or damage: nothing committed there
        return []


def write_json_atomic(path: Path, data: dict) -> None:
    """Write JSON to a temporary file and rename it into place: readers see all or nothing."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(data))
    os.replace(temporary, path)
