"""Exact per-channel histograms of integer pixels, and percentiles read from them.

A histogram with one bin per value between the smallest and the largest value seen is
exact and mergeable (integer counts), so percentiles of a whole dataset come out exactly
as ``numpy.percentile`` would give on all its pixels, without holding them: the robust
range for min-max scaling when a few pixels are outliers (0.5th/99.5th), and the 2nd/98th
percentiles remote-sensing users clip rasters by. Its bins span the values observed, not
the dtype: 13 bands of uint16 reflectances between 0 and 12,000 take 13 × 12,001 bins, and
32-bit integer bands work too, as long as the observed range fits `MAX_CELLS` (memory stays
bounded: a wider range is a clear error). Nodata and masked values are not counted. It is
an optional accumulator, computed only when asked (`normstats.engine.histogram_run`).
8- and 16-bit values are counted by the compiled kernel
(`normstats.maths.fused.integer_histogram`) into 2⁸ or 2¹⁶ bins a channel, then cut to the
values seen: a 256×256 RGB image in 0.06 ms, where numpy's index array and ``bincount``
took 1.4 ms, four times its JPEG decode.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from normstats.errors import IncompatibleImagesError, InvalidOptionError
from normstats.maths import fused

__all__ = ["Histogram", "percentile_from_counts", "ROBUST_RANGE", "MAX_CELLS", "full_range",
           "FULL_RANGE_CELLS"]

#: The percentiles reported by ``--percentiles``: the robust range (0.5th/99.5th) and the
#: 2nd/98th percentiles rasters are clipped by.
ROBUST_RANGE = (0.5, 2.0, 98.0, 99.5)
#: The most bins (channels × observed range) one histogram holds: 128 MiB of counts.
MAX_CELLS = 1 << 24


def _check_integers(dtype: np.dtype) -> None:
    if dtype != np.bool_ and dtype.kind not in "iu":
        raise InvalidOptionError(f"exact histograms need integer pixels, got {dtype}")


def _check_cells(channels: int, bins: int) -> None:
    if channels * bins > MAX_CELLS:
        raise InvalidOptionError(
            f"exact percentiles need a histogram of {channels} bands x {bins:,} values, over "
            f"the limit of {MAX_CELLS:,} bins: the values span too wide a range")


#: The most cells (channels × 2⁸ or 2¹⁶) of a count over the whole range of 8- or 16-bit
#: values: 16 MiB of int64, 32 bands of 16 bits. Wider images are counted over the range
#: they hold, by numpy.
FULL_RANGE_CELLS = 1 << 21


def full_range(dtype: np.dtype, channels: int) -> tuple[int, int] | None:
    """(bins, value of bin 0) of the count of ``channels`` channels of ``dtype`` over its
    whole range (`normstats.maths.fused.integer_histogram`): 8- and 16-bit integers and
    bool; None for the rest, counted over the range they hold.

    Examples
    --------
    >>> import numpy as np
    >>> full_range(np.dtype(np.int16), 3), full_range(np.dtype(np.int32), 1)
    ((65536, -32768), None)
    """
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return 256, 0  # counted as bytes
    if dtype.kind not in "iu" or dtype.itemsize > 2:
        return None
    bins = 1 << (8 * dtype.itemsize)
    if channels * bins > FULL_RANGE_CELLS:
        return None
    return bins, -(bins // 2) if dtype.kind == "i" else 0


@dataclass(frozen=True, eq=False)
class Histogram:
    """Counts (C, bins) of every pixel value per channel; bin k holds value ``offset + k``.

    Examples
    --------
    >>> import numpy as np
    >>> h = Histogram.from_array(np.array([[[[3], [3], [255]]]], np.uint8))
    >>> h.offset, int(h.counts[0, 0]), int(h.counts[0, 252]), h.total
    (3, 2, 1, 3)
    """

    counts: np.ndarray
    dtype: str
    offset: int = 0

    @classmethod
    def from_array(cls, pixels: np.ndarray, valid: np.ndarray | None = None) -> Histogram:
        """Histogram of (..., C) integer pixels (an image HWC or a stack NHWC); with
        ``valid`` (a bool array of the same shape), of the valid values only."""
        _check_integers(pixels.dtype)
        channels = pixels.shape[-1]
        full = full_range(pixels.dtype, channels)
        if full is not None:  # one read of the values, no index array
            counts = np.zeros((channels, full[0]), np.int64)
            fused.integer_histogram(pixels, counts, valid)
            return cls.trimmed(counts, str(pixels.dtype), full[1])
        flat = pixels.reshape(-1, channels)
        if valid is not None:
            valid = np.broadcast_to(valid, pixels.shape).reshape(-1, channels)
        kept = flat if valid is None else flat[valid]
        if kept.size == 0:
            return cls(np.zeros((channels, 1), np.int64), str(pixels.dtype), 0)
        low, high = int(kept.min()), int(kept.max())
        bins = high - low + 1
        _check_cells(channels, bins)
        index = (flat.astype(np.int64) - low) + np.arange(channels, dtype=np.int64) * bins
        index = index.ravel() if valid is None else index[valid]
        counts = np.bincount(index, minlength=channels * bins).reshape(channels, bins)
        return cls(counts.astype(np.int64, copy=False), str(pixels.dtype), low)

    @classmethod
    def trimmed(cls, counts: np.ndarray, dtype: str, offset: int = 0) -> Histogram:
        """The histogram of ``counts`` (C, bins) from value ``offset``, its bins cut to
        the values seen: from the smallest to the largest value of any channel.

        Examples
        --------
        >>> import numpy as np
        >>> h = Histogram.trimmed(np.array([[0, 2, 0, 1, 0]]), "uint8")
        >>> h.offset, h.counts.tolist()
        (1, [[2, 0, 1]])
        """
        seen = np.flatnonzero(counts.any(axis=0))
        if not len(seen):
            return cls(np.zeros((counts.shape[0], 1), np.int64), dtype, 0)
        low, high = int(seen[0]), int(seen[-1])
        return cls(np.array(counts[:, low:high + 1], np.int64), dtype, offset + low)

    @property
    def total(self) -> int:
        """Values counted in the first channel (every channel, without nodata)."""
        return int(self.counts[0].sum())

    @property
    def end(self) -> int:
        """One past the largest value a bin holds."""
        return self.offset + self.counts.shape[1]

    def merge(self, other: Histogram) -> Histogram:
        """Exact sum of two histograms of the same dtype and channel count, over the union
        of their ranges."""
        if other.dtype != self.dtype or other.counts.shape[0] != self.counts.shape[0]:
            raise IncompatibleImagesError(
                f"histograms cannot be merged: {self.dtype} x{self.counts.shape[0]} and "
                f"{other.dtype} x{other.counts.shape[0]}")
        low, end = min(self.offset, other.offset), max(self.end, other.end)
        _check_cells(self.counts.shape[0], end - low)
        counts = np.zeros((self.counts.shape[0], end - low), np.int64)
        for part in (self, other):
            counts[:, part.offset - low:part.end - low] += part.counts
        return Histogram(counts, self.dtype, low)

    def add_in_place(self, other: Histogram) -> Histogram:
        """``self.merge(other)``, adding into this histogram's own counts when ``other``'s
        range lies within its range (an accumulator's histogram, owned by it)."""
        if (other.dtype == self.dtype and other.counts.shape[0] == self.counts.shape[0]
                and self.offset <= other.offset and other.end <= self.end):
            self.counts[:, other.offset - self.offset:other.end - self.offset] += other.counts
            return self
        return self.merge(other)

    def percentile(self, q: float) -> tuple[float, ...]:
        """Per-channel percentile ``q`` in raw pixel values, as `numpy.percentile` (linear).

        Examples
        --------
        >>> import numpy as np
        >>> x = np.array([[[[3], [1], [4], [1], [5]]]], np.uint8)
        >>> Histogram.from_array(x).percentile(30.0) == (float(np.percentile(x, 30.0)),)
        True
        """
        return tuple(percentile_from_counts(row, q, self.offset) for row in self.counts)


def _sorted_value(cumulative: np.ndarray, index: int, offset: int) -> float:
    """The ``index``-th smallest value (0-based) of the sample a histogram describes."""
    return float(int(np.searchsorted(cumulative, index, side="right")) + offset)


def percentile_from_counts(counts: np.ndarray, q: float, offset: int = 0) -> float:
    """`numpy.percentile`'s default ('linear') of the values a histogram counts.

    The float arithmetic is numpy's own, step for step (virtual index ``(n - 1) * q``,
    then its two-sided lerp), so the result is bit-identical, not just close.

    Examples
    --------
    >>> percentile_from_counts(np.array([1, 0, 3]), 50.0)
    2.0
    """
    if not 0 <= q <= 100:
        raise InvalidOptionError(f"percentile must be in [0, 100], got {q}")
    cumulative = np.cumsum(counts)
    n = int(cumulative[-1])
    if n == 0:
        raise InvalidOptionError("percentile of an empty histogram")
    virtual = (n - 1) * (np.float64(q) / 100)
    below = int(np.floor(virtual))
    gamma = float(virtual - below)
    a = _sorted_value(cumulative, min(below, n - 1), offset)
    b = _sorted_value(cumulative, min(below + 1, n - 1), offset)
    diff = b - a
    return a + diff * gamma if gamma < 0.5 else b - diff * (1 - gamma)
