"""Reading one image file: regular files only, never more bytes than a limit.

A folder can hold things that are not files with an image name: a FIFO named ``x.png``
(opening it waits forever for a writer), a link to ``/dev/zero`` (reading it never
ends), a sparse 60 GB ``big.png`` (reading it fills memory). Every read here opens
without blocking, checks the file type on the open descriptor (no race with a rename
between a check and the open), refuses anything over a byte limit from the size the file
reports, and never reads more than that limit even if the file grows while it is read.

The default limit follows from ``--max-pixels``: no decoder allowed here produces more
than 8 bytes a pixel (4 channels of 16 bits), so an honest image file of ``max_pixels``
pixels, even uncompressed, plus 64 MiB of metadata (EXIF, ICC, XMP, thumbnails), fits
in ``8 × max_pixels + 64 MiB`` bytes (about 780 MB at Pillow's default limit).
``--max-file-bytes`` sets it explicitly.
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Sequence

from normstats.errors import RefusedInputError, TransientInputError

try:  # the plain case of many files in C (POSIX), built with normstats
    from normstats.sources.decoding._read_files import read_files as _read_files
except ImportError:  # pragma: no cover - a source tree used without pip install, or Windows
    _read_files = None

__all__ = ["read_whole_file", "read_image_file", "read_plain_files", "open_regular",
           "default_file_limit", "not_regular_reason", "not_a_dataset_path", "too_large_reason",
           "BYTES_PER_PIXEL", "METADATA_BYTES", "IMAGE_EXTENSIONS"]

#: The file name extensions (lower case) of the files a folder walk takes as images.
IMAGE_EXTENSIONS = frozenset({".png", ".jpg", ".jpeg", ".jpe", ".jfif", ".bmp", ".dib", ".tif",
                              ".tiff", ".webp", ".gif", ".ppm", ".pgm", ".pbm", ".pnm"})

#: The most bytes a pixel takes in any image an allowed decoder returns (RGBA, 16-bit).
BYTES_PER_PIXEL = 8
#: Room for metadata beside the pixels of an uncompressed file.
METADATA_BYTES = 64 << 20

_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISDIR, "a directory"))


def default_file_limit(max_pixels: int) -> int:
    """The byte limit implied by a pixel limit: ``8 × max_pixels + 64 MiB``.

    Examples
    --------
    >>> default_file_limit(1_000_000) == 8_000_000 + (64 << 20)
    True
    """
    return BYTES_PER_PIXEL * int(max_pixels) + METADATA_BYTES


def not_regular_reason(mode: int) -> str | None:
    """Why a file of ``st_mode`` is not read, or None for a regular file.

    Examples
    --------
    >>> import stat
    >>> not_regular_reason(stat.S_IFIFO | 0o644)
    'not a regular file (a FIFO (named pipe)); only regular files are read'
    >>> not_regular_reason(stat.S_IFREG | 0o644) is None
    True
    """
    if stat.S_ISREG(mode):
        return None
    kind = next((name for test, name in _KINDS if test(mode)), "not a plain file")
    return f"not a regular file ({kind}); only regular files are read"


def not_a_dataset_path(path: str) -> str | None:
    """Why ``path`` (given as a dataset) is not read, or None for a folder or regular file.

    Checked before anything opens the path: detecting a format reads its first bytes,
    and that read would wait forever on a FIFO.

    Examples
    --------
    >>> import tempfile
    >>> not_a_dataset_path(tempfile.mkdtemp()) is None
    True
    """
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None  # missing or unreadable: the caller's own message says which
    return None if stat.S_ISDIR(mode) else not_regular_reason(mode)


def too_large_reason(size: int, limit: int) -> str:
    """The skip reason of a file (or tar member) over the byte limit.

    Examples
    --------
    >>> too_large_reason(10, 5)
    'file of 10 bytes is over the limit of 5 bytes; raise --max-file-bytes if it is trusted'
    """
    return (f"file of {size:,} bytes is over the limit of {limit:,} bytes; raise "
            f"--max-file-bytes if it is trusted")


def read_image_file(path: str, name: str, limit: int | None = None,
                    size_hint: int | None = None) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit``; errors name ``name``.

    Raises
    ------
    RefusedInputError
        Not a regular file, or over the limit.
    TransientInputError
        Gone, not permitted, or a read error: about the moment, not the file's bytes.

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "a.png")
    >>> _ = open(path, "wb").write(b"abc")
    >>> read_image_file(path, "a.png", limit=3)
    b'abc'
    >>> read_image_file(path, "a.png", limit=2)
    Traceback (most recent call last):
    ...
    normstats.errors.RefusedInputError: a.png: file of 3 bytes is over the limit of 2 bytes; ...
    """
    try:
        return read_whole_file(path, size_hint, limit)
    except _Refused as refused:
        raise RefusedInputError(refused.reason, name) from None
    except IsADirectoryError:  # a file replaced by a folder since the listing
        raise TransientInputError("is a directory, not an image file", name) from None
    except FileNotFoundError:
        raise TransientInputError("file disappeared before it could be read", name) from None
    except PermissionError:
        raise TransientInputError("permission denied", name) from None
    except OSError as error:
        raise TransientInputError(f"cannot read file: {error.strerror or error}", name) from None


def read_plain_files(paths: Sequence[str], limit: int) -> list[bytes | None]:
    """The bytes of each of ``paths`` where the file is plain, else None: the caller reads
    that one with `read_image_file`, whose rules and messages are the only ones.

    Plain is a regular file of at most ``limit`` bytes (fstat's size) that one read gives
    whole, the case of almost every file of a folder. The compiled loop reads such a file
    in its system calls alone (a 2.4 KB PNG in ~7 µs, against ~15 µs through
    `read_whole_file`); without it every answer is None.

    Examples
    --------
    >>> import tempfile, os
    >>> folder = tempfile.mkdtemp()
    >>> path = os.path.join(folder, "a.png")
    >>> _ = open(path, "wb").write(b"abc")
    >>> read_plain_files([path, path + "x", folder], limit=3)[1:]  # missing, a folder
    [None, None]
    >>> read_plain_files([path], limit=2)  # over the limit: read_image_file refuses it
    [None]
    """
    if _read_files is None:  # pragma: no cover - a source tree used without pip install
        return [None] * len(paths)
    return _read_files(list(paths), min(int(limit), _LARGEST_LIMIT))


#: Limits beyond any file (a raised ``--max-pixels`` can give one past a C long long).
_LARGEST_LIMIT = 1 << 62


#: O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
_READ_FLAGS = (os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_BINARY", 0)
               | getattr(os, "O_NOCTTY", 0))


class _Refused(OSError):
    """A file normstats will not read; an `OSError` for callers of `read_whole_file`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def open_regular(path: str) -> io.BufferedReader:
    """``open(path, "rb")`` for a user's data file, refusing anything but a regular file.

    The one door every reader of a user's file goes through (headers, dataset files,
    shards, manifests): the path is opened without blocking and its type checked on the
    open descriptor, so a FIFO, a device or a socket named like a data file is refused
    before a single byte is read (a plain ``open`` of a FIFO waits for a writer forever,
    and a link to ``/dev/zero`` never ends).

    Raises
    ------
    RefusedInputError
        Naming ``path``: not a regular file (and which kind it is).
    OSError
        As ``open`` raises it (missing file, permission): callers word those themselves.

    Examples
    --------
    >>> import tempfile, os
    >>> folder = tempfile.mkdtemp()
    >>> path = os.path.join(folder, "a.bin")
    >>> _ = open(path, "wb").write(b"abc")
    >>> with open_regular(path) as handle:
    ...     handle.read()
    b'abc'
    >>> os.mkfifo(os.path.join(folder, "pipe.npy"))
    >>> open_regular(os.path.join(folder, "pipe.npy"))
    Traceback (most recent call last):
    ...
    normstats.errors.RefusedInputError: ...pipe.npy: not a regular file (a FIFO (named pipe))...
    """
    descriptor = os.open(path, _READ_FLAGS)
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            raise RefusedInputError(not_regular_reason(mode) or "not a regular file",
                                    os.fspath(path))
        os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def read_whole_file(path: str, size_hint: int | None = None, limit: int | None = None) -> bytes:
    """The bytes of the regular file ``path``, read to the end with raw ``os.read`` calls.

    For a folder of small files this halves the cost of reading (~4 µs instead of ~8 µs
    a file with ``open().read()``, which builds a buffered file object and asks for the
    size first); with the right ``size_hint`` it takes one read plus an open, an
    ``fstat`` and a close. Anything but a regular file, and more than ``limit`` bytes, is
    refused (`read_image_file` words the reason).

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "a.bin")
    >>> with open(path, "wb") as handle:
    ...     _ = handle.write(b"abc")
    >>> read_whole_file(path, size_hint=1)
    b'abc'
    """
    descriptor = os.open(path, _READ_FLAGS)
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise _Refused(not_regular_reason(info.st_mode) or "not a regular file")
        if limit is not None and info.st_size > limit:
            raise _Refused(too_large_reason(info.st_size, limit))
        budget = (1 << 62) if limit is None else limit + 1  # one byte more: growth shows
        expected = info.st_size if size_hint is None else max(size_hint, info.st_size)
        parts, request, total = [], min(expected + 1, budget), 0
        while total < budget:
            asked = min(request, budget - total)
            part = os.read(descriptor, asked)
            parts.append(part)
            total += len(part)
            # A short read at or past the size fstat gave is the end: no further call just
            # to hear it (one call per small file). Before that size it is not: Linux
            # stops one read at 2 GiB - 4 KiB, and network and FUSE file systems read short.
            if not part or (len(part) < asked and total >= info.st_size):
                break
            request = max(request, 1 << 16)
    finally:
        os.close(descriptor)
    if limit is not None and total > limit:
        raise _Refused(too_large_reason(total, limit))
    return parts[0] if len(parts) == 1 else b"".join(parts)
