"""What a TIFF holds, read from its first directory (IFD): samples, bits and their format.

Pillow opens TIFFs of the layouts it knows; any other (5 samples per pixel, 64-bit float
samples, 24-bit integers) it cannot identify, and would be called damaged. A few tags of
the first IFD say what such a file is instead. Untrusted bytes: the reader only looks
inside ``data`` (every offset is checked against its length), reads at most
`MAX_ENTRIES` directory entries and `MAX_VALUES` values of a tag, follows no chain of
directories, and gives None for anything it cannot read. `following_directory` reads
one link of the chain: where the directory after the first starts (a mask page there is
GDAL's internal mask).
"""

from __future__ import annotations

import struct

__all__ = ["tiff_layout", "tiff_tags", "following_directory", "describe_layout",
           "MAX_ENTRIES", "MAX_VALUES", "PHOTOMETRIC", "EXTRA_SAMPLES"]

#: Directory entries read at most (a baseline TIFF has about 15).
MAX_ENTRIES = 1024
#: Values read at most of one tag (one per sample: more samples say the same thing).
MAX_VALUES = 64

_SAMPLES_PER_PIXEL, _BITS_PER_SAMPLE, _SAMPLE_FORMAT = 277, 258, 339
_TAGS = (_SAMPLES_PER_PIXEL, _BITS_PER_SAMPLE, _SAMPLE_FORMAT)
#: Colour interpretation, and what each sample beyond the colour ones is (1, 2: alpha).
PHOTOMETRIC, EXTRA_SAMPLES = 262, 338
_SIZE_TAGS = {256, 257}  # ImageWidth, ImageLength
#: TIFF field types of integer values → (struct code, size).
_TYPES = {1: ("B", 1), 3: ("H", 2), 4: ("I", 4), 16: ("Q", 8)}
#: Per signature: byte order, where the first directory's offset is, the struct codes of
#: an offset and of an entry count, and an entry's size (classic TIFF, then BigTIFF).
_CHAIN_LAYOUTS = {b"II*\x00": ("<", 4, "I", "H", 12), b"MM\x00*": (">", 4, "I", "H", 12),
                  b"II+\x00": ("<", 8, "Q", "Q", 20), b"MM\x00+": (">", 8, "Q", "Q", 20)}
_FORMATS = {1: "unsigned integer", 2: "signed integer", 3: "floating point",
            4: "undefined", 5: "complex integer", 6: "complex floating point"}


def tiff_layout(data: bytes) -> tuple[int, tuple[int, ...], tuple[int, ...]] | None:
    """(samples per pixel, bits per sample, sample formats) of a classic TIFF's first
    IFD, with the TIFF defaults for missing tags (1, (1,), (1,)); None if unreadable.

    Examples
    --------
    >>> import io
    >>> from PIL import Image
    >>> buffer = io.BytesIO(); Image.new("RGB", (2, 2)).save(buffer, format="TIFF")
    >>> tiff_layout(buffer.getvalue())
    (3, (8, 8, 8), (1,))
    >>> tiff_layout(b"II*\\x00\\xff\\xff\\xff\\xff") is None  # the directory is past the end
    True
    """
    tags = tiff_tags(data, _TAGS)
    if tags is None:
        return None
    samples = tags.get(_SAMPLES_PER_PIXEL, (1,))[0]
    return samples, tags.get(_BITS_PER_SAMPLE, (1,)), tags.get(_SAMPLE_FORMAT, (1,))


def tiff_tags(data: bytes, wanted: tuple[int, ...]) -> dict[int, tuple[int, ...]] | None:
    """The first `MAX_VALUES` integer values of the ``wanted`` tags of a classic TIFF's
    first IFD (tags it lacks are absent); None if the directory is unreadable, one of them
    holds no integers, or it gives no image size.

    Examples
    --------
    >>> import io
    >>> from PIL import Image
    >>> buffer = io.BytesIO(); Image.new("RGB", (2, 2)).save(buffer, format="TIFF")
    >>> tiff_tags(buffer.getvalue(), (PHOTOMETRIC, EXTRA_SAMPLES))
    {262: (2,)}
    """
    order = {b"II*\x00": "<", b"MM\x00*": ">"}.get(data[:4])
    if order is None or len(data) < 8:
        return None
    start = struct.unpack_from(order + "I", data, 4)[0]
    if start + 2 > len(data):
        return None
    count = struct.unpack_from(order + "H", data, start)[0]
    if count > MAX_ENTRIES or start + 2 + 12 * count > len(data):
        return None
    tags: dict[int, tuple[int, ...]] = {}
    seen: set[int] = set()
    for entry in range(start + 2, start + 2 + 12 * count, 12):
        tag = struct.unpack_from(order + "H", data, entry)[0]
        if tag in wanted:
            values = _tag_values(data, order, entry)
            if not values:
                return None
            tags[tag] = values
        seen.add(tag)
    if not _SIZE_TAGS <= seen:  # no image size: not a directory to describe
        return None
    return tags


def following_directory(data: bytes) -> int | None:
    """The offset of the directory after a TIFF's (or BigTIFF's) first: 0 when the first
    is the last; None when the first directory is unreadable or not inside ``data``.

    Examples
    --------
    >>> import io, numpy as np, tifffile
    >>> buffer = io.BytesIO(); tifffile.imwrite(buffer, np.zeros((2, 2), np.uint8))
    >>> following_directory(buffer.getvalue())
    0
    >>> with tifffile.TiffWriter(buffer := io.BytesIO()) as writer:
    ...     writer.write(np.zeros((2, 2), np.uint8)); writer.write(np.ones((2, 2), bool))
    >>> following_directory(buffer.getvalue()) > 0
    True
    >>> following_directory(b"II*\\x00\\xff\\xff\\xff\\xff") is None
    True
    """
    layout = _CHAIN_LAYOUTS.get(data[:4])
    if layout is None:
        return None
    order, first_at, offset, count_code, entry_size = layout
    offset_size, count_size = struct.calcsize(offset), struct.calcsize(count_code)
    if len(data) < first_at + offset_size:
        return None
    start = struct.unpack_from(order + offset, data, first_at)[0]
    if start < 8 or start + count_size > len(data):
        return None
    count = struct.unpack_from(order + count_code, data, start)[0]
    link = start + count_size + entry_size * count
    if count > MAX_ENTRIES or link + offset_size > len(data):
        return None
    return struct.unpack_from(order + offset, data, link)[0]


def _tag_values(data: bytes, order: str, entry: int) -> tuple[int, ...] | None:
    """The first `MAX_VALUES` integer values of the directory entry at ``entry``."""
    kind, count = struct.unpack_from(order + "HI", data, entry + 2)
    if kind not in _TYPES or count == 0:
        return None
    code, size = _TYPES[kind]
    where = entry + 8  # values of up to 4 bytes sit in the entry itself
    if count * size > 4:
        where = struct.unpack_from(order + "I", data, entry + 8)[0]
    count = min(count, MAX_VALUES)
    if where + count * size > len(data):
        return None
    return struct.unpack_from(f"{order}{count}{code}", data, where)


def describe_layout(layout: tuple[int, tuple[int, ...], tuple[int, ...]]) -> str:
    """A TIFF layout in words: ``5 samples per pixel, 8-bit unsigned integer``.

    Examples
    --------
    >>> describe_layout((1, (64,), (3,)))
    '1 sample per pixel, 64-bit floating point'
    >>> describe_layout((2, (8, 16), (1, 1)))
    '2 samples per pixel, 8-bit and 16-bit unsigned integer'
    """
    samples, bits, formats = layout
    depth = " and ".join(f"{b}-bit" for b in dict.fromkeys(bits))
    kinds = " and ".join(_FORMATS.get(f, f"sample format {f}") for f in dict.fromkeys(formats))
    return f"{samples} sample{'s' if samples != 1 else ''} per pixel, {depth} {kinds}"
