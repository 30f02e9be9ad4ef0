"""GDAL's external masks: a ``.msk`` file next to an image file, found and read.

GDAL keeps a mask it cannot store inside a file in a sidecar TIFF named after the file
with ``.msk`` added (``tile.tif.msk``; ``.MSK`` where that one is absent): one band that
masks every band, or one band per band, 0 where there is no data
(`normstats.sources.decoding.raster.mask_file` reads it). Under ``keep``, a file of a
folder or of a list of files is masked by its sidecar as by a mask page of its own.

A sidecar is part of its image: the folder walk never lists it as an image (its
extension is none of the image extensions), and folds its identity into the image's
change stamp (`sidecar_stamp`), which the record cache keys the image on, so editing,
adding or removing the sidecar makes the image's cached record stale. Images in tar
shards, object stores and Parquet cells have no sidecar.
"""

from __future__ import annotations

import os
import struct
from typing import NamedTuple

from normstats.errors import UnreadableInputError, input_error
from normstats.sources.decoding.file_read import read_image_file

__all__ = ["Sidecar", "SIDECAR_SUFFIXES", "read_sidecar", "sidecar_stamp"]

#: A sidecar's name is its image's name and one of these, looked for in this order.
SIDECAR_SUFFIXES = (".msk", ".MSK")


class Sidecar(NamedTuple):
    """The bytes of an image's mask file, and its name as reports give it."""

    name: str
    data: bytes


def read_sidecar(path: str, name: str, limit: int) -> Sidecar | None:
    """The mask file of the image file ``path`` (``name`` in reports), at most ``limit``
    bytes, or None when it has none.

    Raises
    ------
    UnreadableInputError
        The sidecar exists but cannot be read (not a regular file, over the limit, gone or
        not permitted: the kinds of `read_image_file`), naming the image and its sidecar.

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "t.tif")
    >>> read_sidecar(path, "t.tif", 100) is None
    True
    >>> _ = open(path + ".msk", "wb").write(b"II*\\x00")
    >>> read_sidecar(path, "t.tif", 100)
    Sidecar(name='t.tif.msk', data=b'II*\\x00')
    """
    for suffix in SIDECAR_SUFFIXES:
        try:
            os.stat(path + suffix)
        except FileNotFoundError:  # a dangling link too: GDAL does not see it either
            continue
        except OSError:
            pass  # exists but cannot be looked at: the read below says why
        shown = name + suffix
        try:
            return Sidecar(shown, read_image_file(path + suffix, shown, limit))
        except UnreadableInputError as error:
            raise input_error(error.kind, f"its mask file {shown}: {error.reason}",
                              name) from None
    return None


def sidecar_stamp(info: os.stat_result) -> int:
    """A sidecar's size, modification time, inode and status-change time as one int64,
    folded into its image's change stamp (`normstats.sources.file_list.change_stamp`):
    any write, replacement or touch of the sidecar changes it.

    Examples
    --------
    >>> import os, tempfile
    >>> path = tempfile.mkstemp()[1]
    >>> before = sidecar_stamp(os.stat(path))
    >>> _ = open(path, "wb").write(b"x")
    >>> sidecar_stamp(os.stat(path)) != before
    True
    """
    import hashlib  # here: ~3 ms of start-up that a run without sidecars never pays

    fields = struct.pack("<4q", info.st_size, _int64(info.st_mtime_ns),
                         _int64(info.st_ino), _int64(info.st_ctime_ns))
    return int.from_bytes(hashlib.blake2b(fields, digest_size=8).digest(), "little",
                          signed=True)


def _int64(value: int) -> int:
    """``value`` wrapped into the int64 range (inode numbers are unsigned 64-bit)."""
    return (value + 2**63) % 2**64 - 2**63
