"""Exact sums of float64 values, as integers in a fixed-point scale.

Every finite float64 is an integer multiple of ``2**-1074``; scaled by ``2**FIXED_BITS``
it becomes a Python int, and sums of such ints are exact whatever the order or the
grouping. normstats uses this to average per-image standard deviations and to combine
float moments so that results are bit-identical however the work was split.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

__all__ = ["FIXED_BITS", "to_fixed", "fixed_sum", "fixed_to_float", "int64_sum"]

#: Scale exponent: ``v * 2**FIXED_BITS`` is an exact integer for every finite float64,
#: subnormals included (the smallest is ``2**-1074``).
FIXED_BITS = 1130


def to_fixed(values: np.ndarray) -> np.ndarray:
    """Return ``values * 2**FIXED_BITS`` as an object array of exact Python ints.

    Parameters
    ----------
    values : numpy.ndarray
        Finite float64 values of any shape.

    Returns
    -------
    numpy.ndarray
        Object array of the same shape holding Python ints.

    Examples
    --------
    >>> import numpy as np
    >>> int(to_fixed(np.array([0.5]))[0]) == 2 ** (FIXED_BITS - 1)
    True
    """
    values = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(values)):
        raise ValueError("to_fixed needs finite values")
    mantissa, exponent = np.frexp(values)
    # frexp gives |mantissa| in [0.5, 1): times 2**53 it is an exact integer.
    integer = (mantissa * 2.0**53).astype(np.int64).astype(object)
    shift = (exponent.astype(np.int64) - 53 + FIXED_BITS).astype(object)
    return integer * (2 ** shift)


def fixed_sum(values: np.ndarray, axis: int = 0) -> list[int]:
    """Exact sum of float64 values along ``axis`` as fixed-point Python ints.

    One pass whatever the data: each value is split into a 53-bit integer mantissa and
    an exponent, the mantissa into three 18-bit pieces, and every piece is added into a
    bin keyed by (exponent, column) with `numpy.bincount`. A bin's float64 total is an
    integer below ``2**18`` times the row count, so it stays exact (below ``2**53``) for
    up to `_ROWS_PER_PASS` rows; only the few occupied bins become Python ints.

    Examples
    --------
    >>> import numpy as np
    >>> total = fixed_sum(np.array([[0.1], [0.2]]))
    >>> fixed_to_float(total[0], 1)
    0.30000000000000004
    """
    values = np.moveaxis(np.asarray(values, dtype=np.float64), axis, 0)
    if not np.all(np.isfinite(values)):
        raise ValueError("fixed_sum needs finite values")
    columns = int(np.prod(values.shape[1:], dtype=np.int64))
    flat = values.reshape(values.shape[0], columns)
    totals = [0] * columns
    for start in range(0, flat.shape[0], _ROWS_PER_PASS):
        _add_binned(flat[start:start + _ROWS_PER_PASS], totals)
    return totals


#: Rows binned at once: 2**34 pieces below 2**18 sum exactly in float64 (< 2**52).
_ROWS_PER_PASS = 2**34
_PIECE_BITS = 18
_EXPONENTS = 2100  # frexp exponents of finite float64 lie in [-1073, 1024]


def _add_binned(flat: np.ndarray, totals: list[int]) -> None:
    """Add the exact column sums of ``flat`` (rows, columns) into ``totals`` (fixed point)."""
    rows, columns = flat.shape
    mantissa, exponent = np.frexp(flat)
    # frexp gives |mantissa| in [0.5, 1): times 2**53 it is an exact integer.
    integer = (mantissa * 2.0**53).astype(np.int64)
    bins = ((exponent.astype(np.int64) + 1073) * columns
            + np.arange(columns, dtype=np.int64)).ravel()
    mask = (1 << _PIECE_BITS) - 1
    pieces = (integer & mask, (integer >> _PIECE_BITS) & mask, integer >> 2 * _PIECE_BITS)
    size = _EXPONENTS * columns
    sums = [np.bincount(bins, weights=p.ravel(), minlength=size) for p in pieces]
    occupied = np.flatnonzero((sums[0] != 0) | (sums[1] != 0) | (sums[2] != 0))
    for index in occupied:
        low, middle, high = (int(s[index]) for s in sums)
        whole = low + (middle << _PIECE_BITS) + (high << 2 * _PIECE_BITS)
        exponent_of_bin, column = divmod(int(index), columns)
        shift = exponent_of_bin - 1073 - 53 + FIXED_BITS
        totals[column] += whole << shift


def fixed_to_float(total: int, divisor: int, bits: int = FIXED_BITS) -> float:
    """Correctly rounded float64 of ``total / 2**bits / divisor``.

    Examples
    --------
    >>> fixed_to_float(3 * 2**FIXED_BITS, 4)
    0.75
    """
    return float(Fraction(total, divisor << bits))


def int64_sum(values: np.ndarray, axis: int = 0) -> list[int]:
    """Exact sum of int64 values along ``axis`` as Python ints, without overflow.

    Each value is split into a high and a low 32-bit half; each half sums safely in
    int64 for up to 2**31 rows, and the halves recombine exactly as Python ints.

    Examples
    --------
    >>> import numpy as np
    >>> big = np.full((4, 1), 2**62, dtype=np.int64)
    >>> int64_sum(big) == [2**64]
    True
    """
    values = np.asarray(values, dtype=np.int64)
    high = np.right_shift(values, 32).sum(axis=axis, dtype=np.int64)
    low = np.bitwise_and(values, 0xFFFFFFFF).sum(axis=axis, dtype=np.int64)
    return [(int(h) << 32) + int(lo) for h, lo in zip(np.atleast_1d(high), np.atleast_1d(low))]
