"""The files a folder walk has found, kept as columns while the walk goes on.

A walk finds files in the order of their paths, a batch at a time; `FoundFiles` keeps
them as machine integers and path bytes (no Python object a file) and turns them into a
`FileList` at the end, each physical file once.
"""

from __future__ import annotations

from array import array
from itertools import compress
from stat import S_ISREG
from typing import TYPE_CHECKING

from normstats.errors import SkipKind, Skipped
from normstats.sources.decoding.file_read import not_regular_reason

if TYPE_CHECKING:
    import numpy as np

    from normstats.sources.file_list import FileList

__all__ = ["FoundFiles"]

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
#: ``stat.S_IFMT`` and ``stat.S_IFREG``: the bits of a mode that say a regular file.
_FILE_TYPE, _REGULAR = 0o170000, 0o100000


class FoundFiles:
    """The files a walk has found, in the order of their paths, as columns: the UTF-8 bytes
    of the paths back to back and six machine integers a file (no Python object a file:
    a path string and its sort key cost ~200 bytes more a file at the walk's peak)."""

    def __init__(self) -> None:
        self.paths = bytearray()
        self.lengths = array("q")
        self.devices, self.inodes = array("Q"), array("Q")
        self.sizes, self.mtimes, self.ctimes = array("q"), array("q"), array("q")

    def __len__(self) -> int:
        return len(self.lengths)

    def fold_into_stamp(self, position: int, value: int) -> None:
        """Fold ``value`` (an int64) into the change stamp of the file found at
        ``position``: a stamp is ``inode * spread ^ ctime`` (`change_stamps`), so a value
        XOR'ed into the ctime is XOR'ed into the stamp (a sidecar's: `walk`)."""
        self.ctimes[position] ^= value

    def extend(self, paths: list[str], rows: list[tuple[int, ...]],
               skipped: list[Skipped]) -> None:
        """Add the regular files of ``rows`` (`_FIELDS` of each) as ``paths``, a batch at
        once; the others (a FIFO, a device) go to ``skipped``, never to be opened."""
        if not rows:
            return
        modes, devices, inodes, sizes, mtimes, ctimes = zip(*rows)
        if not all(map(S_ISREG, modes)):
            regular = list(map(S_ISREG, modes))
            skipped += [Skipped(path, not_regular_reason(mode), SkipKind.REFUSED)
                        for path, mode, ok in zip(paths, modes, regular) if not ok]
            self.extend(list(compress(paths, regular)), list(compress(rows, regular)), skipped)
            return
        self._add_paths(paths)
        self.devices.extend(array("Q", devices))
        self.inodes.extend(array("Q", inodes))
        self.sizes.extend(array("q", sizes))
        self.mtimes.extend(_int64s(mtimes))
        self.ctimes.extend(_int64s(ctimes))

    def extend_stats(self, paths: list[str], stats: array, skipped: list[Skipped]) -> None:
        """`extend` from an int64 array (``array("q")``) of the same fields, six a file
        one file after the other (the C stat loop's: device and inode as their bits),
        without a Python object a number. (The walk runs without numpy: a command walks
        in a child forked before numpy loads, `normstats.sources.walk_ahead`.)"""
        modes = stats[0::6]
        if any(mode & _FILE_TYPE != _REGULAR for mode in modes):  # a FIFO, a device: name it
            devices, inodes = (array("Q", stats[k::6].tobytes()) for k in (1, 2))
            self.extend(paths, list(zip(modes, devices, inodes, stats[3::6], stats[4::6],
                                        stats[5::6])), skipped)
            return
        self._add_paths(paths)
        self.devices.frombytes(stats[1::6].tobytes())
        self.inodes.frombytes(stats[2::6].tobytes())
        self.sizes.extend(stats[3::6])
        self.mtimes.extend(stats[4::6])
        self.ctimes.extend(stats[5::6])

    def _add_paths(self, paths: list[str]) -> None:
        joined = "".join(paths)
        if joined.isascii():  # one byte a character: one encode for the batch
            self.paths += joined.encode()
            self.lengths.extend(array("q", map(len, paths)))
        else:
            from normstats.sources.file_list import PATH_ENCODING, PATH_ERRORS

            encoded = [path.encode(PATH_ENCODING, PATH_ERRORS) for path in paths]
            self.paths += b"".join(encoded)
            self.lengths.extend(array("q", map(len, encoded)))

    def first_link_of_each_file(self, skipped: list[Skipped]) -> FileList:
        """The files, each physical file once: at its first path (they were found in the
        order of their paths); its other paths go to ``skipped``."""
        import numpy as np

        from normstats.sources.file_list import FileList, change_stamps

        offsets = np.zeros(len(self.lengths) + 1, np.int64)
        np.cumsum(np.frombuffer(self.lengths, np.int64), out=offsets[1:])
        # The buffers are emptied as soon as copied: never both at once, with what follows.
        paths, self.paths, self.lengths = bytes(self.paths), bytearray(), array("q")
        inodes = np.frombuffer(self.inodes, np.uint64)
        files = FileList(paths, offsets, np.frombuffer(self.sizes, np.int64),
                         np.frombuffer(self.mtimes, np.int64),
                         change_stamps(inodes, np.frombuffer(self.ctimes, np.int64)))
        if _all_distinct(inodes):  # no two links to one file: the usual case, one sort
            return files
        first = _first_of_each_identity(np.frombuffer(self.devices, np.uint64), inodes)
        is_first = first == np.arange(len(first))
        if is_first.all():
            return files
        for position in np.flatnonzero(~is_first).tolist():
            skipped.append(Skipped(files[position].path,
                                   f"same file as {files[int(first[position])].path} (a hard "
                                   "or symbolic link); counted once", SkipKind.DUPLICATE))
        return files.take(np.flatnonzero(is_first))


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


def _all_distinct(values: np.ndarray) -> bool:
    """Whether no value occurs twice.

    Examples
    --------
    >>> import numpy as np
    >>> _all_distinct(np.array([3, 1, 2])), _all_distinct(np.array([3, 1, 3]))
    (True, False)
    """
    import numpy as np

    ordered = np.sort(values)
    return not np.any(ordered[1:] == ordered[:-1])


def _first_of_each_identity(devices: np.ndarray, inodes: np.ndarray) -> np.ndarray:
    """For each file, the position of the first file with its (device, inode).

    (A sort of both columns: ``np.unique(..., axis=0)`` takes 7 times as long.)

    Examples
    --------
    >>> import numpy as np
    >>> _first_of_each_identity(np.array([1, 1, 1], np.uint64), np.array([7, 8, 7], np.uint64))
    array([0, 1, 0])
    >>> _first_of_each_identity(np.array([2, 1, 1], np.uint64), np.array([7, 7, 7], np.uint64))
    array([0, 1, 1])
    """
    import numpy as np

    order = np.lexsort((inodes, devices))  # stable: an identity's files in position order
    devices, inodes = devices[order], inodes[order]
    starts = np.ones(len(order), bool)  # where an identity's first file is, in that order
    starts[1:] = (devices[1:] != devices[:-1]) | (inodes[1:] != inodes[:-1])
    first = np.empty(len(order), np.intp)
    first[order] = order[starts][np.cumsum(starts) - 1]
    return first
