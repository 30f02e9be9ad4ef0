"""Fuzz target: the TIFF directory reader (normstats/sources/decoding/tiff_header.py).

When Pillow cannot identify a TIFF, the reader looks at the first IFD of the untrusted
bytes (its offset, entry count, and the offsets and counts of three tags) to say what
the file holds. On TIFFs Pillow writes (every mode it writes, raw and compressed) it must
read the samples and bits Pillow reports; on hand-written layouts Pillow cannot open, the
ones written; and on any of them damaged (bit flips, cuts, offsets and counts set near
the file's end or 2**32) it must answer a layout within its bounds or None, never raise;
the reason and the whole decode stay one line or an `UnreadableInputError`.
"""

from __future__ import annotations

import io
import struct

import pytest
from fuzz.fuzzing import fuzz_settings, regression_inputs
from hypothesis import event, given
from hypothesis import strategies as st
from PIL import Image
from sources.decoding.test_decode import tiff_bytes

from normstats.errors import UnreadableInputError
from normstats.sources.decoding.decode import decode_bytes
from normstats.sources.decoding.pillow_pixels import unidentified_reason
from normstats.sources.decoding.policy import DecodePolicy
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


@pytest.mark.parametrize("path", regression_inputs("tiff_header"), ids=lambda p: p.name)
def test_saved_regressions(path):
    check(path.read_bytes())
