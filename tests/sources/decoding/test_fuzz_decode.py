"""Fuzzing the folder source with mutated image bytes (docs/reliability.md, row "fuzz").

Hypothesis takes small valid files of every allowed format and damages them: bit flips,
overwritten bytes, truncations and splices of two files (the header of one and the body
of another). A folder of such files goes through `normstats.compute`, and:

- nothing crashes and nothing hangs: each file's decode finishes within a few seconds
  (the largest seen while writing this test was ~0.05 s; a flipped size field can make
  a decoder allocate and fill a big canvas before it finds the data short, which is why
  the bound is seconds and not milliseconds);
- every file that could not be used is in ``skipped`` with a one-line reason;
- every file that did decode contributes exactly what Pillow decodes from it (no
  ``LOAD_TRUNCATED_IMAGES``): the statistics equal the exact oracle of those pixels.

Examples are derandomized so CI runs the same cases every time; the run takes well under a
minute on two cores.
"""

from __future__ import annotations

import io
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import assert_matches_oracle
from PIL import Image

import normstats
from normstats import EmptyDatasetError, UnreadableInputError
from normstats.sources.decoding.decode import ALLOWED_FORMATS, DecodePolicy, decode_file

#: Generous: a hang, not a slow decoder, is what this bound is for.
DECODE_SECONDS = 5.0


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
    policy = DecodePolicy(mode)
    decoded, failed = {}, set()
    for name in written:
        start = time.perf_counter()
        try:
            decoded[name] = decode_file(str(root / name), policy, name).pixels
        except UnreadableInputError:
            failed.add(name)
        assert time.perf_counter() - start < DECODE_SECONDS, name
    for name, pixels in decoded.items():  # what normstats decoded is what Pillow decodes
        assert np.array_equal(pixels, pillow_pixels(written[name], mode)), name
    if not decoded:
        with pytest.raises(EmptyDatasetError, match="no usable image"):
            normstats.compute(root, mode=mode, scheduler="sync", cache=False)
        return
    stats = normstats.compute(root, mode=mode, scheduler="sync", cache=False)
    skipped = {s.path: s.reason for s in stats.skipped}
    assert set(skipped) == failed
    assert all(reason and "\n" not in reason for reason in skipped.values())
    assert_matches_oracle(stats, [decoded[name] for name in sorted(decoded)], 255)
