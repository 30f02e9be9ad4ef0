"""The raster path: TIFFs of any band count, sample type and layout read with tifffile,
exactly; nodata tags, band names, and sizes refused before anything is allocated."""

from __future__ import annotations

import io

import numpy as np
import pytest
import tifffile
from PIL import Image
from raster_files import COMPRESSIONS, DTYPES, LAYOUTS, mask_page, random_raster, raster_bytes

from normstats.errors import RefusedInputError, TransientInputError, UnreadableInputError
from normstats.sources.decoding import pillow_pixels
from normstats.sources.decoding.decode import decode_bytes
from normstats.sources.decoding.policy import DecodePolicy
from normstats.sources.decoding.raster import band_names, needs_raster_path, parse_nodata_tag

KEEP = DecodePolicy("keep")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bands", [1, 2, 3, 5, 13, 20])
def test_every_dtype_band_count_layout_and_codec_reads_exactly(rng, dtype, bands):
    for index, (layout, (planar, tiled)) in enumerate(LAYOUTS.items()):
        compression = COMPRESSIONS[(index + bands) % len(COMPRESSIONS)]
        pixels = random_raster(rng, (19, 37, bands), dtype)
        data = raster_bytes(pixels, planar=planar, tiled=tiled, compression=compression)
        assert needs_raster_path(data) == (bands > 1 or dtype != "uint8"), layout
        image = decode_bytes(data, "x.tif", KEEP)
        assert image.pixels.dtype == pixels.dtype and image.pixels.shape == pixels.shape
        np.testing.assert_array_equal(image.pixels, pixels, err_msg=f"{layout} {compression}")
        assert image.raw_units == (bands > 4 or dtype != "uint8")


def test_every_codec_on_a_13_band_uint16_tile(rng):
    pixels = random_raster(rng, (64, 64, 13), "uint16")
    for compression in COMPRESSIONS:
        for bigtiff in (False, True):
            data = raster_bytes(pixels, compression=compression, tiled=True, bigtiff=bigtiff)
            assert data[:4] == (b"II+\x00" if bigtiff else b"II*\x00")
            np.testing.assert_array_equal(decode_bytes(data, "t.tif", KEEP).pixels, pixels)


def test_only_the_first_page_of_a_multi_page_file_is_read(rng):
    first, second = (random_raster(rng, (5, 6, 7), "int16") for _ in range(2))
    buffer = io.BytesIO()
    with tifffile.TiffWriter(buffer) as writer:
        for page in (first, second):
            writer.write(page, photometric="minisblack", planarconfig="contig")
    np.testing.assert_array_equal(decode_bytes(buffer.getvalue(), "p.tif", KEEP).pixels, first)


def test_an_array_tifffile_spread_over_pages_is_skipped_not_read_as_its_first_page(rng):
    """tifffile.imwrite of a (16, 16, 13) uint16 array, as most Python code writes a
    13-band tile, stores 16 pages of 16x13 grey: the first page alone was read, 1 band of
    208 pixels instead of 13 bands of 256, without a word. It is now skipped, naming how to
    write it; written into one page, it reads exactly."""
    for dtype in ("uint16", "uint8"):  # 8-bit grey pages were Pillow's, which read page 1
        tile = random_raster(rng, (16, 16, 13), dtype)
        spread = io.BytesIO()
        tifffile.imwrite(spread, tile)
        with pytest.raises(UnreadableInputError, match=r"one array of shape \(16, 16, 13\) "
                           r"that tifffile stored as pages of \(16, 13\).*planarconfig="):
            decode_bytes(spread.getvalue(), "t.tif", KEEP)
        one_page = io.BytesIO()
        tifffile.imwrite(one_page, tile, photometric="minisblack", planarconfig="contig")
        np.testing.assert_array_equal(decode_bytes(one_page.getvalue(), "t.tif", KEEP).pixels,
                                      tile)
    pages = io.BytesIO()  # grey pages of their own: the first is read, as Pillow reads it
    first = random_raster(rng, (6, 5, 1), "uint8")[..., 0]
    with tifffile.TiffWriter(pages) as writer:
        for page in (first, first // 2):
            writer.write(page)
    image = decode_bytes(pages.getvalue(), "p.tif", KEEP)
    assert image.channel_names == ("L",)
    np.testing.assert_array_equal(image.pixels[..., 0], first)
    np.testing.assert_array_equal(image.pixels[..., 0], np.asarray(Image.open(pages)))


def test_8_bit_photographs_stay_with_pillow_under_every_mode(rng):
    """The statistics of 8-bit RGB (and grey, RGBA) TIFFs do not change: Pillow reads them."""
    for pixels, photometric in ((rng.integers(0, 256, (6, 5, 3), np.uint8), "rgb"),
                                (rng.integers(0, 256, (6, 5, 1), np.uint8), "minisblack")):
        for compression in (None, "deflate", "lzw"):
            data = raster_bytes(pixels, photometric=photometric, compression=compression)
            assert not needs_raster_path(data)
            for mode in ("RGB", "L", "keep"):
                decoded = decode_bytes(data, "p.tif", DecodePolicy(mode))
                pillow = Image.open(io.BytesIO(data))
                expected = np.asarray(pillow if mode == "keep" else pillow.convert(mode))
                np.testing.assert_array_equal(decoded.pixels, expected.reshape(
                    decoded.pixels.shape))
                assert not decoded.raster and decoded.nodata is None


def test_extra_bands_pillow_would_drop_take_the_raster_path(rng):
    """Pillow reads grey with unspecified extra samples as L and RGB + one as RGB, dropping
    bands silently; under keep those go to tifffile, with every band."""
    for pixels, photometric in ((rng.integers(0, 256, (4, 5, 2), np.uint8), "minisblack"),
                                (rng.integers(0, 256, (4, 5, 4), np.uint8), "rgb")):
        buffer = io.BytesIO()
        tifffile.imwrite(buffer, pixels, photometric=photometric, planarconfig="contig",
                         extrasamples=[0])  # unspecified, not alpha
        data = buffer.getvalue()
        assert np.asarray(Image.open(io.BytesIO(data))).size < pixels.size  # the premise
        assert needs_raster_path(data)
        np.testing.assert_array_equal(decode_bytes(data, "x.tif", KEEP).pixels, pixels)
    alpha = rng.integers(0, 256, (4, 5, 4), np.uint8)
    data = raster_bytes(alpha, photometric="rgb")  # tifffile marks the fourth one alpha
    assert not needs_raster_path(data) and decode_bytes(data, "a.tif", KEEP).channel_names == (
        "R", "G", "B", "A")


def test_colour_modes_refuse_rasters_pillow_cannot_open(rng):
    data = raster_bytes(random_raster(rng, (4, 4, 13), "uint16"))
    with pytest.raises(UnreadableInputError) as refused:
        decode_bytes(data, "s2.tif", DecodePolicy("RGB"))
    assert str(refused.value) == (
        "s2.tif: TIFF raster (13 samples per pixel, 16-bit unsigned integer): the RGB "
        "policy converts colour images and would drop bands or clip them; use --mode keep "
        "to compute its bands")


def test_nodata_comes_from_the_tag_or_the_policy(rng):
    pixels = random_raster(rng, (4, 4, 3), "int16")
    for tag, expected in (("-9999", -9999.0), ("-9999\x00", -9999.0), (" 0 ", 0.0),
                          ("nan", "nan"), ("-3.4028234663852886e+38", -3.4028234663852886e38)):
        image = decode_bytes(raster_bytes(pixels, nodata=tag), "t.tif", KEEP)
        assert str(image.nodata) == str(expected)
    tagged = raster_bytes(pixels, nodata=-9999)
    assert decode_bytes(tagged, "t.tif", DecodePolicy("keep", nodata=5)).nodata == 5.0
    assert decode_bytes(raster_bytes(pixels), "t.tif", KEEP).nodata is None
    with pytest.raises(UnreadableInputError, match="t.tif: its GDAL_NODATA tag 'none' is not a "
                                                   "number; give --nodata"):
        decode_bytes(raster_bytes(pixels, nodata="none"), "t.tif", KEEP)


def test_a_grey_8_bit_geotiff_read_by_pillow_keeps_its_nodata_tag_under_keep_only(rng):
    pixels = rng.integers(0, 256, (4, 4, 1), np.uint8)
    data = raster_bytes(pixels, nodata=0)
    assert not needs_raster_path(data)
    assert decode_bytes(data, "g.tif", KEEP).nodata == 0.0
    assert decode_bytes(data, "g.tif", DecodePolicy("L")).nodata is None  # what a loader sees
    assert decode_bytes(data, "g.tif", DecodePolicy("L", nodata=3)).nodata == 3.0


def test_band_names_come_from_gdal_descriptions(rng):
    names = tuple(f"B{i:02d}" for i in range(1, 13)) + ("B8A",)
    data = raster_bytes(random_raster(rng, (3, 3, 13), "uint16"), names=names)
    assert decode_bytes(data, "s2.tif", KEEP).channel_names == names
    unnamed = raster_bytes(random_raster(rng, (3, 3, 13), "uint16"))
    assert decode_bytes(unnamed, "s2.tif", KEEP).channel_names == tuple(
        f"b{i}" for i in range(1, 14))
    rgb16 = raster_bytes(random_raster(rng, (3, 3, 3), "uint16"), photometric="rgb")
    assert decode_bytes(rgb16, "rgb.tif", KEEP).channel_names == ("R", "G", "B")
    escaped = '<Item name="DESCRIPTION" sample="0" role="description">a &amp; b</Item>'
    assert band_names(escaped, 1, 1) == ("a & b",)
    assert band_names('<Item name="DESCRIPTION" sample="0" role="description">x</Item>', 2,
                      1) == ("b1", "b2")  # one band undescribed: GDAL's numbering for all


def test_declared_sizes_are_refused_before_tifffile_allocates(rng, monkeypatch):
    """A tiny file can declare any size; the directory is checked before `asarray`."""
    def never(*args, **kwargs):  # pytest.fail: a BaseException, which no decoder catches
        pytest.fail("tifffile allocated the pixels of a refused raster")

    huge = _with_size(raster_bytes(random_raster(rng, (16, 16, 13), "uint16"),
                                   compression="deflate", tiled=True), 60_000, 60_000)
    monkeypatch.setattr(tifffile.TiffPage, "asarray", never)
    with pytest.raises(RefusedInputError, match="decompression bomb: 60000x60000"):
        decode_bytes(huge, "big.tif", KEEP)
    with pytest.raises(RefusedInputError, match="13 bands of 60000x60000 uint16 = "
                                                "93,600,000,000 bytes exceed the limit"):
        decode_bytes(huge, "big.tif", DecodePolicy("keep", max_pixels=2**32))
    monkeypatch.setattr(pillow_pixels, "machine_memory", lambda: 10**9)
    with pytest.raises(TransientInputError, match="out of memory"):
        decode_bytes(huge, "big.tif", DecodePolicy("keep", max_pixels=2**40))


def _with_size(data: bytes, width: int, height: int) -> bytes:
    """The TIFF with its ImageWidth and ImageLength tags (LONG or SHORT) rewritten."""
    raw = bytearray(data)
    start = int.from_bytes(raw[4:8], "little")
    for entry in range(start + 2, start + 2 + 12 * int.from_bytes(raw[start:start + 2],
                                                                  "little"), 12):
        tag, kind = (int.from_bytes(raw[entry + k:entry + k + 2], "little") for k in (0, 2))
        if tag in (256, 257):
            raw[entry + 2:entry + 4] = (4).to_bytes(2, "little")  # LONG
            value = width if tag == 256 else height
            raw[entry + 8:entry + 12] = value.to_bytes(4, "little")
    return bytes(raw)


def test_strips_outside_the_file_or_missing_are_damage_not_zeros(rng):
    pixels = random_raster(rng, (8, 8, 5), "uint16")
    data = raster_bytes(pixels)
    for cut in (len(data) - 1, len(data) // 2):
        with pytest.raises(UnreadableInputError, match="truncated"):
            decode_bytes(data[:cut], "cut.tif", KEEP)


def test_float_rasters_with_infinity_are_skipped_with_a_reason(rng):
    pixels = random_raster(rng, (4, 4, 2), "float32")
    pixels[1, 1, 1] = np.inf
    with pytest.raises(UnreadableInputError, match="contains infinite values"):
        decode_bytes(raster_bytes(pixels), "inf.tif", KEEP)


def test_sample_types_without_statistics_are_named(rng):
    data = raster_bytes(rng.integers(0, 9, (3, 3, 2)).astype(np.int64))
    with pytest.raises(UnreadableInputError, match="samples of type int64 have no statistics"):
        decode_bytes(data, "i64.tif", KEEP)


def test_parse_nodata_tag_reads_bytes_as_gdal_writes_them():
    assert parse_nodata_tag(b"-32768\x00", "t.tif") == -32768.0


def _valid(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """A random bool mask (True: data) with a hole in its corner."""
    valid = rng.random(shape) < 0.7
    valid[:3, :3] = False
    return valid


@pytest.mark.parametrize("bits", [1, 8])
def test_a_mask_page_marks_the_pixels_it_hides_in_every_band(rng, bits):
    """GDAL_TIFF_INTERNAL_MASK=YES: a page of NewSubfileType 4 after the image (or after
    its overviews), 1-bit or 8-bit, in every layout, codec and BigTIFF."""
    for index, (layout, (planar, tiled)) in enumerate(LAYOUTS.items()):
        pixels = random_raster(rng, (19, 37, 5), "uint16")
        valid = _valid(rng, (19, 37))
        data = raster_bytes(pixels, planar=planar, tiled=tiled, valid=valid, mask_bits=bits,
                            compression=COMPRESSIONS[index], bigtiff=index % 2 == 1,
                            overviews=index >= 2)
        image = decode_bytes(data, "m.tif", KEEP)
        np.testing.assert_array_equal(image.pixels, pixels, err_msg=layout)
        assert image.mask.shape == (19, 37, 1) and image.leaves_values_out
        np.testing.assert_array_equal(image.mask[:, :, 0], ~valid, err_msg=layout)
    plain = decode_bytes(raster_bytes(pixels), "p.tif", KEEP)
    assert plain.mask is None


def test_a_mask_page_of_8_bit_rgb_read_by_pillow_applies_under_keep_only(rng):
    """JPEG- or deflate-compressed RGB with an internal mask is GDAL's usual masked
    photograph: Pillow decodes its pixels, its mask page is read beside them."""
    pixels = rng.integers(0, 256, (9, 11, 3), np.uint8)
    valid = _valid(rng, (9, 11))
    data = raster_bytes(pixels, photometric="rgb", valid=valid, compression="deflate")
    assert not needs_raster_path(data)
    image = decode_bytes(data, "rgb.tif", KEEP)
    assert not image.raster and image.channel_names == ("R", "G", "B")
    np.testing.assert_array_equal(image.pixels, pixels)
    np.testing.assert_array_equal(image.mask[:, :, 0], ~valid)
    assert decode_bytes(data, "rgb.tif", DecodePolicy("RGB")).mask is None  # a loader's view


def test_a_mask_page_with_one_band_per_band_masks_each_band_alone(rng):
    pixels = random_raster(rng, (6, 8, 3), "int16")
    valid = _valid(rng, (6, 8, 3))
    image = decode_bytes(raster_bytes(pixels, valid=valid), "m.tif", KEEP)
    np.testing.assert_array_equal(image.mask, ~valid)


def test_a_mask_that_does_not_fit_its_image_is_an_error_naming_the_file(rng):
    pixels = random_raster(rng, (6, 8, 3), "uint16")
    cases = {"its mask page (page 2) is 4x6 but the image is 8x6; a mask covers its image "
             "pixel for pixel": mask_page(np.ones((6, 4), bool)),
             "its mask page (page 2) has 2 bands for an image of 3: a mask has one band (for "
             "every band) or one band per band": mask_page(np.ones((6, 8, 2), bool)),
             "its mask page (page 2) holds 16-bit samples of sample format 1; masks are 1-bit "
             "or 8-bit unsigned (0: no data)": (np.ones((6, 8), np.uint16), {
                 "extratags": [(254, 4, 1, 4, True)]})}
    for reason, (mask, options) in cases.items():
        buffer = io.BytesIO()
        with tifffile.TiffWriter(buffer) as writer:
            writer.write(pixels, photometric="minisblack", planarconfig="contig")
            writer.write(mask, **options)
        with pytest.raises(UnreadableInputError) as raised:
            decode_bytes(buffer.getvalue(), "bad.tif", KEEP)
        assert str(raised.value) == f"bad.tif: {reason}"


def test_a_damaged_mask_page_or_chain_is_a_reason_never_a_mask_lost(rng):
    pixels = random_raster(rng, (8, 8, 5), "uint16")
    data = raster_bytes(pixels, valid=_valid(rng, (8, 8)), compression=None)
    mask_strip = len(data) - 8  # tifffile writes the mask's one strip last
    for damaged, reason in (
            (data[:mask_strip], "truncated or corrupt mask page \\(page 2\\) \\(a strip"),
            (_next_directory_at(data, len(data) + 100), "the directory after the first page "
                                                        "cannot be read")):
        with pytest.raises(UnreadableInputError, match=reason):
            decode_bytes(damaged, "d.tif", KEEP)


def _next_directory_at(data: bytes, offset: int) -> bytes:
    """The TIFF with the link from its first directory to the next set to ``offset``."""
    raw = bytearray(data)
    start = int.from_bytes(raw[4:8], "little")
    link = start + 2 + 12 * int.from_bytes(raw[start:start + 2], "little")
    raw[link:link + 4] = offset.to_bytes(4, "little")
    return bytes(raw)


def test_a_mask_is_cropped_with_its_pixels_and_refuses_a_resize(rng):
    pixels = random_raster(rng, (6, 8, 2), "uint16")
    valid = _valid(rng, (6, 8))
    data = raster_bytes(pixels, valid=valid)
    cropped = decode_bytes(data, "c.tif", DecodePolicy("keep", center_crop=4))
    np.testing.assert_array_equal(cropped.mask[:, :, 0], ~valid[1:5, 2:6])
    padded = decode_bytes(data, "c.tif", DecodePolicy("keep", center_crop=10))
    assert padded.mask.shape == (10, 10, 1)
    assert padded.mask[0].all() and padded.mask[:, 0].all()  # what the crop pads is no data
    np.testing.assert_array_equal(padded.mask[2:8, 1:9, 0], ~valid)
    with pytest.raises(UnreadableInputError, match="Resize would blend nodata or masked"):
        decode_bytes(data, "c.tif", DecodePolicy("keep", resize=4))
