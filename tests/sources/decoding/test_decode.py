import io
import struct
import warnings
import zlib

import numpy as np
import pytest
from PIL import Image, UnidentifiedImageError

from normstats import InvalidOptionError, UnreadableInputError
from normstats.sources.decoding.decode import decode_bytes, read_whole_file
from normstats.sources.decoding.policy import DecodePolicy


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


def tiff_bytes(width: int, height: int, samples: int, bits: int, sample_format: int,
               order: str = "<") -> bytes:
    """A minimal uncompressed TIFF written by hand (Pillow cannot write these layouts):
    the header, one IFD of baseline tags, the per-sample values after it, then one strip."""
    def shorts(value: int, count: int = 1) -> bytes:
        return struct.pack(f"{order}{count}H", *[value] * count)

    def longs(value: int) -> bytes:
        return struct.pack(f"{order}I", value)

    per_sample = {258: shorts(bits, samples), 339: shorts(sample_format, samples)}
    strip = bytes(width * height * samples * bits // 8)
    extra_at = 8 + 2 + 12 * 11 + 4  # after the header and the IFD
    strip_at = extra_at + sum(len(v) for v in per_sample.values() if len(v) > 4)
    tags = [(256, 4, 1, longs(width)), (257, 4, 1, longs(height)),
            (258, 3, samples, per_sample[258]), (259, 3, 1, shorts(1)),
            (262, 3, 1, shorts(2 if samples >= 3 else 1)), (273, 4, 1, longs(strip_at)),
            (277, 3, 1, shorts(samples)), (278, 4, 1, longs(height)),
            (279, 4, 1, longs(len(strip))), (284, 3, 1, shorts(1)),
            (339, 3, samples, per_sample[339])]
    out = (b"II*\0" if order == "<" else b"MM\0*") + longs(8) + shorts(len(tags))
    extra = b""
    for tag, kind, count, values in tags:
        if len(values) > 4:  # too long for the entry: stored after the IFD
            values, extra = longs(extra_at + len(extra)), extra + values
        out += struct.pack(f"{order}HHI", tag, kind, count) + values.ljust(4, b"\0")
    return out + longs(0) + extra + strip


@pytest.mark.parametrize(("layout", "words", "dtype"), [
    ((5, 8, 1), "5 samples per pixel, 8-bit unsigned integer", "uint8"),
    ((1, 64, 3), "1 sample per pixel, 64-bit floating point", "float64"),
    ((1, 24, 1), "1 sample per pixel, 24-bit unsigned integer", "uint32"),
    ((7, 16, 2), "7 samples per pixel, 16-bit signed integer", "int16"),
], ids=["5-samples", "float64", "24-bit", "7-samples-int16"])
@pytest.mark.parametrize("order", ["<", ">"], ids=["II", "MM"])
def test_tiffs_pillow_cannot_open_take_the_raster_path_under_keep(layout, words, dtype, order):
    samples, bits, sample_format = layout
    data = tiff_bytes(3, 2, samples, bits, sample_format, order)
    with pytest.raises(UnidentifiedImageError):
        Image.open(io.BytesIO(data))  # the premise: Pillow has no mode for them
    for mode in ("RGB", "L", "RGBA"):
        with pytest.raises(UnreadableInputError) as refused:
            decode_bytes(data, "x.tif", DecodePolicy(mode))
        assert str(refused.value) == (
            f"x.tif: TIFF raster ({words}): the {mode} policy converts colour images and "
            "would drop bands or clip them; use --mode keep to compute its bands")
    image = decode_bytes(data, "x.tif", DecodePolicy("keep"))
    assert image.pixels.shape == (2, 3, samples) and str(image.pixels.dtype) == dtype
    assert image.raster and image.raw_units and not image.pixels.any()


def test_a_tiff_whose_directory_is_cut_off_is_still_damaged():
    data = tiff_bytes(3, 2, 5, 8, 1)
    for cut in (data[:8], data[:20], data[:4] + struct.pack("<I", len(data) + 10)):
        with pytest.raises(UnreadableInputError, match="truncated or corrupt TIFF file"):
            decode_bytes(cut, "x.tif", DecodePolicy("keep"))


def test_a_16_bit_rgb_tiff_is_read_at_16_bits_under_keep():
    values = np.arange(2 * 3 * 3, dtype="<u2").reshape(2, 3, 3) * 3000 + 7
    data = bytearray(tiff_bytes(3, 2, 3, 16, 1))
    data[-values.nbytes:] = values.tobytes()
    assert Image.open(io.BytesIO(bytes(data))).mode == "RGB"  # Pillow keeps 8 bits of 16
    image = decode_bytes(bytes(data), "x.tif", DecodePolicy("keep"))
    assert image.pixels.dtype == np.uint16 and (image.pixels == values).all()
    assert image.channel_names == ("R", "G", "B") and image.raw_units
    rgb = decode_bytes(bytes(data), "x.tif", DecodePolicy("RGB")).pixels
    assert np.array_equal(rgb, np.asarray(Image.open(io.BytesIO(bytes(data))).convert("RGB")))


@pytest.mark.parametrize("mode", ["RGB", "L"])
def test_palette_transparency_bytes_give_pillows_pixels_without_its_warning(mode):
    image = Image.new("P", (4, 4))
    image.putpalette([v % 256 for v in range(0, 16 * 3 * 17, 17)])
    image.putdata(list(range(16)))
    data = encode(image, "PNG", transparency=bytes([0, 128, 255, 7]))
    with Image.open(io.BytesIO(data)) as opened, warnings.catch_warnings():
        assert opened.mode == "P" and isinstance(opened.info["transparency"], bytes)
        warnings.simplefilter("ignore")
        expected = np.asarray(opened.convert(mode))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning fails the test
        decoded = decode_bytes(data, "p.png", DecodePolicy(mode)).pixels
    assert np.array_equal(decoded.reshape(expected.shape), expected)
    kept = decode_bytes(data, "p.png", DecodePolicy("keep")).pixels  # RGBA: alpha kept
    assert kept.shape == (4, 4, 4) and kept[0, :4, 3].tolist() == [0, 128, 255, 7]


def gif_of(height: int, width: int) -> bytes:
    """A GIF: no fast path takes it, so Pillow's own size check sees it."""
    return encode(Image.fromarray(np.zeros((height, width), np.uint8)), "GIF")


PILLOW_LIMIT = ("{n} pixels is within --max-pixels but over the limit of Pillow in this "
                "process (PIL.Image.MAX_IMAGE_PIXELS = 1000), which normstats never changes "
                "in the caller's process; raise it there, or run with the processes scheduler")


def test_pillows_own_limit_is_the_callers_setting_not_the_files_fault(monkeypatch):
    from normstats.errors import RefusedInputError, TransientInputError

    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
    with pytest.raises(TransientInputError) as raised:  # over twice Pillow's limit: an error
        decode_bytes(gif_of(50, 50), "b.gif", DecodePolicy("RGB"))
    assert str(raised.value) == "b.gif: " + PILLOW_LIMIT.format(n=2500)
    with pytest.raises(RefusedInputError) as raised:  # over the policy's own limit too
        decode_bytes(gif_of(50, 50), "b.gif", DecodePolicy("RGB", 2500 - 1))
    assert str(raised.value) == ("b.gif: decompression bomb: 2500 pixels exceeds the limit of "
                                 "2499 pixels; raise it with --max-pixels if the file is trusted")
    with warnings.catch_warnings():  # between once and twice: Pillow only warns, unless the
        warnings.simplefilter("error")  # caller's filters make its warning an error
        with pytest.raises(TransientInputError) as raised:
            decode_bytes(gif_of(30, 50), "w.gif", DecodePolicy("RGB", 1500))
    assert str(raised.value) == "w.gif: " + PILLOW_LIMIT.format(n=1500)


def test_pillows_limit_over_this_machines_memory_says_so(monkeypatch):
    from normstats.errors import TransientInputError
    from normstats.sources.decoding import pillow_pixels

    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
    monkeypatch.setattr(pillow_pixels, "machine_memory", lambda: 2499)
    with pytest.raises(TransientInputError) as raised:
        decode_bytes(gif_of(50, 50), "b.gif", DecodePolicy("RGB"))
    assert str(raised.value) == (
        "b.gif: out of memory: its 2500 pixels need at least 2,500 bytes, more than this "
        "machine's 2,499 bytes of memory (the image is within --max-pixels, but cannot be "
        "decoded here)")


def test_a_pillow_limit_message_without_a_size_is_the_policys_refusal():
    from normstats.errors import RefusedInputError
    from normstats.sources.decoding.decode import _pillow_limit_error

    error = _pillow_limit_error(Image.DecompressionBombError("too big"), DecodePolicy("RGB", 7),
                                "x.gif")
    assert isinstance(error, RefusedInputError)
    assert str(error) == ("x.gif: decompression bomb: the image exceeds the limit of 7 pixels; "
                          "raise it with --max-pixels if the file is trusted")


def test_decode_file_names_the_file_by_its_path_unless_told_and_keeps_its_limit(tmp_path,
                                                                             monkeypatch):
    from normstats.errors import OUT_OF_MEMORY_REASON, RefusedInputError, TransientInputError
    from normstats.sources.decoding import decode as decode_module
    from normstats.sources.decoding.decode import decode_file

    path = tmp_path / "a.png"
    Image.new("L", (3, 2), 7).save(path)
    size = path.stat().st_size
    assert decode_file(str(path), DecodePolicy("L"), size_hint=1).pixels.tolist() == \
        [[[7]] * 3] * 2
    (tmp_path / "empty.png").write_bytes(b"")
    with pytest.raises(UnreadableInputError, match=f"^{tmp_path / 'empty.png'}: zero-byte"):
        decode_file(str(tmp_path / "empty.png"), DecodePolicy())
    with pytest.raises(UnreadableInputError, match="^cats/empty.png: zero-byte file$"):
        decode_file(str(tmp_path / "empty.png"), DecodePolicy(), "cats/empty.png")
    with pytest.raises(RefusedInputError) as raised:
        decode_file(str(path), DecodePolicy("L", max_file_bytes=size - 1), "a.png")
    assert str(raised.value) == (f"a.png: file of {size} bytes is over the limit of "
                                 f"{size - 1} bytes; raise --max-file-bytes if it is trusted")

    def out_of_memory(*args):
        raise MemoryError

    monkeypatch.setattr(decode_module, "read_image_file", out_of_memory)
    with pytest.raises(TransientInputError) as raised:
        decode_file(str(path), DecodePolicy(), "a.png")
    assert str(raised.value) == f"a.png: {OUT_OF_MEMORY_REASON}"


def test_errors_from_pillows_path_name_the_file(monkeypatch):
    from normstats.errors import RefusedInputError

    with pytest.raises(RefusedInputError) as raised:  # the policy's limit, from the header
        decode_bytes(gif_of(3, 4), "cats/big.gif", DecodePolicy("RGB", 11))
    assert str(raised.value).startswith("cats/big.gif: decompression bomb: 4x3 = 12 pixels")
    damaged = bytearray(encode(Image.fromarray(np.arange(300, dtype=np.uint8)
                                               .reshape(10, 10, 3)), "TIFF"))
    with pytest.raises(UnreadableInputError) as raised:
        decode_bytes(bytes(damaged[:-100]), "cats/cut.tif", DecodePolicy())
    assert str(raised.value).startswith("cats/cut.tif: truncated or corrupt image data (")


def test_the_policy_s_transforms_on_a_decoded_image():
    """A resize is refused only where it would blend left-out values into valid ones (a
    mask, or a raster's nodata); it keeps the channel names (CMYK resamples as CMYK) and
    names the file in its errors."""
    from normstats.errors import RefusedInputError
    from normstats.sources.decoding.decode import _transformed
    from normstats.sources.decoding.policy import DecodedImage
    from normstats.sources.decoding.transforms import apply_transforms

    rng = np.random.default_rng(5)
    grey = rng.integers(0, 256, (6, 8, 1), dtype=np.uint8)
    resize = DecodePolicy("keep", resize=3)
    for image in (DecodedImage(grey, ("L",), nodata=0.0),  # nodata of a colour image
                  DecodedImage(grey, ("L",), raster=True)):  # a raster without nodata
        out = _transformed(image, resize, "m.tif")
        assert out.pixels.tolist() == apply_transforms(grey, ("L",), 3, None).tolist()
    for image in (DecodedImage(grey, ("L",), mask=np.zeros((6, 8, 1), bool)),
                  DecodedImage(grey, ("L",), nodata=0.0, raster=True)):
        with pytest.raises(UnreadableInputError) as raised:
            _transformed(image, resize, "m.tif")
        assert str(raised.value) == (
            "m.tif: Resize would blend nodata or masked values into valid pixels: crop only "
            "(--center-crop), or compute the raster unresized")
    cmyk = rng.integers(0, 256, (6, 8, 4), dtype=np.uint8)
    cmyk[:, :, 3] = rng.integers(0, 40, (6, 8))  # alpha would weigh these, K does not
    out = _transformed(DecodedImage(cmyk, ("C", "M", "Y", "K")), resize, "c.jpg")
    assert out.pixels.tolist() == apply_transforms(cmyk, ("C", "M", "Y", "K"), 3,
                                                   None).tolist()
    assert out.pixels.tolist() != apply_transforms(cmyk, ("R", "G", "B", "A"), 3,
                                                   None).tolist()
    with pytest.raises(RefusedInputError) as raised:
        _transformed(DecodedImage(np.zeros((1, 50, 1), np.uint8), ("L",)),
                     DecodePolicy("keep", resize=4, max_pixels=799), "thin.png")
    assert str(raised.value).startswith("thin.png: Resize(4) makes it 4x200 = 800 pixels")


def test_a_bigtiff_raster_under_a_colour_mode_is_named_as_one():
    import tifffile

    from normstats.sources.decoding.decode import _raster_refused
    from normstats.sources.decoding.tiff_header import tiff_layout

    buffer = io.BytesIO()
    tifffile.imwrite(buffer, np.zeros((2, 2, 5), np.uint16), bigtiff=True, photometric="minisblack",
                     planarconfig="contig")
    data = buffer.getvalue()
    assert tiff_layout(data) is None  # a BigTIFF's directory is not read by the header walk
    assert str(_raster_refused(data, "b.tif", DecodePolicy("L"))) == (
        "b.tif: TIFF raster (a BigTIFF): the L policy converts colour images and would drop "
        "bands or clip them; use --mode keep to compute its bands")
