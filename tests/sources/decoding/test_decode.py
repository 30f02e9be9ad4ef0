import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from normstats import InvalidOptionError, UnreadableInputError
from normstats.sources.decoding.decode import DecodePolicy, decode_bytes, read_whole_file


def encode(image: Image.Image, fmt: str, **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def png_16bit_rgb(pixels: np.ndarray) -> bytes:
    """A 16-bit RGB PNG written by hand (Pillow cannot write one)."""
    h, w, _ = pixels.shape
    raw = b"".join(b"\x00" + pixels[y].astype(">u2").tobytes() for y in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + \
            struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", w, h, 16, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + \
        chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def test_rgb_mode_is_torchvision_convert_rgb_for_every_pillow_mode():
    base = Image.fromarray(np.arange(48, dtype=np.uint8).reshape(4, 4, 3) * 5)
    for image in (base.convert("L"), base.convert("P"), base.convert("CMYK"),
                  base.convert("RGBA"), base.convert("1"), base.convert("LA")):
        fmt = "TIFF" if image.mode == "CMYK" else "PNG"
        data = encode(image, fmt)
        decoded = decode_bytes(data, "x", DecodePolicy("RGB"))
        expected = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
        assert np.array_equal(decoded.pixels, expected), image.mode
        assert decoded.channel_names == ("R", "G", "B")


def test_keep_mode_keeps_native_channels_and_depth():
    gray16 = Image.fromarray(np.array([[0, 65535], [1000, 40000]], dtype=np.uint16))
    kept = decode_bytes(encode(gray16, "PNG"), "g16.png", DecodePolicy("keep"))
    assert kept.pixels.dtype == np.uint16 and kept.pixels[0, 1, 0] == 65535
    floats = Image.fromarray(np.array([[0.5, -2.0]], dtype=np.float32))
    kept = decode_bytes(encode(floats, "TIFF"), "f.tif", DecodePolicy("keep"))
    assert kept.pixels.dtype == np.float32 and kept.pixels[0, 1, 0] == -2.0
    cmyk = Image.new("CMYK", (2, 2), (1, 2, 3, 4))
    kept = decode_bytes(encode(cmyk, "TIFF"), "c.tif", DecodePolicy("keep"))
    assert kept.channel_names == ("C", "M", "Y", "K") and kept.pixels[0, 0].tolist() == [1, 2, 3, 4]


def test_sixteen_bit_and_float_are_never_clipped_silently():
    gray16 = encode(Image.fromarray(np.full((2, 2), 4000, np.uint16)), "PNG")
    for mode in ("RGB", "L", "RGBA"):
        with pytest.raises(UnreadableInputError, match="g.png: 16-bit.*--mode keep"):
            decode_bytes(gray16, "g.png", DecodePolicy(mode))
    colour16 = png_16bit_rgb(np.full((2, 3, 3), 513, np.uint16))
    with pytest.raises(UnreadableInputError, match="16-bit colour PNG"):
        decode_bytes(colour16, "c16.png", DecodePolicy("keep"))


def test_webp_bytes_named_jpg_decode_by_content():
    data = encode(Image.new("RGB", (3, 3), (10, 20, 30)), "WEBP", lossless=True)
    assert decode_bytes(data, "really_webp.jpg", DecodePolicy()).pixels[0, 0].tolist() == \
        [10, 20, 30]


def test_formats_outside_the_allow_list_are_refused():
    data = encode(Image.new("RGB", (3, 3)), "PCX")
    with pytest.raises(UnreadableInputError, match="not an image"):
        decode_bytes(data, "x.png", DecodePolicy())


def test_corrupted_png_data_block_is_an_error_not_grey_pixels():
    data = bytearray(encode(Image.fromarray(np.arange(300, dtype=np.uint8).reshape(10, 10, 3)),
                            "PNG"))
    start = data.index(b"IDAT") + 8
    data[start:start + 20] = b"\xff" * 20
    with pytest.raises(UnreadableInputError, match="corrupt"):
        decode_bytes(bytes(data), "bad.png", DecodePolicy())


def test_unknown_mode_is_an_option_error():
    with pytest.raises(InvalidOptionError, match="unknown mode"):
        DecodePolicy("BGR")


@pytest.mark.parametrize("size", [0, 1, 4095, 1 << 16, (1 << 16) + 1, 300_000])
@pytest.mark.parametrize("hint", [None, 0, 10, 1 << 16, 10**6])
def test_read_whole_file_reads_every_byte_whatever_the_hint(tmp_path, size, hint):
    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    (tmp_path / "f.bin").write_bytes(data)
    assert read_whole_file(str(tmp_path / "f.bin"), hint) == data
