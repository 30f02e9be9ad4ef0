"""Compressed files and archives, told by their first bytes rather than their names.

gzip is read where normstats reads it (tar shards, IDX files) whatever the file is
called: browsers save ``train-images-idx3-ubyte.gz`` already decompressed under its
``.gz`` name, and a gzip stream may be named ``shard.tar``. The archive and compression
formats normstats does not read (zip, xz, bzip2, zstd, 7z, rar) are named in the refusal,
with the command that turns them into what it reads: a folder, or a plain tar, which is
read in place without unpacking.
"""

from __future__ import annotations

import os

from normstats.sources.decoding.file_read import open_regular

__all__ = ["is_gzip", "unread_archive", "GZIP_MAGIC"]

GZIP_MAGIC = b"\x1f\x8b"

#: (its first bytes, what the file is, the command that decompresses it when it is one
#: compressed file, else None, the command that unpacks it into a folder when it is an
#: archive, else None)
_FORMATS = (
    ((b"PK\x03\x04", b"PK\x05\x06"), "a zip archive", None, "unzip {name} -d {stem}"),
    ((b"\xfd7zXZ\x00",), "an xz-compressed", "xz -dk {name}", None),
    ((b"BZh",), "a bzip2-compressed", "bzip2 -dk {name}", None),
    ((b"\x28\xb5\x2f\xfd",), "a zstd-compressed", "zstd -d {name}", None),
    ((b"7z\xbc\xaf\x27\x1c",), "a 7z archive", None, "7z x {name} -o{stem}"),
    ((b"Rar!\x1a\x07",), "a rar archive", None, "unrar x {name} {stem}/"),
)

#: Name endings of tars compressed by something else than gzip.
_TAR_ENDINGS = (".tar.xz", ".txz", ".tar.bz2", ".tbz2", ".tbz", ".tar.zst", ".tzst")


def is_gzip(path: str) -> bool:
    """Whether the file at ``path`` is a gzip stream (by its magic, whatever its name);
    a FIFO or device is refused unread (`open_regular`, which raises OSError).

    Examples
    --------
    >>> import gzip, os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "shard.tar")
    >>> _ = open(p, "wb").write(gzip.compress(b"data"))
    >>> is_gzip(p)
    True
    """
    with open_regular(path) as handle:
        return handle.read(2) == GZIP_MAGIC


def unread_archive(path: str, head: bytes) -> str | None:
    """What ``head``, the first bytes of the file at ``path``, says it is when that is an
    archive or compression normstats does not read, and how to get what it reads; None
    otherwise.

    Examples
    --------
    >>> zipped = unread_archive("data/train.zip", b"PK\\x03\\x04...")
    >>> zipped[:zipped.index(",")], zipped[zipped.index("("):zipped.index(")") + 1]
    ('a zip archive', '(unzip data/train.zip -d data/train)')
    >>> xz = unread_archive("shards/0.tar.xz", b"\\xfd7zXZ\\x00...")
    >>> xz[:xz.index(",")], xz[xz.index("("):]
    ('an xz-compressed tar', '(xz -dk shards/0.tar.xz gives shards/0.tar)')
    >>> unread_archive("a.png", b"\\x89PNG") is None
    True
    """
    for magics, kind, decompress, unpack in _FORMATS:
        if not head.startswith(magics):
            continue
        stem = os.path.splitext(path)[0]
        if unpack is not None:
            return (f"{kind}, which normstats does not read: unpack it "
                    f"({unpack.format(name=path, stem=stem)}) and compute the folder")
        command = decompress.format(name=path)
        if path.lower().endswith(_TAR_ENDINGS):
            plain = stem if stem.lower().endswith(".tar") else f"{stem}.tar"
            return (f"{kind} tar, which normstats does not read: decompress it into a "
                    "plain tar, which normstats reads without unpacking "
                    f"({command} gives {plain})")
        return (f"{kind} file, which normstats does not read: decompress it ({command}) "
                "and compute what it holds")
    return None
