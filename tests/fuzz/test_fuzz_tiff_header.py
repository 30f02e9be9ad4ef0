"""Fuzz target: the TIFF directory reader (normstats/sources/decoding/tiff_header.py) and
the raster path behind it (normstats/sources/decoding/raster.py).

When Pillow cannot identify a TIFF, the reader looks at the first IFD of the untrusted
bytes (its offset, entry count, and the offsets and counts of three tags) to say what
the file holds. On TIFFs Pillow writes (every mode it writes, raw and compressed) it must
read the samples and bits Pillow reports; on hand-written layouts Pillow cannot open, the
ones written; and on any of them damaged (bit flips, cuts, offsets and counts set near
the file's end or 2**32) it must answer a layout within its bounds or None, never raise;
the reason and the whole decode stay one line or an `UnreadableInputError`.

Rasters as tifffile writes them (any sample type, 2 to 13 bands, planar or interleaved,
tiled or striped, each codec, BigTIFF, nodata tags good and bad, GDAL's mask pages after
the image or after an overview), damaged the same way, decode under ``keep`` to pixels
within the pixel and byte limits or are refused in one line, and tifffile is never asked
to allocate more than those limits allow (the declared size is checked before it reads a
byte of pixel data). So do the same rasters beside a damaged ``.msk`` sidecar: a mask is a
mask of the image's size, or a reason.
"""

from __future__ import annotations

import io
import math
import struct
from unittest import mock

import numpy as np
import pytest
import tifffile
from fuzz.fuzzing import fuzz_settings, regression_inputs
from hypothesis import event, given
from hypothesis import strategies as st
from PIL import Image
from raster_files import mask_page, raster_bytes
from sources.decoding.test_decode import tiff_bytes

from normstats.errors import UnreadableInputError
from normstats.sources.decoding.decode import decode_bytes
from normstats.sources.decoding.file_read import BYTES_PER_PIXEL
from normstats.sources.decoding.pillow_pixels import unidentified_reason
from normstats.sources.decoding.policy import DecodePolicy
from normstats.sources.decoding.sidecar import Sidecar
from normstats.sources.decoding.tiff_header import MAX_VALUES, tiff_layout

MODES = ("1", "L", "LA", "RGB", "RGBA", "CMYK", "I;16", "F")
COMPRESSIONS = (None, "tiff_deflate", "tiff_lzw", "packbits")
#: Numbers worth writing over an offset or a count: around the file's size and 2**32.
EDGES = [0, 1, 7, 8, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFF0, 0xFFFFFFFF]


def pillow_tiff(mode: str, compression: str | None) -> bytes:
    """A 3x2 TIFF as Pillow writes it (little-endian; big-endian ones are hand-written)."""
    buffer = io.BytesIO()
    options = {"compression": compression} if compression else {}
    Image.new(mode, (3, 2)).save(buffer, format="TIFF", **options)
    return buffer.getvalue()


def check(data: bytes) -> str:
    """The reader's answer is within its bounds; the reason and the decode stay in words."""
    layout = tiff_layout(data)
    if layout is not None:
        samples, bits, formats = layout
        assert isinstance(samples, int) and 0 <= samples < 2**32
        assert 1 <= len(bits) <= MAX_VALUES and 1 <= len(formats) <= MAX_VALUES
    reason = unidentified_reason(data)
    assert reason and "\n" not in reason
    try:
        decode_bytes(data, "x.tif", DecodePolicy("keep", max_pixels=10_000))
    except UnreadableInputError as error:
        assert "\n" not in str(error)
    return "read" if layout is not None else "none"


def test_pillows_own_tiffs_read_as_pillow_reports_them():
    for mode in MODES:
        for compression in COMPRESSIONS:
            if mode == "1" and compression == "packbits":
                continue
            data = pillow_tiff(mode, compression)
            image = Image.open(io.BytesIO(data))
            samples, bits, _ = tiff_layout(data)
            assert samples == image.tag_v2.get(277, 1), (mode, compression)
            assert bits == tuple(image.tag_v2.get(258, (1,))), (mode, compression)


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("samples", [1, 2, 5, 7, 70])
def test_hand_written_layouts_read_as_written(order, samples):
    for bits, sample_format in ((8, 1), (16, 2), (24, 1), (64, 3)):
        layout = tiff_layout(tiff_bytes(2, 2, samples, bits, sample_format, order))
        kept = min(samples, MAX_VALUES)
        assert layout == (samples, (bits,) * kept, (sample_format,) * kept)


seeds = st.one_of(
    st.tuples(st.sampled_from(MODES), st.sampled_from(COMPRESSIONS)).filter(
        lambda m: m != ("1", "packbits")).map(lambda m: pillow_tiff(m[0], m[1])),
    st.tuples(st.integers(1, 9), st.sampled_from([1, 8, 12, 16, 24, 32, 64]),
              st.integers(0, 7), st.sampled_from("<>")).map(
        lambda t: tiff_bytes(2, 2, t[0], t[1], t[2], t[3])))
edits = st.lists(st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 400), st.integers(0, 7)),
    st.tuples(st.just("long"), st.integers(0, 400), st.sampled_from(EDGES)),
    st.tuples(st.just("cut"), st.integers(0, 400), st.just(0))), max_size=4)


def edited(data: bytes, changes: list) -> bytes:
    raw = bytearray(data)
    order = "<" if raw[:2] == b"II" else ">"
    for kind, at, value in changes:
        if not raw:
            break
        at %= len(raw)
        if kind == "flip":
            raw[at] ^= 1 << value
        elif kind == "long" and at + 4 <= len(raw):
            raw[at:at + 4] = struct.pack(order + "I", value)
        elif kind == "cut":
            del raw[at:]
    return bytes(raw)


@fuzz_settings(300)
@given(seeds, edits)
def test_damaged_tiffs_give_a_bounded_layout_or_none(data, changes):
    event(check(edited(data, changes)))


@fuzz_settings(100)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_after_the_signature(tail):
    for signature in (b"II*\x00", b"MM\x00*"):
        check(signature + tail)


#: The raster path's limits in the fuzz cases: a few thousand pixels, 8 bytes each.
RASTER_POLICY = DecodePolicy("keep", max_pixels=4096)

#: Masks of a 16x16 raster: none, of one band (checkered), of one band per band.
MASKS = (None, np.indices((16, 16)).sum(axis=0) % 3 > 0, "per band")

raster_seeds = st.tuples(
    st.sampled_from(("uint8", "uint16", "int16", "int32", "float32", "float64")),
    st.sampled_from((2, 5, 13)), st.booleans(), st.booleans(),
    st.sampled_from((None, "deflate", "lzw", "zstd")), st.booleans(),
    st.sampled_from((None, "0", "nan", "x")), st.sampled_from(MASKS), st.booleans()).map(
    lambda t: raster_bytes(np.arange(16 * 16 * t[1]).reshape(16, 16, t[1]).astype(t[0]),
                           planar=t[2], tiled=t[3], compression=t[4], bigtiff=t[5],
                           nodata=t[6], valid=_mask_of(t[7], t[1]), overviews=t[8],
                           mask_bits=8 if t[8] else 1))


def _mask_of(mask, bands: int) -> np.ndarray | None:
    if isinstance(mask, str):
        return np.arange(16 * 16 * bands).reshape(16, 16, bands) % 5 > 0
    return mask


def sidecar_bytes(bands: int, bits: int) -> bytes:
    """A ``.msk`` sidecar of a 16x16 raster: one band, or one per band."""
    valid = np.arange(16 * 16 * bands).reshape(16, 16, bands) % 7 > 0
    data, options = mask_page(valid[:, :, 0] if bands == 1 else valid, bits, subfiletype=0)
    buffer = io.BytesIO()
    tifffile.imwrite(buffer, data, **options)
    return buffer.getvalue()


def check_raster(data: bytes, sidecar: bytes | None = None) -> str:
    """A damaged raster decodes to pixels within the limits, or is refused in one line;
    tifffile allocates nothing larger than the limits allow; a mask (its own, or its
    ``sidecar``'s) fits the pixels."""
    budget = BYTES_PER_PIXEL * RASTER_POLICY.max_pixels
    allocate = tifffile.TiffPage.asarray

    def guarded(page, *args, **kwargs):
        declared = math.prod(page.shape) * np.dtype(page.dtype).itemsize
        if declared > budget:  # pytest.fail: a BaseException, which no decoder catches
            pytest.fail(f"tifffile asked to allocate {declared:,} bytes")
        return allocate(page, *args, **kwargs)

    with mock.patch.object(tifffile.TiffPage, "asarray", guarded):
        try:
            image = decode_bytes(data, "r.tif", RASTER_POLICY, sidecar=None if sidecar is None
                                 else Sidecar("r.tif.msk", sidecar))
        except UnreadableInputError as error:
            assert "\n" not in str(error)
            return "refused"
    height, width, bands = image.pixels.shape
    assert height * width <= RASTER_POLICY.max_pixels and image.pixels.nbytes <= budget
    assert image.pixels.dtype.kind in "iuf" and len(image.channel_names) == bands
    if image.mask is not None:
        assert image.mask.dtype == bool and image.mask.shape[:2] == (height, width)
        assert image.mask.shape[2] in (1, bands)
        return "read, masked"
    return "read"


def resized(data: bytes, width: int, height: int) -> bytes:
    """The raster with the ImageWidth and ImageLength of its first directory rewritten (as
    LONG values; BigTIFF entries too): the size tifffile would allocate for."""
    raw = bytearray(data)
    order = "<" if raw[:2] == b"II" else ">"
    big = raw[2:4] in (b"+\x00", b"\x00+")
    start = struct.unpack_from(order + ("Q" if big else "I"), raw, 8 if big else 4)[0]
    count = struct.unpack_from(order + ("Q" if big else "H"), raw, start)[0]
    size, first = (20, start + 8) if big else (12, start + 2)
    for entry in range(first, first + size * min(count, 64), size):
        if entry + size > len(raw):
            break
        tag = struct.unpack_from(order + "H", raw, entry)[0]
        if tag in (256, 257):
            value = width if tag == 256 else height
            struct.pack_into(order + "HQQ" if big else order + "HII", raw, entry + 2, 4, 1,
                             value)
    return bytes(raw)


@fuzz_settings(200)
@given(raster_seeds, edits, st.none() | st.tuples(st.sampled_from(EDGES + [64, 4096, 10**5]),
                                                  st.sampled_from(EDGES + [64, 4096, 10**5])))
def test_damaged_rasters_decode_within_the_limits_or_are_refused(data, changes, size):
    if size is not None:
        data = resized(data, *size)
    event(check_raster(edited(data, changes)))


@fuzz_settings(150)
@given(st.sampled_from((2, 5)), st.sampled_from((1, 8)), st.booleans(), edits)
def test_damaged_sidecars_give_a_mask_that_fits_or_a_reason(bands, bits, one_band, changes):
    raster = raster_bytes(np.arange(16 * 16 * bands).reshape(16, 16, bands).astype(np.uint16))
    event(check_raster(raster, edited(sidecar_bytes(1 if one_band else bands, bits), changes)))


@pytest.mark.parametrize("path", regression_inputs("tiff_header"), ids=lambda p: p.name)
def test_saved_regressions(path):
    check(path.read_bytes())
    check_raster(path.read_bytes())
