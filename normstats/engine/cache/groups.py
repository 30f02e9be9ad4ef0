"""The groups a record cache directory holds: found by normstats' own metadata only.

A group is a direct child of the cache directory that carries normstats' identity in its
``zarr.json`` or the group marker file; nothing else is ever taken for one, so clearing
a cache can never remove a user's folder.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from normstats.engine.cache.segment import MARKER_LIMIT, read_cache_json
from normstats.engine.cache.store import dataset_root, read_group_marker

__all__ = ["GroupInfo", "group_info", "find_groups"]


@dataclass(frozen=True)
class GroupInfo:
    """What a cache group holds, from its metadata and markers (not verified)."""

    path: Path
    identity: dict
    images: int
    failures: int
    segments: int
    size: int
    updated: float

    @property
    def root(self) -> str:
        return str(self.identity.get("root", "?"))

    @property
    def mode(self) -> str:
        return str(self.identity.get("policy", {}).get("mode", "?"))


def group_info(path: Path) -> GroupInfo | None:
    """The `GroupInfo` of a cache group folder, or None if ``path`` is not one.

    A folder is a group only when normstats' own metadata says so (a ``zarr.json`` whose
    attributes carry normstats' identity, or the group marker file): never by the names
    of the folders inside it, so a dataset folder holding a ``markers/`` class is not one.
    Callers pass only direct children of the cache directory (see `find_groups`).
    """
    try:
        identity = read_cache_json(path / "zarr.json")["attributes"]["normstats"]
        if not isinstance(identity, dict) or not isinstance(identity.get("format"), int):
            raise TypeError("not normstats' metadata")
    except (OSError, ValueError, KeyError, TypeError):
        if read_group_marker(path) is None:
            return None
        identity = {}  # damaged metadata of our own group: still listed and clearable
    images = failures = segments = 0
    updated = 0.0
    for marker in (path / "markers").glob("*.json"):
        try:
            data = read_cache_json(marker, MARKER_LIMIT)
            images, failures = images + int(data["rows"]), failures + len(data["failures"])
            segments += 1
            updated = max(updated, marker.stat().st_mtime)
        except (OSError, ValueError, KeyError, TypeError):
            continue
    size = _bytes_under(path)
    return GroupInfo(path, identity, images, failures, segments, size, updated)


def _bytes_under(folder: Path) -> int:
    """Bytes of the regular files under ``folder`` (links not followed). Files may vanish
    meanwhile (another process's compaction deletes the segments it replaced): those
    count as gone, never as an error."""
    total, pending = 0, [os.fspath(folder)]
    while pending:
        try:
            with os.scandir(pending.pop()) as entries:
                for entry in entries:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            pending.append(entry.path)
                        elif entry.is_file(follow_symlinks=False):
                            total += entry.stat(follow_symlinks=False).st_size
                    except FileNotFoundError:
                        continue
        except FileNotFoundError:
            continue
    return total


def find_groups(cache_dir: Path, target: str | None = None) -> list[GroupInfo]:
    """Every group under ``cache_dir``; with ``target``, the group folder it names (only a
    direct child of ``cache_dir``) or the groups of the dataset folder it names.

    Nothing outside ``cache_dir`` is ever taken for a group, so `cache clear` cannot
    remove a user's folder whatever it contains.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> find_groups(pathlib.Path(tempfile.mkdtemp()))
    []
    """
    try:
        folders = sorted(p for p in cache_dir.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return []
    groups = [info for info in map(group_info, folders) if info is not None]
    if target is None:
        return groups
    named = dataset_root(target)
    own = [g for g in groups if os.path.realpath(g.path) == named]
    return own or [g for g in groups if g.root == named]
