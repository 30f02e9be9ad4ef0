"""Fuzzing the folder source with mutated image bytes (docs/reliability.md, row "fuzz").

Hypothesis takes small valid files of every allowed format and damages them: bit flips,
overwritten bytes, truncations and splices of two files (the header of one and the body
of another). A folder of such files goes through `normstats.compute`, and:

- nothing crashes, and the work of each file is bounded, counted rather than timed: a
  flipped size field can make a decoder allocate and fill a big canvas before it finds
  the data short, so the run uses a small ``max_pixels`` and every canvas Pillow
  allocates (``Image.core.new`` / ``fill``) is checked against it; the claim is refused
  from the header. A hang is caught by the suite's pytest-timeout;
- every file that could not be used is in ``skipped`` with a one-line reason;
- every file that did decode contributes exactly what Pillow decodes from it (no
  ``LOAD_TRUNCATED_IMAGES``): the statistics equal the exact oracle of those pixels.

Examples are derandomized so CI runs the same cases every time; the run takes well under a
minute on two cores.
"""

from __future__ import annotations

import contextlib
import io
import tempfile
import warnings
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import assert_matches_oracle
from PIL import Image

import normstats
from normstats import EmptyDatasetError, UnreadableInputError
from normstats.sources.decoding.decode import ALLOWED_FORMATS, decode_file
from normstats.sources.decoding.policy import DecodePolicy

#: 64 times the seeds' 20x16 pixels: a mutated size field up to it is decoded, past it
#: refused from the header; no decode handles more pixels than this.
MAX_PIXELS = 64 * 20 * 16


def _encode(image: Image.Image, fmt: str, **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def _seed_files() -> dict[str, bytes]:
    """Small valid files of every allowed format, keyed by a name with their extension."""
    rng = np.random.default_rng(7)
    ramp = np.arange(20, dtype=np.int64)[None, :, None] * 9
    rgb = Image.fromarray(((ramp + rng.integers(0, 50, (16, 20, 3))) % 256).astype(np.uint8))
    return {
        "base.jpg": _encode(rgb, "JPEG", quality=85),
        "progressive.jpg": _encode(rgb, "JPEG", progressive=True),
        "gray.jpg": _encode(rgb.convert("L"), "JPEG"),
        "rgb.png": _encode(rgb, "PNG"),
        "gray.png": _encode(rgb.convert("L"), "PNG"),
        "rgba.png": _encode(rgb.convert("RGBA"), "PNG"),
        "palette.png": _encode(rgb.convert("P"), "PNG"),
        "anim.gif": _encode(rgb, "GIF"),
        "lossy.webp": _encode(rgb, "WEBP"),
        "lossless.webp": _encode(rgb, "WEBP", lossless=True),
        "raw.tif": _encode(rgb, "TIFF"),
        "deflate.tif": _encode(rgb, "TIFF", compression="tiff_deflate"),
        "rgb.bmp": _encode(rgb, "BMP"),
        "rgb.ppm": _encode(rgb, "PPM"),
    }


SEEDS = _seed_files()
NAMES = sorted(SEEDS)

position = st.integers(min_value=0, max_value=1 << 16)  # taken modulo the length
mutation = st.one_of(
    st.tuples(st.just("flip"), position, st.integers(0, 7)),
    st.tuples(st.just("overwrite"), position, st.binary(min_size=1, max_size=8)),
    st.tuples(st.just("truncate"), position),
    st.tuples(st.just("splice"), position, st.sampled_from(NAMES), position),
)


def mutate(data: bytes, mutations: list[tuple]) -> bytes:
    """Apply the mutations in order (positions wrap around the current length)."""
    out = bytearray(data)
    for kind, at, *rest in mutations:
        at %= max(1, len(out))
        if kind == "flip" and out:
            out[at] ^= 1 << rest[0]
        elif kind == "overwrite":
            out[at:at + len(rest[0])] = rest[0]
        elif kind == "truncate":
            del out[at:]
        elif kind == "splice":
            other = SEEDS[rest[0]]
            out = out[:at] + other[rest[1] % len(other):]
    return bytes(out)


damaged_file = st.tuples(st.sampled_from(NAMES), st.lists(mutation, min_size=1, max_size=3),
                         st.booleans())


def pillow_pixels(data: bytes, mode: str) -> np.ndarray:
    """Pillow's own decode of the file, the reference for whatever normstats decoded."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with Image.open(io.BytesIO(data), formats=ALLOWED_FORMATS) as image:
            image.load()
            pixels = np.asarray(image.convert(mode))
    return pixels[:, :, None] if pixels.ndim == 2 else pixels


@settings(max_examples=400, deadline=20_000, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(files=st.lists(damaged_file, min_size=1, max_size=4),
       mode=st.sampled_from(["RGB", "L", "RGBA"]))
def test_mutated_files_are_decoded_exactly_or_skipped_and_named(files: list[tuple],
                                                                mode: str) -> None:
    # a fresh folder per example, removed at once (function-scoped fixtures do not mix
    # with @given, and thousands of numbered tmp_path folders slow each other down)
    with tempfile.TemporaryDirectory() as folder:
        check_folder(Path(folder), files, mode)


def check_folder(root: Path, files: list[tuple], mode: str) -> None:
    """Write the damaged files into ``root`` and check the run over them."""
    written: dict[str, bytes] = {}
    for index, (seed, mutations, named_jpg) in enumerate(files):
        # sometimes a misleading extension: detection goes by content, not by name
        name = f"{index}_{seed}" + (".jpg" if named_jpg else "")
        written[name] = mutate(SEEDS[seed], mutations)
        (root / name).write_bytes(written[name])
    policy = DecodePolicy(mode, max_pixels=MAX_PIXELS)
    decoded, failed = {}, set()
    for name in written:
        with canvases() as sizes:
            try:
                decoded[name] = decode_file(str(root / name), policy, name).pixels
            except UnreadableInputError:
                failed.add(name)
        assert all(w * h <= MAX_PIXELS for w, h in sizes), (name, sizes)
    for name, pixels in decoded.items():  # what normstats decoded is what Pillow decodes
        assert np.array_equal(pixels, pillow_pixels(written[name], mode)), name
    if not decoded:
        with pytest.raises(EmptyDatasetError, match="no usable image"):
            normstats.compute(root, mode=mode, scheduler="sync", cache=False,
                              max_pixels=MAX_PIXELS)
        return
    stats = normstats.compute(root, mode=mode, scheduler="sync", cache=False,
                              max_pixels=MAX_PIXELS)
    skipped = {s.path: s.reason for s in stats.skipped}
    assert set(skipped) == failed
    assert all(reason and "\n" not in reason for reason in skipped.values())
    assert_matches_oracle(stats, [decoded[name] for name in sorted(decoded)], 255)


@contextlib.contextmanager
def canvases() -> Iterator[list[tuple[int, int]]]:
    """The size of every image memory Pillow allocates inside the block (this thread)."""
    sizes: list[tuple[int, int]] = []
    core = Image.core
    originals = {name: getattr(core, name) for name in ("new", "fill")}

    def spy(original):
        def allocate(mode, size, *rest):
            sizes.append(tuple(size))
            return original(mode, size, *rest)
        return allocate

    for name, original in originals.items():
        setattr(core, name, spy(original))
    try:
        yield sizes
    finally:
        for name, original in originals.items():
            setattr(core, name, original)


def test_the_canvas_spy_sees_pillows_allocations():
    """The bound above is only as good as the spy: it must see a decode's canvas."""
    with canvases() as sizes:
        decode_file_bytes = SEEDS["rgb.bmp"]
        Image.open(io.BytesIO(decode_file_bytes)).load()
    assert (20, 16) in sizes


def _claiming(name: str, width: int) -> bytes:
    """A seed whose header claims ``width`` columns (the data stays the seed's)."""
    data = bytearray(SEEDS[name])
    if name.endswith(".bmp"):
        data[18:22] = width.to_bytes(4, "little")  # BITMAPINFOHEADER biWidth
    elif name.endswith(".png"):
        data[16:20] = width.to_bytes(4, "big")  # IHDR width
        data[29:33] = zlib.crc32(bytes(data[12:29])).to_bytes(4, "big")  # its CRC again
    elif name.endswith(".ppm"):
        data = bytearray(bytes(data).replace(b"20 16", f"{width} 16".encode(), 1))
    return bytes(data)


@pytest.mark.parametrize("name", ["rgb.bmp", "rgb.png", "rgb.ppm"])
def test_a_size_field_past_the_limit_is_refused_before_any_canvas(tmp_path, name):
    """The bound of the fuzz test on the flipped size field it may not happen to draw:
    a header claiming 5,000 x 16 pixels is refused from the header, before Pillow
    allocates a canvas; one claiming 1,000 x 16 (within the limit) gets its canvas."""
    for width, refused in ((5_000, True), (1_000, False)):
        path = tmp_path / f"{width}_{name}"
        path.write_bytes(_claiming(name, width))
        with canvases() as sizes:
            with pytest.raises(UnreadableInputError) as error:
                decode_file(str(path), DecodePolicy("RGB", max_pixels=MAX_PIXELS))
        if refused:
            assert "decompression bomb: 5000x16 = 80000 pixels" in str(error.value)
            assert sizes == []
        else:  # the data is too short for the claimed size: Pillow allocates, then fails
            assert "decompression bomb" not in str(error.value)
            assert (1_000, 16) in sizes
