"""Fuzz target: ``.npz`` archives, read by `normstats.sources.npz.open_npz`.

Hypothesis damages the ``.npy`` member before it is zipped (its header text, its length
field, its body length) and the zip around it afterwards (bit flips, the sizes, CRC and
offsets of the local and central headers overwritten with 0, small or huge values, cuts),
for stored and deflated archives. Whatever the damage, `open_npz` either refuses the file
with a one-line `NormstatsError` or gives exactly the array numpy reads from the member's
bytes; and it never inflates more than the member's declared size (plus its header and one
byte), counted through zlib rather than timed.
"""

from __future__ import annotations

import io
import struct
import tempfile
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest
from fuzz.fuzzing import fuzz_settings, regression_inputs
from hypothesis import given
from hypothesis import strategies as st
from watchdogs import counting_inflation

from normstats.errors import NormstatsError
from normstats.sources.npz import open_npz

_SEEDS = [np.arange(2 * 4 * 4 * 3, dtype=np.uint8).reshape(2, 4, 4, 3),
          (np.arange(3 * 5 * 4, dtype=np.uint16) * 997).reshape(3, 5, 4).astype(">u2"),
          np.linspace(-1, 1, 2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)]
_HEADER_WORDS = [b"'|u1'", b"'<f8'", b"'|O'", b"'V8'", b"'<M8[s]'", b"True", b"(0,",
                 b"(2**62,", b"(-1,", b"(-2, -48)", b"(99999999999, 4)", b"()", b"{", b"}",
                 b",", b"[('a', '|u1')]", b"\x00", b"\n"]
#: Offsets of the 4-byte CRC, compressed size and uncompressed size fields, from a header's
#: signature: local (PK\x03\x04) and central (PK\x01\x02) headers.
_FIELDS = {b"PK\x03\x04": (14, 18, 22), b"PK\x01\x02": (16, 20, 24, 42)}
_VALUES = [0, 1, 95, 96, 160, 1 << 20, (1 << 31) - 1, 0xFFFFFFFF]


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


@st.composite
def damaged_npz(draw) -> bytes:
    npy = bytearray(_npy(draw(st.sampled_from(_SEEDS))))
    for _ in range(draw(st.integers(0, 2))):
        kind = draw(st.sampled_from(["word", "flip", "cut", "grow", "length"]))
        if kind == "word" and len(npy) > 10:
            at = draw(st.integers(10, min(len(npy), 118)))
            npy[at:at] = draw(st.sampled_from(_HEADER_WORDS))
        elif kind == "flip" and npy:
            npy[draw(st.integers(0, len(npy) - 1))] ^= 1 << draw(st.integers(0, 7))
        elif kind == "cut":
            del npy[draw(st.integers(0, len(npy))):]
        elif kind == "grow":
            npy += bytes(draw(st.integers(1, 300)))
        elif kind == "length":
            npy[8:10] = draw(st.integers(0, 0xFFFF)).to_bytes(2, "little")
    buffer = io.BytesIO()
    method = draw(st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED]))
    with zipfile.ZipFile(buffer, "w", method) as archive:
        archive.writestr("images.npy", bytes(npy))
        archive.writestr("labels.npy", _npy(np.arange(3)))
    return _damaged_zip(draw, bytearray(buffer.getvalue()))


def _damaged_zip(draw, data: bytearray) -> bytes:
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["field", "flip", "cut"]))
        if kind == "field" and data:
            signature = draw(st.sampled_from(sorted(_FIELDS)))
            start = data.find(signature, draw(st.integers(0, len(data))) % len(data))
            start = data.find(signature) if start < 0 else start
            at = start + draw(st.sampled_from(_FIELDS[signature]))
            if start >= 0 and at + 4 <= len(data):
                data[at:at + 4] = struct.pack("<I", draw(st.sampled_from(_VALUES)))
        elif kind == "flip" and data:
            data[draw(st.integers(0, len(data) - 1))] ^= 1 << draw(st.integers(0, 7))
        elif kind == "cut":
            del data[draw(st.integers(0, len(data))):]
    return bytes(data)


def _reference(path: Path, name: str) -> np.ndarray:
    """What numpy reads from the member's bytes as they lie in the file (stored) or as they
    inflate (deflated), without trusting the zip directory's sizes."""
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(name)
    raw = path.read_bytes()
    name_len, extra_len = struct.unpack("<HH", raw[info.header_offset + 26:][:4])
    start = info.header_offset + 30 + name_len + extra_len
    member = raw[start:start + info.compress_size]
    if info.compress_type == zipfile.ZIP_DEFLATED:
        member = zlib.decompressobj(-zlib.MAX_WBITS).decompress(member, info.file_size + 1)
    return np.load(io.BytesIO(member), allow_pickle=False)


def _declared(path: Path) -> int:
    try:
        with zipfile.ZipFile(path) as archive:
            return sum(info.file_size for info in archive.infolist())
    except Exception:  # noqa: BLE001 - a directory zipfile refuses: nothing may be inflated
        return 0


def check(path: Path, inflated: list[int]) -> None:
    """The property: exact arrays or one line naming the file; bounded inflation."""
    inflated.clear()
    try:
        source = open_npz(str(path))
    except NormstatsError as error:
        assert str(error).startswith(str(path)) and "\n" not in str(error)
        source = None
    assert sum(inflated) <= _declared(path) + 12 + (1 << 16) + 1
    if source is None:
        return
    expected = _reference(path, source.description.rsplit(":", 1)[1] + ".npy")
    mapped = getattr(source.array, "records", None)
    got = np.ascontiguousarray(source.array if mapped is None else mapped[0:len(source)])
    native = expected.astype(expected.dtype.newbyteorder("="))
    assert got.shape == expected.shape and got.dtype == native.dtype
    assert got.tobytes() == np.ascontiguousarray(native).tobytes()


@fuzz_settings(250)
@given(damaged_npz())
def test_a_damaged_npz_is_refused_or_read_exactly(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder, counting_inflation() as inflated:
        path = Path(folder) / "data.npz"
        path.write_bytes(data)
        check(path, inflated)


@pytest.mark.parametrize("saved", regression_inputs("npz"), ids=lambda p: p.name)
def test_saved_inputs_are_refused_or_read_exactly(saved: Path) -> None:
    with counting_inflation() as inflated:
        check(saved, inflated)
