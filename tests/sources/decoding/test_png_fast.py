"""The libpng fast path must give exactly Pillow's pixels, or not be taken."""

from __future__ import annotations

import io
import logging
import struct
import warnings
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image, PngImagePlugin

from normstats.sources.decoding import decode, png_fast
from normstats.sources.decoding.decode import Scratch, decode_bytes
from normstats.sources.decoding.png_fast import decode_png_fast, plain_png_header
from normstats.sources.decoding.policy import DecodePolicy


def test_imagecodecs_a_hard_dependency_is_importable():
    """imagecodecs is a dependency: a broken install fails here instead of skipping."""
    assert png_fast._imagecodecs is not None

MODES = ("RGB", "L", "RGBA", "keep")
NATIVE = {"L": 1, "LA": 2, "RGB": 3, "RGBA": 4}


def png(image: Image.Image, **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", **options)
    return buffer.getvalue()


def chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """(kind, body) of every chunk of a well-formed PNG."""
    out, position = [], 8
    while position < len(data):
        (length,) = struct.unpack_from(">I", data, position)
        out.append((data[position + 4:position + 8], data[position + 8:position + 8 + length]))
        position += 12 + length
    return out


def assemble(parts: list[tuple[bytes, bytes]]) -> bytes:
    return png_fast.PNG_SIGNATURE + b"".join(chunk(kind, body) for kind, body in parts)


def pillow_pixels(data: bytes, mode: str) -> np.ndarray:
    """What a Pillow-based loader gets (``keep``: the file's own channels)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with Image.open(io.BytesIO(data)) as image:
            image.load()
            pixels = np.asarray(image if mode == "keep" else image.convert(mode))
    return pixels[:, :, None] if pixels.ndim == 2 else pixels


def icc_profile() -> bytes:
    """A real ICC profile (sRGB from littlecms), as cameras and editors embed one."""
    from PIL import ImageCms

    return ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()


def corpus(rng) -> dict[str, bytes]:
    """Every plain colour type at odd sizes, compression levels, filters and metadata."""
    out = {}
    for width, height in ((1, 1), (7, 3), (33, 17), (256, 2)):
        for native, channels in NATIVE.items():
            noise = rng.integers(0, 256, (height, width, channels), dtype=np.uint8)
            ramp = (np.arange(width * height * channels) % 251).astype(np.uint8)
            for kind, values in (("noise", noise), ("ramp", ramp.reshape(noise.shape))):
                image = Image.fromarray(values.squeeze(2) if channels == 1 else values, native)
                name = f"{native}{width}x{height}-{kind}"
                out[name] = png(image)
                out[name + "-level0"] = png(image, compress_level=0)
                out[name + "-optimize"] = png(image, optimize=True)
                out[name + "-dpi"] = png(image, dpi=(72, 72))  # a pHYs chunk
                text = PngImagePlugin.PngInfo()
                text.add_text("Software", "a photo editor")
                # an ICC profile (iCCP) and text (tEXt): metadata Pillow's pixels ignore
                out[name + "-icc-text"] = png(image, icc_profile=icc_profile(), pnginfo=text)
    for name in [n for n in out if n.startswith("RGB33")]:
        parts = chunks(out[name])
        metadata = [(b"gAMA", struct.pack(">I", 45455)), (b"sRGB", b"\x00"),
                    (b"cHRM", bytes(range(32))), (b"tIME", b"\x07\xea\x0b\x15\x0c\x00\x00")]
        out[name + "-metadata"] = assemble(parts[:1] + metadata + parts[1:])
        body = b"".join(b for k, b in parts if k == b"IDAT")  # the stream cut into 3 IDATs
        split = [(b"IDAT", body[i:i + len(body) // 3 + 1])
                 for i in range(0, len(body), len(body) // 3 + 1)]
        out[name + "-split"] = assemble(parts[:1] + split + parts[-1:])
    return out


@pytest.mark.parametrize("mode", MODES)
def test_fast_path_equals_pillow_on_a_corpus(mode, rng):
    taken, files = 0, corpus(rng)
    for name, data in files.items():
        expected = pillow_pixels(data, mode)
        fast = decode_png_fast(data, DecodePolicy(mode))
        if fast is not None:
            taken += 1
            assert fast.dtype == np.uint8 and np.array_equal(fast, expected), name
        assert np.array_equal(decode_bytes(data, name, DecodePolicy(mode)).pixels, expected), name
    # colour files under L go to Pillow (its luma rounding is its own); all others are fast
    grey = [name for name in files if not name.startswith("RGB")]
    assert taken == (len(grey) if mode == "L" else len(files)) > 0


def test_files_that_are_not_plain_go_to_pillow(rng):
    rgb = Image.fromarray(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8))
    plain = png(rgb)
    parts = chunks(plain)
    ihdr = bytearray(parts[0][1])
    interlaced = assemble([(b"IHDR", bytes(ihdr[:12]) + b"\x01")] + parts[1:])
    compressed_text = PngImagePlugin.PngInfo()
    compressed_text.add_text("Software", "normstats", zip=True)
    profile = zlib.compress(icc_profile())
    others = {
        "palette": png(rgb.convert("P")),
        "transparency": png(rgb, transparency=(0, 0, 0)),
        "16-bit": png(Image.fromarray(np.zeros((4, 4), np.uint16))),
        "1-bit": png(rgb.convert("1")),
        "interlaced": interlaced,
        "compressed text": png(rgb, pnginfo=compressed_text),
        "iCCP after IDAT": assemble(parts[:2] + [(b"iCCP", b"icc\0\0" + profile)] + parts[2:]),
        "iCCP method 1": assemble(parts[:1] + [(b"iCCP", b"icc\0\1" + profile)] + parts[1:]),
        "iCCP cut stream": assemble(parts[:1] + [(b"iCCP", b"icc\0\0" + profile[:-9])]
                                    + parts[1:]),
        "iCCP no name": assemble(parts[:1] + [(b"iCCP", b"\0\0" + profile)] + parts[1:]),
        "trailing bytes": plain + b"\0",
        "bad CRC": plain[:-5] + bytes([plain[-5] ^ 1]) + plain[-4:],
        "IDATs apart": assemble(parts[:2] + [(b"pHYs", bytes(9))] + parts[1:]),
        "no IEND": plain[:-12],
        "short gAMA": assemble(parts[:1] + [(b"gAMA", b"\0\0")] + parts[1:]),
        "IHDR not first": assemble([(b"pHYs", bytes(9))] + parts),
    }
    for name, data in others.items():
        assert decode_png_fast(data, DecodePolicy("RGB")) is None, name
    assert decode_png_fast(plain, DecodePolicy("RGB", max_pixels=63)) is None
    assert decode_png_fast(plain, DecodePolicy("L")) is None
    assert decode_png_fast(plain, DecodePolicy("RGB")) is not None


def test_pillow_gives_the_verdict_on_damage_past_the_crc_checks(rng):
    data = png(Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)))
    parts = chunks(data)
    idat = bytearray(parts[1][1])
    idat[len(idat) // 2] ^= 0xFF  # inside the deflate stream, CRC recomputed
    damaged = assemble(parts[:1] + [(b"IDAT", bytes(idat))] + parts[2:])
    assert plain_png_header(damaged) is not None
    assert decode_png_fast(damaged, DecodePolicy()) is None
    with pytest.raises(decode.UnreadableInputError, match="corrupt"):
        decode_bytes(damaged, "d.png", DecodePolicy())


def test_scratch_buffer_gives_the_same_pixels(rng):
    scratch = Scratch()
    files = [png(Image.fromarray(rng.integers(0, 256, (5, 9, c), dtype=np.uint8).squeeze()))
             for c in (3, 1, 4)]
    for data in files:
        for mode in MODES:
            into = decode_bytes(data, "a.png", DecodePolicy(mode), scratch).pixels
            assert np.array_equal(into, pillow_pixels(data, mode))


# -- differential fuzzing: damage that keeps every CRC right reaches libpng itself --------

SEEDS = {native: png(Image.fromarray(
    np.random.default_rng(3).integers(0, 256, (6, 11, c), dtype=np.uint8).squeeze(), native))
    for native, c in NATIVE.items()}
# with an ICC profile: chunk 1 is iCCP, so the fuzzer damages profiles too
SEEDS["RGB-icc"] = png(Image.fromarray(np.random.default_rng(4).integers(
    0, 256, (6, 11, 3), dtype=np.uint8)), icc_profile=icc_profile())

body_mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 1 << 16), st.integers(0, 7)),
    st.tuples(st.just("cut"), st.integers(0, 1 << 16)),
    st.tuples(st.just("grow"), st.binary(min_size=1, max_size=6)),
)


def damage(seed: bytes, target: int, mutations: list[tuple]) -> bytes:
    """Mutate one chunk's body (IHDR included) and write every CRC anew."""
    parts = chunks(seed)
    kind, body = parts[target % len(parts)]
    body = bytearray(body)
    for what, *rest in mutations:
        if what == "flip" and body:
            body[rest[0] % len(body)] ^= 1 << rest[1]
        elif what == "cut":
            del body[rest[0] % (len(body) + 1):]
        elif what == "grow":
            body += rest[0]
    parts[target % len(parts)] = (kind, bytes(body))
    return assemble(parts)


@settings(max_examples=300, deadline=10_000, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.sampled_from(sorted(SEEDS)), target=st.integers(0, 4),
       mutations=st.lists(body_mutation, min_size=1, max_size=3),
       mode=st.sampled_from(MODES))
def test_a_file_the_fast_path_takes_is_one_pillow_decodes_identically(seed, target, mutations,
                                                                     mode):
    data = damage(SEEDS[seed], target, mutations)
    fast = decode_png_fast(data, DecodePolicy(mode))
    if fast is not None:
        assert np.array_equal(fast, pillow_pixels(data, mode))


def test_libpng_warnings_stay_quiet_during_normstats_decodes_only(caplog):
    parts = chunks(SEEDS["RGB"])
    extra = assemble(parts[:1] + [(b"IDAT", parts[1][1] + b"\0\1")] + parts[2:])
    with caplog.at_level(logging.WARNING, logger="imagecodecs"):
        fast = decode_png_fast(extra, DecodePolicy())
        assert fast is not None and np.array_equal(fast, pillow_pixels(extra, "RGB"))
        assert not caplog.records
        png_fast._imagecodecs.png_decode(extra)  # the user's own call keeps its warning
    assert "Extra compressed data" in caplog.text



def test_decoder_logs_stay_quiet_until_the_outermost_decode_ends(caplog):
    """The quiet is entered around every decode, a raster's inside a TIFF's: an inner
    decode ending, or failing, must not let the outer one's lines through."""
    logger = logging.getLogger("imagecodecs")
    with caplog.at_level(logging.WARNING, logger="imagecodecs"):
        with png_fast.quiet_decoder_logs():
            with pytest.raises(ValueError), png_fast.quiet_decoder_logs():
                raise ValueError("a decoder failed")
            logger.warning("outer decode")
        assert not caplog.records
        logger.warning("the user's own line")
    assert [record.message for record in caplog.records] == ["the user's own line"]

# -- the compiled chunk walk answers as the Python walk does ---------------------------------

def test_the_compiled_chunk_walk_is_built_with_the_install():
    """Built by pip install like the statistics kernel: a broken build fails here."""
    assert png_fast._png_chunks is not None


@pytest.mark.parametrize("length", [*range(0, 40), 1000, 4099, 1 << 16])
def test_the_compiled_crc_is_zlibs(length, rng):
    data = rng.integers(0, 256, length, dtype=np.uint8).tobytes()
    assert png_fast._png_chunks.crc32(data) == zlib.crc32(data)


def test_the_compiled_walk_agrees_on_every_file_of_the_corpus(rng):
    for name, data in corpus(rng).items():
        assert png_fast._plain_layout(data) == png_fast._walk_chunks(data), name


def test_the_compiled_walk_agrees_on_every_cut_and_layout(rng):
    """Files cut at every length, and chunk sequences the fast path must refuse."""
    seed = SEEDS["RGB-icc"]
    for end in range(len(seed) + 1):
        assert png_fast._plain_layout(seed[:end]) == png_fast._walk_chunks(seed[:end]), end
    parts = chunks(seed)  # IHDR, iCCP, IDAT, IEND
    profile, text = parts[1], (b"tEXt", b"Software\0editor")
    layouts = {
        "two profiles": parts[:2] + [profile] + parts[2:],
        "profile after IDAT": parts[:1] + parts[2:3] + [profile] + parts[3:],
        "two IDAT runs": parts[:3] + [text] + parts[2:],
        "text twice": parts[:2] + [text, text] + parts[2:],
        "unknown chunk": parts[:2] + [(b"zzZz", b"x")] + parts[2:],
        "bad metadata length": parts[:2] + [(b"sRGB", b"\0\0")] + parts[2:],
        "16-bit": [(b"IHDR", parts[0][1][:8] + b"\x10" + parts[0][1][9:])] + parts[1:],
        "interlaced": [(b"IHDR", parts[0][1][:12] + b"\x01")] + parts[1:],
        "palette": [(b"IHDR", parts[0][1][:9] + b"\x03" + parts[0][1][10:])] + parts[1:],
        "zero width": [(b"IHDR", bytes(4) + parts[0][1][4:])] + parts[1:],
        "no IHDR": parts[1:],
        "IEND not last": parts + [text],
        "damaged profile": parts[:1] + [(b"iCCP", profile[1][:-9])] + parts[2:],
    }
    for name, layout in layouts.items():
        data = assemble(layout)
        assert png_fast._plain_layout(data) == png_fast._walk_chunks(data), name
    assert png_fast._plain_layout(assemble(parts))[1] is not None  # the profile is found


def test_text_over_pillows_limit_is_refused_by_both_walks():
    parts = chunks(SEEDS["RGB"])
    half = (b"tEXt", b"k\0" + bytes(png_fast._TEXT_LIMIT // 2))  # two of them: over the limit
    data = assemble(parts[:1] + [half, half] + parts[1:])
    assert png_fast._walk_chunks(data) is None
    assert png_fast._plain_layout(data) is None
    assert png_fast._plain_layout(assemble(parts[:1] + [half] + parts[1:])) is not None


@settings(max_examples=400, deadline=10_000, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.sampled_from(sorted(SEEDS)), target=st.integers(0, 4),
       mutations=st.lists(body_mutation, min_size=1, max_size=3),
       raw=st.booleans())
def test_the_compiled_walk_agrees_on_damaged_files(seed, target, mutations, raw):
    """Damage with the CRCs written anew (the walk's later rules are reached) or kept
    (``raw``: a body changed under its old CRC, so the CRC rule decides)."""
    data = damage(SEEDS[seed], target, mutations)
    if raw:
        parts, old = chunks(data), chunks(SEEDS[seed])
        data = png_fast.PNG_SIGNATURE + b"".join(
            struct.pack(">I", len(body)) + kind + body
            + struct.pack(">I", zlib.crc32(k + b) if i < len(old) else 0)
            for i, ((kind, body), (k, b)) in enumerate(zip(parts, old + old)))
    assert png_fast._plain_layout(data) == png_fast._walk_chunks(data)


def claimed_png(width: int, height: int) -> bytes:
    """A structurally valid PNG whose header claims a size (its data is never inflated)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (png_fast.PNG_SIGNATURE + chunk(b"IHDR", header) + chunk(b"IDAT", b"x")
            + chunk(b"IEND", b""))


@pytest.mark.parametrize("width, height, plain", [
    (2**31 - 1, 1, True), (1, 2**31 - 1, True), (2**31, 1, False), (1, 2**31, False),
    (2**32 - 1, 1, False), (1, 2**32 - 1, False), (0, 1, False), (1, 0, False)])
def test_sizes_png_allows_are_plain_up_to_2_31_minus_1(width, height, plain):
    """PNG's limit (2³¹ − 1 per side, never 0): past it a header is not plain, whatever
    the 32-bit field holds; Pillow then gives its verdict."""
    assert plain_png_header(claimed_png(width, height)) == \
        ((height, width, 3) if plain else None)
