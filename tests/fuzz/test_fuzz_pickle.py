"""Fuzz target: CIFAR python batches, read by `normstats.sources.safepickle.safe_load`.

Hypothesis damages real pickles of small batches (protocols 2 and 5: bit flips, cuts,
bytes overwritten by opcodes, a slice of the stream copied elsewhere, and splices of the
dangerous opcodes -- GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, EXT1,
persistent ids, memo and stack tricks) and writes free-form opcode streams. Whatever the
bytes, `safe_load` returns plain values and arrays that own exactly their bytes, or raises
a one-line `NormstatsError` naming the file: never another exception, never a crash. The
cases run in-process (the reader calls nothing of numpy's on the file's data); the saved
inputs that once crashed or hung the old reader also run in a child process, whose exit
status shows it survived them.
"""

from __future__ import annotations

import math
import pickle
import struct
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from fuzz.fuzzing import fuzz_settings, regression_inputs
from hypothesis import given
from hypothesis import strategies as st

from normstats.errors import NormstatsError
from normstats.sources.safepickle import PICKLED_DTYPES, safe_load

P = pickle


def _batch() -> dict[Any, Any]:
    """A small batch with every kind of value a real one holds, and a few arrays."""
    return {b"batch_label": b"training batch 1 of 5", b"labels": [3, 1, 4],
            b"data": np.arange(3 * 12, dtype=np.uint8).reshape(3, 12),
            b"filenames": [b"a.png", b"b.png", b"c.png"], "mean": 0.5, "none": None,
            "fortran": np.asfortranarray(np.arange(6, dtype=">i4").reshape(2, 3)),
            "scalar": np.array(2.5, np.float32), "empty": np.zeros((0, 2), np.int16)}


SEEDS = [pickle.dumps(_batch(), protocol) for protocol in (2, 5)]

#: Opcode snippets an attacker splices in: calls, states, memo and stack tricks, lies.
DANGEROUS = [
    P.GLOBAL + b"os\nsystem\n", P.GLOBAL + b"numpy\nndarray\n", P.GLOBAL + b"numpy\ndtype\n",
    P.GLOBAL + b"numpy.core.multiarray\n_reconstruct\n", P.GLOBAL + b"_codecs\nencode\n",
    P.GLOBAL + b"numpy._core.numeric\n_frombuffer\n", P.GLOBAL + b"builtins\nbytes\n",
    P.STACK_GLOBAL, P.REDUCE, P.BUILD, P.INST + b"numpy\ndtype\n", P.OBJ, P.NEWOBJ,
    P.NEWOBJ_EX, P.EXT1 + b"\x01", P.EXT2 + b"\x01\x00", P.PERSID + b"0\n", P.BINPERSID,
    P.MARK, P.POP, P.POP_MARK, P.DUP, P.TUPLE, P.TUPLE1, P.TUPLE2, P.TUPLE3, P.EMPTY_TUPLE,
    P.EMPTY_LIST, P.EMPTY_DICT, P.EMPTY_SET, P.APPEND, P.APPENDS, P.SETITEM, P.SETITEMS,
    P.LIST, P.DICT, P.MEMOIZE, P.BINGET + b"\x00", P.BINGET + b"\x05", P.BINPUT + b"\x00",
    P.LONG_BINPUT + b"\xff\xff\xff\xff", P.LONG_BINGET + b"\xff\xff\xff\x7f",
    P.BINBYTES8 + struct.pack("<Q", 1 << 62), P.BYTEARRAY8 + b"\x03" + bytes(7) + b"abc",
    P.LONG4 + struct.pack("<i", 1 << 30), P.FRAME + struct.pack("<Q", 1 << 40),
    P.BININT + struct.pack("<i", -1), P.BININT1 + b"\x03", P.NONE, P.NEWTRUE, P.NEWFALSE,
    P.SHORT_BINBYTES + b"\x08AAAAAAAA", P.SHORT_BINUNICODE + b"\x02O8",
    P.SHORT_BINUNICODE + b"\x02u1", P.SHORT_BINUNICODE + b"\x01|", P.NEXT_BUFFER,
    P.READONLY_BUFFER, P.STOP, P.PROTO + b"\x05",
]

position = st.integers(min_value=0, max_value=1 << 16)  # taken modulo the length


@st.composite
def mutated_pickles(draw) -> bytes:
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(position) % (len(data) + 1)
        kind = draw(st.sampled_from(["flip", "cut", "opcode", "splice", "copy"]))
        if kind == "flip" and at < len(data):
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "cut":
            del data[at:]
        elif kind == "opcode" and at < len(data):
            data[at] = draw(st.sampled_from(DANGEROUS))[0]
        elif kind == "splice":
            data[at:at] = b"".join(draw(st.lists(st.sampled_from(DANGEROUS), min_size=1,
                                                 max_size=6)))
        else:  # a slice of the stream copied elsewhere: opcodes out of their place
            start = draw(position) % (len(data) + 1)
            data[at:at] = data[start:start + draw(st.integers(1, 64))]
    return bytes(data)


@st.composite
def opcode_streams(draw) -> bytes:
    body = b"".join(draw(st.lists(st.sampled_from(DANGEROUS), max_size=40)))
    return P.PROTO + bytes([draw(st.sampled_from([2, 5]))]) + body + P.STOP


def assert_plain(value: Any, seen: set[int] | None = None) -> None:
    """Plain values, and arrays of an allowed dtype that own exactly their bytes."""
    seen = set() if seen is None else seen
    if isinstance(value, str | bytes | int | float | type(None)) or id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, np.ndarray):
        assert value.dtype.kind + str(value.dtype.itemsize) in PICKLED_DTYPES \
            or value.dtype == np.bool_
        assert value.flags.owndata and value.base is None
        assert value.nbytes == math.prod(value.shape) * value.dtype.itemsize
        return
    assert type(value) in (list, tuple, dict), type(value)
    if isinstance(value, dict):
        assert all(isinstance(key, str | bytes) for key in value)
    for item in value.values() if isinstance(value, dict) else value:
        assert_plain(item, seen)


def check(data: bytes) -> None:
    """The property: plain values and exact arrays, or one line naming the file."""
    try:
        value = safe_load(data, "data_batch_1")
    except NormstatsError as error:
        message = str(error)
        assert message.startswith("data_batch_1: ") and "\n" not in message
        assert len(message) < 600
        return
    assert_plain(value)


def test_the_seeds_read_back_exactly() -> None:
    for seed in SEEDS:
        got, batch = safe_load(seed, "seed"), _batch()
        assert got.keys() == batch.keys()
        for key, value in batch.items():
            if isinstance(value, np.ndarray):
                assert got[key].dtype == value.dtype and got[key].shape == value.shape
                assert got[key].tobytes("A") == value.tobytes("A")
            else:
                assert got[key] == value


@fuzz_settings(300)
@given(mutated_pickles())
def test_mutated_batches_give_plain_values_or_one_line(data: bytes) -> None:
    check(data)


@fuzz_settings(200)
@given(opcode_streams())
def test_free_form_opcode_streams_give_plain_values_or_one_line(data: bytes) -> None:
    check(data)


@pytest.mark.parametrize("path", regression_inputs("pickle"), ids=lambda p: p.name)
def test_saved_inputs_give_plain_values_or_one_line(path) -> None:
    check(path.read_bytes())


_REPLAY = """
import sys
from normstats.errors import NormstatsError
from normstats.sources.safepickle import safe_load
for path in sys.argv[1:]:
    try:
        safe_load(open(path, "rb").read(), path)
        print(path + ": read")
    except NormstatsError as error:
        print(error)
"""


def test_saved_inputs_do_not_crash_a_process() -> None:
    """The inputs that crashed (rc 139) or hung the old reader, in a child process."""
    paths = [str(p) for p in regression_inputs("pickle")]
    assert len(paths) >= 4
    run = subprocess.run([sys.executable, "-c", _REPLAY, *paths], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, (run.returncode, run.stderr[-2000:])
    lines = run.stdout.splitlines()
    assert [line.split(": ", 1)[0] for line in lines] == paths  # one line a file
    assert all(": refused to unpickle: " in line for line in lines)
