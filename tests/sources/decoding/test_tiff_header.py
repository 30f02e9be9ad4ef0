"""`tiff_layout` on classic TIFF directories built byte by byte here: what it reads, where
it stops reading (every length up to the last byte it needs), and how it words a layout;
`following_directory` on files of one and two pages in both byte orders and BigTIFF."""

from __future__ import annotations

import io
import struct

import numpy as np
import pytest
import tifffile

from normstats.sources.decoding.tiff_header import (
    MAX_ENTRIES,
    MAX_VALUES,
    describe_layout,
    following_directory,
    tiff_layout,
)

WIDTH, HEIGHT, BITS, SAMPLES, FORMAT = 256, 257, 258, 277, 339
CODES = {1: "B", 3: "H", 4: "I", 16: "Q"}


def tiff(entries: list[tuple[int, int, list[int]]], order: str = "<") -> tuple[bytes, int]:
    """A TIFF of one directory at offset 8, values longer than 4 bytes after it, and the
    number of bytes a reader needs: the directory and the out-of-line values it reads."""
    ifd_end = 8 + 2 + 12 * len(entries) + 4
    body, extra, needed = b"", b"", 8 + 2 + 12 * len(entries)
    for tag, kind, values in entries:
        packed = struct.pack(f"{order}{len(values)}{CODES[kind]}", *values)
        if len(packed) > 4:
            field = struct.pack(order + "I", ifd_end + len(extra))
            read = min(len(values), MAX_VALUES) * len(packed) // len(values)  # 64 at most
            needed = max(needed, ifd_end + len(extra) + read)
            extra += packed
        else:
            field = packed.ljust(4, b"\0")
        body += struct.pack(order + "HHI", tag, kind, len(values)) + field
    mark = b"II*\x00" if order == "<" else b"MM\x00*"
    data = (mark + struct.pack(order + "I", 8) + struct.pack(order + "H", len(entries)) + body
            + struct.pack(order + "I", 0) + extra)
    return data, needed


SIZE = [(WIDTH, 3, [5]), (HEIGHT, 4, [7])]


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("entries, layout", [
    (SIZE, (1, (1,), (1,))),  # the TIFF defaults
    (SIZE + [(BITS, 3, [16, 16]), (SAMPLES, 3, [2])], (2, (16, 16), (1,))),   # inline values
    (SIZE + [(BITS, 3, [8, 8, 8]), (SAMPLES, 3, [3]), (FORMAT, 3, [2, 2, 2])],
     (3, (8, 8, 8), (2, 2, 2))),                                            # out of line
    (SIZE + [(BITS, 16, [64]), (FORMAT, 1, [3])], (1, (64,), (3,))),        # LONG8 and BYTE
    (SIZE + [(SAMPLES, 4, [70]), (BITS, 3, list(range(70)))],
     (70, tuple(range(MAX_VALUES)), (1,))),                                 # 64 values read
])
def test_a_directory_is_read_and_every_shorter_prefix_is_not(order, entries, layout):
    data, needed = tiff(entries, order)
    assert tiff_layout(data) == layout
    assert tiff_layout(data[:needed]) == layout
    for length in range(needed):
        assert tiff_layout(data[:length]) is None, length


@pytest.mark.parametrize("entries", [
    [(WIDTH, 3, [5])],                                 # no height: not an image directory
    [(HEIGHT, 3, [5]), (BITS, 3, [8])],
    SIZE + [(BITS, 3, [])],                            # a wanted tag without values
])
def test_directories_that_say_nothing_readable_are_none(entries):
    assert tiff_layout(tiff(entries)[0]) is None


def test_a_wanted_tag_of_a_type_it_cannot_read_is_none():
    data = bytearray(tiff(SIZE + [(BITS, 3, [8])])[0])
    struct.pack_into("<H", data, 8 + 2 + 24 + 2, 5)  # RATIONAL
    assert tiff_layout(bytes(data)) is None
    struct.pack_into("<HI", data, 8 + 2 + 24 + 2, 3, 2**31 + 5)  # a count past int32
    assert tiff_layout(bytes(data)) is None


@pytest.mark.parametrize("offset", [2**31, 2**32 - 1, 2**32 - 8])
def test_a_directory_offset_past_the_data_is_none(offset):
    data = bytearray(tiff(SIZE)[0])
    struct.pack_into("<I", data, 4, offset)
    assert tiff_layout(bytes(data)) is None
    values = bytearray(tiff(SIZE + [(BITS, 3, [8, 8, 8])])[0])
    struct.pack_into("<I", values, 8 + 2 + 24 + 8, offset)  # the values' offset
    assert tiff_layout(bytes(values)) is None


def test_at_most_max_entries_are_read():
    filler = [(1000 + i, 3, [0]) for i in range(MAX_ENTRIES - 2)]
    data, _ = tiff(SIZE + filler)
    assert tiff_layout(data) == (1, (1,), (1,))
    assert tiff_layout(tiff(SIZE + filler + [(999, 3, [0])])[0]) is None


@pytest.mark.parametrize("layout, words", [
    ((1, (64,), (3,)), "1 sample per pixel, 64-bit floating point"),
    ((5, (8, 8, 8, 8, 8), (1,)), "5 samples per pixel, 8-bit unsigned integer"),
    ((2, (8, 16), (2, 7)), "2 samples per pixel, 8-bit and 16-bit signed integer and sample "
                           "format 7"),
    ((3, (24, 24, 24), (4, 5, 6)), "3 samples per pixel, 24-bit undefined and complex integer "
                                   "and complex floating point"),
])
def test_layouts_in_words(layout, words):
    assert describe_layout(layout) == words


@pytest.mark.parametrize("byteorder", ["<", ">"])
@pytest.mark.parametrize("bigtiff", [False, True])
def test_following_directory_is_where_tifffile_finds_the_second_page(byteorder, bigtiff):
    for pages in (1, 2):
        buffer = io.BytesIO()
        with tifffile.TiffWriter(buffer, bigtiff=bigtiff, byteorder=byteorder) as writer:
            for _ in range(pages):
                writer.write(np.zeros((3, 4, 2), np.uint16), photometric="minisblack",
                             planarconfig="contig")
        data = buffer.getvalue()
        with tifffile.TiffFile(io.BytesIO(data)) as tiff:
            expected = tiff.pages[1].offset if pages == 2 else 0
        assert following_directory(data) == expected
        for cut in range(len(data) if pages == 1 else 0):  # every shorter file: None or 0
            assert following_directory(data[:cut]) in (None, 0)
    assert following_directory(b"GIF89a") is None
