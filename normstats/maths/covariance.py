"""Channel covariance: exact per-image cross sums, pooled exactly, and the matrices they give.

For C channels the covariance needs, beside the per-channel Σx and Σx² of the records,
the cross sums Σ x_c·x_d of every pair c < d (numpy's ``triu_indices(C, 1)`` order, P =
C·(C−1)/2 of them):

- integer images: exact int64 per image (|x_c·x_d| < 2³² and fewer than 2³¹ pixels, the
  bound Σx² already has), the compiled kernel for 8-bit pixels
  (``normstats/maths/_cross.c``) and float64 matrix products on blocks small enough to be
  exact otherwise; pooled as Python ints;
- float images: the per-image co-moment Σ(x_c − m_c)(x_d − m_d) around the image's own
  mean (two-pass, float64, corrected by the mean's residual), pooled exactly in fixed
  point as the variances are: Σ_i [C_i + n_i·m_ic·m_id], which is the pairwise co-moment
  merge ``C = C_a + C_b + δ_c·δ_d·n_a·n_b/n`` carried out without rounding, so any
  chunking or order gives the same bits.

`CoMoments` holds the pooled totals of every pair c ≤ d (the diagonal is Σx²) and
finalizes them, through `fractions.Fraction`, into the correctly rounded covariance
``(n·Σx_c·x_d − Σx_c·Σx_d) / (n·(n − ddof))``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from normstats.maths.exact import FIXED_BITS, fixed_sum, int64_sum
from normstats.maths.moments import FloatMoments, Moments

__all__ = ["pair_indices", "integer_cross_sums", "float_co_moments", "integer_cross_totals",
           "float_cross_totals", "integer_gram", "CoMoments", "co_moments_of",
           "exact_product_terms"]

#: Values below 2**53 are exact in float64: a block of products stays below it.
_EXACT = 2**53
_BLOCK_BYTES = 8 << 20  # float64 scratch of the numpy path


def pair_indices(channels: int, diagonal: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Rows and columns of the channel pairs c < d (c ≤ d with ``diagonal``), row by row.

    Examples
    --------
    >>> [a.tolist() for a in pair_indices(3)]
    [[0, 0, 1], [1, 2, 2]]
    """
    return np.triu_indices(channels, 0 if diagonal else 1)


@functools.cache
def _kernel() -> object | None:
    """`normstats.maths._cross`, or None where it was not built (numpy's blocks then)."""
    try:
        from normstats.maths import _cross
    except ImportError:
        return None
    return _cross


def integer_cross_sums(stack: np.ndarray) -> np.ndarray:
    """Exact per-image sums of x_c·x_d over the pixels of an integer stack, c < d.

    Parameters
    ----------
    stack : numpy.ndarray
        Shape (N, H, W, C), an integer or bool dtype of at most 16 bits.

    Returns
    -------
    numpy.ndarray
        int64, shape (N, C·(C−1)/2), pairs in `pair_indices` order.

    Examples
    --------
    >>> x = np.array([[[[1, 2, 3]], [[4, 5, 6]]]], np.uint8)  # one image of two pixels
    >>> integer_cross_sums(x).tolist()  # R·G, R·B, G·B
    [[22, 27, 36]]
    """
    n, h, w, c = stack.shape
    if h * w >= 2**31:
        raise ValueError("images of 2**31 pixels or more are not supported")
    out = np.zeros((n, c * (c - 1) // 2), np.int64)
    if out.size == 0:
        return out
    kernel = _kernel()
    if stack.dtype == np.uint8 and kernel is not None and c <= 128:
        flat = np.ascontiguousarray(stack).reshape(n, h * w * c)
        kernel.cross(flat, n, c, out)
        return out
    return _numpy_cross_sums(stack, out)


def _numpy_cross_sums(stack: np.ndarray, out: np.ndarray) -> np.ndarray:
    """`integer_cross_sums` by float64 matrix products over blocks of pixels whose
    products sum below 2**53, so that BLAS adds exact integers."""
    n, h, w, c = stack.shape
    info = np.iinfo(np.uint8 if stack.dtype == np.bool_ else stack.dtype)
    largest = max(int(info.max), -int(info.min)) ** 2
    pixels = h * w
    block = max(1, min(pixels, (_EXACT - 1) // largest))
    images = max(1, _BLOCK_BYTES // (block * c * 8))
    values = stack.reshape(n, pixels, c)
    rows, cols = pair_indices(c)
    for i0 in range(0, n, images):
        for p0 in range(0, pixels, block):
            part = values[i0:i0 + images, p0:p0 + block].astype(np.float64)
            gram = np.matmul(part.transpose(0, 2, 1), part)
            out[i0:i0 + images] += gram[:, rows, cols].astype(np.int64)
    return out


def float_co_moments(stack: np.ndarray) -> np.ndarray:
    """Per-image co-moments Σ(x_c − m_c)(x_d − m_d) of a float stack, c < d, in float64.

    Two passes around the image's float64 mean, less n·r_c·r_d for the mean's residual
    r (as `normstats.maths.image_moments.float_moments` corrects M2).

    Examples
    --------
    >>> x = np.array([[1.0, 3.0], [2.0, 2.0], [3.0, 1.0]]).reshape(1, 3, 1, 2) + 1e8
    >>> float_co_moments(x).tolist()  # Σ(x_0 − 2)(x_1 − 2) over three pixels
    [[-2.0]]
    """
    n, h, w, c = stack.shape
    count = h * w
    values = np.ascontiguousarray(
        np.asarray(stack, dtype=np.float64).reshape(n, count, c).transpose(0, 2, 1))
    mean = values.sum(axis=2) / count
    deviations = values - mean[:, :, None]
    residual = deviations.sum(axis=2) / count
    gram = np.matmul(deviations, deviations.transpose(0, 2, 1))
    rows, cols = pair_indices(c)
    return gram[:, rows, cols] - count * residual[:, rows] * residual[:, cols]


def integer_cross_totals(cross_sums: np.ndarray) -> tuple[int, ...]:
    """Exact Python-int totals over images of per-image cross sums (N, P)."""
    return tuple(int64_sum(cross_sums)) if cross_sums.shape[1] else ()


def float_cross_totals(pixels: np.ndarray, means: np.ndarray, residuals: np.ndarray,
                       co_moments: np.ndarray) -> tuple[int, ...]:
    """Σ_i [C_i + n_i·m_ic·m_id] over images, c < d, in fixed point (``2**FIXED_BITS``).

    ``m = means + residuals`` exactly: its products are summed as exact float64 terms
    (Veltkamp splits), grouped by pixel count, so the totals are exact given the records.
    """
    pixels = np.asarray(pixels, dtype=np.int64)
    rows, cols = pair_indices(means.shape[1])
    if rows.size == 0:
        return ()
    totals = fixed_sum(co_moments)
    for n in np.unique(pixels):
        same = pixels == n
        terms = exact_product_terms(means[same][:, rows], residuals[same][:, rows],
                                    means[same][:, cols], residuals[same][:, cols])
        for pair, value in enumerate(fixed_sum(np.concatenate(terms))):
            totals[pair] += int(n) * value
    return tuple(totals)


_SPLITTER = 134217729.0  # 2**27 + 1: Veltkamp's constant for splitting a float64


def _split(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c = a * _SPLITTER
    high = c - (c - a)
    return high, a - high


def exact_product_terms(a_hi: np.ndarray, a_lo: np.ndarray, b_hi: np.ndarray,
                        b_lo: np.ndarray) -> list[np.ndarray]:
    """float64 arrays whose exact sum is (a_hi + a_lo)·(b_hi + b_lo), each an exact
    product of two 26-bit halves.

    Examples
    --------
    >>> from fractions import Fraction
    >>> a, b = np.array([0.1]), np.array([0.3])
    >>> sum(Fraction(float(t[0])) for t in exact_product_terms(a, 0 * a, b, 0 * b)) == \\
    ...     Fraction(0.1) * Fraction(0.3)
    True
    """
    a_pieces = [*_split(a_hi), *_split(a_lo)]
    b_pieces = [*_split(b_hi), *_split(b_lo)]
    return [x * y for x in a_pieces for y in b_pieces]


def integer_gram(values: np.ndarray) -> list[list[int]]:
    """Exact XᵀX of integer rows (n, d) of any width, as Python ints.

    float64 products over blocks of rows whose sums stay below 2**53 when the values
    allow it (|x| < 2**26.5), Python ints otherwise.

    Examples
    --------
    >>> integer_gram(np.array([[2**40, 1], [1, 1]], np.int64))[0]
    [1208925819614629174706177, 1099511627777]
    """
    values = np.asarray(values)
    d = values.shape[1]
    largest = max(abs(int(v)) for v in (values.min(initial=0), values.max(initial=0)))
    if largest == 0:
        return [[0] * d for _ in range(d)]
    if largest * largest >= _EXACT:
        exact = values.astype(object)
        return (exact.T @ exact).tolist()
    step = max(1, (_EXACT - 1) // (largest * largest))
    total = np.zeros((d, d), dtype=object)
    for start in range(0, values.shape[0], step):
        block = values[start:start + step].astype(np.float64)
        total += (block.T @ block).astype(np.int64).astype(object)
    return total.tolist()


@dataclass(frozen=True)
class CoMoments:
    """Exact pooled totals of a covariance: count, Σx per channel, Σx_c·x_d per pair c ≤ d.

    Integer data keep plain integers (``bits`` 0); float data keep fixed-point totals
    scaled by ``2**bits`` (`normstats.maths.exact`). ``products`` follow
    ``pair_indices(C, diagonal=True)``. Merging adds; everything is exact.

    Examples
    --------
    >>> m = CoMoments.from_integers(np.array([[0, 0], [2, 4]]))
    >>> m.covariance()
    ((1.0, 2.0), (2.0, 4.0))
    >>> m.merge(m).count
    4
    """

    count: int
    total: tuple[int, ...]
    products: tuple[int, ...]
    bits: int = 0

    @property
    def channels(self) -> int:
        return len(self.total)

    @classmethod
    def from_integers(cls, values: np.ndarray) -> CoMoments:
        """Totals of integer rows (n, d)."""
        values = np.asarray(values)
        gram = integer_gram(values)
        rows, cols = pair_indices(values.shape[1], diagonal=True)
        return cls(int(values.shape[0]), _column_sums(values),
                   tuple(gram[r][c] for r, c in zip(rows.tolist(), cols.tolist())))

    @classmethod
    def from_floats(cls, values: np.ndarray) -> CoMoments:
        """Totals of float rows (n, d): two-pass float64 co-moments around their mean, as
        one image's, pooled exactly."""
        values = np.asarray(values, dtype=np.float64)
        n, d = values.shape
        mean = values.sum(axis=0) / n
        deviations = values - mean
        residual = deviations.sum(axis=0) / n
        rows, cols = pair_indices(d, diagonal=True)
        gram = deviations.T @ deviations - n * np.outer(residual, residual)
        co = gram[rows, cols][None]
        co[0, rows == cols] = np.maximum(co[0, rows == cols], 0.0)
        terms = exact_product_terms(mean[rows][None], residual[rows][None], mean[cols][None],
                                    residual[cols][None])
        products = [a + n * b for a, b in zip(fixed_sum(co), fixed_sum(np.concatenate(terms)))]
        linear = fixed_sum(np.stack([mean, residual]))
        return cls(n, tuple(n * v for v in linear), tuple(products), FIXED_BITS)

    @classmethod
    def from_moments(cls, count: int, total: tuple[int, ...], total_sq: tuple[int, ...],
                     cross: tuple[int, ...], bits: int) -> CoMoments:
        """Totals from per-channel moments (Σx, Σx²) and the cross totals of pairs c < d."""
        channels = len(total)
        rows, cols = pair_indices(channels, diagonal=True)
        off = {pair: v for pair, v in zip(zip(*(a.tolist() for a in pair_indices(channels))),
                                          cross)}
        products = tuple(total_sq[r] if r == c else off[(r, c)]
                         for r, c in zip(rows.tolist(), cols.tolist()))
        return cls(count, tuple(total), products, bits)

    def merge(self, other: CoMoments) -> CoMoments:
        """Exact sum of two accumulators of the same channels and kind."""
        if (self.channels, self.bits) != (other.channels, other.bits):
            raise ValueError("cannot merge co-moments of different channels or kinds")
        return CoMoments(self.count + other.count,
                         tuple(a + b for a, b in zip(self.total, other.total)),
                         tuple(a + b for a, b in zip(self.products, other.products)), self.bits)

    def exact(self, ddof: int = 0) -> list[list[Fraction]]:
        """The covariance matrix as exact fractions ``(n·Q − S_c·S_d) / (n·(n − ddof))``."""
        n, unit = self.count, 1 << self.bits
        if n - ddof <= 0:
            raise ValueError(f"covariance with ddof={ddof} needs more than {ddof} values")
        rows, cols = pair_indices(self.channels, diagonal=True)
        matrix = [[Fraction(0)] * self.channels for _ in range(self.channels)]
        for r, c, q in zip(rows.tolist(), cols.tolist(), self.products):
            value = Fraction(n * q * unit - self.total[r] * self.total[c],
                             n * (n - ddof) * unit * unit)
            if r == c:
                value = max(value, Fraction(0))  # float totals: never a negative variance
            matrix[r][c] = matrix[c][r] = value
        return matrix

    def covariance(self, scale: float = 1, ddof: int = 0) -> tuple[tuple[float, ...], ...]:
        """The correctly rounded covariance, divided by ``scale**2``."""
        factor = Fraction(scale) ** 2
        return tuple(tuple(float(v / factor) for v in row) for row in self.exact(ddof))

    def correlation(self) -> tuple[tuple[float, ...], ...] | None:
        """The correlation matrix (None when a channel is constant: it is undefined)."""
        exact = self.exact()
        variance = [exact[i][i] for i in range(self.channels)]
        if any(v == 0 for v in variance):
            return None
        return tuple(tuple(1.0 if i == j else _ratio(exact[i][j], variance[i], variance[j])
                           for j in range(self.channels)) for i in range(self.channels))


def co_moments_of(moments: Moments | None, cross: tuple[int, ...] | None) -> CoMoments | None:
    """The `CoMoments` of pooled per-channel moments and cross totals (None without them,
    or where nodata left some values out of some channels: the pairs' counts differ)."""
    if moments is None or cross is None or getattr(moments, "counts", None) is not None:
        return None
    bits = FIXED_BITS if isinstance(moments, FloatMoments) else 0
    return CoMoments.from_moments(moments.count, moments.total, moments.total_sq, cross, bits)


def _column_sums(values: np.ndarray) -> tuple[int, ...]:
    """Exact column sums of integer rows as Python ints (uint64 beyond int64 included)."""
    if values.dtype == np.uint64 and values.size and int(values.max()) >= 2**63:
        return tuple(int(v) for v in values.astype(object).sum(axis=0))
    return tuple(int64_sum(values.astype(np.int64)))


def _ratio(cov: Fraction, var_a: Fraction, var_b: Fraction) -> float:
    """cov / sqrt(var_a·var_b), from its exact square (one rounding and a square root)."""
    value = float(cov * cov / (var_a * var_b)) ** 0.5
    return min(1.0, value) if cov >= 0 else -min(1.0, value)
