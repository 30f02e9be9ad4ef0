"""Exact per-channel histograms of integer pixels, and percentiles read from them.

For 8- and 16-bit images a histogram with one bin per possible value (256 or 65,536)
is exact and mergeable (integer counts), so the 0.5th/99.5th percentiles of a whole
dataset come out exactly as ``numpy.percentile`` would give on all its pixels, without
holding them: the robust range for min-max scaling when a few pixels are outliers. It is
an optional accumulator, computed only when asked (`normstats.engine.histogram_run`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from normstats.errors import IncompatibleImagesError, InvalidOptionError

__all__ = ["Histogram", "percentile_from_counts", "ROBUST_RANGE"]

#: The percentiles of the robust range reported by ``--percentiles``.
ROBUST_RANGE = (0.5, 99.5)


def _value_range(dtype: np.dtype) -> tuple[int, int]:
    """Smallest value and number of bins of an exact histogram of ``dtype``."""
    if dtype == np.bool_:
        return 0, 2
    if np.issubdtype(dtype, np.integer) and dtype.itemsize <= 2:
        info = np.iinfo(dtype)
        return int(info.min), int(info.max) - int(info.min) + 1
    raise InvalidOptionError(f"exact histograms need integer pixels of at most 16 bits, "
                             f"got {dtype}")


@dataclass(frozen=True, eq=False)
class Histogram:
    """Counts (C, bins) of every pixel value per channel; bin k holds value ``offset + k``.

    Examples
    --------
    >>> import numpy as np
    >>> h = Histogram.from_array(np.array([[[[0], [0], [255]]]], np.uint8))
    >>> int(h.counts[0, 0]), int(h.counts[0, 255]), h.total
    (2, 1, 3)
    """

    counts: np.ndarray
    dtype: str
    offset: int = 0

    @classmethod
    def from_array(cls, pixels: np.ndarray) -> Histogram:
        """Histogram of (..., C) integer pixels (an image HWC or a stack NHWC)."""
        offset, bins = _value_range(pixels.dtype)
        flat = pixels.reshape(-1, pixels.shape[-1])
        counts = np.stack([np.bincount(flat[:, c].astype(np.intp) - offset, minlength=bins)
                           for c in range(flat.shape[1])]).astype(np.int64)
        return cls(counts, str(pixels.dtype), offset)

    @property
    def total(self) -> int:
        """Pixels per channel."""
        return int(self.counts[0].sum())

    def merge(self, other: Histogram) -> Histogram:
        """Exact sum of two histograms of the same dtype and channel count."""
        if other.dtype != self.dtype or other.counts.shape != self.counts.shape:
            raise IncompatibleImagesError(
                f"histograms cannot be merged: {self.dtype} x{self.counts.shape[0]} and "
                f"{other.dtype} x{other.counts.shape[0]}")
        return Histogram(self.counts + other.counts, self.dtype, self.offset)

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
