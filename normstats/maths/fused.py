"""A compiled, single-pass kernel for 8-bit images: Σx, Σx², min and max per channel.

8-bit images are what most datasets hold, and for them the statistics must cost little
next to decoding. numpy needs four passes (a float copy, two matrix products, min, max);
the numba kernels (`normstats.maths.fused_kernels`) read each byte once. Grey and RGB images
have dedicated kernels with one uint32 accumulator per channel, which LLVM vectorises
(~2.5 GB/s a core, 2x the lanes); other channel counts accumulate in int32 *lanes*, 96 of them (a
multiple of 1, 2, 3 and 4 channels, so lane ``l`` always holds channel ``l % C``).
Accumulators are flushed into int64 before they could overflow. Integer arithmetic
throughout: results are exact and identical to `normstats.maths.image_moments`.

numba is imported lazily; without it (or for other dtypes) the numpy kernels are used.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections.abc import Callable, Iterator

import numpy as np

__all__ = ["uint8_moments", "uint8_moments_into", "outputs", "available", "exponent_bins",
           "numpy_only", "available_for", "warm", "is_loaded", "LOAD_BYTES"]

#: Inputs smaller than this never load the compiled kernels (numpy's passes over 1 MB take
#: about a millisecond; loading the kernels ~0.6 s); once loaded they are used for all.
LOAD_BYTES = 1 << 20

#: Set by `numpy_only` while a handful of images is reduced: importing numba and loading
#: the compiled kernel from its cache costs ~0.6 s, numpy's passes over a few images
#: microseconds.
_NUMPY_ONLY = False


@contextlib.contextmanager
def numpy_only() -> Iterator[None]:
    """Within the block, use the numpy kernels unless the compiled one is loaded already.

    Examples
    --------
    >>> with numpy_only():
    ...     _ = available()
    """
    global _NUMPY_ONLY
    before, _NUMPY_ONLY = _NUMPY_ONLY, True
    try:
        yield
    finally:
        _NUMPY_ONLY = before

#: Loading a kernel from numba's cache takes well under this; compiling one (the first run
#: after an install or an upgrade) takes ~1 s here, longer on slow machines, which the user
#: is then told about.
COMPILE_NOTICE_SECONDS = 1.5


COMPILE_NOTICE = ("normstats: compiling the statistics kernel for this installation (once, a "
                  "few seconds; later runs load it from numba's cache)")


def _say_compiling() -> None:
    logging.getLogger("normstats.maths.fused").warning(COMPILE_NOTICE)


#: The kernel of each channel count by name in `normstats.maths.fused_kernels` (others:
#: the lanes kernel). Each is compiled (or loaded from numba's cache) only when a run first
#: meets its channel count: an RGB folder never pays for the grey and lanes kernels.
KERNEL_NAMES = {1: "grey_moments", 3: "rgb_moments"}
LANES_KERNEL = "stack_moments"


@functools.cache
def _kernel_module():
    """`normstats.maths.fused_kernels` (imports numba), or None without numba."""
    try:
        from normstats.maths import fused_kernels
    except ImportError:
        return None
    return fused_kernels


@functools.cache
def _compiled(name: str) -> Callable | None:
    """The kernel ``name``, warmed up on a tiny input; None without numba or on any failure."""
    module = _kernel_module()
    if module is None:
        return None
    notice = threading.Timer(COMPILE_NOTICE_SECONDS, _say_compiling)
    notice.daemon = True
    notice.start()
    try:
        from normstats import process_role

        lean = _without_scipy_blas() if process_role.OWN_PROCESS else contextlib.nullcontext()
        with lean:
            return _warm(name, getattr(module, name))
    finally:
        notice.cancel()


@contextlib.contextmanager
def _without_scipy_blas() -> Iterator[None]:
    """While numba initialises, ``import scipy.linalg`` fails (a ``None`` entry in
    ``sys.modules`` is Python's way to refuse an import); afterwards it works again.

    Used only in normstats' own process (`normstats.process_role`): numba's first kernel
    load then skips its BLAS probe, which imports scipy.linalg (~0.2 s where scipy is
    installed) for ``np.dot`` support that normstats' kernels never use. A library
    caller's process is left as it is: its own numba code may need that support.
    """
    import sys

    if "scipy.linalg" in sys.modules:
        yield
        return
    sys.modules["scipy.linalg"] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        if sys.modules.get("scipy.linalg", 0) is None:
            del sys.modules["scipy.linalg"]


def _warm(name: str, kernel: Callable) -> Callable | None:
    channels = next((c for c, known in KERNEL_NAMES.items() if known == name), 3)
    try:
        kernel(np.zeros((1, 3 * channels), np.uint8), *outputs(1, channels))
    except Exception:  # noqa: BLE001 - any numba failure means: use the numpy kernels
        return None
    return kernel


def _loaded_any() -> bool:
    return _compiled.cache_info().currsize > 0


def is_loaded() -> bool:
    """True once this process has loaded (or compiled) any of the kernels.

    Examples
    --------
    >>> is_loaded() in (True, False)
    True
    """
    return _loaded_any()


def warm(channels: int = 3) -> bool:
    """Compile (or load) the kernel for ``channels`` now; True when it can be used.

    Called before forking workers, so they inherit it instead of each loading it.

    Examples
    --------
    >>> warm(3) in (True, False)
    True
    """
    if _NUMPY_ONLY and not _loaded_any():  # the run chose numpy's kernels: load nothing
        return False
    return _compiled(KERNEL_NAMES.get(channels, LANES_KERNEL)) is not None


@functools.cache
def exponent_bins() -> Callable | None:
    """The compiled significand binning of `normstats.maths.exact`, warmed up (None: no numba)."""
    module = _kernel_module()
    if module is None:
        return None
    try:
        module.exponent_bins(np.zeros((1, 1), np.int64), *(np.zeros((2048, 1), np.int64),) * 2)
    except Exception:  # noqa: BLE001 - any numba failure means: use numpy's bincount
        return None
    return module.exponent_bins


def _kernel(channels: int) -> Callable:
    """The kernel for ``channels``: dedicated ones for grey and RGB, lanes for the rest;
    the numpy kernel when that one cannot be compiled."""
    kernel = _compiled(KERNEL_NAMES.get(channels, LANES_KERNEL))
    return kernel if kernel is not None else _numpy_kernel


def _numpy_kernel(flat: np.ndarray, sums: np.ndarray, squares: np.ndarray, lows: np.ndarray,
                  highs: np.ndarray) -> None:
    """The kernels' contract in numpy: accumulate (N, H·W·C) uint8 rows into the outputs."""
    n, channels = sums.shape
    values = flat.reshape(n, -1, channels)
    wide = values.astype(np.int64)
    sums += wide.sum(axis=1)
    squares += np.einsum("npc,npc->nc", wide, wide)
    np.minimum(lows, values.min(axis=1, initial=255), out=lows)
    np.maximum(highs, values.max(axis=1, initial=0), out=highs)


def outputs(n: int, channels: int) -> tuple[np.ndarray, ...]:
    """Per-image, per-channel accumulators: sums and squares at 0, min at 255, max at 0."""
    return (np.zeros((n, channels), np.int64), np.zeros((n, channels), np.int64),
            np.full((n, channels), 255, np.uint8), np.zeros((n, channels), np.uint8))


def available() -> bool:
    """True when numba is installed and the compiled kernel can be used (and, inside
    `numpy_only`, is loaded already)."""
    if _NUMPY_ONLY and not _loaded_any():
        return False
    return _kernel_module() is not None


def available_for(nbytes: int) -> bool:
    """`available`, but for an input of ``nbytes`` below `LOAD_BYTES` only if the kernels
    are loaded already.

    Examples
    --------
    >>> available_for(10) in (True, False)
    True
    """
    if nbytes < LOAD_BYTES and not _loaded_any():
        return False
    return available()


def uint8_moments(stack: np.ndarray) -> tuple[np.ndarray, ...]:
    """Exact (sums, sums of squares, min, max), each (N, C), of a uint8 (N, H, W, C) stack.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.arange(12, dtype=np.uint8).reshape(1, 2, 2, 3)
    >>> [a.tolist() for a in uint8_moments(x)]
    [[[18, 22, 26]], [[126, 166, 214]], [[0.0, 1.0, 2.0]], [[9.0, 10.0, 11.0]]]
    """
    n, h, w, c = stack.shape
    flat = np.ascontiguousarray(stack).reshape(n, h * w * c)
    sums, squares, lows, highs = outputs(n, c)
    _kernel(c)(flat, sums, squares, lows, highs)
    return sums, squares, lows.astype(np.float64), highs.astype(np.float64)


def uint8_moments_into(image: np.ndarray, row: int, sums: np.ndarray, squares: np.ndarray,
                       lows: np.ndarray, highs: np.ndarray) -> None:
    """Reduce one (H, W, C) uint8 image into row ``row`` of arrays made by `outputs`.

    Examples
    --------
    >>> import numpy as np
    >>> out = outputs(2, 1)
    >>> uint8_moments_into(np.full((2, 2, 1), 3, np.uint8), 1, *out)
    >>> out[0].tolist()
    [[0], [12]]
    """
    flat = np.ascontiguousarray(image).reshape(1, -1)
    end = row + 1
    _kernel(sums.shape[1])(flat, sums[row:end], squares[row:end], lows[row:end], highs[row:end])
