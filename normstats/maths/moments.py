"""Exact accumulators of per-channel moments: pure values, no I/O, no dask.

Two value types share one interface (``from_array``, ``from_records``, ``merge``,
``mean``, ``variance``, ``finalize``):

- `IntegerMoments` keeps Σx and Σx² of integer images as Python ints.
- `FloatMoments` keeps, in exact fixed point, Σ n·mean and Σ (M2 + n·mean²) of
  per-image float64 moments. Merging is the Chan/Golub/LeVeque pairwise update
  ``M2 = M2a + M2b + δ²·na·nb/n`` carried out exactly: with exact totals it reduces to
  ``M2 = Σ(M2_i + n_i·mean_i²) − (Σ n_i·mean_i)²/n``, so any chunking or order gives
  the same bits.

Both finalize through `fractions.Fraction`, so the reported mean and variance are the
correctly rounded values of the exact ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from normstats.maths.exact import FIXED_BITS, fixed_sum, int64_sum, scaled_quotient
from normstats.maths.image_moments import float_moments, integer_sums

__all__ = ["IntegerMoments", "FloatMoments", "Moments", "as_pixel_stack"]

_SPLITTER = 134217729.0  # 2**27 + 1: Veltkamp's constant for splitting a float64


def as_pixel_stack(values: np.ndarray) -> np.ndarray:
    """View (..., C) values as one (1, P, 1, C) image stack for the image kernels."""
    values = np.asarray(values)
    channels = values.shape[-1] if values.ndim else 1
    return values.reshape(1, -1, 1, channels)


def _check_same_channels(a: tuple, b: tuple) -> None:
    if len(a) != len(b):
        raise ValueError(f"cannot merge moments of {len(a)} and {len(b)} channels")


@dataclass(frozen=True)
class IntegerMoments:
    """Exact Σx and Σx² per channel of integer data, merged as Python ints.

    Attributes
    ----------
    count : int
        Number of values per channel.
    total, total_sq : tuple of int
        Σx and Σx² per channel.
    counts : tuple of int, optional
        Values per channel where nodata was left out (None: ``count`` in every channel).

    Examples
    --------
    >>> import numpy as np
    >>> a = IntegerMoments.from_array(np.array([[0], [255]], dtype=np.uint8))
    >>> a.finalize(scale=255)
    ((0.5,), (0.25,))
    """

    count: int
    total: tuple[int, ...]
    total_sq: tuple[int, ...]
    counts: tuple[int, ...] | None = None

    @classmethod
    def from_array(cls, values: np.ndarray) -> IntegerMoments:
        """Moments of integer values shaped (..., C)."""
        sums, squares = integer_sums(as_pixel_stack(values))
        count = int(np.asarray(values).size // sums.shape[1])
        return cls(count, tuple(int(v) for v in sums[0]), tuple(int(v) for v in squares[0]))

    @classmethod
    def from_records(cls, pixels: np.ndarray, sums: np.ndarray, squares: np.ndarray,
                     valid: np.ndarray | None = None) -> IntegerMoments:
        """Pool per-image records: pixel counts (N,), Σx and Σx² (N, C) int64, and the
        valid values per image and channel (N, C) where nodata was left out."""
        counts = None if valid is None else tuple(int64_sum(valid))
        return cls(int(np.sum(pixels, dtype=np.int64)), tuple(int64_sum(sums)),
                   tuple(int64_sum(squares)), counts)

    def channel_counts(self) -> tuple[int, ...]:
        """Values per channel: ``counts``, or ``count`` in every channel."""
        return self.counts if self.counts is not None else (self.count,) * len(self.total)

    def merge(self, other: IntegerMoments) -> IntegerMoments:
        """Exact sum of two accumulators (commutative and associative)."""
        _check_same_channels(self.total, other.total)
        return IntegerMoments(self.count + other.count,
                              tuple(a + b for a, b in zip(self.total, other.total)),
                              tuple(a + b for a, b in zip(self.total_sq, other.total_sq)),
                              _merged_counts(self, other))

    def mean(self) -> tuple[Fraction, ...]:
        """Exact per-channel mean."""
        return tuple(Fraction(s, n) for s, n in zip(self.total, self.channel_counts()))

    def variance(self, ddof: int = 0) -> tuple[Fraction, ...]:
        """Exact per-channel variance ``(n·Σx² − (Σx)²) / (n·(n − ddof))``, never negative."""
        return tuple(Fraction(n * q - s * s, n * (n - ddof))
                     for s, q, n in zip(self.total, self.total_sq, self.channel_counts()))

    def finalize(self, scale: float = 1, ddof: int = 0) -> tuple[tuple[float, ...], ...]:
        """Correctly rounded (mean, variance) per channel, divided by ``scale`` (and scale²)."""
        return _finalize(self, scale, ddof)


@dataclass(frozen=True)
class FloatMoments:
    """Exact totals of per-image float64 moments, in fixed point (see `normstats.maths.exact`).

    Attributes
    ----------
    count : int
        Number of values per channel.
    total : tuple of int
        Σ n_i·mean_i per channel, scaled by ``2**FIXED_BITS``.
    total_sq : tuple of int
        Σ (M2_i + n_i·mean_i²) per channel, scaled by ``2**FIXED_BITS``.
    counts : tuple of int, optional
        Values per channel where nodata was left out (None: ``count`` in every channel).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[1e8 + 1], [1e8 + 2], [1e8 + 3]])
    >>> mean, var = FloatMoments.from_array(x).finalize()
    >>> mean, var
    ((100000002.0,), (0.6666666666666666,))
    """

    count: int
    total: tuple[int, ...]
    total_sq: tuple[int, ...]
    counts: tuple[int, ...] | None = None

    @classmethod
    def from_array(cls, values: np.ndarray) -> FloatMoments:
        """Moments of float values shaped (..., C), accumulated in float64."""
        mean, residual, m2 = float_moments(as_pixel_stack(values))
        count = int(np.asarray(values).size // mean.shape[1])
        return cls.from_records(np.array([count]), mean, residual, m2)

    @classmethod
    def from_records(cls, pixels: np.ndarray, means: np.ndarray, residuals: np.ndarray,
                     m2s: np.ndarray, valid: np.ndarray | None = None) -> FloatMoments:
        """Pool per-image records exactly: pixel counts (N,), mean, residual, M2 (N, C),
        and the valid values per image and channel (N, C) where nodata was left out (a
        channel without one has zero moments)."""
        pixels = np.asarray(pixels, dtype=np.int64)
        if valid is not None:  # each channel pooled over its own counts
            columns = [cls.from_records(valid[:, c], means[:, c:c + 1], residuals[:, c:c + 1],
                                        m2s[:, c:c + 1]) for c in range(means.shape[1])]
            return cls(int(pixels.sum()), tuple(m.total[0] for m in columns),
                       tuple(m.total_sq[0] for m in columns), tuple(m.count for m in columns))
        channels = means.shape[1]
        total, total_sq = [0] * channels, list(fixed_sum(m2s))
        for n in np.unique(pixels):
            rows = pixels == n
            hi, lo = means[rows], residuals[rows]
            linear = fixed_sum(np.concatenate([hi, lo]))
            square = fixed_sum(np.concatenate(_exact_square_terms(hi, lo)))
            for c in range(channels):
                total[c] += int(n) * linear[c]
                total_sq[c] += int(n) * square[c]
        return cls(int(pixels.sum()), tuple(total), tuple(total_sq))

    def channel_counts(self) -> tuple[int, ...]:
        """Values per channel: ``counts``, or ``count`` in every channel."""
        return self.counts if self.counts is not None else (self.count,) * len(self.total)

    def merge(self, other: FloatMoments) -> FloatMoments:
        """Exact sum of two accumulators (commutative and associative)."""
        _check_same_channels(self.total, other.total)
        return FloatMoments(self.count + other.count,
                            tuple(a + b for a, b in zip(self.total, other.total)),
                            tuple(a + b for a, b in zip(self.total_sq, other.total_sq)),
                            _merged_counts(self, other))

    def mean(self) -> tuple[Fraction, ...]:
        """Per-channel mean, exact given the per-image float64 moments."""
        return tuple(Fraction(s, n << FIXED_BITS)
                     for s, n in zip(self.total, self.channel_counts()))

    def variance(self, ddof: int = 0) -> tuple[Fraction, ...]:
        """Per-channel variance, exact given the per-image moments; never negative."""
        unit = 1 << FIXED_BITS
        return tuple(max(Fraction(n * q * unit - s * s, n * (n - ddof) * unit * unit), Fraction(0))
                     for s, q, n in zip(self.total, self.total_sq, self.channel_counts()))

    def finalize(self, scale: float = 1, ddof: int = 0) -> tuple[tuple[float, ...], ...]:
        """Correctly rounded (mean, variance) per channel, divided by ``scale`` (and scale²)."""
        return _finalize(self, scale, ddof)


Moments = IntegerMoments | FloatMoments


def _merged_counts(a: Moments, b: Moments) -> tuple[int, ...] | None:
    """Per-channel counts of two merged accumulators (None while neither left any out)."""
    if a.counts is None and b.counts is None:
        return None
    return tuple(x + y for x, y in zip(a.channel_counts(), b.channel_counts()))


def _finalize(moments: Moments, scale: float, ddof: int) -> tuple[tuple[float, ...], ...]:
    if min(moments.channel_counts()) - ddof <= 0:
        raise ValueError(f"variance with ddof={ddof} needs more than {ddof} values")
    mean = tuple(scaled_quotient(m.numerator, m.denominator, scale) for m in moments.mean())
    variance = tuple(scaled_quotient(v.numerator, v.denominator, scale, 2)
                     for v in moments.variance(ddof))
    return mean, variance


def _split(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Veltkamp split: a = high + low with 26-bit halves whose products are exact."""
    c = a * _SPLITTER
    high = c - (c - a)
    return high, a - high


def _exact_square_terms(hi: np.ndarray, lo: np.ndarray) -> list[np.ndarray]:
    """float64 arrays whose exact sum is (hi + lo)², each term an exact product."""
    hh, hl = _split(hi)
    lh, ll = _split(lo)
    return [hh * hh, 2 * hh * hl, hl * hl,
            2 * hh * lh, 2 * hh * ll, 2 * hl * lh, 2 * hl * ll,
            lh * lh, 2 * lh * ll, ll * ll]
