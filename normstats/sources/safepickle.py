"""A pickle reader for CIFAR-style batches: plain values, and numpy arrays normstats builds.

numpy's own reconstruction run on a file's data (``numpy.dtype`` given a state, ``ndarray``
given a shape) let a file forge a dtype with an object field whose pointers numpy freed (a
segfault), or an array over memory the file never held. So nothing of Python's or numpy's
runs on the file's data: `pickletools.genops` only parses the opcodes, and a small machine
runs those building plain values (dict, list, tuple, str, bytes, int, float, bool, None),
refusing every other. The globals of a pickled array (``_reconstruct``, ``ndarray``,
``dtype``, protocol 5's ``_frombuffer``, a latin-1 ``_codecs.encode``) are stand-ins that
record what the file describes, BUILD states included; other globals, and calling
``numpy.ndarray`` itself (no pickled array does), are refused unrun. Each array is then
checked -- a dtype of `PICKLED_DTYPES` without fields, subarray or flags, a shape whose
size times the item size is exactly the bytes given, C or Fortran order -- and built by
``np.frombuffer(...).reshape(...).copy()``, owning exactly its bytes.

Work is bounded: at most `MAX_OPERATIONS` opcodes (so the memo and stack too), containers
nested at most 32 deep and never in themselves, and at most `MAX_ITEMS` items in the
result counting a shared list each time it is named: a "billion laughs" pickle of shared
lists is refused at once, not walked 10**16 times.
"""

from __future__ import annotations

import math
import pickletools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from normstats.errors import UnreadableInputError

__all__ = ["safe_load", "MAX_OPERATIONS", "MAX_ITEMS", "PICKLED_DTYPES"]

#: Opcodes a pickle may run; a CIFAR-100 training batch needs about 10 per image (500,000).
MAX_OPERATIONS = 4_000_000
#: Items the result may hold, a shared list, tuple or dict counted each time it is named.
MAX_ITEMS = 4_000_000
_MAX_DEPTH = _MAX_DIMS = 32
#: The array dtypes read from pickles (numpy's ``kind + itemsize`` names): plain numbers.
PICKLED_DTYPES = frozenset({"b1", "u1", "i1", "u2", "i2", "u4", "i4", "u8", "i8", "f4", "f8"})
_BYTE_ORDERS = {"<": "<", ">": ">", "=": "=", "|": "="}
_SCALARS = (str, bytes, int, float, type(None))  # bool is an int


class _Refused(Exception):
    """What the file asks for that is not read, in the user's words."""


def _text(value: Any, what: str) -> str:
    """A name given as text (Python 3) or as a Python 2 byte string."""
    if isinstance(value, bytes | str):
        return value.decode("latin1") if isinstance(value, bytes) else value
    raise _Refused(f"{what} is a {type(value).__name__}, not text")


class _Dtype:
    """``numpy.dtype(name)`` as the file describes it; `build` makes it from allowed parts."""

    def __init__(self, name: Any, align: Any = False, copy: Any = True) -> None:
        self.name = _text(name, "a dtype name")
        if self.name not in PICKLED_DTYPES:
            raise _Refused(f"an array of numpy dtype {self.name[:20]!r}; only plain numbers "
                           "are read (bool, int8 to int64, uint8 to uint64, float32, float64)")
        self.order: str | None = None

    def set_state(self, state: Any) -> None:
        """The byte order of numpy's dtype state; fields, a subarray or flags are refused."""
        plain = (isinstance(state, tuple) and len(state) in (8, 9)
                 and state[0] == len(state) - 5 and state[8:] in ((), (None,))
                 and state[2:8] == (None, None, None, -1, -1, 0))
        order = _text(state[1], "a byte order") if plain else None
        if order not in _BYTE_ORDERS or self.order is not None:
            raise _Refused(f"numpy.dtype({self.name!r}) is given fields, a subarray, flags or "
                           "a second state, as no plain dtype is (a forged pickle)")
        self.order = order

    def build(self) -> np.dtype:
        return np.dtype(_BYTE_ORDERS[self.order or "="] + self.name)


class _Array:
    """A numpy array as the file describes it; `build` checks it and makes it."""

    state: tuple | None = None  # set once, by BUILD or by _frombuffer

    def set_state(self, state: Any) -> None:
        """numpy's array state: ``([1,] shape, dtype, is_fortran, raw bytes)``."""
        if isinstance(state, tuple) and len(state) == 5 and state[0] == 1:
            state = state[1:]
        if self.state is not None or not isinstance(state, tuple) or len(state) != 4:
            raise _Refused("an array is given a state numpy never writes (a forged pickle)")
        self.state = state

    def build(self) -> np.ndarray:
        if self.state is None:
            raise _Refused("an array is never given its bytes (a forged pickle)")
        shape, dtype, fortran, raw = self.state
        if not isinstance(dtype, _Dtype) or not isinstance(raw, bytes | bytearray) \
                or type(fortran) not in (bool, int) or fortran not in (0, 1):
            raise _Refused("an array state that is not (shape, dtype, order, bytes)")
        if not isinstance(shape, tuple) or len(shape) > _MAX_DIMS or not all(
                type(size) is int and 0 <= size < 1 << 63 for size in shape):
            raise _Refused(f"an array shape that is not a tuple of up to {_MAX_DIMS} sizes")
        real = dtype.build()
        need = math.prod(shape) * real.itemsize
        if need != len(raw):
            raise _Refused(f"an array of shape {shape} {real} needs {need:,} bytes but the "
                           f"pickle holds {len(raw):,} (a forged pickle)")
        flat = np.frombuffer(raw, real)
        return flat.reshape(shape, order="F" if fortran else "C").copy(order="K")


def _reconstruct(cls: Any, shape: Any, typecode: Any) -> _Array:
    """``_reconstruct(ndarray, (0,), b"b")``: an empty array whose BUILD brings the rest."""
    if cls is not _NDARRAY:
        raise _Refused(f"_reconstruct makes a {type(cls).__name__}, not a numpy.ndarray")
    return _Array()


def _from_buffer(buffer: Any, dtype: Any, shape: Any, order: Any) -> _Array:
    """Protocol 5's ``_frombuffer(bytes, dtype, shape, order)``, its buffer in the file."""
    if _text(order, "an array order") not in ("C", "F"):
        raise _Refused(f"an array order {str(order)[:10]!r}, not C or F")
    array = _Array()
    array.set_state((shape, dtype, order in ("F", b"F"), buffer))
    return array


def _latin1(text: Any, encoding: Any) -> bytes:
    """``_codecs.encode(text, "latin1")``: how Python 3 writes bytes at protocol 2."""
    if not isinstance(text, str) or _text(encoding, "a codec").lower().replace("-", "") \
            != "latin1":
        raise _Refused(f"it calls _codecs.encode with codec {str(encoding)[:20]!r}; only "
                       "latin1 text is read (the call was not run)")
    return text.encode("latin1")


@dataclass(frozen=True, eq=False)
class _Global:
    """An allowed global as the file sees it: its name, and what calling it records."""

    name: str
    call: Callable[..., Any] | None


_NDARRAY = _Global("numpy.ndarray", None)  # named by _reconstruct, never called
_GLOBALS = {
    **dict.fromkeys([("numpy.core.multiarray", "_reconstruct"),
                     ("numpy._core.multiarray", "_reconstruct")],
                    _Global("numpy.core.multiarray._reconstruct", _reconstruct)),
    ("numpy", "ndarray"): _NDARRAY, ("numpy", "dtype"): _Global("numpy.dtype", _Dtype),
    **dict.fromkeys([("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer")],
                    _Global("numpy.core.numeric._frombuffer", _from_buffer)),
    ("_codecs", "encode"): _Global("_codecs.encode", _latin1),
    **dict.fromkeys([("__builtin__", "bytes"), ("builtins", "bytes")],  # b"" at protocol < 3
                    _Global("bytes", lambda: b"")),  # bytes() only: never bytes(10**9)
}


def _global(module: Any, name: Any) -> _Global:
    if (module, name) not in _GLOBALS:
        raise _Refused(f"it calls {str(module)[:80]}.{str(name)[:80]}; only numpy arrays, "
                       "lists and dicts are allowed (the call was not run)")
    return _GLOBALS[(module, name)]


class _Machine:
    """The pickle stack machine, reduced to plain values and the stand-ins above."""

    def __init__(self) -> None:
        self.stack: list[Any] = []
        self.marks: list[list[Any]] = []
        self.memo: dict[Any, Any] = {}

    def push(self, value: Any) -> None:
        self.stack.append(value)

    def mark(self, _: None) -> None:
        self.marks.append(self.stack)
        self.stack = []

    def pop_mark(self) -> list[Any]:
        items, self.stack = self.stack, self.marks.pop()
        return items

    def pop(self, count: int) -> list[Any]:
        if count > len(self.stack):
            raise ValueError("the stack holds fewer values than an opcode takes")
        items, self.stack[-count:] = self.stack[-count:], []
        return items

    def append(self, items: list[Any]) -> None:
        if type(self.stack[-1]) is not list:
            raise ValueError(f"APPEND to a {type(self.stack[-1]).__name__}")
        self.stack[-1].extend(items)

    def set_items(self, items: list[Any], target: Any = None) -> Any:
        target = self.stack[-1] if target is None else target
        if type(target) is not dict or len(items) % 2:
            raise ValueError(f"SETITEM on a {type(target).__name__} or an odd item count")
        for key in items[::2]:  # text keys only: their hashes are salted, so no flood
            if not isinstance(key, str | bytes):
                raise _Refused(f"a dict key of type {type(key).__name__}; only text keys are read")
        target.update(zip(items[::2], items[1::2]))
        return target

    def reduce(self, _: None) -> None:
        args = self.stack.pop()
        call = self.stack[-1]
        if not isinstance(call, _Global) or not isinstance(args, tuple):
            raise _Refused(f"it calls a {type(call).__name__}; only numpy's array globals are "
                           "called")
        if call.call is None:
            raise _Refused("it calls numpy.ndarray(...) itself, as no pickled array does: an "
                           "array over memory the file does not hold (a forged pickle)")
        try:
            self.stack[-1] = call.call(*args)
        except TypeError:
            raise _Refused(f"it calls {call.name} with {len(args)} arguments, as numpy never "
                           "does (a forged pickle)") from None

    def build(self, _: None) -> None:
        state = self.stack.pop()
        if not isinstance(self.stack[-1], _Array | _Dtype):
            raise _Refused(f"it sets the state of a {type(self.stack[-1]).__name__}; only "
                           "numpy arrays and dtypes take one")
        self.stack[-1].set_state(state)


_OPS: dict[str, Callable[[_Machine, Any], None]] = {
    **dict.fromkeys("INT BININT BININT1 BININT2 LONG LONG1 LONG4 FLOAT BINFLOAT UNICODE "
                    "BINUNICODE SHORT_BINUNICODE BINUNICODE8 BINBYTES SHORT_BINBYTES "
                    "BINBYTES8 BYTEARRAY8".split(), _Machine.push),
    # Python 2 byte strings: genops gives them as latin-1 text, read as bytes
    **dict.fromkeys(("STRING", "BINSTRING", "SHORT_BINSTRING"),
                    lambda m, text: m.push(text.encode("latin1"))),
    "NONE": lambda m, _: m.push(None), "NEWTRUE": lambda m, _: m.push(True),
    "NEWFALSE": lambda m, _: m.push(False), "EMPTY_TUPLE": lambda m, _: m.push(()),
    "EMPTY_LIST": lambda m, _: m.push([]), "EMPTY_DICT": lambda m, _: m.push({}),
    "MARK": _Machine.mark, "POP_MARK": lambda m, _: m.pop_mark(),
    "POP": lambda m, _: m.stack.pop() if m.stack else m.pop_mark(),
    "DUP": lambda m, _: m.push(m.stack[-1]),
    **dict.fromkeys(("PUT", "BINPUT", "LONG_BINPUT"),
                    lambda m, index: m.memo.__setitem__(index, m.stack[-1])),
    "MEMOIZE": lambda m, _: m.memo.__setitem__(len(m.memo), m.stack[-1]),
    **dict.fromkeys(("GET", "BINGET", "LONG_BINGET"), lambda m, index: m.push(m.memo[index])),
    "LIST": lambda m, _: m.push(m.pop_mark()),
    "TUPLE": lambda m, _: m.push(tuple(m.pop_mark())),
    **{f"TUPLE{n}": lambda m, _, n=n: m.push(tuple(m.pop(n))) for n in (1, 2, 3)},
    "DICT": lambda m, _: m.push(m.set_items(m.pop_mark(), {})),
    "APPEND": lambda m, _: m.append(m.pop(1)), "APPENDS": lambda m, _: m.append(m.pop_mark()),
    "SETITEM": lambda m, _: m.set_items(m.pop(2)),
    "SETITEMS": lambda m, _: m.set_items(m.pop_mark()),
    "GLOBAL": lambda m, names: m.push(_global(*names.partition(" ")[::2])),
    "STACK_GLOBAL": lambda m, _: m.push(_global(*m.pop(2))),
    "REDUCE": _Machine.reduce, "BUILD": _Machine.build,
    **dict.fromkeys(("PROTO", "FRAME", "STOP"), lambda m, _: None),
}


def _run(data: bytes) -> Any:
    """The value the pickle ``data`` builds, stand-ins and all."""
    machine = _Machine()
    for count, (opcode, arg, position) in enumerate(pickletools.genops(data)):
        if count == MAX_OPERATIONS:
            raise _Refused(f"it runs more than {MAX_OPERATIONS:,} pickle operations, more "
                           "than any batch of images needs")
        operation = _OPS.get(opcode.name)
        if operation is None:
            raise _Refused(f"it uses the pickle operation {opcode.name} (at byte {position:,}), "
                           "which no batch of arrays, lists and dicts needs (nothing was run)")
        operation(machine, arg)
    if len(machine.stack) != 1 or machine.marks:
        raise ValueError("the pickle does not end with one value")
    return machine.stack[0]


class _Plain:
    """The machine's result made plain: arrays built, each container converted once."""

    def __init__(self) -> None:
        self.done: dict[int, tuple[Any, int] | None] = {}  # id -> (plain value, items)

    def convert(self, value: Any, depth: int = 0) -> tuple[Any, int]:
        """``value`` made plain, and its items counting shared containers each time."""
        if isinstance(value, _SCALARS):
            return value, 1
        if id(value) in self.done:
            if self.done[id(value)] is None:
                raise _Refused("a list, tuple or dict contains itself")
            return self.done[id(value)]
        if depth > _MAX_DEPTH:
            raise _Refused(f"lists, tuples and dicts nested more than {_MAX_DEPTH} deep")
        self.done[id(value)] = None
        plain = self._made_plain(value, depth + 1)
        if plain[1] > MAX_ITEMS:
            raise _Refused(f"its lists, tuples and dicts expand to more than {MAX_ITEMS:,} "
                           "items (a few shared many times over: a 'billion laughs' pickle)")
        self.done[id(value)] = plain
        return plain

    def _made_plain(self, value: Any, depth: int) -> tuple[Any, int]:
        if isinstance(value, _Array):
            return value.build(), 1
        if isinstance(value, bytearray):
            return bytes(value), 1
        if type(value) in (list, tuple, dict):
            items = value.values() if type(value) is dict else value
            parts = [self.convert(item, depth) for item in items]
            plain = [part for part, _ in parts]
            count = 1 + len(parts) * (type(value) is dict) + sum(n for _, n in parts)
            return (dict(zip(value, plain)) if type(value) is dict
                    else type(value)(plain)), count
        what = {_Dtype: "a numpy dtype", _Global: "a bare global"}.get(type(value))
        raise _Refused(f"it holds {what or type(value).__name__} outside an array; only "
                       "plain values and arrays are read")


def safe_load(data: bytes, path: str) -> Any:
    """Unpickle ``data`` (Python 2 or 3, protocols 0-5) into plain values and numpy arrays.

    Python 2 byte strings stay ``bytes`` (as ``encoding="bytes"``, which the CIFAR site
    recommends), so dict keys read ``b"data"``. Every array is built by normstats and owns
    exactly its bytes; nothing the file names is ever run.

    Raises
    ------
    UnreadableInputError
        Naming ``path``: what was refused (never run), or why the pickle is unreadable.

    Examples
    --------
    >>> import pickle, numpy as np
    >>> safe_load(pickle.dumps({b"data": np.arange(3, dtype=np.uint8)}, 2), "x")[b"data"]
    array([0, 1, 2], dtype=uint8)
    >>> try:
    ...     safe_load(b"cos\\nsystem\\n(S'true'\\ntR.", "evil")
    ... except UnreadableInputError as error:
    ...     print(error.reason[:40])
    refused to unpickle: it calls os.system;
    """
    try:
        return _Plain().convert(_run(data))[0]
    except _Refused as refused:
        raise UnreadableInputError(f"refused to unpickle: {refused}", path) from None
    except Exception as error:  # noqa: BLE001 - whatever a broken stream makes parsing raise
        raise UnreadableInputError(f"not a readable pickle ({type(error).__name__}: "
                                   f"{str(error)[:200]})", path) from None
