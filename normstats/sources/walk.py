"""Walking a folder for image files: sorted, loop-safe, each file counted once.

The walk is recursive and sorted (so results and task boundaries are reproducible),
follows directory symlinks but never enters a directory twice (so symlink loops end),
and counts a file reached through several hard or symbolic links once, naming the
duplicates. Only files with an image extension are considered; their format is then
detected from content against an allow-list when they are decoded.

A file costs the walk one ``stat`` call (about two thirds of its time) and little else:
names are sorted out and stat'ed folder by folder, relative to the open folder, and the
numbers of each batch of files go into the columns at once.

A mask sidecar (GDAL's ``<image>.msk``: `normstats.sources.decoding.sidecar`) is not an
image: it is found in its image's folder listing (only folders holding other files than
images are searched), stat'ed, and its identity folded into its image's change stamp, so
the record cache sees an edited, new or removed sidecar as a changed image.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import compress, groupby, islice, product
from operator import attrgetter, not_
from pathlib import Path
from typing import TYPE_CHECKING

from normstats.errors import SkipKind, Skipped
from normstats.sources.decoding.file_read import IMAGE_EXTENSIONS
from normstats.sources.decoding.sidecar import SIDECAR_SUFFIXES, sidecar_stamp
from normstats.sources.found_files import FoundFiles
from normstats.sources.heap import release_free_memory

if TYPE_CHECKING:
    from normstats.sources.file_list import FileList

try:  # the stat loop in C (POSIX), built with normstats
    from normstats.sources._stat_batch import stat_names as _stat_names
except ImportError:  # pragma: no cover - a source tree used without pip install, or Windows
    _stat_names = None

__all__ = ["WalkResult", "walk_images", "list_images", "list_named_files", "walks_ahead",
           "ahead_key"]

#: Walks of folders made ahead, by `ahead_key`: each a function that returns the walk
#: (`list_images`), or None when the folder is to be walked here after all. Only
#: `normstats.sources.walk_ahead` puts them here, for the command's own process.
walks_ahead: dict[str, Callable[[], _Walk | None]] = {}

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
#: The C loop stats this many names a call, on `_STAT_THREADS` threads (each thread's
#: start costs what ~20 stats do: per 10,000 files of a folder, batches of 256 took 10-11
#: ms on two threads, of 1,024 6.7-7.0 ms, all at once 5.9-6.1, one thread 10-13); their
#: numbers still go into the columns `_BATCH` at a time.
_STAT_BATCH = 4096
#: Threads each batch is stat'ed on by the C loop: a stat waits on the file system's
#: lookups, which run side by side (two threads stat 100,000 files in 10 folders in
#: 62 ms, one in 111-133 ms), and a command walks while its other core loads numpy or
#: waits. The cores this process may run on, at most 4.
_STAT_THREADS = max(1, min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                           else os.cpu_count() or 1))

#: Every spelling of the image extensions in upper and lower case (".png", ".PNG", ...),
#: by length (4, 5): a name's last characters are looked up as they are, not lowered. No
#: other character lowers to one of their letters ("İ" lowers to two, one not ASCII).
_SHORT_SUFFIXES, _LONG_SUFFIXES = (
    frozenset("".join(spelling) for extension in IMAGE_EXTENSIONS if len(extension) == length
              for spelling in product(*({c, c.upper()} for c in extension)))
    for length in (4, 5))

_PATH = attrgetter("path")
#: The stamp folded in for a sidecar that exists but cannot be stat'ed.
_UNREADABLE_SIDECAR = 0x5EED
_FIELDS = attrgetter("st_mode", "st_dev", "st_ino", "st_size", "st_mtime_ns", "st_ctime_ns")


@dataclass(frozen=True)
class WalkResult:
    """Files to decode, duplicates skipped, and how many non-image files were ignored.

    ``files`` may be given as any sequence of `FileEntry`; it is kept as a `FileList`.
    ``sidecars`` counts the files with a mask sidecar (folded into their stamps): with
    any, the decoders look for one beside each file.
    """

    files: FileList
    skipped: tuple[Skipped, ...]
    ignored: int
    sidecars: int = 0

    def __post_init__(self) -> None:
        from normstats.sources.file_list import FileList

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
    ahead = walks_ahead.pop(ahead_key(root), None) if confine_to is None else None
    walk = ahead() if ahead is not None else None  # the command's child walked it already
    return (walk or list_images(root, confine_to)).result()


def ahead_key(root: str | os.PathLike) -> str:
    """The key of a folder's walk in `walks_ahead`: its absolute path."""
    return os.path.abspath(os.fspath(root))


def list_images(root: str | os.PathLike, confine_to: str | os.PathLike | None = None
                ) -> _Walk:
    """The walk of `walk_images` up to its end: the image files found (every link), the
    inputs skipped, the files ignored. Only the standard library and normstats' light
    modules run here, no numpy: a command runs it in a child it forks before numpy loads
    (`normstats.sources.walk_ahead`)."""
    walk = _Walk(None if confine_to is None else os.path.realpath(confine_to))
    # Depth first, each folder's files and subfolders in the order of their paths (a
    # subfolder sorts as its name and a separator): files are found in sorted order, so
    # neither their paths nor a sort of them need to be held as Python objects.
    pending: list[_Step] = [_Descend(str(Path(root)), "")]
    while pending:
        step = pending.pop()
        if isinstance(step, _Descend):
            pending.extend(reversed(walk.visit(step.folder, step.rel)))
        else:
            walk.add(step)
    walk.seen.clear()  # the folders entered: needed no more (nor sent by a child)
    return walk


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
    found = FoundFiles()
    skipped: list[Skipped] = []
    relative_paths = sorted(set(relative_paths))  # a name given twice is one file
    _stat_files(relative_paths, "", found, skipped, under=root)
    # no listing says which have a sidecar: each file's is looked for
    sidecars = _fold_sidecars(found, 0, relative_paths, "", skipped,
                              lambda name: _probed_sidecar_stamp(os.path.join(root, name)))
    files = found.first_link_of_each_file(skipped)
    skipped.sort(key=_PATH)
    return WalkResult(files, tuple(skipped), 0, sidecars)


class _Walk:
    """A walk under way: the files found, the inputs skipped, the non-image files ignored,
    and the folders entered, as (device, inode)."""

    def __init__(self, boundary: str | None) -> None:
        self.boundary = boundary
        self.found = FoundFiles()
        self.skipped: list[Skipped] = []
        self.seen: set[tuple[int, int]] = set()
        self.ignored = 0
        self.sidecars = 0

    def result(self) -> WalkResult:
        """The finished walk: each physical file once (its first path), the skipped inputs
        in the order of their paths."""
        files = self.found.first_link_of_each_file(self.skipped)
        del self.found
        # The walk's temporaries (path strings, sort keys, index arrays) would otherwise
        # stay resident, here and in every decoding worker forked later.
        release_free_memory()
        self.skipped.sort(key=_PATH)
        return WalkResult(files, tuple(self.skipped), self.ignored, self.sidecars)

    def visit(self, folder: str, rel: str) -> list[_Step]:
        """List ``folder`` (``rel`` under the root) and stat its image files; return its
        runs of files and its subfolders in the order of their paths, or nothing for a
        folder already walked."""
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

    def _list(self, folder: str, rel: str, descriptor: int | None) -> list[_Step]:
        """Sort out the entries of the opened ``folder``: its runs of image files between
        its subfolders, in the order of their paths."""
        try:
            with os.scandir(folder if descriptor is None else descriptor) as listing:
                subfolders, files = self._sort_out(listing, folder, rel)
        except OSError as error:
            self._skip_folder(rel, "cannot list folder", error)
            return []
        images = _image_names(files)
        self.ignored += len(files) - len(images)
        # only a folder with other files than images can hold a sidecar (most hold none)
        masks = _sidecar_names(files, images) if len(files) > len(images) else {}
        del files
        if not subfolders:  # a leaf folder (most of a tree): one run of files
            return [_Files(folder, rel, sorted(images), masks)] if images else []
        # A subfolder sorts as its name and a separator, which no file name holds.
        order = sorted(images + [name + os.sep for name in subfolders])
        steps: list[_Step] = []
        for is_folder, run in groupby(order, key=_ends_with_separator):
            names = list(run)
            if is_folder:
                steps += [_Descend(os.path.join(folder, name[:-len(os.sep)]), rel + name)
                          for name in names]
            else:
                steps.append(_Files(folder, rel, names, masks))
        return steps

    def add(self, run: _Files) -> None:
        """Stat a run of files of one folder and add them to those found (the folder is
        opened again: a deep tree would otherwise hold a descriptor for each level)."""
        try:
            descriptor = os.open(run.folder, _FOLDER_FLAGS) if _BY_DESCRIPTOR else None
        except OSError:  # the folder went meanwhile: by path, each file skipped with why
            descriptor = None
        start, skipped_before = len(self.found), len(self.skipped)
        try:
            _stat_files(run.names, run.rel, self.found, self.skipped, descriptor,
                        under=run.folder if descriptor is None else None)
            if run.sidecars:
                self.sidecars += _fold_sidecars(
                    self.found, start, run.names, run.rel, self.skipped[skipped_before:],
                    lambda name: _sidecar_stamp(run, name, descriptor))
        finally:
            if descriptor is not None:
                os.close(descriptor)

    def _sort_out(self, entries: Iterator[os.DirEntry], folder: str, rel: str
                  ) -> tuple[list[str], list[str]]:
        """The names of the subfolders to walk and of the other files among ``entries``,
        less the links out of the boundary (skipped). The entries are taken a batch at a
        time from the listing, never held together: only their names live on."""
        subfolders: list[str] = []
        files: list[str] = []
        while batch := list(islice(entries, _BATCH)):
            if self.boundary is not None:
                batch = [entry for entry in batch if not (entry.is_symlink() and self._leaves(
                    os.path.join(folder, entry.name), rel + entry.name))]
            names = [entry.name for entry in batch]
            try:  # the kind comes with the listing (d_type): no system call but for links
                kinds = [entry.is_dir() for entry in batch]
            except OSError:
                kinds = list(map(_is_folder, batch))
            subfolders += compress(names, kinds)
            files += compress(names, map(not_, kinds))
        return subfolders, files

    def _leaves(self, path: str, rel: str) -> bool:
        """Whether the link ``path`` leads out of the boundary (then it is skipped)."""
        target = os.path.realpath(path)
        if _inside(target, self.boundary):
            return False
        self.skipped.append(Skipped(rel, f"a link out of the dataset root {self.boundary} "
                                         f"(to {target}); not followed", SkipKind.REFUSED))
        return True

    def _skip_folder(self, rel: str, what: str, error: OSError) -> None:
        self.skipped.append(Skipped(rel or "." + os.sep, f"{what}: {error.strerror or error}",
                                    SkipKind.TRANSIENT))


def _is_folder(entry: os.DirEntry) -> bool:
    """Whether ``entry`` is a folder to walk; a link that cannot be followed is a file
    (its stat names the error)."""
    try:
        return entry.is_dir()
    except OSError:
        return False


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


def _sidecar_names(files: list[str], images: list[str]) -> dict[str, str]:
    """The mask sidecars among a folder's ``files``: each image's name to its sidecar's
    (``.msk`` before ``.MSK``, the order GDAL looks in).

    Examples
    --------
    >>> sorted(_sidecar_names(["a.tif", "a.tif.MSK", "a.tif.msk", "b.tif.MSK", "c.msk"],
    ...                       ["a.tif", "b.tif"]).items())
    [('a.tif', 'a.tif.msk'), ('b.tif', 'b.tif.MSK')]
    """
    candidates = [name for name in files if name.endswith(SIDECAR_SUFFIXES)]
    if not candidates:
        return {}
    names = set(images)
    found: dict[str, str] = {}
    for suffix in reversed(SIDECAR_SUFFIXES):  # the first suffix, written last, wins
        found.update((name[:-len(suffix)], name) for name in candidates
                     if name.endswith(suffix) and name[:-len(suffix)] in names)
    return found


def _fold_sidecars(found: FoundFiles, start: int, names: list[str], rel: str,
                   skipped: list[Skipped], stamp_of: Callable[[str], int]) -> int:
    """Fold ``stamp_of(name)`` (a sidecar's stamp, 0 for none) into the stamp of each of
    ``names`` found from position ``start`` on (those not among ``skipped``, in order);
    the number of files with a sidecar."""
    gone = {s.path for s in skipped}
    kept = [name for name in names if rel + name not in gone]
    folded = 0
    for position, name in enumerate(kept, start):
        stamp = stamp_of(name)
        if stamp:
            found.fold_into_stamp(position, stamp)
            folded += 1
    return folded


def _sidecar_stamp(run: _Files, name: str, descriptor: int | None) -> int:
    """The stamp of the sidecar the listing found for the image ``name`` of ``run``."""
    sidecar = run.sidecars.get(name)
    if sidecar is None:
        return 0
    return _stat_stamp(sidecar if descriptor is not None else os.path.join(run.folder, sidecar),
                       descriptor)


def _probed_sidecar_stamp(path: str) -> int:
    """The stamp of the image file ``path``'s sidecar, looked for by name; 0 for none."""
    for suffix in SIDECAR_SUFFIXES:
        stamp = _stat_stamp(path + suffix, None)
        if stamp:
            return stamp
    return 0


def _stat_stamp(path: str, descriptor: int | None) -> int:
    """`sidecar_stamp` of ``path`` (relative to the folder ``descriptor``); 0 when it is not
    there (a dangling link too: the decoder does not see it either), and a fixed stamp
    when it cannot be stat'ed (the decoder then says why it cannot be read)."""
    try:
        return sidecar_stamp(os.stat(path, dir_fd=descriptor)) or 1
    except FileNotFoundError:
        return 0
    except OSError:
        return _UNREADABLE_SIDECAR


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


@dataclass
class _Descend:
    """A step of the walk: list a folder (``rel`` under the root, with a separator)."""

    folder: str
    rel: str


@dataclass
class _Files:
    """A step of the walk: stat a run of image files of ``folder`` (sorted ``names``; ``rel``
    the folder under the root, with a separator) and add them to those found."""

    folder: str
    rel: str
    names: list[str]
    #: The mask sidecars of its images, by image name (`_sidecar_names`).
    sidecars: dict[str, str] = field(default_factory=dict)


_Step = _Descend | _Files


def _ends_with_separator(name: str) -> bool:
    return name.endswith(os.sep)


def _stat_files(names: list[str], rel: str, found: FoundFiles, skipped: list[Skipped],
                dir_fd: int | None = None, under: str | None = None) -> None:
    """Stat ``names`` (relative to the folder ``dir_fd`` if given, else under the folder
    ``under``; links followed) and add those that can be to ``found`` as ``rel + name``, a
    batch at a time; the others go to ``skipped``."""
    stat, fields = os.stat, _FIELDS
    for start in range(0, len(names), _STAT_BATCH):
        chunk = names[start:start + _STAT_BATCH]
        stats = None
        if _stat_names is not None and dir_fd is not None:
            # the system call and nothing else a file, six int64s each; any failure: the
            # whole chunk by Python, below
            stats = array("q", bytes(48 * len(chunk)))
            if _stat_names(dir_fd, chunk, stats, _STAT_THREADS) != 0:
                stats = None
        for first in range(0, len(chunk), _BATCH):
            batch = chunk[first:first + _BATCH]
            paths = [rel + name for name in batch] if rel else batch
            if stats is not None:
                found.extend_stats(paths, stats[6 * first:6 * (first + len(batch))], skipped)
                continue
            targets = batch if under is None else [os.path.join(under, name) for name in batch]
            try:  # one system call a file and no other work (DirEntry.stat() would keep it)
                rows = [fields(stat(target, dir_fd=dir_fd)) for target in targets]
            except OSError:  # a dangling symlink or a file deleted meanwhile: one at a time
                paths, rows = _stat_one_by_one(targets, paths, skipped, dir_fd)
            found.extend(paths, rows, skipped)


def _stat_one_by_one(names: list[str], paths: list[str], skipped: list[Skipped],
                     dir_fd: int | None) -> tuple[list[str], list[tuple[int, ...]]]:
    """The paths and `_FIELDS` of the ``names`` that can be stat'ed; the others are
    skipped with the system's reason."""
    kept, rows = [], []
    for name, path in zip(names, paths):
        try:
            rows.append(_FIELDS(os.stat(name, dir_fd=dir_fd)))
        except OSError as error:
            skipped.append(Skipped(path, f"cannot stat file: {error.strerror or error}",
                                   SkipKind.TRANSIENT))
        else:
            kept.append(path)
    return kept, rows
