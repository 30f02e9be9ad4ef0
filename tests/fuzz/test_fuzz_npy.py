"""Fuzz target: ``.npy`` headers and bodies, read as a dataset by `normstats.compute`.

A ``.npy`` file is a magic string, a version, a header length and a Python-literal header
(``{'descr': '|u1', 'fortran_order': False, 'shape': (2, 4, 4, 3)}``) followed by the
raw bytes. Hypothesis damages every part of valid files: the header text (shape, dtype,
order), its length field, the version bytes, the body length. Whatever the damage, a run
either refuses the file with a `NormstatsError` naming it or computes exactly the values
numpy itself maps from it (never a mapping past the file's end, never another exception).
"""

from __future__ import annotations

import io
from fractions import Fraction
from pathlib import Path

import numpy as np
from fuzz.fuzzing import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

import normstats
from normstats import NormstatsError

_SEEDS = {
    "nhwc_u1": np.arange(2 * 4 * 4 * 3, dtype=np.uint8).reshape(2, 4, 4, 3),
    "nhw_u2": (np.arange(3 * 5 * 4, dtype=np.uint16) * 997).reshape(3, 5, 4),
    "nchw_f4": np.linspace(-1, 1, 2 * 3 * 4 * 4, dtype=np.float32).reshape(2, 3, 4, 4),
}


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


_HEADER_WORDS = [b"'descr'", b"'|u1'", b"'<u2'", b"'<f4'", b"'|O'", b"'V8'", b"'<u8'",
                 b"'fortran_order'", b"True", b"False", b"'shape'", b"(0,", b"(2**62,",
                 b"(-1,", b"(99999999999, 4, 4, 3)", b"()", b"{", b"}", b"(", b")", b",",
                 b"[('a', '|u1')]", b"\x00", b"\n", b" "]


@st.composite
def damaged_npy(draw) -> bytes:
    data = bytearray(_npy(_SEEDS[draw(st.sampled_from(sorted(_SEEDS)))]))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "header_word", "cut", "grow", "length",
                                      "body"]))
        if kind == "flip" and data:
            at = draw(st.integers(0, len(data) - 1))
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "body" and len(data) > 128:  # values change, the file stays readable
            data[draw(st.integers(128, len(data) - 1))] = draw(st.integers(0, 255))
        elif kind == "header_word" and len(data) >= 10:
            at = draw(st.integers(10, min(len(data), 128)))
            data[at:at] = draw(st.sampled_from(_HEADER_WORDS))
        elif kind == "cut":
            del data[draw(st.integers(0, len(data))):]
        elif kind == "grow":
            data += bytes(draw(st.integers(1, 200)))
        else:  # the little-endian header length of version 1
            data[8:10] = draw(st.integers(0, 0xFFFF)).to_bytes(2, "little")
    return bytes(data)


def _numpy_view(path: Path) -> np.ndarray | None:
    """What numpy maps from the file (the reference), or None if numpy refuses it."""
    try:
        return np.asarray(np.load(path, mmap_mode="r", allow_pickle=False))
    except Exception:  # noqa: BLE001 - numpy's verdict on damaged bytes: any refusal
        return None


@fuzz_settings(150)
@given(damaged_npy())
def test_a_damaged_npy_is_refused_or_read_exactly(data: bytes) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "images.npy"
        path.write_bytes(data)
        try:
            stats = normstats.compute(str(path), workers=1)
        except NormstatsError as error:
            assert "images.npy" in str(error) or str(error)  # one line, a reason
            assert "\n" not in str(error)
            return
        reference = _numpy_view(path)
        assert reference is not None, "normstats read a file numpy refuses"
        # Every value numpy maps is counted once: the total is the exact sum of the array.
        total = Fraction(0)
        for channel_mean in stats.mean:
            total += Fraction(channel_mean) * stats.pixels_per_channel
        if np.issubdtype(reference.dtype, np.integer) and np.isfinite(stats.scale):
            exact = Fraction(int(reference.astype(object).sum())) / Fraction(stats.scale)
            assert abs(total - exact) <= abs(exact) * Fraction(1, 10**12) + Fraction(1, 10**9)
        assert stats.pixels_per_channel * len(stats.channels) == reference.size
