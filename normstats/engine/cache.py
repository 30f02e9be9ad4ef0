"""The zarr v3 store of per-image records: one group per dataset root and decode policy.

Layout of a cache directory (see ``docs/cache.md``)::

    <cache>/<name>-<mode>-<hash>/      zarr group; attributes say which root and policy
        normstats-group.json           says "this folder is a normstats cache group"
        lock                           flock'ed by the run that may write
        segments/<segment>/            zarr group: one array per record field, one chunk each
        markers/<segment>.json         completion marker, written after the data

A segment counts only when its marker exists and the SHA-256 digest in the marker
matches the arrays read back, so a half-written, truncated or deleted chunk or
metadata file is never read as fill values: its files are simply decoded again.
Markers are written to a temporary file and renamed into place.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from normstats.engine.cache_location import (  # re-exported: the cache's public face
    CACHE_ENV,
    cache_enabled_by_default,
    default_cache_dir,
    resolve_cache_dir,
)
from normstats.engine.cache_lock import lock_holder, release_lock, take_lock
from normstats.engine.cache_plan import CachedFailure, SegmentIndex
from normstats.maths.records import FloatRecords, IntegerRecords, Records
from normstats.sources.decoding.decode import DecodePolicy

__all__ = ["CACHE_ENV", "FORMAT", "GROUP_MARKER", "read_group_marker", "DatasetCache",
           "LoadedSegment", "default_cache_dir", "resolve_cache_dir", "cache_enabled_by_default",
           "group_identity"]

#: 2: files keyed on their stamp too (inode and ctime), groups on every decoder's version.
FORMAT = 2
GROUP_MARKER = "normstats-group.json"
_GROUP_MARKER_CONTENT = {"normstats": "cache-group", "format": FORMAT}
_FIELDS = {"IntegerRecords": ("pixels", "minimum", "maximum", "sums", "sums_sq"),
           "FloatRecords": ("pixels", "minimum", "maximum", "means", "residuals", "m2s")}
_KINDS = {"IntegerRecords": IntegerRecords, "FloatRecords": FloatRecords}
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
        marker = json.loads((Path(path) / GROUP_MARKER).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict) or marker.get("normstats") != "cache-group":
        return None
    return marker


def group_identity(root: str, policy: DecodePolicy) -> dict:
    """Everything that changes the records of a file: root, decode policy and the
    version of every decoder that may produce its pixels (Pillow, libjpeg-turbo through
    simplejpeg, libpng through imagecodecs).
    """
    return {"format": FORMAT, "root": os.path.realpath(root),
            "policy": dataclasses.asdict(policy), "decoders": decoder_versions()}


def decoder_versions() -> dict[str, str]:
    """The version of each decoding package ("absent" for a missing one).

    Asked of the modules the decoders already imported (reading the installed
    distributions' metadata instead costs ~65 ms a run).

    Examples
    --------
    >>> sorted(decoder_versions())
    ['imagecodecs', 'pillow', 'simplejpeg']
    """
    import PIL

    from normstats.sources.decoding import jpeg_fast, png_fast

    def version(module: Any) -> str:
        return "absent" if module is None else str(getattr(module, "__version__", "?"))

    return {"pillow": PIL.__version__, "simplejpeg": version(jpeg_fast._simplejpeg),
            "imagecodecs": version(png_fast._imagecodecs)}


def group_name(identity: dict) -> str:
    """A readable, unique folder name: ``<root name>-<mode>-<16 hex digits>``."""
    text = json.dumps(identity, sort_keys=True)
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", os.path.basename(identity["root"]))[:40] or "root"
    return f"{slug}-{identity['policy'].get('mode', 'x')}-{digest}"


@dataclass(frozen=True, eq=False)
class LoadedSegment:
    """A committed, verified segment: its index for planning and its records."""

    index: SegmentIndex
    records: Records | None


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
                if json.loads(path.read_text()) == wanted:
                    continue
            except (OSError, ValueError):
                pass  # missing or damaged: rewrite it
            write_json_atomic(path, wanted)

    # -- locking -------------------------------------------------------------------
    def try_lock(self, wait: float) -> bool:
        """Take the writer lock, polling for up to ``wait`` seconds; False if still busy.

        A dead run's lock is free at once: see `normstats.engine.cache_lock`.
        """
        self._lock_fd = take_lock(self.path / "lock", wait)
        return self._lock_fd is not None

    def holder(self) -> str:
        """The process id written by the current lock holder, for messages."""
        return lock_holder(self.path / "lock")

    def unlock(self) -> None:
        if self._lock_fd is not None:
            release_lock(self._lock_fd)
            self._lock_fd = None

    # -- reading -------------------------------------------------------------------
    def load(self) -> tuple[list[LoadedSegment], int]:
        """Every committed segment whose data matches its marker, and a count of junk.

        Junk is what a crash or damage left behind: markers that do not parse or whose
        data fails the digest, temporary files, and segment folders without a marker.
        """
        segments, junk, named = [], 0, set()
        for marker_path in sorted(_listing(self.markers_dir)):
            loaded = _read_segment(self.segments_dir, marker_path)
            if loaded is None:
                junk += 1
            else:
                segments.append(loaded)
                named.add(loaded.index.name)
        junk += sum(1 for d in _listing(self.segments_dir) if d.is_dir() and d.name not in named)
        return segments, junk

    # -- writing -------------------------------------------------------------------
    def write_segment(self, records: Records | None, sizes: np.ndarray, mtimes: np.ndarray,
                      failures: tuple[CachedFailure, ...], stamps: np.ndarray | None = None
                      ) -> str:
        """Write one segment's arrays, then its marker; return the segment name."""
        name = f"{time.time_ns():020d}-{os.getpid()}-{next(_counter):05d}"
        if stamps is None:
            stamps = np.zeros(len(sizes), np.int64)
        arrays = _segment_arrays(records, sizes, mtimes, stamps)
        if arrays:
            import zarr  # lazily: zarr costs 0.15 s to import, most commands never need it

            group = zarr.open_group(self.segments_dir / name, mode="w")
            for field, values in arrays.items():
                group.create_array(field, data=values, chunks=values.shape or (1,))
        marker = _marker(name, records, arrays, failures)
        write_json_atomic(self.markers_dir / f"{name}.json", marker)
        return name

    def remove_all_but(self, keep: str) -> None:
        """Delete every marker, then every segment folder, except ``keep``'s."""
        for path in self.markers_dir.iterdir():
            if path.name != f"{keep}.json":
                path.unlink(missing_ok=True)
        for path in self.segments_dir.iterdir():
            if path.is_dir() and path.name != keep:
                shutil.rmtree(path, ignore_errors=True)


def _listing(folder: Path) -> list[Path]:
    try:
        return list(folder.iterdir())
    except OSError:  # deleted by `cache clear` or damage: nothing committed there
        return []


def _segment_arrays(records: Records | None, sizes: np.ndarray, mtimes: np.ndarray,
                    stamps: np.ndarray) -> dict[str, np.ndarray]:
    if records is None or len(records) == 0:
        return {}
    blob = "\0".join(records.keys).encode("utf-8", "surrogatepass")
    arrays = {"path_bytes": np.frombuffer(blob, dtype=np.uint8),
              "size": np.asarray(sizes, np.int64), "mtime_ns": np.asarray(mtimes, np.int64),
              "stamp": np.asarray(stamps, np.int64)}
    for field in _FIELDS[type(records).__name__]:
        arrays[field] = np.ascontiguousarray(getattr(records, field))
    return arrays


def _digest(header: dict, arrays: dict[str, np.ndarray]) -> str:
    digest = hashlib.sha256(json.dumps(header, sort_keys=True).encode())
    for field in sorted(arrays):
        values = np.ascontiguousarray(arrays[field])
        digest.update(f"{field}:{values.dtype.str}:{values.shape}".encode())
        digest.update(values.tobytes())
    return "sha256:" + digest.hexdigest()


def _marker(name: str, records: Records | None, arrays: dict[str, np.ndarray],
            failures: tuple[CachedFailure, ...]) -> dict:
    header = {"format": FORMAT, "segment": name, "rows": 0 if records is None else len(records)}
    if records is not None:
        header.update(kind=type(records).__name__, dtype=records.dtype,
                      channels=list(records.channel_names))
    header["failures"] = [[f.path, f.size, f.mtime_ns, f.stamp, f.reason] for f in failures]
    return {**header, "digest": _digest(header, arrays)}


def _read_segment(segments_dir: Path, marker_path: Path) -> LoadedSegment | None:
    """The verified segment a marker names, or None for anything damaged or foreign."""
    if not marker_path.name.endswith(".json") or marker_path.name.startswith("."):
        return None
    try:
        marker = json.loads(marker_path.read_text())
        digest = marker.pop("digest")
        if marker["format"] != FORMAT or marker["segment"] != marker_path.name[:-5]:
            return None
        arrays = _read_arrays(segments_dir / marker["segment"], marker)
        if _digest(marker, arrays) != digest:
            return None
        return _loaded(marker, arrays)
    except Exception:  # noqa: BLE001 - any damage means "not committed": decode again
        return None


def _read_arrays(folder: Path, marker: dict) -> dict[str, np.ndarray]:
    if marker["rows"] == 0:
        return {}
    import zarr

    group = zarr.open_group(folder, mode="r")
    names = ("path_bytes", "size", "mtime_ns", "stamp", *_FIELDS[marker["kind"]])
    return {name: np.asarray(group[name][...]) for name in names}


def _loaded(marker: dict, arrays: dict[str, np.ndarray]) -> LoadedSegment:
    failures = tuple(CachedFailure(str(p), int(s), int(m), str(r), int(stamp))
                     for p, s, m, stamp, r in marker["failures"])
    if not arrays:
        empty = np.zeros(0, np.int64)
        return LoadedSegment(SegmentIndex(marker["segment"], (), empty, empty, failures), None)
    paths = tuple(arrays["path_bytes"].tobytes().decode("utf-8", "surrogatepass").split("\0"))
    if len(paths) != marker["rows"]:
        raise ValueError("path count does not match the marker")
    fields = {f: arrays[f] for f in _FIELDS[marker["kind"]]}
    records = _KINDS[marker["kind"]](dtype=marker["dtype"], channel_names=tuple(
        marker["channels"]), keys=paths, **fields)
    index = SegmentIndex(marker["segment"], paths, arrays["size"], arrays["mtime_ns"], failures,
                         arrays["stamp"])
    return LoadedSegment(index, records)


def write_json_atomic(path: Path, data: dict) -> None:
    """Write JSON to a temporary file and rename it into place: readers see all or nothing."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(data))
    os.replace(temporary, path)
