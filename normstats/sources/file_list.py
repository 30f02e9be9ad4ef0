"""A compact, immutable list of files: one buffer of paths and three int64 arrays.

A folder listing kept as a tuple of `FileEntry` objects costs ~170 bytes a file beyond
its path characters in Python objects (~460 bytes a file of resident memory once the
allocator's leftovers are counted), and decoding workers are forked after the walk, so
every one of them carries that too. `FileList` keeps 24 bytes a file plus the UTF-8
bytes of its path, builds a `FileEntry` only when one is asked for, slices without
copying, and pickles as four buffers (tasks travel to worker processes by pickle).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any, overload

import numpy as np

__all__ = ["FileEntry", "FileList"]

# surrogatepass: paths of undecodable file names hold lone surrogates (os.fsdecode's
# surrogateescape); this codec round-trips every Python str, exactly.
_ENCODING, _ERRORS = "utf-8", "surrogatepass"

#: Entries are built this many at a time when iterating, so iterating a huge list never
#: turns all its numbers into Python ints at once.
_CHUNK = 4096


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One image file: its path relative to the root, size and modification time."""

    path: str
    size: int
    mtime_ns: int


class FileList(Sequence[FileEntry]):
    """An immutable sequence of `FileEntry` stored as columns, not as objects.

    Parameters
    ----------
    paths : bytes
        The UTF-8 (surrogatepass) encoded paths, back to back.
    offsets : numpy.ndarray
        int64, one more than the files: path ``i`` is ``paths[offsets[i]:offsets[i + 1]]``.
    sizes, mtimes : numpy.ndarray
        int64 size and ``mtime_ns`` of each file.

    Most code builds one with `from_columns` or `of` rather than from buffers.

    Examples
    --------
    >>> files = FileList.of([FileEntry("a.png", 10, 1), FileEntry("b/c.png", 20, 2)])
    >>> len(files), files[1]
    (2, FileEntry(path='b/c.png', size=20, mtime_ns=2))
    >>> [f.path for f in files[1:]], int(files.sizes.sum())
    (['b/c.png'], 30)
    """

    __slots__ = ("_paths", "_offsets", "sizes", "mtimes")

    def __init__(self, paths: bytes, offsets: np.ndarray, sizes: np.ndarray,
                 mtimes: np.ndarray) -> None:
        if not len(offsets) == len(sizes) + 1 == len(mtimes) + 1:
            raise ValueError("a FileList needs one offset more than sizes and mtimes")
        self._paths = bytes(paths)
        # Slices share these arrays: read-only, so no view can change another list.
        self._offsets = _frozen(offsets)
        self.sizes = _frozen(sizes)
        self.mtimes = _frozen(mtimes)

    @classmethod
    def from_columns(cls, paths: Sequence[str], sizes: Any, mtimes: Any) -> FileList:
        """A list from parallel columns: path strings and integer sizes and mtimes.

        Examples
        --------
        >>> FileList.from_columns(["a.png", "é.png"], [1, 2], [3, 4])[1].path
        'é.png'
        """
        joined = "".join(paths)
        if joined.isascii():  # one byte a character: lengths are the string lengths
            lengths = np.fromiter(map(len, paths), np.int64, len(paths))
        else:
            lengths = np.fromiter((len(p.encode(_ENCODING, _ERRORS)) for p in paths),
                                  np.int64, len(paths))
        offsets = np.zeros(len(paths) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return cls(joined.encode(_ENCODING, _ERRORS), offsets,
                   np.array(sizes, dtype=np.int64).reshape(-1),
                   np.array(mtimes, dtype=np.int64).reshape(-1))

    @classmethod
    def of(cls, entries: Iterable[FileEntry]) -> FileList:
        """A list of ``entries`` (any iterable of `FileEntry`; a `FileList` is returned as is).

        Examples
        --------
        >>> len(FileList.of(FileEntry(f"{i}.png", i, 0) for i in range(3)))
        3
        """
        if isinstance(entries, FileList):
            return entries
        paths: list[str] = []
        sizes: list[int] = []
        mtimes: list[int] = []
        for entry in entries:
            paths.append(entry.path)
            sizes.append(entry.size)
            mtimes.append(entry.mtime_ns)
        return cls.from_columns(paths, sizes, mtimes)

    def __len__(self) -> int:
        return len(self.sizes)

    @overload
    def __getitem__(self, index: int) -> FileEntry: ...

    @overload
    def __getitem__(self, index: slice) -> FileList: ...

    def __getitem__(self, index: int | slice) -> FileEntry | FileList:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return self.take(np.arange(start, stop, step))
            stop = max(start, stop)
            # A view: the same path buffer, views of the arrays.
            return FileList(self._paths, self._offsets[start:stop + 1],
                            self.sizes[start:stop], self.mtimes[start:stop])
        i = operator.index(index)
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"file index {index} out of range for {n} files")
        start, stop = int(self._offsets[i]), int(self._offsets[i + 1])
        return FileEntry(self._paths[start:stop].decode(_ENCODING, _ERRORS),
                         int(self.sizes[i]), int(self.mtimes[i]))

    def __iter__(self) -> Iterator[FileEntry]:
        paths = self._paths
        for first in range(0, len(self), _CHUNK):
            last = first + _CHUNK
            offsets = self._offsets[first:last + 1].tolist()
            sizes = self.sizes[first:last].tolist()
            mtimes = self.mtimes[first:last].tolist()
            for i, (size, mtime) in enumerate(zip(sizes, mtimes)):
                yield FileEntry(paths[offsets[i]:offsets[i + 1]].decode(_ENCODING, _ERRORS),
                                size, mtime)

    def take(self, indices: Any) -> FileList:
        """The files at ``indices`` (any integer array-like), in that order, as a new list.

        Examples
        --------
        >>> files = FileList.from_columns(["a", "b", "c"], [1, 2, 3], [0, 0, 0])
        >>> [f.path for f in files.take([2, 0])]
        ['c', 'a']
        """
        indices = np.asarray(indices, dtype=np.int64).reshape(-1)
        n = len(self)
        indices = np.where(indices < 0, indices + n, indices)
        if len(indices) and not 0 <= indices.min() <= indices.max() < n:
            raise IndexError(f"file indices out of range for {n} files")
        starts, stops = self._offsets[indices], self._offsets[indices + 1]
        offsets = np.zeros(len(indices) + 1, np.int64)
        np.cumsum(stops - starts, out=offsets[1:])
        paths = self._paths
        joined = b"".join(paths[a:b] for a, b in zip(starts.tolist(), stops.tolist()))
        return FileList(joined, offsets, self.sizes[indices], self.mtimes[indices])

    def _columns(self) -> tuple[bytes, np.ndarray, np.ndarray, np.ndarray]:
        """Exactly this list's data: its own bytes, offsets from 0, sizes, mtimes."""
        first, last = int(self._offsets[0]), int(self._offsets[-1])
        paths = self._paths if (first, last) == (0, len(self._paths)) else \
            self._paths[first:last]
        return paths, self._offsets - first, self.sizes, self.mtimes

    def __reduce__(self) -> tuple:
        # A slice pickles only its own part of the shared path buffer.
        return FileList, self._columns()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FileList):
            return NotImplemented
        mine, theirs = self._columns(), other._columns()
        return mine[0] == theirs[0] and all(np.array_equal(a, b)
                                            for a, b in zip(mine[1:], theirs[1:]))

    def __hash__(self) -> int:
        paths, offsets, sizes, mtimes = self._columns()
        return hash((paths, offsets.tobytes(), sizes.tobytes(), mtimes.tobytes()))

    def __repr__(self) -> str:
        shown = ", ".join(repr(entry.path) for entry in islice(self, 3))
        more = ", ..." if len(self) > 3 else ""
        return f"FileList({len(self)} files: [{shown}{more}])"


def _frozen(array: np.ndarray) -> np.ndarray:
    view = np.asarray(array, dtype=np.int64).view()
    view.flags.writeable = False
    return view
