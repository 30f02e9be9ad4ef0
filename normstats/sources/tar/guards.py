"""What normstats lets Python's `tarfile` do with a shard: no size in a header is trusted.

A member (or extended header) said to run past the end of the shard is an error naming
it before anything is read or allocated, and `tarfile` reads a plain tar through a file
object whose reads stop at the end of the shard (it reads an extended header's claimed
size in one call) and never step backwards (a negative size would make it list the same
member forever). In a ``.tar.gz`` the end of the shard bounds nothing useful: deflate
packs zeros ~1000:1, so a 1 MB shard can claim a 1 GB pax header, which `tarfile` would
read whole into memory before any member is seen. So `tarfile` parses every header block
through `guarded_info`, which refuses an extended header (pax, GNU long name or link)
over `MAX_EXTENDED_HEADER_BYTES`, and a sparse member, before `tarfile` reads what
follows the block, and global pax headers of more than `MAX_GLOBAL_PAX_RECORDS` records
(each member would hold a copy); the block reader of `normstats.sources.tar.headers`
checks the pax headers it reads itself the same way.
"""

from __future__ import annotations

import io
import os
import tarfile
from typing import Any

from normstats.errors import NormstatsError
from normstats.sources.packed import MAX_DEFLATE_RATIO

__all__ = ["checked_members", "open_tar", "guarded_info", "check_size", "check_extended",
           "MAX_EXTENDED_HEADER_BYTES", "MAX_GLOBAL_PAX_RECORDS"]

#: The largest extended header (pax, GNU long name or link) normstats reads. Honest ones
#: hold a few records or a path: a few hundred bytes, a few KB for the longest paths.
MAX_EXTENDED_HEADER_BYTES = 1 << 20
#: The most records pax global headers may hold: `tarfile` copies them into every member
#: that follows (honest ones hold one to a few records, such as a commit id).
MAX_GLOBAL_PAX_RECORDS = 64
#: What each extended header type is called in a refusal.
_EXTENDED_KINDS = {b"x": "a pax header", b"g": "a pax global header",
                   b"X": "a Solaris extended header", b"L": "a GNU long name header",
                   b"K": "a GNU long link header"}


def check_size(path: str, name: bytes | str, length: int, start: int, size: int,
               packed: int | None = None) -> None:
    """Refuse a header whose data would run past the end of the shard (``size`` bytes, or
    what a gzip stream of ``packed`` bytes can hold), before anything is read."""
    shown = name if isinstance(name, str) else name.decode("utf-8", "surrogateescape")
    if length < 0:
        raise NormstatsError(f"member {shown} has a negative size ({length:,}) in its "
                             "header: a damaged shard", path=path)
    if start + length > size:
        end = f"the shard ends at {size:,}" if packed is None else \
            f"a gzip stream of {packed:,} bytes cannot hold that much"
        raise NormstatsError(f"truncated inside member {shown}: its header gives "
                             f"{length:,} bytes from offset {start:,}, and {end}", path=path)


def check_extended(path: str, kind: bytes, name: bytes | str, length: int, offset: int
                   ) -> None:
    """Refuse an extended header of negative size or over `MAX_EXTENDED_HEADER_BYTES`
    (``offset``: where its header block starts in the tar, unpacked)."""
    if 0 <= length <= MAX_EXTENDED_HEADER_BYTES:
        return
    shown = name if isinstance(name, str) else name.decode("utf-8", "surrogateescape")
    claim = f"a negative size ({length:,})" if length < 0 else f"{length:,} bytes"
    raise NormstatsError(f"{_EXTENDED_KINDS[kind]} of {claim} (the header {shown!r} at byte "
                         f"{offset:,} of the tar), where normstats reads at most 1 MiB "
                         f"({MAX_EXTENDED_HEADER_BYTES:,} bytes): a damaged or hostile shard",
                         path=path)


def _sparse_refused(path: str, name: str) -> NormstatsError:
    return NormstatsError(f"member {name} is a sparse file, which normstats does not read "
                          "from a shard", path=path)


def checked_members(tar: tarfile.TarFile, size: int, path: str, compressed: bool) -> Any:
    """The members of ``tar`` one by one, each checked before `tarfile` moves past it:
    a negative size (it would step back and list the same member forever) and data past
    the end of the shard (in a stream, seeking there would take forever) are errors. Each
    member's ``pax_headers`` is emptied: a listing never reads it, and a shard repeating a
    1 MiB pax header of small records would have every member hold ~5 MB.

    Examples
    --------
    >>> import io, tarfile
    >>> buffer = io.BytesIO()
    >>> with tarfile.open(fileobj=buffer, mode="w") as tar:
    ...     info = tarfile.TarInfo("a.png"); info.size = 3
    ...     tar.addfile(info, io.BytesIO(b"abc"))
    >>> size = len(buffer.getvalue()); _ = buffer.seek(0)
    >>> [i.name for i in checked_members(tarfile.open(fileobj=buffer), size, "s.tar", False)]
    ['a.png']
    """
    bound = size * MAX_DEFLATE_RATIO + (1 << 16) if compressed else size
    for info in tar:
        info.pax_headers = {}  # each member's own copy (see above)
        if info.issparse():  # its data is not where a plain read would look
            raise _sparse_refused(path, info.name)
        if info.isfile() or info.type not in tarfile.SUPPORTED_TYPES:
            check_size(path, info.name, info.size, info.offset_data, bound,
                       size if compressed else None)
        yield info


def open_tar(handle: io.BufferedReader, path: str, compressed: bool) -> tarfile.TarFile:
    """`tarfile` over the open shard ``path``: a gzip stream, or a plain tar read through
    `_Clamped`, its headers parsed by `guarded_info` (this module's docstring).

    Examples
    --------
    >>> import io, tarfile, tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "s.tar.gz")
    >>> with tarfile.open(p, "w:gz") as tar:
    ...     info = tarfile.TarInfo("a.png"); info.size = 3
    ...     tar.addfile(info, io.BytesIO(b"abc"))
    >>> with open(p, "rb") as handle, open_tar(handle, p, compressed=True) as tar:
    ...     [i.name for i in tar]
    ['a.png']
    """
    size = 0 if compressed else os.fstat(handle.fileno()).st_size
    return tarfile.open(fileobj=handle if compressed else _Clamped(handle, size),
                        mode="r|gz" if compressed else "r:", tarinfo=guarded_info(path))


def guarded_info(path: str) -> type[tarfile.TarInfo]:
    """A `tarfile.TarInfo` class for the shard ``path`` that refuses, as `tarfile` parses a
    header block and before it reads what follows, an extended header over
    `MAX_EXTENDED_HEADER_BYTES` (`tarfile` would read it whole into memory), a sparse
    member (`tarfile` would read its whole map, from extension blocks or a pax 1.0 map)
    and, at the header after them, global pax headers of more than
    `MAX_GLOBAL_PAX_RECORDS` records (`tarfile` would copy them into every member).

    Examples
    --------
    >>> import tarfile
    >>> info = tarfile.TarInfo("././@LongLink")
    >>> info.type, info.size = tarfile.GNUTYPE_LONGNAME, 1 << 30
    >>> guarded_info("s.tar").frombuf(info.tobuf(tarfile.GNU_FORMAT), "utf-8", "strict")
    Traceback (most recent call last):
    ...
    normstats.errors.NormstatsError: s.tar: a GNU long name header of 1,073,741,824 bytes ...
    """
    start = [0]  # where the header block being parsed starts (frombuf is not told)

    class GuardedInfo(tarfile.TarInfo):
        __slots__ = ()

        @classmethod
        def fromtarfile(cls, tar: tarfile.TarFile) -> tarfile.TarInfo:
            start[0] = tar.fileobj.tell()
            if len(tar.pax_headers) > MAX_GLOBAL_PAX_RECORDS:
                raise NormstatsError(
                    f"pax global headers of {len(tar.pax_headers):,} records before the "
                    f"header at byte {start[0]:,} of the tar, where normstats reads at most "
                    f"{MAX_GLOBAL_PAX_RECORDS} (each member gets a copy): a damaged or "
                    "hostile shard", path=path)
            return super().fromtarfile(tar)

        @classmethod
        def frombuf(cls, buf: bytes, encoding: str, errors: str) -> tarfile.TarInfo:
            info = super().frombuf(buf, encoding, errors)
            if info.type in _EXTENDED_KINDS:
                check_extended(path, info.type, info.name, info.size, start[0])
            elif info.type == tarfile.GNUTYPE_SPARSE:
                raise _sparse_refused(path, info.name)
            return info

        def _proc_gnusparse_10(self, member: tarfile.TarInfo, pax_headers: dict[str, str],
                               tar: tarfile.TarFile) -> None:
            # `tarfile` reads a pax 1.0 sparse map number by number from the member's data,
            # as long as the map's first line says: hours and gigabytes for a forged one.
            # A private method of tarfile's, but the one place that read happens (the
            # sparse-map test of tests/sources/tar/test_headers.py fails if it moves).
            raise _sparse_refused(path, pax_headers.get("GNU.sparse.name", member.name))

    return GuardedInfo


class _Clamped:
    """A shard file for `tarfile` whose reads and seeks stop at the end of the shard."""

    def __init__(self, handle: io.BufferedReader, size: int) -> None:
        self.handle, self.size, self.name, self.mode = handle, size, handle.name, "rb"

    def read(self, count: int = -1) -> bytes:
        left = max(0, self.size - self.handle.tell())
        return self.handle.read(left if count is None or count < 0 else min(count, left))

    def seek(self, offset: int, whence: int = 0) -> int:
        if whence == 0:
            offset = min(max(0, offset), self.size)
        return self.handle.seek(offset, whence)

    def tell(self) -> int:
        return self.handle.tell()
