"""The pickle reader of CIFAR python batches: real pickles read bit-exactly, hostile ones refused.

The hostile pickles are written opcode by opcode here (`forged_object_dtype_pickle`,
`ndarray_call_pickle`, `billion_laughs_pickle`); the same bytes are saved under
``tests/fuzz/regressions/pickle/`` and replayed by the pickle fuzz target.
"""

from __future__ import annotations

import pickle
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from fuzz.fuzzing import REGRESSIONS

import normstats
from normstats.errors import NormstatsError
from normstats.sources import safepickle
from normstats.sources.cifar import open_cifar_python
from normstats.sources.safepickle import safe_load

P = pickle  # the opcode constants: P.MARK, P.TUPLE, ...


def _global(module: str, name: str) -> bytes:
    return P.GLOBAL + f"{module}\n{name}\n".encode()


def _text(text: str) -> bytes:
    return P.BINUNICODE + struct.pack("<I", len(text.encode())) + text.encode()


def _int(value: int) -> bytes:
    return P.BININT + struct.pack("<i", value)


def _bytes(data: bytes) -> bytes:
    return P.BINBYTES + struct.pack("<I", len(data)) + data


def _tuple(*items: bytes) -> bytes:
    return P.MARK + b"".join(items) + P.TUPLE


def _dtype(name: str, flags: int = 0, names: bytes = P.NONE, fields: bytes = P.NONE,
           size: int = -1, order: str = "|") -> bytes:
    """``numpy.dtype(name)`` and the state numpy's ``__setstate__`` is given."""
    state = _tuple(_int(3), _text(order), P.NONE, names, fields, _int(size), _int(size),
                   _int(flags))
    return (_global("numpy", "dtype") + _text(name) + P.NEWFALSE + P.NEWTRUE + P.TUPLE3
            + P.REDUCE + state + P.BUILD)


def _reconstructed(shape: tuple[int, ...], dtype: bytes, raw: bytes) -> bytes:
    """A pickled array as numpy writes it: ``_reconstruct(ndarray, (0,), b"b")`` + BUILD."""
    array = (_global("numpy.core.multiarray", "_reconstruct") + _global("numpy", "ndarray")
             + _int(0) + P.TUPLE1 + _bytes(b"b") + P.TUPLE3 + P.REDUCE)
    state = _tuple(_int(1), _tuple(*map(_int, shape)), dtype, P.NEWFALSE, _bytes(raw))
    return array + state + P.BUILD


def _batch(data: bytes) -> bytes:
    """``{b"data": <data>}`` at protocol 2."""
    return P.PROTO + b"\x02" + P.EMPTY_DICT + _bytes(b"data") + data + P.SETITEM + P.STOP


def forged_object_dtype_pickle() -> bytes:
    """Issue 25, item 1: a ``V8`` dtype given the state of a struct with one object field and
    flags 1 (reference-counted, yet not pickled as a list), then an array over ``b"A" * 32``:
    numpy took the bytes for object pointers and freed 0x4141414141414141 (rc 139)."""
    fields = (P.EMPTY_DICT + _text("a") + _dtype("O8", flags=63) + _int(0) + P.TUPLE2
              + P.SETITEM)
    forged = _dtype("V8", flags=1, names=_text("a") + P.TUPLE1, fields=fields, size=8)
    return _batch(_reconstructed((4,), forged, b"A" * 32))


def ndarray_call_pickle(count: int) -> bytes:
    """Issue 25, item 2: ``numpy.ndarray((count, 3072), uint8)`` called by the pickle with no
    buffer: an array the file never held (uninitialised memory, or 4,000,000 images)."""
    return _batch(_global("numpy", "ndarray") + _int(count) + _int(3072) + P.TUPLE2
                  + _dtype("u1") + P.TUPLE2 + P.REDUCE)


def billion_laughs_pickle(depth: int = 9, fan_out: int = 100) -> bytes:
    """Issue 25, item 3: lists nested ``depth`` deep, each naming the one below ``fan_out``
    times through the memo: 100**9 paths, which the old array check walked forever."""
    body = P.EMPTY_LIST + P.BINPUT + b"\x00"
    for level in range(1, depth + 1):
        body += (P.POP + P.MARK + (P.BINGET + bytes([level - 1])) * fan_out + P.LIST
                 + P.BINPUT + bytes([level]))
    return _batch(body)


#: The saved regression inputs of the pickle fuzz target, and how each is written.
REGRESSION_FILES = {
    "forged_object_dtype.pickle": forged_object_dtype_pickle,
    "ndarray_call_4000000.pickle": lambda: ndarray_call_pickle(4_000_000),
    "ndarray_call_16.pickle": lambda: ndarray_call_pickle(16),
    "billion_laughs.pickle": billion_laughs_pickle,
}


def python2_batch(pixels: np.ndarray, labels: list[int]) -> bytes:
    """A batch as Python 2's cPickle wrote the CIFAR files: byte strings, BINPUT, NEWFALSE."""
    def string(data: bytes) -> bytes:
        return (P.SHORT_BINSTRING + bytes([len(data)]) if len(data) < 256
                else P.BINSTRING + struct.pack("<i", len(data))) + data

    dtype = (_global("numpy", "dtype") + string(b"u1") + P.BININT1 + b"\x00" + P.BININT1
             + b"\x01" + P.TUPLE3 + P.REDUCE + P.BINPUT + b"\x07"
             + _tuple(P.BININT1 + b"\x03", string(b"|"), P.NONE * 3, _int(-1), _int(-1),
                      P.BININT1 + b"\x00") + P.BUILD)
    array = (_global("numpy.core.multiarray", "_reconstruct") + _global("numpy", "ndarray")
             + P.BININT1 + b"\x00" + P.TUPLE1 + string(b"b") + P.TUPLE3 + P.REDUCE
             + _tuple(P.BININT1 + b"\x01", b"".join(P.BININT2 + struct.pack("<H", n)
                                                    for n in pixels.shape) + P.TUPLE2,
                      dtype, P.NEWFALSE, string(pixels.tobytes())) + P.BUILD)
    label_list = P.EMPTY_LIST + P.MARK + b"".join(P.BININT1 + bytes([n]) for n in labels)
    return (P.PROTO + b"\x02" + P.EMPTY_DICT + P.MARK + string(b"data") + array
            + string(b"labels") + label_list + P.APPENDS + P.SETITEMS + P.STOP)


ALLOWED = ["u1", "i1", "u2", "i2", "u4", "i4", "u8", "i8", "f4", "f8", "?"]


@pytest.mark.parametrize("protocol", [0, 1, 2, 3, 4, 5])
def test_real_pickles_of_every_allowed_dtype_read_bit_exactly(protocol: int) -> None:
    rng = np.random.default_rng(protocol)
    for name in ALLOWED:
        for order in "<>":
            dtype = np.dtype(name).newbyteorder(order)
            for shape in [(), (0,), (0, 3), (2, 0), (3, 4), (2, 3, 4)]:
                base = rng.integers(0, 120, shape).astype(dtype)
                for array in (base, np.asfortranarray(base), base.T):
                    batch = {b"data": array, "same": [array, (1, -2.5, None, True, "t", b"")]}
                    got = safe_load(pickle.dumps(batch, protocol), "batch")
                    data = got[b"data"]
                    assert (data.dtype, data.shape) == (array.dtype, array.shape)
                    assert data.tobytes("A") == array.tobytes("A")  # bit-exact, same order
                    assert data.flags.f_contiguous == array.flags.f_contiguous
                    assert data.flags.owndata and data.base is None
                    assert got["same"][0] is data
                    assert got["same"][1] == (1, -2.5, None, True, "t", b"")


def test_a_python2_cifar_batch_reads_as_bytes_keys() -> None:
    pixels = np.random.default_rng(2).integers(0, 256, (3, 3072), dtype=np.uint8)
    batch = safe_load(python2_batch(pixels, [6, 9, 9]), "data_batch_1")
    assert sorted(batch) == [b"data", b"labels"] and batch[b"labels"] == [6, 9, 9]
    assert batch[b"data"].dtype == np.uint8
    assert np.array_equal(batch[b"data"], pixels) and batch[b"data"].flags.owndata


def _cli(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "normstats", "compute", str(path)],
                          capture_output=True, text=True, timeout=120)


def _assert_one_error_line(run: subprocess.CompletedProcess, path: Path, reason: str) -> None:
    assert run.returncode == 1, (run.returncode, run.stderr[-2000:])
    assert run.stderr.splitlines() == [f"normstats: error: {path}: {reason}"]


def test_a_forged_object_dtype_is_refused_and_never_reaches_numpy(tmp_path: Path) -> None:
    path = tmp_path / "data_batch_1"
    path.write_bytes(forged_object_dtype_pickle())
    reason = ("refused to unpickle: an array of numpy dtype 'V8'; only plain numbers are read "
              "(bool, int8 to int64, uint8 to uint64, float32, float64)")
    with pytest.raises(NormstatsError) as refused:
        open_cifar_python(str(path))
    assert str(refused.value) == f"{path}: {reason}"
    _assert_one_error_line(_cli(path), path, reason)  # was rc 139: a segfault


@pytest.mark.parametrize("count", [4_000_000, 16])
def test_a_pickle_calling_ndarray_itself_is_refused(tmp_path: Path, count: int) -> None:
    path = tmp_path / "data_batch_1"
    path.write_bytes(ndarray_call_pickle(count))
    assert path.stat().st_size < 200
    reason = ("refused to unpickle: it calls numpy.ndarray(...) itself, as no pickled array "
              "does: an array over memory the file does not hold (a forged pickle)")
    with pytest.raises(NormstatsError) as refused:
        normstats.compute(str(path))
    assert str(refused.value) == f"{path}: {reason}"
    _assert_one_error_line(_cli(path), path, reason)


def test_a_billion_laughs_pickle_is_refused_at_once(tmp_path: Path) -> None:
    path = tmp_path / "data_batch_1"
    path.write_bytes(billion_laughs_pickle())
    start = time.perf_counter()
    with pytest.raises(NormstatsError) as refused:
        open_cifar_python(str(path))
    assert time.perf_counter() - start < 0.5
    assert str(refused.value) == (
        f"{path}: refused to unpickle: its lists, tuples and dicts expand to more than "
        "4,000,000 items (a few shared many times over: a 'billion laughs' pickle)")


def test_shared_lists_within_the_budget_stay_shared() -> None:
    got = safe_load(billion_laughs_pickle(depth=2, fan_out=3), "x")[b"data"]
    assert got == [[[], [], []]] * 3 and got[0] is got[1] and got[0][0] is got[2][2]


def test_the_opcode_budget_bounds_the_memo_and_the_stack(monkeypatch) -> None:
    monkeypatch.setattr(safepickle, "MAX_OPERATIONS", 100)
    assert safe_load(pickle.dumps(list(range(90)), 2), "x") == list(range(90))
    with pytest.raises(NormstatsError, match="more than 100 pickle operations"):
        safe_load(pickle.dumps(list(range(200)), 2), "x")


_U1 = _dtype("u1")
REFUSED = {
    "global": (P.PROTO + b"\x02" + _global("os", "system") + _tuple(_text("true")) + P.REDUCE
               + P.STOP, "it calls os.system; only numpy arrays, lists and dicts are allowed"),
    "INST": (P.MARK + P.INST + b"numpy\ndtype\n" + P.STOP, "the pickle operation INST"),
    "NEWOBJ": (P.PROTO + b"\x02" + _global("numpy", "dtype") + P.EMPTY_TUPLE + P.NEWOBJ
               + P.STOP, "the pickle operation NEWOBJ (at byte 16)"),
    "EXT1": (P.PROTO + b"\x02" + P.EXT1 + b"\x01" + P.STOP, "the pickle operation EXT1"),
    "persistent id": (P.NONE + P.BINPERSID + P.STOP, "the pickle operation BINPERSID"),
    "object dtype": (_batch(_reconstructed((1,), _dtype("O8", flags=63), bytes(8))),
                     "an array of numpy dtype 'O8'"),
    "dtype flags": (_batch(_reconstructed((1,), _dtype("u1", flags=1), b"A")),
                    "numpy.dtype('u1') is given fields, a subarray, flags or a second state"),
    "short bytes": (_batch(_reconstructed((2, 3072), _U1, bytes(3072))),
                    "an array of shape (2, 3072) uint8 needs 6,144 bytes but the pickle "
                    "holds 3,072 (a forged pickle)"),
    "negative shape": (_batch(_reconstructed((-1, -4), _U1, bytes(4))),
                       "an array shape that is not a tuple of up to 32 sizes"),
    "frombuffer short": (_batch(_global("numpy.core.numeric", "_frombuffer")
                                + _tuple(_bytes(b"abc"), _U1, _int(4) + P.TUPLE1, _text("C"))
                                + P.REDUCE), "needs 4 bytes but the pickle holds 3"),
    "no BUILD": (_batch(_global("numpy.core.multiarray", "_reconstruct")
                        + _global("numpy", "ndarray") + _int(0) + P.TUPLE1 + _bytes(b"b")
                        + P.TUPLE3 + P.REDUCE), "an array is never given its bytes"),
    "BUILD twice": (_batch(_reconstructed((1,), _U1, b"A") + _tuple(
        _int(1), _int(1) + P.TUPLE1, _U1, P.NEWFALSE, _bytes(b"B")) + P.BUILD),
        "an array is given a state numpy never writes"),
    "BUILD on a list": (_batch(P.EMPTY_LIST + P.EMPTY_DICT + P.BUILD),
                        "it sets the state of a list; only numpy arrays and dtypes take one"),
    "a bare dtype": (_batch(_U1), "it holds a numpy dtype outside an array"),
    "ndarray subclass": (_batch(_global("numpy.core.multiarray", "_reconstruct")
                                + _global("numpy", "dtype") + _int(0) + P.TUPLE1
                                + _bytes(b"b") + P.TUPLE3 + P.REDUCE),
                         "_reconstruct makes a _Global, not a numpy.ndarray"),
    "bytes(n)": (_batch(_global("builtins", "bytes") + _int(10**9) + P.TUPLE1 + P.REDUCE),
                 "it calls bytes with 1 arguments"),
    "int key": (P.PROTO + b"\x02" + P.EMPTY_DICT + _int(1) + _int(2) + P.SETITEM + P.STOP,
                "a dict key of type int; only text keys are read"),
    "cycle": (_batch(P.EMPTY_LIST + P.BINPUT + b"\x00" + P.BINGET + b"\x00" + P.APPEND),
              "a list, tuple or dict contains itself"),
    "deep": (_batch(P.EMPTY_LIST * 40 + P.APPEND * 39),
             "lists, tuples and dicts nested more than 32 deep"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_what_is_refused_is_named_in_one_line(case: str) -> None:
    data, fragment = REFUSED[case]
    with pytest.raises(NormstatsError) as refused:
        safe_load(data, "data_batch_7")
    message = str(refused.value)
    assert message.startswith("data_batch_7: refused to unpickle: ") and "\n" not in message
    assert fragment in message


def test_the_saved_regression_inputs_are_the_ones_written_here() -> None:
    folder = REGRESSIONS / "pickle"
    for name, write in REGRESSION_FILES.items():
        assert (folder / name).read_bytes() == write(), name
