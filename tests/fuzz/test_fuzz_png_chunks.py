"""Fuzz target: the compiled PNG chunk walk (normstats/sources/decoding/_png_chunks.c).

The PNG fast path reads a file's chunk sequence in C before anything else: lengths,
kinds, CRCs, the IHDR fields, the order of IDATs, iCCP and IEND, all taken from untrusted
bytes. Its verdict must be the Python reference walk's (`png_fast._walk_chunks`) on every
input, and it must never read past the buffer. Hypothesis feeds it valid files damaged
byte by byte (bit flips, length fields set near 2**32, spans inserted, deleted, repeated,
cuts), with their CRCs kept or written anew so that the later rules are reached; chunk
sequences built from every kind the walk knows, with IHDR fields at their limits; and
arbitrary bytes after the PNG signature. tests/sanitize/build_and_run.py runs this file
under AddressSanitizer, where an out-of-bounds read fails the run.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest
from fuzz.fuzzing import fuzz_settings, regression_inputs
from hypothesis import event, given
from hypothesis import strategies as st
from sources.decoding.test_png_fast import SEEDS, assemble, chunks, icc_profile

from normstats.sources.decoding import png_fast

SIGNATURE = png_fast.PNG_SIGNATURE
#: Length fields at the edges: small ones, IHDR's, and those near 2**31 and 2**32, whose
#: sum with an offset wraps where Py_ssize_t has 32 bits.
LENGTHS = [0, 1, 13, 0x7FFFFFFF, 0x80000000, 0xFFFFFFF3, 0xFFFFFFF4, 0xFFFFFFFF]


def test_the_compiled_walk_is_the_one_fuzzed():
    assert png_fast._png_chunks is not None


def verdict(data: bytes) -> str:
    """Assert that the compiled walk answers as the Python one, for bytes and for other
    buffers; "plain" or "refused" (hypothesis' statistics show that both are reached)."""
    expected = png_fast._walk_chunks(data)
    assert png_fast._plain_layout(data) == expected
    compiled = png_fast._png_chunks.plain_layout(data)
    assert png_fast._png_chunks.plain_layout(bytearray(data)) == compiled
    assert png_fast._png_chunks.plain_layout(memoryview(data)) == compiled
    return "refused" if expected is None else "plain"


def with_crcs_written_anew(data: bytes) -> bytes:
    """Every chunk that fits in the bytes gets its right CRC: the walk reads on."""
    out, position = bytearray(data), len(SIGNATURE)
    while position + 12 <= len(out):
        stop = position + 12 + int.from_bytes(out[position:position + 4], "big")
        if stop > len(out):
            break
        out[stop - 4:stop] = struct.pack(">I", zlib.crc32(out[position + 4:stop - 4]))
        position = stop
    return bytes(out)


byte_mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 1 << 12), st.integers(0, 7)),
    st.tuples(st.just("length"), st.integers(0, 1 << 12), st.sampled_from(LENGTHS)),
    st.tuples(st.just("insert"), st.integers(0, 1 << 12), st.binary(min_size=1, max_size=16)),
    st.tuples(st.just("delete"), st.integers(0, 1 << 12), st.integers(1, 64)),
    st.tuples(st.just("repeat"), st.integers(0, 1 << 12), st.integers(1, 64)),
    st.tuples(st.just("cut"), st.integers(0, 1 << 12), st.none()),
)


def mutate(data: bytes, mutations: list[tuple]) -> bytes:
    out = bytearray(data)
    for what, at, arg in mutations:
        at %= len(out) + 1
        if what == "flip" and at < len(out):
            out[at] ^= 1 << arg
        elif what == "length":
            out[at:at + 4] = struct.pack(">I", arg)
        elif what == "insert":
            out[at:at] = arg
        elif what in ("delete", "repeat"):
            span = bytes(out[at:at + arg])
            out[at:at + arg] = span * 2 if what == "repeat" else b""
        elif what == "cut":
            del out[at:]
    return bytes(out)


@fuzz_settings(300)
@given(seed=st.sampled_from(sorted(SEEDS)), mutations=st.lists(byte_mutation, min_size=1,
                                                                max_size=4),
       crcs_anew=st.booleans())
def test_damaged_files_get_the_python_walks_verdict(seed, mutations, crcs_anew):
    data = mutate(SEEDS[seed], mutations)
    event(verdict(with_crcs_written_anew(data) if crcs_anew else data))


def ihdr_body(width: int, height: int, depth: int, colour: int, rest: bytes) -> bytes:
    return struct.pack(">IIBB", width, height, depth, colour) + rest


EDGES = [0, 1, 5, 2**31 - 1, 2**31, 2**32 - 1]
PLAIN_HEADER = ihdr_body(5, 1, 8, 2, bytes(3))
header = st.one_of(st.just(PLAIN_HEADER), st.builds(
    ihdr_body, st.sampled_from(EDGES), st.sampled_from(EDGES), st.sampled_from([1, 8, 16]),
    st.sampled_from([0, 2, 3, 4, 6, 7]),
    st.sampled_from([bytes(3), b"\0\0\1", b"\1\0\0", b"\0\1\0", bytes(2), bytes(4)])))
PROFILE = b"icc\0\0" + zlib.compress(b"a profile")
#: A body each kind accepts (the walk checks lengths, profiles and nothing else).
RIGHT_BODY = {b"IDAT": b"x", b"IEND": b"", b"iCCP": PROFILE, b"tEXt": b"k\0v",
              b"gAMA": bytes(4), b"cHRM": bytes(32), b"sRGB": bytes(1), b"pHYs": bytes(9),
              b"tIME": bytes(7), b"PLTE": bytes(3), b"tRNS": bytes(2), b"IHDR": PLAIN_HEADER}
METADATA = [b"tEXt", b"gAMA", b"cHRM", b"sRGB", b"pHYs", b"tIME"]
body = st.one_of(st.binary(max_size=40),
                 st.sampled_from([b"", bytes(1), bytes(8), bytes(31), b"icc\0\1" + PROFILE[5:],
                                  PROFILE[:-3], b"\0\0" + PROFILE[5:]]))
any_chunk = st.tuples(st.one_of(st.sampled_from(sorted(RIGHT_BODY)),
                                st.binary(min_size=4, max_size=4)), body)
right_chunk = st.sampled_from(sorted(RIGHT_BODY)).map(lambda kind: (kind, RIGHT_BODY[kind]))


@st.composite
def chunk_sequence(draw) -> list[tuple[bytes, bytes]]:
    """A plain sequence (IHDR, metadata and at most one profile, a run of IDATs, metadata,
    IEND), then up to three edits that may break a rule: a chunk inserted, replaced,
    removed, repeated or moved."""
    metadata = st.lists(st.sampled_from(METADATA).map(lambda k: (k, RIGHT_BODY[k])),
                        max_size=3)
    profile = [(b"iCCP", PROFILE)] if draw(st.booleans()) else []
    parts = ([(b"IHDR", draw(header))] + draw(metadata) + profile
             + [(b"IDAT", draw(st.binary(max_size=9)))] * draw(st.integers(1, 3))
             + draw(metadata) + [(b"IEND", b"")])
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(parts) - 1))
        edit = draw(st.sampled_from(["insert", "replace", "remove", "repeat", "move"]))
        if edit in ("insert", "replace"):
            parts[at:at + (edit == "replace")] = [draw(st.one_of(right_chunk, any_chunk))]
        elif edit == "repeat":
            parts.insert(at, parts[at])
        elif len(parts) > 1:
            moved = parts.pop(at)
            if edit == "move":
                parts.insert(draw(st.integers(0, len(parts))), moved)
    return parts


@fuzz_settings(300)
@given(parts=chunk_sequence(), trailing=st.one_of(st.just(b""), st.binary(max_size=3)))
def test_chunk_sequences_get_the_python_walks_verdict(parts, trailing):
    """Every chunk kind the walk knows, in and out of order, bodies of the lengths it
    checks or not, CRCs right: each rule of the walk decides some of them."""
    event(verdict(assemble(parts) + trailing))


@fuzz_settings(300)
@given(rest=st.binary(max_size=300))
def test_any_bytes_after_the_signature_get_the_python_walks_verdict(rest):
    event(verdict(SIGNATURE + rest))


def test_the_seeds_are_plain_and_a_profile_only_python_refuses_agrees():
    """The fuzzer starts from files the walk accepts; an unreadable profile is refused
    after the compiled walk (Python checks it), as the reference walk refuses it."""
    assert all(png_fast._walk_chunks(data) is not None for data in SEEDS.values())
    parts = chunks(SEEDS["RGB"])
    damaged = assemble(parts[:1] + [(b"iCCP", b"icc\0\0" + zlib.compress(icc_profile())[:-9])]
                       + parts[1:])
    assert png_fast._png_chunks.plain_layout(damaged) is not None
    assert png_fast._plain_layout(damaged) is None
    assert verdict(damaged) == "refused"


@pytest.mark.parametrize("path", regression_inputs("png_chunks"), ids=lambda p: p.name)
def test_saved_inputs_get_the_python_walks_verdict(path: Path):
    verdict(path.read_bytes())
