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

import functools
from collections.abc import Callable

import numpy as np

__all__ = ["uint8_moments", "uint8_moments_into", "outputs", "available", "exponent_bins"]

@functools.cache
def _kernels() -> dict[int, Callable] | None:
    """Compiled kernels by channel count (0: any), warmed up; None without numba."""
    try:
        from normstats.maths.fused_kernels import grey_moments, rgb_moments, stack_moments
    except ImportError:
        return None
    kernels = {0: stack_moments, 1: grey_moments, 3: rgb_moments}
    try:
        for channels, kernel in kernels.items():
            kernel(np.zeros((1, 3 * max(channels, 1)), np.uint8), *outputs(1, max(channels, 1)))
    except Exception:  # noqa: BLE001 - any numba failure means: use the numpy kernels
        return None
    return kernels


@functools.cache
def exponent_bins() -> Callable | None:
    """The compiled significand binning of `normstats.maths.exact`, warmed up (None: no numba)."""
    if _kernels() is None:
        return None
    from normstats.maths.fused_kernels import exponent_bins as kernel

    try:
        kernel(np.zeros((1, 1), np.int64), *(np.zeros((2048, 1), np.int64),) * 2)
    except Exception:  # noqa: BLE001 - any numba failure means: use numpy's bincount
        return None
    return kernel


def _kernel(channels: int) -> Callable:
    """The kernel for ``channels``: dedicated ones for grey and RGB, lanes for the rest."""
    kernels = _kernels()
    return kernels.get(channels, kernels[0])


def outputs(n: int, channels: int) -> tuple[np.ndarray, ...]:
    """Per-image, per-channel accumulators: sums and squares at 0, min at 255, max at 0."""
    return (np.zeros((n, channels), np.int64), np.zeros((n, channels), np.int64),
            np.full((n, channels), 255, np.uint8), np.zeros((n, channels), np.uint8))


def available() -> bool:
    """True when numba is installed and the compiled kernel can be used."""
    return _kernels() is not None


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
