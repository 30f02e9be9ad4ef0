"""A compact, immutable list of files: one buffer of paths and four integer arrays.

A folder listing kept as a tuple of `FileEntry` objects costs ~170 bytes a file beyond
its path characters in Python objects (~460 bytes a file of resident memory once the
allocator's leftovers are counted), and decoding workers are forked after the walk, so
every one of them carries that too. `FileList` keeps 28 bytes a file plus the UTF-8
bytes of its path, builds a `FileEntry` only when one is asked for, slices without
copying, and pickles as five buffers (tasks travel to worker processes by pickle).
"""

from __future__ import annotations

import operator
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any, overload

import numpy as np

__all__ = ["FileEntry", "FileList", "change_stamp", "change_stamps", "stamp_of",
           "PATH_ENCODING", "PATH_ERRORS"]

# surrogatepass: paths of undecodable file names hold lone surrogates (os.fsdecode's
# surrogateescape); this codec round-trips every Python str, exactly.
PATH_ENCODING, PATH_ERRORS = "utf-8", "surrogatepass"

#: Entries are built this many at a time when iterating, so iterating a huge list never
#: turns all its numbers into Python ints at once.
_CHUNK = 4096
#: Paths are decoded this many at a time: a batch at once is cheaper, and a task of many
#: small images then never holds all its path strings.
_PATH_CHUNK = 256
#: Paths are joined this many at a time (`FileList.joined_paths`).
_JOIN_CHUNK = 1 << 14


#: An odd 64-bit constant (2**64 / golden ratio): multiplying by it spreads inode numbers
#: over all 64 bits before they are mixed with the status-change time.
_SPREAD = 0x9E3779B97F4A7C15
_MASK = (1 << 64) - 1


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One image file: its path relative to the root, size, modification time and stamp.

    ``stamp`` folds the file's inode number and status-change time (``st_ctime_ns``) into
    one int64 (see `change_stamp`); 0 where the file system gives neither (remote stores).
    """

    path: str
    size: int
    mtime_ns: int
    stamp: int = 0


def change_stamp(inode: int, ctime_ns: int) -> int:
    """The inode and status-change time of a file folded into one signed 64-bit integer.

    A file's size and ``mtime`` can be set back to old values (``tar --mtime``,
    ``touch -d``, ``rsync -t``), but every write, extraction or replacement changes its
    ``ctime``, which no user call can set, and a replaced file usually has a new inode.
    The record cache keys a file on size, ``mtime`` and this stamp.

    Examples
    --------
    >>> change_stamp(12, 1_000) == change_stamp(12, 1_000)
    True
    >>> change_stamp(12, 1_000) != change_stamp(12, 1_001) != change_stamp(13, 1_001)
    True
    """
    mixed = ((inode * _SPREAD) ^ ctime_ns) & _MASK
    return mixed - (1 << 64) if mixed >> 63 else mixed


def change_stamps(inodes: Any, ctimes_ns: Any) -> np.ndarray:
    """`change_stamp` of many files at once, as an int64 array.

    Examples
    --------
    >>> int(change_stamps([12], [1_000])[0]) == change_stamp(12, 1_000)
    True
    """
    inodes = np.asarray(inodes, dtype=np.uint64)
    ctimes = np.asarray(ctimes_ns, dtype=np.int64).view(np.uint64)
    with np.errstate(over="ignore"):  # the product wraps modulo 2**64 by design
        stamps = inodes * np.uint64(_SPREAD)
    np.bitwise_xor(stamps, ctimes, out=stamps)  # in place: one column's memory, not two
    return stamps.view(np.int64)


def stamp_of(info: os.stat_result) -> int:
    """`change_stamp` of a ``stat`` result."""
    return change_stamp(info.st_ino, info.st_ctime_ns)


class FileList(Sequence[FileEntry]):
    """An immutable sequence of `FileEntry` stored as columns, not as objects.

    Parameters
    ----------
    paths : bytes
        The UTF-8 (surrogatepass) encoded paths, back to back.
    offsets : numpy.ndarray
        Integers, one more than the files: path ``i`` is ``paths[offsets[i]:offsets[i + 1]]``.
    sizes, mtimes : numpy.ndarray
        int64 size and ``mtime_ns`` of each file.
    stamps : numpy.ndarray, optional
        int64 `change_stamp` of each file (zeros when not given).

    Most code builds one with `from_columns` or `of` rather than from buffers.

    Examples
    --------
    >>> files = FileList.of([FileEntry("a.png", 10, 1), FileEntry("b/c.png", 20, 2)])
    >>> len(files), files[1]
    (2, FileEntry(path='b/c.png', size=20, mtime_ns=2, stamp=0))
    >>> [f.path for f in files[1:]], int(files.sizes.sum())
    (['b/c.png'], 30)
    """

    __slots__ = ("_paths", "_offsets", "sizes", "mtimes", "stamps")

    def __init__(self, paths: bytes, offsets: np.ndarray, sizes: np.ndarray,
                 mtimes: np.ndarray, stamps: np.ndarray | None = None) -> None:
        if stamps is None:
            stamps = np.zeros(len(sizes), np.int64)
        if not len(offsets) == len(sizes) + 1 == len(mtimes) + 1 == len(stamps) + 1:
            raise ValueError("a FileList needs one offset more than sizes, mtimes and stamps")
        self._paths = bytes(paths)
        # Slices share these arrays: read-only, so no view can change another list. Paths
        # under 4 GiB in all (any real folder) take four bytes an offset, not eight.
        self._offsets = _frozen(offsets, np.uint32 if len(self._paths) < 2**32 else np.int64)
        self.sizes = _frozen(sizes)
        self.mtimes = _frozen(mtimes)
        self.stamps = _frozen(stamps)

    @classmethod
    def from_columns(cls, paths: Sequence[str], sizes: Any, mtimes: Any,
                     stamps: Any = None) -> FileList:
        """A list from parallel columns: path strings and integer sizes, mtimes, stamps.

        Examples
        --------
        >>> FileList.from_columns(["a.png", "é.png"], [1, 2], [3, 4])[1].path
        'é.png'
        """
        data, lengths = _encoded(paths)
        offsets = np.zeros(len(paths) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return cls(data, offsets,
                   np.array(sizes, dtype=np.int64).reshape(-1),
                   np.array(mtimes, dtype=np.int64).reshape(-1),
                   None if stamps is None else np.array(stamps, dtype=np.int64).reshape(-1))

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
        stamps: list[int] = []
        for entry in entries:
            paths.append(entry.path)
            sizes.append(entry.size)
            mtimes.append(entry.mtime_ns)
            stamps.append(entry.stamp)
        return cls.from_columns(paths, sizes, mtimes, stamps)

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
                            self.sizes[start:stop], self.mtimes[start:stop],
                            self.stamps[start:stop])
        i = operator.index(index)
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"file index {index} out of range for {n} files")
        start, stop = int(self._offsets[i]), int(self._offsets[i + 1])
        return FileEntry(self._paths[start:stop].decode(PATH_ENCODING, PATH_ERRORS),
                         int(self.sizes[i]), int(self.mtimes[i]), int(self.stamps[i]))

    def __iter__(self) -> Iterator[FileEntry]:
        for first in range(0, len(self), _CHUNK):
            last = first + _CHUNK
            yield from map(FileEntry, self._decoded_paths(first, last),
                           self.sizes[first:last].tolist(), self.mtimes[first:last].tolist(),
                           self.stamps[first:last].tolist())

    def paths(self) -> list[str]:
        """Every file's relative path, in order (cheaper than iterating the entries).

        Examples
        --------
        >>> FileList.from_columns(["a.png", "b/c.png"], [1, 2], [0, 0]).paths()
        ['a.png', 'b/c.png']
        """
        if len(self) < 2 or b"\0" in self._columns()[0]:  # no free separator: one by one
            return self._decoded_paths(0, len(self))
        # A NUL (which no file name holds) between paths, one decode and one split: no
        # Python call a path (a million paths in ~0.05 s, not ~0.5 s).
        return str(self.joined_paths(), PATH_ENCODING, PATH_ERRORS).split("\0")

    def has_paths(self, paths: Sequence[str]) -> bool:
        """Whether this list's paths are exactly ``paths``, in order: compared as bytes and
        lengths, without a path string made (a task's 1,000 paths in ~0.05 ms).

        Examples
        --------
        >>> files = FileList.from_columns(["a.png", "b.png"], [1, 2], [0, 0])
        >>> files.has_paths(["a.png", "b.png"]), files.has_paths(["a.pngb", ".png"])
        (True, False)
        """
        if len(paths) != len(self):
            return False
        data, offsets = self._columns()[:2]
        given, lengths = _encoded(paths)
        return given == data and np.array_equal(np.diff(offsets.astype(np.int64)), lengths)

    def find_sorted(self, path: str) -> int | None:
        """The index of ``path`` in this list, sorted by path (as the walk lists a folder),
        by binary search on the paths' bytes (UTF-8 sorts as the strings do, lone
        surrogates too); None when it is not listed. No path string is made.

        Examples
        --------
        >>> files = FileList.from_columns(["a.png", "b/c.png", "é.png"], [1, 2, 3], [0] * 3)
        >>> files.find_sorted("b/c.png"), files.find_sorted("é.png"), files.find_sorted("b")
        (1, 2, None)
        """
        target = path.encode(PATH_ENCODING, PATH_ERRORS)
        paths, offsets = self._paths, self._offsets

        def listed(row: int) -> bytes:
            return paths[int(offsets[row]):int(offsets[row + 1])]

        low, high = 0, len(self)
        while low < high:
            middle = (low + high) // 2
            if listed(middle) < target:
                low = middle + 1
            else:
                high = middle
        return low if low < len(self) and listed(low) == target else None

    def joined_paths(self) -> np.ndarray:
        """Every path's bytes (uint8), a NUL between two paths: how the record cache
        stores them. Made a run of paths at a time: its temporaries stay small.

        Examples
        --------
        >>> FileList.from_columns(["a.png", "b/c.png"], [1, 2], [0, 0]).joined_paths().tobytes()
        b'a.png\\x00b/c.png'
        """
        data, offsets = self._columns()[:2]
        offsets = offsets.astype(np.int64)
        source = np.frombuffer(data, np.uint8)
        count = len(self)
        joined = np.zeros(len(data) + max(count - 1, 0), np.uint8)  # the NULs already there
        for first in range(0, count, _JOIN_CHUNK):
            last = min(count, first + _JOIN_CHUNK)
            start, stop = offsets[first], offsets[last]
            # path i's bytes move right by i: one NUL before each path but the first
            piece = joined[start + first:stop + last - 1]
            is_path = np.ones(len(piece), bool)
            is_path[offsets[first + 1:last] - start + np.arange(last - first - 1)] = False
            piece[is_path] = source[start:stop]
        return joined

    def paths_and_sizes(self) -> Iterator[tuple[str, int]]:
        """Every file's relative path and size, in order: cheaper than iterating the entries,
        and only a few hundred paths are strings at a time.

        Examples
        --------
        >>> list(FileList.from_columns(["a.png", "b/c.png"], [1, 2], [0, 0]).paths_and_sizes())
        [('a.png', 1), ('b/c.png', 2)]
        """
        for first in range(0, len(self), _PATH_CHUNK):
            last = first + _PATH_CHUNK
            yield from zip(self._decoded_paths(first, last), self.sizes[first:last].tolist())

    def _decoded_paths(self, first: int, last: int) -> list[str]:
        """The paths of files ``first`` to ``last`` (exclusive) as strings."""
        offsets, data = self._offsets[first:last + 1].tolist(), self._paths
        return [data[a:b].decode(PATH_ENCODING, PATH_ERRORS)
                for a, b in zip(offsets, offsets[1:])]

    def take(self, indices: Any) -> FileList:
        """The files at ``indices`` (any integer array-like), in that order, as a new list
        (a view of this one's buffers, as a slice is, where they are consecutive).

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
        in_order = len(indices) > 1 and bool((np.diff(indices) > 0).all())
        if in_order and indices[-1] - indices[0] + 1 == len(indices):
            return self[int(indices[0]):int(indices[-1]) + 1]  # consecutive: a view
        starts, stops = self._offsets[indices], self._offsets[indices + 1]
        offsets = np.zeros(len(indices) + 1, np.int64)
        np.cumsum(stops - starts, out=offsets[1:])
        paths = self._paths
        if in_order:
            # one masked copy of the bytes from the first file taken to the last, not of
            # the whole list's: the record cache takes each commit's files (a few runs of
            # consecutive ones) from a listing a hundred times longer
            low, high = int(indices[0]), int(indices[-1]) + 1
            span = self._offsets[low:high + 1].astype(np.int64)
            chosen = np.zeros(high - low, bool)
            chosen[indices - low] = True
            data = np.frombuffer(paths, np.uint8)[span[0]:span[-1]]
            joined = data[np.repeat(chosen, np.diff(span))].tobytes()
        else:
            joined = b"".join(paths[a:b] for a, b in zip(starts.tolist(), stops.tolist()))
        return FileList(joined, offsets, self.sizes[indices], self.mtimes[indices],
                        self.stamps[indices])

    def _columns(self) -> tuple[bytes, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Exactly this list's data: its own bytes, offsets from 0, sizes, mtimes, stamps."""
        first, last = int(self._offsets[0]), int(self._offsets[-1])
        paths = self._paths if (first, last) == (0, len(self._paths)) else \
            self._paths[first:last]
        return paths, self._offsets - first, self.sizes, self.mtimes, self.stamps

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
        paths, offsets, *numbers = self._columns()
        # Offsets by value: equal lists hash equal whatever width their offsets were kept in.
        return hash((paths, offsets.astype(np.int64).tobytes(),
                     *(column.tobytes() for column in numbers)))

    def __repr__(self) -> str:
        shown = ", ".join(repr(entry.path) for entry in islice(self, 3))
        more = ", ..." if len(self) > 3 else ""
        return f"FileList({len(self)} files: [{shown}{more}])"


def _encoded(paths: Sequence[str]) -> tuple[bytes, np.ndarray]:
    """The bytes of ``paths`` one after the other, and each path's length in bytes."""
    joined = "".join(paths)
    if joined.isascii():  # one byte a character: lengths are the string lengths
        lengths = np.fromiter(map(len, paths), np.int64, len(paths))
    else:
        lengths = np.fromiter((len(p.encode(PATH_ENCODING, PATH_ERRORS)) for p in paths),
                              np.int64, len(paths))
    return joined.encode(PATH_ENCODING, PATH_ERRORS), lengths


def _frozen(array: np.ndarray, dtype: type = np.int64) -> np.ndarray:
    view = np.asarray(array, dtype=dtype).view()
    view.flags.writeable = False
    return view
