"""The compiled extensions trust no size they are given: every entry point refuses sizes
whose products overflow, negative sizes, buffers shorter or longer than the sizes claim,
unaligned or overlapping outputs, with a Python exception and before touching memory.

The hostile calls run in a child process, one after the other: a kernel that wrote out of
bounds would kill the child (the next child goes on from the call after), never the test
runner. Before the checks,
``moments(b"", 2**57, 128, ...)`` multiplied 2**57 images by 128 channels into 0 cells,
took four empty outputs as the right size and wrote past them (SIGSEGV, exit -11);
``exponent_bins(b"", 2**61, ...)`` divided by ``8 * 2**61``, which wraps to 0 (SIGFPE).
Under tests/sanitize/build_and_run.py the child loads the sanitized builds too.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys

import numpy as np
import pytest

from normstats.maths import _moments

# Run in the child, with ``m`` the statistics kernels, ``x`` the cross sums (covariance),
# ``p`` the PNG chunk walk, ``out(n)``
# the four outputs of n cells (sums, squares, lows, highs), SIG the PNG signature and IHDR
# a plain header chunk, CRC right (the walk reads on past it).
CHILD = """
import json, struct, sys, zlib
from normstats.maths import _moments as m
from normstats.maths import _cross as x
from normstats.sources.decoding import _png_chunks as p
SIG = b"\\x89PNG\\r\\n\\x1a\\n"
HEAD = b"IHDR" + struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)  # 1x1 grey: plain
IHDR = struct.pack(">I", 13) + HEAD + struct.pack(">I", zlib.crc32(HEAD))
def out(cells):
    return bytearray(8 * cells), bytearray(8 * cells), bytearray(cells), bytearray(cells)
for name, call in json.loads(sys.argv[1]).items():
    print("calling", name, file=sys.stderr, flush=True)  # the last one said crashed
    try:
        answer = ["returned", repr(eval(call))]
    except Exception as error:
        answer = [type(error).__name__, str(error)]
    print(json.dumps([name, *answer]), flush=True)
"""

TOO_MANY = "more outputs than memory can hold"
TOO_WIDE = "more bins than memory can hold"
#: name -> (call, exception type or "returned", text the message or the answer contains)
MOMENTS = {
    "2**57 images of 128 channels (0 cells once wrapped)":
        ('m.moments(b"", 2**57, 128, *out(0))', "OverflowError",
         f"144115188075855872 images of 128 channels: {TOO_MANY}"),
    "count * channels wrapping to 2 cells":
        ('m.moments(b"", (2**64 + 2) // 3, 3, *out(2))', "OverflowError", TOO_MANY),
    "cells * 8 bytes wrapping": ('m.moments(b"", 2**60, 1, *out(0))', "OverflowError", TOO_MANY),
    "the largest count": ('m.moments(b"", sys.maxsize, 1, *out(0))', "OverflowError", TOO_MANY),
    "a count past Py_ssize_t": ('m.moments(b"", 2**63, 1, *out(0))', "OverflowError",
                                "too large to convert"),
    "a negative count": ('m.moments(b"", -1, 3, *out(0))', "ValueError", "count must be >= 0"),
    "a count of -2**57": ('m.moments(b"", -2**57, 128, *out(0))', "ValueError",
                          "count must be >= 0"),
    "no channels": ("m.moments(bytes(12), 2, 0, *out(0))", "ValueError", "channels in 1..128"),
    "negative channels": ("m.moments(bytes(12), 2, -3, *out(6))", "ValueError",
                          "channels in 1..128"),
    "129 channels": ("m.moments(bytes(258), 2, 129, *out(258))", "ValueError",
                     "channels in 1..128"),
    "pixels but no image": ("m.moments(bytes(12), 0, 3, *out(0))", "ValueError",
                            "rows of equal size"),
    "images shorter than their rows": ("m.moments(bytes(11), 2, 3, *out(6))", "ValueError",
                                       "rows of equal size"),
    "rows not whole pixels": ("m.moments(bytes(14), 2, 3, *out(6))", "ValueError",
                              "whole number of pixels"),
    "sums a byte short": ("m.moments(bytes(12), 2, 3, bytearray(47), *out(6)[1:])",
                          "ValueError", "sums holds 47 bytes, the kernel expects 48"),
    "squares a byte long": ("m.moments(bytes(12), 2, 3, bytearray(48), bytearray(49), "
                            "*out(6)[2:])", "ValueError", "squares holds 49 bytes"),
    "lows a byte short": ("m.moments(bytes(12), 2, 3, *out(6)[:2], bytearray(5), bytearray(6))",
                          "ValueError", "lows holds 5 bytes, the kernel expects 6"),
    "highs empty": ("m.moments(bytes(12), 2, 3, *out(6)[:3], bytearray(0))", "ValueError",
                    "highs holds 0 bytes, the kernel expects 6"),
    "sums unaligned": ("m.moments(bytes(12), 2, 3, memoryview(bytearray(49))[1:], "
                       "*out(6)[1:])", "ValueError", "sums is not aligned to 8 bytes"),
    "sums and squares one buffer": ("(lambda b: m.moments(bytes(12), 2, 3, b, b, *out(6)[2:]))"
                                    "(bytearray(48))", "ValueError",
                                    "sums and squares share memory"),
    "lows inside the images": ("(lambda i: m.moments(i, 2, 3, *out(6)[:2], memoryview(i)[:6], "
                               "bytearray(6)))(bytearray(12))", "ValueError",
                               "images and lows share memory"),
    "a read-only output": ("m.moments(bytes(12), 2, 3, bytes(48), *out(6)[1:])", "TypeError",
                           "read-write"),
    "images not contiguous": ("m.moments(memoryview(bytes(24))[::2], 2, 3, *out(6))",
                              "BufferError", "not C-contiguous"),
    "two images (the control)": ("m.moments(bytes(12), 2, 3, *out(6))", "returned", "None"),
    "no image": ('m.moments(b"", 0, 3, *out(0))', "returned", "None"),
    "images of no pixels": ('m.moments(b"", 2, 3, *out(6))', "returned", "None"),
}
#: records: moments' outputs with float64 lows and highs, then the spreads and totals of
#: spread_sums (3 channels: 5,184 and 96 bytes) and uint8 extremes (2 x 3); two images of
#: 2 pixels of 3 channels (12 bytes) is the control.
def _records(lows="bytearray(48)", spreads="bytearray(5184)", totals="bytearray(96)",
             extremes="bytearray(6)", images="bytes(12)", count=2):
    return (f"m.records({images}, {count}, 3, bytearray(48), bytearray(48), {lows}, "
            f"bytearray(48), {spreads}, {totals}, {extremes})")


RECORDS = {
    "records: lows of uint8": (_records(lows="bytearray(6)"), "ValueError",
                               "lows holds 6 bytes, the kernel expects 48"),
    "records: spreads a byte short": (_records(spreads="bytearray(5183)"), "ValueError",
                                      "spreads holds 5183 bytes, the kernel expects 5184"),
    "records: totals unaligned": (_records(totals="memoryview(bytearray(97))[1:]"),
                                  "ValueError", "totals is not aligned to 8 bytes"),
    "records: extremes a byte long": (_records(extremes="bytearray(7)"), "ValueError",
                                      "extremes holds 7 bytes"),
    "records: spreads inside the lows": ("(lambda b: m.records(bytes(12), 2, 3, "
                                         "bytearray(48), bytearray(48), memoryview(b)[:48], "
                                         "bytearray(48), b, bytearray(96), bytearray(6)))"
                                         "(bytearray(5184))", "ValueError",
                                         "lows and spreads share memory"),
    "records: read-only extremes": (_records(extremes="bytes(6)"), "TypeError", "read-write"),
    "records: a count wrapping": (_records(images='b""', count=2**62), "OverflowError",
                                  "more outputs than memory can hold"),
    "records: two images (the control)": (_records(), "returned", "True"),
    "records: images of no pixels, spreads left to numpy": (_records(images='b""'),
                                                            "returned", "False"),
}
BINS = {
    "2**61 columns (8 * columns wraps to 0)":
        ('m.exponent_bins(b"", 2**61, bytearray(0), bytearray(0))', "OverflowError",
         f"2305843009213693952 columns: {TOO_WIDE}"),
    "2**61 + 1 columns (a bin's index wraps)":
        ('m.exponent_bins(struct.pack("<d", 1.5), 2**61 + 1, bytearray(16384), '
         "bytearray(16384))", "OverflowError", TOO_WIDE),
    "the most columns": ("m.exponent_bins(b'', sys.maxsize, bytearray(0), bytearray(0))",
                         "OverflowError", TOO_WIDE),
    "no column": ("m.exponent_bins(bytes(8), 0, bytearray(0), bytearray(0))", "ValueError",
                  "columns must be >= 1"),
    "negative columns": ("m.exponent_bins(bytes(8), -1, bytearray(8), bytearray(8))",
                         "ValueError", "columns must be >= 1"),
    "values not in rows": ("m.exponent_bins(bytes(24), 2, bytearray(32768), bytearray(32768))",
                           "ValueError", "do not split into rows"),
    "low_sums a byte short": ("m.exponent_bins(bytes(16), 1, bytearray(16383), "
                              "bytearray(16384))", "ValueError",
                              "low_sums holds 16383 bytes, the kernel expects 16384"),
    "high_sums for one column fewer": ("m.exponent_bins(bytes(16), 2, bytearray(32768), "
                                       "bytearray(16384))", "ValueError", "high_sums holds"),
    "low_sums unaligned": ("m.exponent_bins(bytes(8), 1, memoryview(bytearray(16385))[1:], "
                           "bytearray(16384))", "ValueError", "low_sums is not aligned"),
    "low_sums and high_sums one buffer": ("(lambda b: m.exponent_bins(bytes(8), 1, b, b))"
                                          "(bytearray(16384))", "ValueError",
                                          "low_sums and high_sums share memory"),
    "the values inside low_sums": ("(lambda b: m.exponent_bins(memoryview(b)[:8], 1, b, "
                                   "bytearray(16384)))(bytearray(16384))", "ValueError",
                                   "bits and low_sums share memory"),
}
#: spread_sums: int64 sums and squares (count, channels), pixels (count), fixed-point
#: spreads of 3 * 72 uint64 limbs a channel (1,728 bytes) and totals of 2 int128s a channel
#: (32 bytes); one image of 4 pixels whose sums are 6 and 14 is the control.
ONE = 'struct.pack("<q", 6), struct.pack("<q", 14), struct.pack("<q", 4)'
SPREADS = {
    "spread: no channels": ("m.spread_sums(bytes(8), bytes(8), bytes(8), 0, bytearray(0), "
                            "bytearray(0))", "ValueError", "channels must be in 1..128"),
    "spread: 129 channels": ("m.spread_sums(b'', b'', b'', 129, bytearray(129 * 1728), "
                             "bytearray(129 * 32))", "ValueError",
                             "channels must be in 1..128"),
    "spread: pixels not whole int64s": ("m.spread_sums(b'', b'', bytes(7), 1, bytearray(1728), "
                                        "bytearray(32))", "ValueError",
                                        "not a whole number of int64s"),
    "spread: sums a byte short": ("m.spread_sums(bytes(7), bytes(8), bytes(8), 1, "
                                  "bytearray(1728), bytearray(32))", "ValueError",
                                  "sums holds 7 bytes, the kernel expects 8"),
    "spread: squares for two images": ("m.spread_sums(bytes(8), bytes(16), bytes(8), 1, "
                                       "bytearray(1728), bytearray(32))", "ValueError",
                                       "squares holds 16 bytes"),
    "spread: spreads a byte short": ("m.spread_sums(bytes(8), bytes(8), bytes(8), 1, "
                                     "bytearray(1727), bytearray(32))", "ValueError",
                                     "spreads holds 1727 bytes, the kernel expects 1728"),
    "spread: totals unaligned": ("m.spread_sums(bytes(8), bytes(8), bytes(8), 1, "
                                 "bytearray(1728), memoryview(bytearray(33))[1:])",
                                 "ValueError", "totals is not aligned"),
    "spread: spreads and totals one buffer": ("(lambda b: m.spread_sums(bytes(8), "
                                              "bytes(8), bytes(8), 1, b, "
                                              "memoryview(b)[:32]))(bytearray(1728))",
                                              "ValueError", "spreads and totals share memory"),
    "spread: the sums inside the spreads": ("(lambda b: m.spread_sums(memoryview(b)[:8], "
                                            "bytes(8), bytes(8), 1, b, bytearray(32)))"
                                            "(bytearray(1728))", "ValueError",
                                            "sums and spreads share memory"),
    "spread: read-only totals": (f"m.spread_sums({ONE}, 1, bytearray(1728), bytes(32))",
                                 "TypeError", "read-write"),
    "spread: one image (the control)": (f"m.spread_sums({ONE}, 1, bytearray(1728), "
                                        "bytearray(32))", "returned", "True"),
    "spread: no image": ("m.spread_sums(b'', b'', b'', 3, bytearray(3 * 1728), "
                         "bytearray(3 * 32))", "returned", "True"),
    "spread: an image of no pixel, left to numpy": (
        "m.spread_sums(bytes(8), bytes(8), bytes(8), 1, bytearray(1728), bytearray(32))",
        "returned", "False"),
    "spread: n * n past int64, left to numpy": (
        'm.spread_sums(bytes(8), bytes(8), struct.pack("<q", 2**32), 1, bytearray(1728), '
        "bytearray(32))", "returned", "False"),
}
#: running_sums: uint8 images, the uint16 run (one per value of an image), uint32 squares or
#: None; two images of 6 values into a run of 6 (12 bytes, squares 24) is the control.
RUNNING = {
    "running: a negative count": ("m.running_sums(b'', -1, bytearray(12), None)",
                                  "ValueError", "count must be >= 0"),
    "running: count * values wrapping": ('m.running_sums(b"", 2**62, bytearray(8), None)',
                                         "OverflowError",
                                         "4611686018427387904 images of 4 values: more than "
                                         "memory can hold"),
    "running: the largest count": ('m.running_sums(b"", sys.maxsize, bytearray(4), None)',
                                   "OverflowError", "more than memory can hold"),
    "running: a count past Py_ssize_t": ('m.running_sums(b"", 2**63, bytearray(4), None)',
                                         "OverflowError", "too large to convert"),
    "running: a run of half a uint16": ("m.running_sums(bytes(6), 1, bytearray(13), None)",
                                        "ValueError", "not a whole number of uint16s"),
    "running: images a byte short": ("m.running_sums(bytes(11), 2, bytearray(12), None)",
                                     "ValueError", "images hold 11 bytes, 2 images of the "
                                                   "run's 6 values are 12"),
    "running: images a byte long": ("m.running_sums(bytes(13), 2, bytearray(12), None)",
                                    "ValueError", "images hold 13 bytes"),
    "running: bytes but no value": ("m.running_sums(bytes(3), 5, bytearray(0), None)",
                                    "ValueError", "images hold 3 bytes"),
    "running: squares for one value fewer": ("m.running_sums(bytes(12), 2, bytearray(12), "
                                             "bytearray(20))", "ValueError",
                                             "squares holds 20 bytes, the kernel expects 24"),
    "running: run unaligned": ("m.running_sums(bytes(12), 2, memoryview(bytearray(13))[1:], "
                               "None)", "ValueError", "run is not aligned to 2 bytes"),
    "running: squares unaligned": ("m.running_sums(bytes(12), 2, bytearray(12), "
                                   "memoryview(bytearray(26))[2:])", "ValueError",
                                   "squares is not aligned to 4 bytes"),
    "running: run and squares overlapping": ("(lambda b: m.running_sums(bytes(12), 2, "
                                             "memoryview(b)[:12], memoryview(b)[8:32]))"
                                             "(bytearray(32))", "ValueError",
                                             "run and squares share memory"),
    "running: the images inside the run": ("(lambda b: m.running_sums(memoryview(b)[:12], 2, "
                                           "b, None))(bytearray(12))", "ValueError",
                                           "images and run share memory"),
    "running: a read-only run": ("m.running_sums(bytes(12), 2, bytes(12), None)", "TypeError",
                                 "read-write"),
    "running: read-only squares": ("m.running_sums(bytes(12), 2, bytearray(12), bytes(24))",
                                   "BufferError", "not writable"),
    "running: squares not contiguous": ("m.running_sums(bytes(12), 2, bytearray(12), "
                                        "memoryview(bytearray(48))[::2])", "BufferError",
                                        "not C-contiguous"),
    "running: images not contiguous": ("m.running_sums(memoryview(bytes(24))[::2], 2, "
                                       "bytearray(12), None)", "BufferError",
                                       "not C-contiguous"),
    "running: two images (the control)": ("m.running_sums(bytes(12), 2, bytearray(12), "
                                          "bytearray(24))", "returned", "None"),
    "running: no image": ("m.running_sums(b'', 0, bytearray(12), None)", "returned", "None"),
    "running: images of no values": ("m.running_sums(b'', 5, bytearray(0), None)", "returned",
                                     "None"),
}
CROSS = {
    "cross: 2**62 images of 3 channels (outputs wrap)":
        ('x.cross(b"", 2**62, 3, bytearray(0))', "OverflowError",
         f"4611686018427387904 images of 3 channels: {TOO_MANY}"),
    "cross: count * pairs * 8 wrapping": ('x.cross(b"", 2**61, 2, bytearray(0))',
                                          "OverflowError", TOO_MANY),
    "cross: a negative count": ('x.cross(b"", -1, 3, bytearray(0))', "ValueError",
                                "count must be >= 0"),
    "cross: 129 channels": ("x.cross(bytes(258), 2, 129, bytearray(8 * 2 * 8256))",
                            "ValueError", "channels in 1..128"),
    "cross: rows not whole pixels": ("x.cross(bytes(14), 2, 3, bytearray(48))", "ValueError",
                                     "whole number of pixels"),
    "cross: images shorter than their rows": ("x.cross(bytes(11), 2, 3, bytearray(48))",
                                              "ValueError", "rows of equal size"),
    "cross: sums a byte short": ("x.cross(bytes(12), 2, 3, bytearray(47))", "ValueError",
                                 "sums holds 47 bytes"),
    "cross: sums unaligned": ("x.cross(bytes(12), 2, 3, memoryview(bytearray(49))[1:])",
                              "ValueError", "sums holds 48 bytes (aligned: 0)"),
    "cross: sums inside the images": ("(lambda b: x.cross(memoryview(b)[:12], 2, 3, "
                                      "memoryview(b)[8:56]))(bytearray(64))", "ValueError",
                                      "images and sums share memory"),
    "cross: a read-only output": ("x.cross(bytes(12), 2, 3, bytes(48))", "TypeError",
                                  "read-write"),
    "cross: two images (the control)": ("x.cross(bytes(12), 2, 3, bytearray(48))", "returned",
                                        "None"),
    "cross: images of no pixels": ('x.cross(b"", 2, 3, bytearray(48))', "returned", "None"),
    "cross: one channel, no pair": ("x.cross(bytes(4), 2, 1, bytearray(0))", "returned",
                                    "None"),
}
PNG = {  # the walk reads its sizes from the bytes: lengths near 2**32 must not wrap a sum
    "a first chunk of length 2**32 - 1": (r'p.plain_layout(SIG + b"\xff\xff\xff\xffIHDR" + '
                                          "bytes(30))", "returned", "None"),
    "a first chunk ending at 2**32 + 8": (r'p.plain_layout(SIG + b"\xff\xff\xff\xf4IHDR" + '
                                          "bytes(30))", "returned", "None"),
    "a second chunk of length 2**31": (r'p.plain_layout(SIG + IHDR + b"\x80\x00\x00\x00IDAT" '
                                       "+ bytes(30))", "returned", "None"),
    "the signature alone": ("p.plain_layout(SIG)", "returned", "None"),
    "eleven bytes after the signature": ("p.plain_layout(SIG + bytes(11))", "returned", "None"),
    "no bytes": ('p.plain_layout(b"")', "returned", "None"),
    "not a buffer": ("p.plain_layout(3)", "TypeError", "bytes-like"),
    "a walk over bytes not contiguous": ("p.plain_layout(memoryview(SIG * 2)[::2])",
                                         "BufferError", "not C-contiguous"),
    "the CRC of no bytes": ('p.crc32(b"")', "returned", "0"),
    "a CRC over bytes not contiguous": ("p.crc32(memoryview(bytes(8))[::2])", "BufferError",
                                        "not C-contiguous"),
}
CASES = {**MOMENTS, **RECORDS, **BINS, **SPREADS, **RUNNING, **CROSS, **PNG}


@pytest.fixture(scope="module")
def answers() -> dict[str, list[str]]:
    """Each case's answer, [exception type or "returned", its text], from one child for
    all of them; a child that dies marks its call ["crashed", why] and the next child
    goes on from the call after."""
    found: dict[str, list[str]] = {}
    pending = list(CASES)
    while pending:
        calls = {name: CASES[name][0] for name in pending}
        child = subprocess.run([sys.executable, "-c", CHILD, json.dumps(calls)],
                               capture_output=True, text=True, timeout=120)
        for line in child.stdout.splitlines():
            name, *answer = json.loads(line)
            found[name] = answer
        pending = [name for name in pending if name not in found]
        if pending:  # the child died in the first call it did not answer
            found[pending.pop(0)] = ["crashed", f"exit status {child.returncode}, "
                                                f"{child.stderr[-1500:]}"]
    return found


@pytest.mark.parametrize("name", CASES)
def test_each_entry_point_refuses_a_size_it_cannot_honour(answers, name):
    _, kind, text = CASES[name]
    assert answers[name][0] == kind and text in answers[name][1], answers[name]


def test_exponent_bins_read_unaligned_values_exactly():
    """A numpy view at an odd offset (``np.ascontiguousarray`` keeps it so) is read byte
    by byte: bins equal to Python's integers, as for the aligned copy."""
    values = [1.5, -2.25, 5e-324, -0.0, 3.0e300, 7.0]
    raw = bytearray(1 + 8 * len(values))
    raw[1:] = struct.pack(f"<{len(values)}d", *values)
    bits = np.frombuffer(raw, np.int64, offset=1).reshape(3, 2)
    assert not bits.flags.aligned
    low, high = np.zeros((2048, 2), np.int64), np.zeros((2048, 2), np.int64)
    _moments.exponent_bins(bits, 2, low, high)
    expected_low, expected_high = np.zeros_like(low), np.zeros_like(high)
    for i, b in enumerate(struct.unpack(f"<{len(values)}q", bytes(raw[1:]))):
        biased = (b >> 52) & 0x7FF
        significand = (b & (2**52 - 1)) | (biased > 0) << 52
        significand = -significand if b < 0 else significand
        expected_low[biased, i % 2] += significand & (2**27 - 1)
        expected_high[biased, i % 2] += significand >> 27
    assert low.tolist() == expected_low.tolist() and high.tolist() == expected_high.tolist()
