"""A restricted unpickler for files that are known to hold only numpy arrays, lists and dicts.

Pickle runs whatever callable the file names. This unpickler resolves only the few
globals a pickled ``numpy.ndarray`` needs (``_reconstruct``, ``ndarray``, ``dtype``,
``_frombuffer`` for protocol 5 and a latin-1-only ``_codecs.encode`` for byte strings
written by Python 3), and checks that every array it built owns exactly its bytes; any other
global -- ``os.system``, ``builtins.eval``, ``subprocess.Popen`` -- is refused with an
error naming the file and the global, before anything is called.
"""

from __future__ import annotations

import codecs
import io
import pickle
from typing import Any

import numpy as np

from normstats.errors import NormstatsError

__all__ = ["safe_load", "RefusedGlobal"]


class RefusedGlobal(pickle.UnpicklingError):
    """A pickle named a global outside the allow-list."""


def _latin1(text: str, encoding: str = "latin1") -> bytes:
    """``_codecs.encode`` as numpy pickles use it; any other codec is refused."""
    if encoding.lower().replace("-", "") != "latin1":
        raise RefusedGlobal(f"_codecs.encode with codec {encoding!r}")
    return codecs.encode(text, "latin1")


_RECONSTRUCT = np.ndarray.__reduce__(np.zeros(1))[0]
_FROMBUFFER = np.zeros(1).__reduce_ex__(5)[0]
_ALLOWED: dict[tuple[str, str], Any] = {
    ("numpy.core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy._core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    # protocol 5 pickles rebuild arrays from their bytes with it (checked afterwards)
    ("numpy._core.numeric", "_frombuffer"): _FROMBUFFER,
    ("numpy.core.numeric", "_frombuffer"): _FROMBUFFER,
    ("_codecs", "encode"): _latin1,
}


class _ArrayUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise RefusedGlobal(f"{module}.{name}") from None

    def persistent_load(self, pid: Any) -> Any:
        raise RefusedGlobal(f"persistent id {pid!r}")


class _ForgedArray(ValueError):
    """An unpickled array that does not own or exactly cover its bytes."""


#: Containers nested deeper than this are not searched for arrays: a CIFAR batch is a
#: dict of arrays and lists, two levels.
_MAX_DEPTH = 8


def _check_arrays(value: Any, depth: int) -> None:
    """Refuse arrays built by calling ``ndarray(shape, dtype, buffer, offset, strides)``.

    ``numpy.ndarray`` must be allowed (a pickled array names it), but a pickle can also
    call it on a short buffer with zero or overlapping strides: 3 KB then reads as
    50,000 identical images. A genuine unpickled array owns its data or is a contiguous
    view of exactly its own bytes.
    """
    if isinstance(value, np.ndarray):
        if value.flags.owndata:
            return
        base = value.base
        while isinstance(base, np.ndarray) and base.base is not None:
            base = base.base
        covered = base.nbytes if isinstance(base, np.ndarray) else memoryview(base).nbytes
        contiguous = value.flags.c_contiguous or value.flags.f_contiguous
        if not contiguous or covered != value.nbytes:
            raise _ForgedArray(f"an array of shape {value.shape} is a view of {covered:,} "
                               f"bytes with strides {value.strides}, not an array of its "
                               f"own {value.nbytes:,} bytes (a forged pickle)")
    elif depth < _MAX_DEPTH and isinstance(value, dict):
        for item in value.values():
            _check_arrays(item, depth + 1)
    elif depth < _MAX_DEPTH and isinstance(value, list | tuple):
        for item in value:
            _check_arrays(item, depth + 1)


def safe_load(data: bytes, path: str) -> Any:
    """Unpickle ``data`` (Python 2 or 3 pickles) allowing only numpy arrays and plain containers.

    Python 2 byte strings stay ``bytes`` (``encoding="bytes"``, as the CIFAR site
    recommends), so dict keys read ``b"data"``.

    Raises
    ------
    NormstatsError
        Naming ``path``: the refused global (never called), or why the pickle is unreadable.

    Examples
    --------
    >>> import pickle, numpy as np
    >>> safe_load(pickle.dumps({b"data": np.arange(3, dtype=np.uint8)}, 2), "x")[b"data"]
    array([0, 1, 2], dtype=uint8)
    >>> try:
    ...     safe_load(b"cos\\nsystem\\n(S'true'\\ntR.", "evil")
    ... except NormstatsError as error:
    ...     print(error.reason[:40])
    refused to unpickle: it calls os.system;
    """
    try:
        loaded = _ArrayUnpickler(io.BytesIO(data), encoding="bytes").load()
        _check_arrays(loaded, depth=0)
        return loaded
    except RefusedGlobal as refused:
        raise NormstatsError(f"refused to unpickle: it calls {refused}; only numpy arrays, "
                             "lists and dicts are allowed (the call was not run)",
                             path=path) from None
    except _ForgedArray as forged:
        raise NormstatsError(f"refused to unpickle: {forged}", path=path) from None
    except Exception as error:  # noqa: BLE001 - any failure of a hostile or broken stream
        raise NormstatsError(f"not a readable pickle ({type(error).__name__}: {error})",
                             path=path) from None
