"""Exact sums of float64 values, as integers in a fixed-point scale.

Every finite float64 is an integer multiple of ``2**-1074``; scaled by ``2**FIXED_BITS``
it becomes a Python int, and sums of such ints are exact whatever the order or the
grouping. normstats uses this to average per-image standard deviations and to combine
float moments so that results are bit-identical however the work was split.
"""

from __future__ import annotations

import numpy as np

from normstats.maths import fused

__all__ = ["FIXED_BITS", "to_fixed", "fixed_sum", "add_bins", "fixed_to_float",
           "scaled_quotient", "int64_sum"]

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

    One pass whatever the data: each value's bits give its 53-bit integer significand
    (split into two pieces below ``2**27``) and its binary exponent, and every piece is
    added into a bin keyed by (exponent, column) with `numpy.bincount`. A bin's float64
    total is a sum of integers below ``2**27``, exact (below ``2**53``) for up to
    `_ROWS_PER_PASS` rows; only the few occupied bins become Python ints.

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


#: Rows binned at once: 2**25 rows of pieces below 2**27 sum exactly in float64.
_ROWS_PER_PASS = 2**25
_PIECE_BITS = 27
_EXPONENTS = 2048  # biased exponents of float64; 2047 (inf, NaN) is refused earlier
_SIGNIFICAND = (1 << 52) - 1


def _add_binned(flat: np.ndarray, totals: list[int]) -> None:
    """Add the exact column sums of ``flat`` (rows, columns) into ``totals`` (fixed point)."""
    bits = np.ascontiguousarray(flat).view(np.int64)
    compiled = fused.exponent_bins()
    if compiled is not None:
        low_sums = np.zeros((_EXPONENTS, flat.shape[1]), np.int64)
        high_sums = np.zeros_like(low_sums)
        compiled(bits, low_sums, high_sums)
    else:
        low_sums, high_sums = _bincount_pieces(bits)
    add_bins(low_sums, high_sums, totals)


def add_bins(low_sums: np.ndarray, high_sums: np.ndarray, totals: list[int]) -> None:
    """Add bins of significand pieces into fixed-point ``totals``: (2048, columns) sums of
    the low 27 bits and of the rest of the significands of the values of each biased
    exponent and column (as `normstats.maths.fused.exponent_bins` fills them).

    Examples
    --------
    >>> low, high = np.zeros((2048, 1), np.int64), np.zeros((2048, 1), np.int64)
    >>> high[1023, 0] = 2**25  # 1.0 = 2**52 · 2**-52, its significand's high piece
    >>> totals = [0]
    >>> add_bins(low, high, totals)
    >>> totals == [2**FIXED_BITS]
    True
    """
    occupied = np.flatnonzero((low_sums != 0) | (high_sums != 0))
    exponents, columns = np.divmod(occupied, low_sums.shape[1])
    # As lists: Python ints at once, not numpy scalars one by one (5x faster). numpy's
    # binning gives float64 bins, whole numbers below 2**53: exact as int64.
    lows = low_sums.ravel()[occupied].astype(np.int64).tolist()
    highs = high_sums.ravel()[occupied].astype(np.int64).tolist()
    for exponent, column, low, high in zip(exponents.tolist(), columns.tolist(), lows, highs):
        totals[column] += (low + (high << _PIECE_BITS)) << (max(exponent, 1) - 1075 + FIXED_BITS)


def _bincount_pieces(bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Without the compiled kernel: (2048, columns) float64 bin totals of both pieces."""
    columns = bits.shape[1]
    biased = (bits >> 52) & 0x7FF
    # value = ±significand · 2**(max(biased, 1) - 1075), the leading 1 implicit unless subnormal.
    significand = (bits & _SIGNIFICAND) | ((biased > 0).astype(np.int64) << 52)
    significand = np.where(bits < 0, -significand, significand)
    bins = (biased * columns + np.arange(columns, dtype=np.int64)).ravel()
    low = (significand & ((1 << _PIECE_BITS) - 1)).ravel()
    high = (significand >> _PIECE_BITS).ravel()
    size = _EXPONENTS * columns
    return (np.bincount(bins, weights=low, minlength=size).reshape(_EXPONENTS, columns),
            np.bincount(bins, weights=high, minlength=size).reshape(_EXPONENTS, columns))


def fixed_to_float(total: int, divisor: int, bits: int = FIXED_BITS) -> float:
    """Correctly rounded float64 of ``total / 2**bits / divisor``.

    Examples
    --------
    >>> fixed_to_float(3 * 2**FIXED_BITS, 4)
    0.75
    """
    return scaled_quotient(total, divisor << bits)


def scaled_quotient(numerator: int, denominator: int, scale: float = 1.0,
                    power: int = 1) -> float:
    """Correctly rounded float64 of ``numerator / (denominator · scale**power)``.

    The int true division of the exact terms (the scale is a ratio of two ints): what
    ``float(Fraction(...))`` computes, the same bits, without first reducing the fraction
    (a gcd of thousand-bit integers for fixed-point sums). OverflowError past float64.

    Examples
    --------
    >>> from fractions import Fraction
    >>> scaled_quotient(3, 10, 0.1) == float(Fraction(3, 10) / Fraction(0.1))
    True
    """
    top, bottom = float(scale).as_integer_ratio()
    return numerator * bottom**power / (denominator * top**power)


def int64_sum(values: np.ndarray, axis: int = 0) -> list[int]:
    """Exact sum of int64 values along ``axis`` as Python ints, without overflow.

    Where no sum of the values could pass int64 (rows times the largest magnitude below
    2**63: the records of 8-bit images) they are summed as they are. Otherwise each value
    is split into a high and a low 32-bit half; each half sums safely in int64 for up to
    2**31 rows, and the halves recombine exactly as Python ints.

    Examples
    --------
    >>> import numpy as np
    >>> big = np.full((4, 1), 2**62, dtype=np.int64)
    >>> int64_sum(big) == [2**64]
    True
    """
    # The summed axis made last and contiguous: numpy reduces an (N, 3) array along N
    # an order of magnitude slower than a (3, N) one along its rows.
    values = np.ascontiguousarray(np.moveaxis(np.asarray(values, dtype=np.int64), axis, -1))
    if values.size and max(int(values.max()), -int(values.min())) * values.shape[-1] < 2**63:
        return [int(v) for v in np.atleast_1d(values.sum(axis=-1, dtype=np.int64))]
    high = np.right_shift(values, 32).sum(axis=-1, dtype=np.int64)
    low = np.bitwise_and(values, 0xFFFFFFFF).sum(axis=-1, dtype=np.int64)
    return [(int(h) << 32) + int(lo) for h, lo in zip(np.atleast_1d(high), np.atleast_1d(low))]
