"""Listing the members of a tar shard: header blocks read directly, else `tarfile`, guarded.

Python's `tarfile` builds a `TarInfo` per member through several layers of parsing: a
shard of 1,000 WebDataset samples (2,000 members, each with the pax record Python's
writer adds) takes ~0.1 s to list, and listing is done before any decoding starts. Most
shards are plain ustar blocks with pax records for path and size; those are read here
(a few ms a shard), with `tarfile`'s reading of every field (octal or base-256 numbers,
the ustar prefix, old-style folders, unknown member types). Anything else — pax global
headers, GNU long names, sparse files, a bad checksum, a field `tarfile` would refuse, a
cut header — is left to `tarfile` (`plain_headers` returns None), whose listing applies.

No header is trusted for a size: both ways of listing check every size they read as
`normstats.sources.tar.guards` says, before anything is read or allocated.
"""

from __future__ import annotations

import io
import os
import re
import tarfile
from dataclasses import dataclass
from typing import Any

from normstats.errors import NormstatsError
from normstats.sources.archives import unread_archive
from normstats.sources.decoding.file_read import open_regular
from normstats.sources.tar.guards import check_extended, check_size, checked_members, open_tar

__all__ = ["Header", "plain_headers", "list_members"]


@dataclass(frozen=True)
class Header:
    """What a listing needs of a plain ustar header (a `tarfile.TarInfo` stand-in)."""

    name: str
    size: int
    offset_data: int
    kind: bytes
    linkname: str = ""

    def isfile(self) -> bool:
        return self.kind in _REGULAR

    def islnk(self) -> bool:
        return self.kind == b"1"

    def issym(self) -> bool:
        return self.kind == b"2"


_REGULAR = (b"0", b"\0", b"7")
#: Types whose data `tarfile` does not skip: links, folders, devices, FIFOs (any other
#: unknown type is skipped like a file, by its size).
_NO_DATA = frozenset((b"1", b"2", b"3", b"4", b"5", b"6"))
#: Header types left to Python's tarfile: pax global headers, Solaris extended headers,
#: GNU long names and links, sparse files.
_EXTENDED = frozenset(b"gXLKS")
#: An octal field as `tarfile` reads it in its plain form; anything stranger (inner
#: spaces, signs, underscores, tabs) is left to `tarfile` itself.
_OCTAL = re.compile(rb" *([0-7]*) *(?:\0[\s\S]*)?")
#: Where `tarfile` reads a number in a header besides the size and the checksum: mode,
#: uid, gid, mtime, devices.
_NUMBERS = ((100, 108), (108, 116), (116, 124), (136, 148), (329, 337), (337, 345))
#: A pax record, as `tarfile` matches it: ``"LEN key=value\n"``.
_RECORD = re.compile(rb"(\d+) ([^=]+)=")


def plain_headers(path: str) -> list[Header] | None:
    """The headers of a plain tar read block by block, pax records for path and size
    included; None when the shard uses anything else, so `tarfile` reads it instead.

    Raises
    ------
    NormstatsError
        A member said to run past the end of the shard, or of negative size.

    Examples
    --------
    >>> import io, tarfile, tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "s.tar")
    >>> with tarfile.open(p, "w") as tar:
    ...     info = tarfile.TarInfo("000001.jpg"); info.size = 3
    ...     tar.addfile(info, io.BytesIO(b"abc"))
    >>> [(h.name, h.size, h.offset_data) for h in plain_headers(p)]
    [('000001.jpg', 3, 512)]
    """
    with open_regular(path) as handle:
        listed = _read_headers(handle, os.fstat(handle.fileno()).st_size, path)
    return None if listed is None else listed[0]


def _read_headers(handle: io.BufferedReader, size: int, path: str
                  ) -> tuple[list[Header], int] | None:
    """The headers and the offset of the end-of-archive block; None to defer."""
    headers: list[Header] = []
    pax: dict[bytes, bytes] | None = None
    offset, seen = 0, set()
    while True:
        handle.seek(offset)
        block = handle.read(512)
        if len(block) < 512:
            return None  # cut inside a header: tarfile's error names it
        if not any(block):
            return None if pax is not None else (headers, offset)  # tarfile: a cut
        fields = _fields(block, seen)
        if fields is None:
            return None
        kind, length = fields
        name, link = _names(block, kind)
        if kind == b"x":
            if pax is not None:  # two in a row: tarfile lets the first one win
                return None
            check_extended(path, kind, name, length, offset)
            check_size(path, name, length, offset + 512, size)
            pax = _pax_records(handle.read(-(-length // 512) * 512))
            if pax is None:
                return None
            offset += 512 + -(-length // 512) * 512
            continue
        if pax:
            name = pax[b"path"].rstrip(b"/") if b"path" in pax else name
            link = pax.get(b"linkpath", link)
            length = int(pax.get(b"size", length))
        if kind not in _NO_DATA:
            check_size(path, name, length, offset + 512, size)
        pax = None
        headers.append(Header(name.decode("utf-8", "surrogateescape"), length, offset + 512,
                              kind, link.decode("utf-8", "surrogateescape")))
        offset += 512 + (0 if kind in _NO_DATA else -(-length // 512) * 512)
        if offset > size:
            return None  # cut inside a member's padding: tarfile's error names it


def _fields(block: bytes, seen: set[bytes]) -> tuple[bytes, int] | None:
    """The type and size of a header whose checksum and numbers `tarfile` would accept
    as this module reads them; None to leave the header to `tarfile`. The numbers but
    the size are mostly the same from member to member: ``seen`` keeps those checked."""
    kind = block[156:157]
    others = block[100:124] + block[136:148] + block[329:345]
    if others not in seen:
        if None in [_number(block[a:b]) for a, b in _NUMBERS]:
            return None
        seen.add(others)
    size = _number(block[124:136])
    if kind[0] in _EXTENDED or size is None or \
            _number(block[148:156]) != sum(block[:148]) + 8 * 32 + sum(block[156:]):
        return None
    if kind == b"\0" and block[:100].split(b"\0", 1)[0].endswith(b"/"):
        kind = b"5"  # an old-style folder: a file entry whose name ends with a slash
    return kind, size


def _names(block: bytes, kind: bytes) -> tuple[bytes, bytes]:
    """The member name (with the ustar prefix, as tarfile builds it) and link name."""
    name = block[0:100].split(b"\0", 1)[0]
    if kind == b"5":
        name = name.rstrip(b"/")  # as tarfile names folders
    prefix = block[345:500].split(b"\0", 1)[0]
    if prefix:
        name = prefix + b"/" + name
    if kind == b"5":
        name = name.rstrip(b"/")  # again, with the prefix (tarfile does both)
    return name, block[157:257].split(b"\0", 1)[0]


def _pax_records(data: bytes) -> dict[bytes, bytes] | None:
    """``"LEN key=value\n"`` records of a pax header, matched as tarfile matches them;
    None for what this module leaves to tarfile (sparse files, a size it reads its way)."""
    records, position = {}, 0
    while (match := _RECORD.match(data, position)) is not None:
        length = int(match.group(1))
        if length == 0:
            return None
        records[match.group(2)] = data[match.end(2) + 1:match.start(1) + length - 1]
        position += length
    if any(key.startswith(b"GNU.sparse.") for key in records) or (
            b"size" in records and re.fullmatch(rb"[0-9]+", records[b"size"]) is None):
        return None
    return records


def _number(field: bytes) -> int | None:
    """A header number as tarfile reads it: base-256 (first byte 0x80, or 0xff for a
    negative number) or octal; None for an octal form left to tarfile."""
    if field[0] in (0x80, 0xFF):
        value = int.from_bytes(field[1:], "big")
        return value - 256 ** (len(field) - 1) if field[0] == 0xFF else value
    match = _OCTAL.fullmatch(field)
    if match is None:
        return None
    return int(match.group(1), 8) if match.group(1) else 0


def list_members(path: str, compressed: bool) -> tuple[list[Any], int | None]:
    """Every member of a shard (folders and links too) and, for a plain tar, the offset
    of its end-of-archive block: read block by block when `plain_headers` can, else by
    `tarfile` through the guards of this module's docstring.

    Examples
    --------
    >>> import io, tarfile, tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "s.tar.gz")
    >>> with tarfile.open(p, "w:gz") as tar:
    ...     info = tarfile.TarInfo("000001.jpg"); info.size = 3
    ...     tar.addfile(info, io.BytesIO(b"abc"))
    >>> [(i.name, i.size) for i in list_members(p, compressed=True)[0]]
    [('000001.jpg', 3)]
    """
    with open_regular(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        if not compressed:
            listed = _read_headers(handle, size, path)
            if listed is not None:
                return listed
            handle.seek(0)
        try:
            with open_tar(handle, path, compressed) as tar:
                infos = list(checked_members(tar, size, path, compressed))
                return infos, None if compressed else tar.offset
        except (tarfile.TarError, EOFError, OSError, ValueError, IndexError,
                OverflowError) as error:
            if isinstance(error, NormstatsError):
                raise
            truncated = isinstance(error, EOFError) or "unexpected end" in str(error)
            handle.seek(0)
            if not truncated and (archive := unread_archive(path, handle.read(8))):
                raise NormstatsError(f"not a tar shard but {archive}", path=path) from None
            raise NormstatsError(f"{'truncated' if truncated else 'not a readable tar shard'}"
                                 f" ({error or type(error).__name__})", path=path) from None
