"""Pixels under ``--mode keep`` for every Pillow mode an allowed file opens in, and the
refusals that keep a deeper image from being clipped to 8 bits, word for word."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from normstats.errors import UnreadableInputError
from normstats.sources.decoding.decode import decode_bytes
from normstats.sources.decoding.policy import DecodePolicy

KEEP = DecodePolicy("keep")


def encode(image: Image.Image, fmt: str, **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def int32_tiff(values) -> bytes:
    return encode(Image.fromarray(np.array(values, np.int32)), "TIFF")


@pytest.mark.parametrize("values", [[[0, 65535], [7, 300]], [[-1, 5]], [[65536, 5]],
                                    [[-(2**31), 2**31 - 1]]])
def test_32_bit_integer_tiffs_are_read_exactly_through_the_raster_path(values):
    decoded = decode_bytes(int32_tiff(values), "i.tif", KEEP)
    assert decoded.pixels.dtype == np.int32 and decoded.channel_names == ("L",)
    assert decoded.pixels[:, :, 0].tolist() == values and decoded.raster


def test_floats_are_kept_as_float32():
    data = encode(Image.fromarray(np.array([[0.5, -2.0]], np.float32)), "TIFF")
    decoded = decode_bytes(data, "f.tif", KEEP)
    assert decoded.pixels.dtype == np.float32 and decoded.pixels[0, :, 0].tolist() == [0.5, -2.0]


@pytest.mark.parametrize("data, described", [
    (int32_tiff([[1, 2]]), "32-bit integer image (Pillow mode I)"),
    (encode(Image.fromarray(np.array([[0.5]], np.float32)), "TIFF"),
     "32-bit float image (Pillow mode F)"),
    (encode(Image.fromarray(np.array([[0, 65535]], np.uint16)), "PNG"),
     "16-bit image (Pillow mode I;16)"),
])
@pytest.mark.parametrize("mode", ["RGB", "L"])
def test_deeper_images_are_never_clipped_to_8_bits(data, described, mode):
    with pytest.raises(UnreadableInputError) as raised:
        decode_bytes(data, "d.tif", DecodePolicy(mode))
    assert str(raised.value) == (f"d.tif: {described}: converting it to {mode} would clip it "
                                 "to 8 bits; use --mode keep to compute it at its native depth")


def palette(transparency: bool) -> bytes:
    image = Image.fromarray(np.arange(6, dtype=np.uint8).reshape(2, 3) * 40).convert("P")
    return encode(image, "PNG", **({"transparency": 0} if transparency else {}))


@pytest.mark.parametrize("data, mode, names", [
    (palette(False), "RGB", ("R", "G", "B")),
    (palette(True), "RGBA", ("R", "G", "B", "A")),
    (encode(Image.fromarray(np.array([[0, 255, 0]], np.uint8)).convert("1"), "PNG"), "L",
     ("L",)),
    (encode(Image.new("LAB", (2, 1), (5, 6, 7)), "TIFF"), "RGB", ("R", "G", "B")),
])
def test_other_modes_keep_what_their_samples_say(data, mode, names):
    """A palette becomes its colours (with alpha where it has transparency), a bilevel
    image 0/255 grey, any other mode RGB: each exactly Pillow's own conversion."""
    decoded = decode_bytes(data, "x.png", KEEP)
    expected = np.asarray(Image.open(io.BytesIO(data)).convert(mode))
    assert decoded.pixels.dtype == np.uint8 and decoded.channel_names == names
    assert np.array_equal(decoded.pixels.reshape(expected.shape), expected)
    assert decoded.pixels.shape[2] == len(names)


def test_16_bit_grey_png_is_kept_at_16_bits():
    data = encode(Image.fromarray(np.array([[0, 65535, 1234]], np.uint16)), "PNG")
    decoded = decode_bytes(data, "g.png", KEEP)
    assert decoded.pixels.dtype == np.uint16
    assert decoded.pixels[0, :, 0].tolist() == [0, 65535, 1234]


def png_16_bit(colour_type: int, channels: int) -> bytes:
    """A 16-bit colour PNG written by hand (Pillow cannot write one)."""
    import struct
    import zlib

    raw = b"\x00" + np.arange(2 * channels, dtype=">u2").tobytes()

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", 2, 1, 16, colour_type, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw))
            + chunk(b"IEND", b""))


@pytest.mark.parametrize("colour_type, channels", [(2, 3), (6, 4)])
def test_16_bit_colour_pngs_are_refused_not_reduced(colour_type, channels):
    with pytest.raises(UnreadableInputError) as raised:
        decode_bytes(png_16_bit(colour_type, channels), "c.png", KEEP)
    assert str(raised.value) == (
        "c.png: 16-bit colour PNG: Pillow can only decode it to 8 bits, and --mode keep never "
        "reduces bit depth silently; use --mode RGB for the 8-bit pixels a Pillow-based "
        "loader sees")


def test_the_size_check_refuses_over_the_limit_empty_images_and_what_memory_cannot_hold(
        monkeypatch):
    from normstats.errors import RefusedInputError, TransientInputError
    from normstats.sources.decoding import pillow_pixels
    from normstats.sources.decoding.pillow_pixels import check_size

    image = Image.new("RGB", (3, 2))
    check_size(image, DecodePolicy("RGB", 6), "a.png")  # at the limit: decoded
    with pytest.raises(RefusedInputError) as raised:
        check_size(image, DecodePolicy("RGB", 5), "a.png")
    assert str(raised.value) == ("a.png: decompression bomb: 3x2 = 6 pixels exceeds the limit "
                                 "of 5 pixels; raise it with --max-pixels if the file is trusted")
    with pytest.raises(UnreadableInputError) as raised:
        check_size(Image.new("L", (0, 5)), DecodePolicy(), "z.png")
    assert str(raised.value) == "z.png: image has no pixels"
    monkeypatch.setattr(pillow_pixels, "machine_memory", lambda: 17)  # RGB: 3 bytes a pixel
    with pytest.raises(TransientInputError) as raised:
        check_size(image, DecodePolicy(), "a.png")
    assert str(raised.value) == (
        "a.png: out of memory: its 3x2 = 6 pixels need at least 18 bytes, more than this "
        "machine's 17 bytes of memory (the image is within --max-pixels, but cannot be "
        "decoded here)")
    monkeypatch.setattr(pillow_pixels, "machine_memory", lambda: 18)
    check_size(image, DecodePolicy(), "a.png")
    monkeypatch.setattr(pillow_pixels, "machine_memory", lambda: None)  # not known: decoded
    check_size(image, DecodePolicy(), "a.png")


@pytest.mark.parametrize("data, reason", [
    (b"RIFF\x10\x00\x00\x00WEBPXXXX", "truncated or corrupt WEBP file (its header cannot be "
     "read)"),
    (b"RIFF\x10\x00\x00\x00WAVEfmt ", "not an image (content is none of PNG, JPEG, BMP, TIFF, "
     "WEBP, GIF, PPM)"),
    (b"XIFF\x10\x00\x00\x00WEBPVP8 ", "not an image (content is none of PNG, JPEG, BMP, TIFF, "
     "WEBP, GIF, PPM)"),
    (b"GIF89a\x00", "truncated or corrupt GIF file (its header cannot be read)"),
    (b"\xff\xd8\xff\xe0", "truncated or corrupt JPEG file (its header cannot be read)"),
    (b"MM\x00*\x00\x00\x00\x09", "truncated or corrupt TIFF file (its header cannot be read)"),
])
def test_what_pillow_cannot_identify_is_named_by_its_signature(data, reason):
    from normstats.sources.decoding.pillow_pixels import unidentified_reason

    assert unidentified_reason(data) == reason
    with pytest.raises(UnreadableInputError) as raised:
        decode_bytes(data, "x.img", DecodePolicy())
    assert str(raised.value) == f"x.img: {reason}"


def test_running_out_of_memory_is_the_moment_not_the_file(monkeypatch):
    from normstats.errors import OUT_OF_MEMORY_REASON, TransientInputError
    from normstats.sources.decoding import decode as decode_module

    def out_of_memory(*args):
        raise MemoryError

    monkeypatch.setattr(decode_module, "_decode_bytes", out_of_memory)
    with pytest.raises(TransientInputError) as raised:
        decode_bytes(b"data", "big.png", DecodePolicy())
    assert str(raised.value) == f"big.png: {OUT_OF_MEMORY_REASON}"


@pytest.mark.parametrize("options, message", [
    ({"max_pixels": True}, "max_pixels must be an integer, got True"),
    ({"max_pixels": 2.5}, "max_pixels must be an integer, got 2.5"),
    ({"max_pixels": None}, "max_pixels must be an integer, got None"),
    ({"max_pixels": 0}, "max_pixels must be positive, got 0"),
    ({"max_file_bytes": "10"}, "max_file_bytes must be an integer, got '10'"),
    ({"max_file_bytes": -1}, "max_file_bytes must be positive, got -1"),
    ({"center_crop": 0}, "center_crop must be a positive integer, got 0"),
    ({"resize": 2.5}, "resize must be a positive integer, got 2.5"),
])
def test_a_policy_refuses_limits_and_sizes_in_words(options, message):
    from normstats.errors import InvalidOptionError

    with pytest.raises(InvalidOptionError) as raised:
        DecodePolicy("RGB", **options)
    assert str(raised.value) == message


def test_the_smallest_limits_are_allowed():
    policy = DecodePolicy("rgb", max_pixels=1, max_file_bytes=1, center_crop=1)
    assert (policy.mode, policy.max_pixels, policy.max_file_bytes, policy.center_crop) == \
        ("RGB", 1, 1, 1)
    assert DecodePolicy("RGB", max_pixels=np.int64(7)).max_pixels == 7


def test_a_16_bit_pgm_is_kept_at_its_depth():
    data = encode(Image.fromarray(np.array([[0, 65535], [7, 300]], np.uint16)), "PPM")
    assert Image.open(io.BytesIO(data)).mode == "I"  # how Pillow opens it
    decoded = decode_bytes(data, "d.pgm", KEEP)
    assert decoded.pixels.dtype == np.uint16
    assert decoded.pixels[:, :, 0].tolist() == [[0, 65535], [7, 300]]


def test_native_pixels_of_each_pillow_mode():
    """What ``keep`` makes of an image Pillow holds in a mode of 32-bit integers (within
    the 16-bit range, else refused by name), floats, or a palette with alpha."""
    from normstats.sources.decoding.pillow_pixels import _native_pixels

    edges = _native_pixels(Image.fromarray(np.array([[0, 65535]], np.int32)), b"", "n.pgm")
    assert edges.dtype == np.uint16 and edges.tolist() == [[0, 65535]]
    for values in ([[-1, 5]], [[5, 65536]]):
        with pytest.raises(UnreadableInputError) as raised:
            _native_pixels(Image.fromarray(np.array(values, np.int32)), b"", "n.pgm")
        assert str(raised.value) == ("n.pgm: 32-bit integer image outside the 16-bit range is "
                                     "not supported exactly")
    floats = _native_pixels(Image.fromarray(np.array([[0.5, -2.0]], np.float32)), b"", "f")
    assert floats.dtype == np.float32 and floats.tolist() == [[0.5, -2.0]]
    with_alpha = _native_pixels(Image.new("PA", (3, 1)), b"", "p")
    assert with_alpha.shape == (1, 3, 4) and with_alpha.dtype == np.uint8
    assert _native_pixels(Image.new("P", (3, 1)), b"", "p").shape == (1, 3, 3)


def test_deeper_colour_tiffs_pillow_opens_as_8_bit_are_named():
    import tifffile

    from normstats.sources.decoding.pillow_pixels import _reduced_depth, unidentified_reason
    from normstats.sources.decoding.tiff_header import describe_layout, tiff_layout

    for bits, dtype in ((16, np.uint16), (8, np.uint8)):
        buffer = io.BytesIO()
        tifffile.imwrite(buffer, np.zeros((2, 3, 3), dtype), photometric="rgb")
        data = buffer.getvalue()
        image = Image.open(io.BytesIO(data))
        assert _reduced_depth(image, data) == ("16-bit colour TIFF" if bits == 16 else None)
        # read through its directory: a layout, named when Pillow cannot identify it
        assert unidentified_reason(data) == \
            f"a TIFF Pillow cannot decode ({describe_layout(tiff_layout(data))})"
    png = encode(Image.fromarray(np.zeros((2, 2, 3), np.uint8)), "PNG")
    assert _reduced_depth(Image.open(io.BytesIO(png)), png) is None
