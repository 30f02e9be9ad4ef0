"""Walking a folder for image files: sorted, loop-safe, each file counted once.

The walk is recursive and sorted (so results and task boundaries are reproducible),
follows directory symlinks but never enters a directory twice (so symlink loops end),
and counts a file reached through several hard or symbolic links once, naming the
duplicates. Only files with an image extension are considered; their format is then
detected from content against an allow-list when they are decoded.
"""

from __future__ import annotations

import os
from array import array
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from normstats.maths.records import Skipped
from normstats.sources.decoding.file_read import not_regular_reason
from normstats.sources.decoding.policy import IMAGE_EXTENSIONS
from normstats.sources.file_list import FileList, change_stamps
from normstats.sources.heap import release_free_memory

__all__ = ["WalkResult", "walk_images", "list_named_files", "DUPLICATE"]

#: How a second link to a file already listed begins its skip reason: not an error.
DUPLICATE = "same file as"

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True)
class WalkResult:
    """Files to decode, duplicates skipped, and how many non-image files were ignored.

    ``files`` may be given as any sequence of `FileEntry`; it is kept as a `FileList`.
    """

    files: FileList
    skipped: tuple[Skipped, ...]
    ignored: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "files", FileList.of(self.files))


def walk_images(root: str | os.PathLike, confine_to: str | os.PathLike | None = None
                ) -> WalkResult:
    """List the image files under ``root``, sorted, each physical file once.

    Folders are visited in sorted order and a file reached through several links keeps
    its first path in sorted order, so the listing is the same on every filesystem.
    With ``confine_to`` (a manifest's ``--root``), a symbolic link that leads outside
    that folder is not followed: it is skipped and named.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp()); (d / "a.png").write_bytes(b"x")
    1
    >>> [f.path for f in walk_images(d).files]
    ['a.png']
    """
    root = Path(root)
    prefix = len(os.path.join(str(root), ""))  # entry.path[prefix:] is the relative path
    found = _Found()
    skipped: list[Skipped] = []
    seen_dirs: set[tuple[int, int]] = set()
    ignored = 0
    pending = [root]
    boundary = None if confine_to is None else os.path.realpath(confine_to)
    while pending:
        directory = pending.pop()
        try:
            info = directory.stat()
        except OSError as error:  # a path longer than PATH_MAX, or removed during the walk
            skipped.append(Skipped(os.path.relpath(directory, root) + os.sep,
                                   f"cannot open folder: {error.strerror or error}"))
            continue
        if (info.st_dev, info.st_ino) in seen_dirs:
            continue  # a symlink loop or a second link to a walked folder
        seen_dirs.add((info.st_dev, info.st_ino))
        subfolders = []
        for entry in _scan(directory, root, skipped):
            rel = entry.path[prefix:]  # os.path.relpath costs ~30 µs a file
            if boundary is not None and entry.is_symlink() and \
                    not _inside(os.path.realpath(entry.path), boundary):
                skipped.append(Skipped(rel, f"a link out of the dataset root {boundary} "
                                            f"(to {os.path.realpath(entry.path)}); not followed"))
            elif _is_dir(entry):
                subfolders.append(Path(entry.path))
            elif os.path.splitext(entry.name)[1].lower() not in IMAGE_EXTENSIONS:
                ignored += 1
            else:
                _stat_file(entry.path, rel, found, skipped)
        pending.extend(reversed(subfolders))
    files = found.first_link_of_each_file(skipped)
    del found
    # The walk's temporaries (path strings, sort keys, index arrays) would otherwise stay
    # resident, here and in every decoding worker forked later.
    release_free_memory()
    skipped.sort(key=lambda s: s.path)
    return WalkResult(files, tuple(skipped), ignored)


def list_named_files(root: str, relative_paths: list[str]) -> WalkResult:
    """The files ``relative_paths`` under ``root``, listed as the walk lists files: regular
    files only, each physical file once (other links named), sorted by path.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp()); (d / "b.png").write_bytes(b"x")
    1
    >>> [f.path for f in list_named_files(str(d), ["b.png", "b.png"]).files]
    ['b.png']
    """
    found = _Found()
    skipped: list[Skipped] = []
    for rel in dict.fromkeys(relative_paths):  # a name given twice is one file
        _stat_file(os.path.join(root, rel), rel, found, skipped)
    files = found.first_link_of_each_file(skipped)
    skipped.sort(key=lambda s: s.path)
    return WalkResult(files, tuple(skipped), 0)


def _scan(directory: Path, root: Path, skipped: list[Skipped]) -> list[os.DirEntry]:
    try:
        with os.scandir(directory) as entries:
            return sorted(entries, key=lambda e: e.name)
    except OSError as error:
        skipped.append(Skipped(os.path.relpath(directory, root) + os.sep,
                               f"cannot list folder: {error.strerror or error}"))
        return []


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir(follow_symlinks=True)
    except OSError:
        return False


def _stat_file(path: str, rel: str, found: _Found, skipped: list[Skipped]) -> None:
    try:
        info = os.stat(path)  # not entry.stat(): that keeps the result in a DirEntry
    except OSError as error:  # a dangling symlink, or a file deleted during the walk
        skipped.append(Skipped(rel, f"cannot stat file: {error.strerror or error}"))
        return
    if (reason := not_regular_reason(info.st_mode)) is not None:  # a FIFO never gets opened
        skipped.append(Skipped(rel, reason))
        return
    found.add(rel, info)


class _Found:
    """The files a walk has found, as columns: a path string and four machine integers
    a file, not a tuple, a `FileEntry` and their int objects (~300 bytes more a file).
    """

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.devices, self.inodes = array("Q"), array("Q")
        self.sizes, self.mtimes, self.ctimes = array("q"), array("q"), array("q")

    def add(self, rel: str, info: os.stat_result) -> None:
        self.paths.append(rel)
        self.devices.append(info.st_dev)
        self.inodes.append(info.st_ino)
        self.sizes.append(info.st_size)
        self.mtimes.append(_saturated(info.st_mtime_ns))
        self.ctimes.append(_saturated(info.st_ctime_ns))

    def first_link_of_each_file(self, skipped: list[Skipped]) -> FileList:
        """The files sorted by path, each physical file once: at its first path in that
        order; its other paths go to ``skipped``.
        """
        paths = self.paths
        order = np.array(sorted(range(len(paths)), key=paths.__getitem__), dtype=np.intp)
        first = _first_of_each_identity(np.frombuffer(self.devices, np.uint64)[order],
                                        np.frombuffer(self.inodes, np.uint64)[order])
        is_first = first == np.arange(len(order))
        for position in np.flatnonzero(~is_first).tolist():
            skipped.append(Skipped(paths[order[position]],
                                   f"{DUPLICATE} {paths[order[first[position]]]} (a hard "
                                   "or symbolic link); counted once"))
        kept = order[is_first]
        return FileList.from_columns([paths[i] for i in kept.tolist()],
                                     np.frombuffer(self.sizes, np.int64)[kept],
                                     np.frombuffer(self.mtimes, np.int64)[kept],
                                     change_stamps(np.frombuffer(self.inodes, np.uint64)[kept],
                                                   np.frombuffer(self.ctimes, np.int64)[kept]))


def _saturated(time_ns: int) -> int:
    """A time as an int64: dates before 1677 or after 2262 saturate (they only key caches)."""
    if _INT64_MIN <= time_ns <= _INT64_MAX:  # all but the strangest files: one comparison
        return time_ns
    return _INT64_MIN if time_ns < 0 else _INT64_MAX


def _first_of_each_identity(devices: np.ndarray, inodes: np.ndarray) -> np.ndarray:
    """For each file, the position of the first file with its (device, inode).

    Examples
    --------
    >>> _first_of_each_identity(np.array([1, 1, 1], np.uint64), np.array([7, 8, 7], np.uint64))
    array([0, 1, 0])
    """
    if not len(devices):
        return np.zeros(0, np.intp)
    # return_index sorts stably, so it gives each identity's first position
    _, first, inverse = np.unique(np.stack([devices, inodes], axis=1), axis=0,
                                  return_index=True, return_inverse=True)
    return first[inverse.reshape(-1)]
