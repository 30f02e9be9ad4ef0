"""Walking a folder for image files: sorted, loop-safe, each file counted once.

The walk is recursive and sorted (so results and task boundaries are reproducible),
follows directory symlinks but never enters a directory twice (so symlink loops end),
and counts a file reached through several hard or symbolic links once, naming the
duplicates. Only files with an image extension are considered; their format is then
detected from content against an allow-list when they are decoded.

A file costs the walk one ``stat`` call (about two thirds of its time) and little else:
names are sorted out and stat'ed folder by folder, relative to the open folder, and the
numbers of each batch of files go into the columns at once.
"""

from __future__ import annotations

import os
from array import array
from dataclasses import dataclass
from itertools import compress, product
from operator import attrgetter
from pathlib import Path
from stat import S_ISREG

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

#: Each folder is opened once, then listed and its files stat'ed relative to that
#: descriptor: a stat looks up one name, not every folder of its path, and the listing
#: and the stats see the same folder. Windows has no such calls: paths there.
_BY_DESCRIPTOR = (os.stat in os.supports_dir_fd and os.scandir in os.supports_fd
                  and hasattr(os, "O_DIRECTORY"))
#: O_DIRECTORY: a folder replaced by a FIFO since its stat fails to open, never blocks.
_FOLDER_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
#: Files are stat'ed this many at a time, then their numbers go into the columns at once,
#: while still in the processor's cache: from a batch of 4,096, that takes twice as long.
_BATCH = 256

#: Every spelling of the image extensions in upper and lower case (".png", ".PNG", ...),
#: by length (4, 5): a name's last characters are looked up as they are, not lowered. No
#: other character lowers to one of their letters ("İ" lowers to two, one not ASCII).
_SHORT_SUFFIXES, _LONG_SUFFIXES = (
    frozenset("".join(spelling) for extension in IMAGE_EXTENSIONS if len(extension) == length
              for spelling in product(*({c, c.upper()} for c in extension)))
    for length in (4, 5))

_PATH = attrgetter("path")
_FIELDS = attrgetter("st_mode", "st_dev", "st_ino", "st_size", "st_mtime_ns", "st_ctime_ns")


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
    walk = _Walk(None if confine_to is None else os.path.realpath(confine_to))
    pending = [(str(Path(root)), "")]  # (folder, its path relative to the root with a sep)
    while pending:
        folder, rel = pending.pop()
        pending.extend(reversed(walk.visit(folder, rel)))  # depth first, in name order
    files = walk.found.first_link_of_each_file(walk.skipped)
    del walk.found
    # The walk's temporaries (path strings, sort keys, index arrays) would otherwise stay
    # resident, here and in every decoding worker forked later.
    release_free_memory()
    walk.skipped.sort(key=_PATH)
    return WalkResult(files, tuple(walk.skipped), walk.ignored)


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
    relative_paths = list(dict.fromkeys(relative_paths))  # a name given twice is one file
    _stat_files([os.path.join(root, rel) for rel in relative_paths], relative_paths,
                found, skipped)
    files = found.first_link_of_each_file(skipped)
    skipped.sort(key=_PATH)
    return WalkResult(files, tuple(skipped), 0)


class _Walk:
    """A walk under way: the files found, the inputs skipped, the non-image files ignored,
    and the folders entered, as (device, inode)."""

    def __init__(self, boundary: str | None) -> None:
        self.boundary = boundary
        self.found = _Found()
        self.skipped: list[Skipped] = []
        self.seen: set[tuple[int, int]] = set()
        self.ignored = 0

    def visit(self, folder: str, rel: str) -> list[tuple[str, str]]:
        """List ``folder`` (``rel`` under the root) and stat its image files; return its
        subfolders in name order, or nothing for a folder already walked."""
        try:
            info = os.stat(folder)
        except OSError as error:  # a path longer than PATH_MAX, or removed during the walk
            self._skip_folder(rel, "cannot open folder", error)
            return []
        if (info.st_dev, info.st_ino) in self.seen:
            return []  # a symlink loop or a second link to a walked folder
        self.seen.add((info.st_dev, info.st_ino))
        try:
            descriptor = os.open(folder, _FOLDER_FLAGS) if _BY_DESCRIPTOR else None
        except OSError as error:
            self._skip_folder(rel, "cannot list folder", error)
            return []
        try:
            return self._list(folder, rel, descriptor)
        finally:
            if descriptor is not None:
                os.close(descriptor)

    def _list(self, folder: str, rel: str, descriptor: int | None) -> list[tuple[str, str]]:
        """Stat the image files of the opened ``folder``; return its subfolders."""
        try:
            with os.scandir(folder if descriptor is None else descriptor) as listing:
                entries = list(listing)
        except OSError as error:
            self._skip_folder(rel, "cannot list folder", error)
            return []
        subfolders, files = self._sort_out(entries, folder, rel)
        del entries  # only their names live on, in the lists: the entries go before the stats
        images = _image_names(files)
        images.sort()  # runs of sorted paths: the final sort merges them
        self.ignored += len(files) - len(images)
        paths = [rel + name for name in images]
        if descriptor is None:  # Windows: by path
            images = [os.path.join(folder, name) for name in images]
        _stat_files(images, paths, self.found, self.skipped, descriptor)
        return [(os.path.join(folder, name), rel + name + os.sep) for name in sorted(subfolders)]

    def _sort_out(self, entries: list[os.DirEntry], folder: str, rel: str
                  ) -> tuple[list[str], list[str]]:
        """The names of the subfolders to walk and of the other files among ``entries``,
        less the links out of the boundary (skipped)."""
        subfolders, files = [], []
        boundary = self.boundary
        for entry in entries:
            if boundary is not None and entry.is_symlink() and \
                    self._leaves(os.path.join(folder, entry.name), rel + entry.name):
                continue
            try:  # the kind comes with the listing (d_type): no system call but for links
                if entry.is_dir():
                    subfolders.append(entry.name)
                    continue
            except OSError:  # a link that cannot be followed: its stat names the error
                pass
            files.append(entry.name)
        return subfolders, files

    def _leaves(self, path: str, rel: str) -> bool:
        """Whether the link ``path`` leads out of the boundary (then it is skipped)."""
        target = os.path.realpath(path)
        if _inside(target, self.boundary):
            return False
        self.skipped.append(Skipped(rel, f"a link out of the dataset root {self.boundary} "
                                         f"(to {target}); not followed"))
        return True

    def _skip_folder(self, rel: str, what: str, error: OSError) -> None:
        self.skipped.append(Skipped(rel or "." + os.sep, f"{what}: {error.strerror or error}"))


def _image_names(names: list[str]) -> list[str]:
    """The names whose ``os.path.splitext(name)[1].lower()`` is an image extension (names
    without separators), at half the cost.

    Examples
    --------
    >>> _image_names(["a.PNG", "a.png.txt", ".png", "..png", ".a.png", "png", "a.jpeg"])
    ['a.PNG', '.a.png', 'a.jpeg']
    """
    # The suffixes hold one dot, their first character: the name's last dot. A name of
    # leading dots only before it has no extension (".png"): after them, a dot remains.
    return [name for name in names
            if (name[-4:] in _SHORT_SUFFIXES or name[-5:] in _LONG_SUFFIXES)
            and (name[0] != "." or "." in name.lstrip("."))]


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _stat_files(names: list[str], paths: list[str], found: _Found, skipped: list[Skipped],
                dir_fd: int | None = None) -> None:
    """Stat ``names`` (relative to the folder ``dir_fd`` if given; links followed) and
    keep the regular files in ``found`` as ``paths``; the others go to ``skipped``."""
    stat, fields = os.stat, _FIELDS
    for start in range(0, len(names), _BATCH):
        batch, kept = names[start:start + _BATCH], paths[start:start + _BATCH]
        try:  # one system call a file and no other work (DirEntry.stat() would keep it)
            rows = [fields(stat(name, dir_fd=dir_fd)) for name in batch]
        except OSError:  # a dangling symlink or a file deleted meanwhile: one at a time
            kept, rows = _stat_one_by_one(batch, kept, skipped, dir_fd)
        found.extend(kept, rows, skipped)


def _stat_one_by_one(names: list[str], paths: list[str], skipped: list[Skipped],
                     dir_fd: int | None) -> tuple[list[str], list[tuple[int, ...]]]:
    """The paths and `_FIELDS` of the ``names`` that can be stat'ed; the others are
    skipped with the system's reason."""
    kept, rows = [], []
    for name, path in zip(names, paths):
        try:
            rows.append(_FIELDS(os.stat(name, dir_fd=dir_fd)))
        except OSError as error:
            skipped.append(Skipped(path, f"cannot stat file: {error.strerror or error}"))
        else:
            kept.append(path)
    return kept, rows


class _Found:
    """The files a walk has found, as columns: a path string and five machine integers
    a file, not a tuple, a `FileEntry` and their int objects (~300 bytes more a file)."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.devices, self.inodes = array("Q"), array("Q")
        self.sizes, self.mtimes, self.ctimes = array("q"), array("q"), array("q")

    def extend(self, paths: list[str], rows: list[tuple[int, ...]],
               skipped: list[Skipped]) -> None:
        """Add the regular files of ``rows`` (`_FIELDS` of each) as ``paths``, a batch at
        once; the others (a FIFO, a device) go to ``skipped``, never to be opened."""
        if not rows:
            return
        modes, devices, inodes, sizes, mtimes, ctimes = zip(*rows)
        if not all(map(S_ISREG, modes)):
            regular = list(map(S_ISREG, modes))
            skipped += [Skipped(path, not_regular_reason(mode))
                        for path, mode, ok in zip(paths, modes, regular) if not ok]
            self.extend(list(compress(paths, regular)), list(compress(rows, regular)), skipped)
            return
        self.paths += paths
        self.devices.extend(array("Q", devices))
        self.inodes.extend(array("Q", inodes))
        self.sizes.extend(array("q", sizes))
        self.mtimes.extend(_int64s(mtimes))
        self.ctimes.extend(_int64s(ctimes))

    def first_link_of_each_file(self, skipped: list[Skipped]) -> FileList:
        """The files sorted by path, each physical file once: at its first path in that
        order; its other paths go to ``skipped``."""
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
        return FileList.from_columns(list(map(paths.__getitem__, kept.tolist())),
                                     np.frombuffer(self.sizes, np.int64)[kept],
                                     np.frombuffer(self.mtimes, np.int64)[kept],
                                     change_stamps(np.frombuffer(self.inodes, np.uint64)[kept],
                                                   np.frombuffer(self.ctimes, np.int64)[kept]))


def _int64s(times_ns: tuple[int, ...]) -> array:
    """Times as int64s: dates before 1677 or after 2262 saturate (they only key caches)."""
    try:
        return array("q", times_ns)
    except OverflowError:  # the strangest files only: one at a time
        return array("q", map(_saturated, times_ns))


def _saturated(time_ns: int) -> int:
    """A time as an int64: dates before 1677 or after 2262 saturate (they only key caches)."""
    if _INT64_MIN <= time_ns <= _INT64_MAX:  # all but the strangest files: one comparison
        return time_ns
    return _INT64_MIN if time_ns < 0 else _INT64_MAX


def _first_of_each_identity(devices: np.ndarray, inodes: np.ndarray) -> np.ndarray:
    """For each file, the position of the first file with its (device, inode).

    (A sort of both columns: ``np.unique(..., axis=0)`` takes 7 times as long.)

    Examples
    --------
    >>> _first_of_each_identity(np.array([1, 1, 1], np.uint64), np.array([7, 8, 7], np.uint64))
    array([0, 1, 0])
    >>> _first_of_each_identity(np.array([2, 1, 1], np.uint64), np.array([7, 7, 7], np.uint64))
    array([0, 1, 1])
    """
    order = np.lexsort((inodes, devices))  # stable: an identity's files in position order
    devices, inodes = devices[order], inodes[order]
    starts = np.ones(len(order), bool)  # where an identity's first file is, in that order
    starts[1:] = (devices[1:] != devices[:-1]) | (inodes[1:] != inodes[:-1])
    first = np.empty(len(order), np.intp)
    first[order] = order[starts][np.cumsum(starts) - 1]
    return first
