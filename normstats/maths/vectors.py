"""Per-feature statistics of vector data (N, d), as scikit-learn's ``StandardScaler`` sees them.

Each feature (column) is its own dataset: NaN is a missing value, ignored in that column
only (a NaN in column 0 never changes column 2), so features have their own counts.
Infinite values are errors named by row and column (or skipped in their column). Integer
features of any width (int8 … int64, uint64) are summed as Python ints, so Σx and Σx² are
exact even for int64 values near 2**62; float features use the float accumulator of
images (two-pass float64 moments per block of rows, merged exactly), relative error
≤ 1e-12 against the exact value.

With ``covariance=True`` a summary also keeps the exact co-moments of the rows whose
features are all finite (`normstats.maths.covariance.CoMoments`): the d×d covariance is
that of the complete rows, as ``numpy.cov(rowvar=False)`` of them would give it (exact for
integer features, whatever their width).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from normstats.errors import EmptyDatasetError, UnreadableInputError
from normstats.maths.covariance import CoMoments
from normstats.maths.exact import FIXED_BITS
from normstats.maths.moments import FloatMoments, IntegerMoments, Moments
from normstats.maths.records import FLOAT_LIMIT, TOO_LARGE_REASON, Skipped, refuse_long_double

__all__ = ["FeatureSummary", "VectorSummary", "summarize_vectors"]


@dataclass(frozen=True)
class FeatureSummary:
    """Exact moments, count and extremes of one feature's finite values."""

    moments: Moments | None = None
    minimum: float = float("inf")
    maximum: float = float("-inf")

    @property
    def count(self) -> int:
        return 0 if self.moments is None else self.moments.count

    def merge(self, other: FeatureSummary) -> FeatureSummary:
        if self.moments is None:
            return other
        if other.moments is None:
            return self
        return FeatureSummary(self.moments.merge(other.moments),
                              min(self.minimum, other.minimum), max(self.maximum, other.maximum))


@dataclass(frozen=True)
class VectorSummary:
    """Per-feature summaries of some rows, the rows seen, and the values skipped.

    Examples
    --------
    >>> import numpy as np
    >>> s = summarize_vectors(np.array([[1.0, np.nan], [3.0, 4.0]]))
    >>> [f.count for f in s.features], s.rows
    ([2, 1], 2)
    """

    features: tuple[FeatureSummary, ...]
    rows: int
    dtype: str
    skipped: tuple[Skipped, ...] = field(default_factory=tuple)
    #: Exact co-moments of the complete rows (every feature finite), when asked.
    co_moments: CoMoments | None = None

    def merge(self, other: VectorSummary) -> VectorSummary:
        if len(self.features) != len(other.features):
            raise ValueError("cannot merge vectors of different feature counts")
        both = self.co_moments is not None and other.co_moments is not None
        return VectorSummary(tuple(a.merge(b) for a, b in zip(self.features, other.features)),
                             self.rows + other.rows, self.dtype, self.skipped + other.skipped,
                             self.co_moments.merge(other.co_moments) if both else None)

    def finalize(self, scale: float) -> dict[str, tuple]:
        """Mean, variance (ddof 0 and 1), min, max and count per feature.

        Mean and variance are the exact totals divided by ``scale`` (and scale²) and
        rounded once: the exact values, correctly rounded, for integer features; for float
        features the totals hold each block's float64 two-pass moments, so they are within
        1e-12 (relative) of the exact values. Min and max are the extremes divided by
        ``scale`` in float64.
        """
        empty = [j for j, f in enumerate(self.features) if f.count == 0]
        if empty:
            raise EmptyDatasetError(f"feature {empty[0]} has no finite value (all NaN, "
                                    "infinite or skipped), so it has no statistic")
        mean, var, var1 = [], [], []
        for feature in self.features:
            m, v = feature.moments.finalize(scale)
            mean.append(m[0])
            var.append(v[0])
            var1.append(feature.moments.finalize(scale, ddof=1)[1][0]
                        if feature.count > 1 else None)
        return {"mean": tuple(mean), "variance": tuple(var), "variance_ddof1": tuple(var1),
                "min": tuple(f.minimum / scale for f in self.features),
                "max": tuple(f.maximum / scale for f in self.features),
                "counts": tuple(f.count for f in self.features)}


def summarize_vectors(block: np.ndarray, first_row: int = 0, name: str = "array",
                      fail_on_inf: bool = False, covariance: bool = False) -> VectorSummary:
    """The `VectorSummary` of rows ``block`` (n, d), numbered from ``first_row``; with
    ``covariance``, the co-moments of its complete rows too."""
    block = np.asarray(block)
    if block.ndim != 2:
        raise ValueError(f"vector data must be (N, d), got shape {block.shape}")
    if block.shape[1] == 0:
        raise UnreadableInputError(f"vectors of shape {block.shape} have no features (axis 1 "
                                   "has length 0): that is not a dataset", name)
    dtype = block.dtype.name  # a bool input is summed as 0/1 but reported as bool
    refuse_long_double(block.dtype)
    if block.dtype.kind == "b":
        block = block.astype(np.uint8)
    skipped: list[Skipped] = []
    features = tuple(_feature(block[:, j], j, first_row, name, fail_on_inf, skipped)
                     for j in range(block.shape[1]))
    return VectorSummary(features, block.shape[0], dtype, tuple(skipped),
                         _complete_rows(block) if covariance else None)


def _complete_rows(block: np.ndarray) -> CoMoments:
    """Exact co-moments of the rows of ``block`` whose values are all finite and small
    enough to square (all rows of integer data)."""
    if block.dtype.kind in "iu":
        return CoMoments.from_integers(block)
    values = block.astype(np.float64, copy=False)
    with np.errstate(invalid="ignore"):
        complete = (np.isfinite(values) & (np.abs(values) <= FLOAT_LIMIT)).all(axis=1)
    if not complete.any():
        d = block.shape[1]
        return CoMoments(0, (0,) * d, (0,) * (d * (d + 1) // 2), FIXED_BITS)
    return CoMoments.from_floats(values[complete])


def _feature(column: np.ndarray, j: int, first_row: int, name: str, fail_on_inf: bool,
             skipped: list[Skipped]) -> FeatureSummary:
    if column.dtype.kind in "iu":
        return _integer_feature(column)
    infinite = np.isinf(column)
    if infinite.any():
        rows = np.flatnonzero(infinite) + first_row
        if fail_on_inf:
            raise UnreadableInputError(f"infinite value at row {rows[0]}, column {j}", name)
        skipped.extend(Skipped(f"{name}[{r}, {j}]", "infinite value") for r in rows)
    large = np.zeros(len(column), bool)
    if float(np.finfo(column.dtype).max) > FLOAT_LIMIT:  # float16/32 cannot be, nor compared
        large = np.isfinite(column) & (np.abs(column) > FLOAT_LIMIT)  # (a cast: a warning)
    if large.any():
        rows = np.flatnonzero(large) + first_row
        if fail_on_inf:
            raise UnreadableInputError(f"value too large at row {rows[0]}, column {j}: "
                                       f"{TOO_LARGE_REASON}", name)
        skipped.extend(Skipped(f"{name}[{r}, {j}]", TOO_LARGE_REASON) for r in rows)
    values = column[np.isfinite(column) & ~large].astype(np.float64, copy=False)
    if values.size == 0:
        return FeatureSummary()
    # A block's float64 two-pass moments, merged exactly with the other blocks' (as images
    # are): the caller's fixed block size makes the bits independent of how data arrives.
    return FeatureSummary(FloatMoments.from_array(values[:, None]), float(values.min()),
                          float(values.max()))


def _integer_feature(column: np.ndarray) -> FeatureSummary:
    if column.size == 0:
        return FeatureSummary()
    values = column.tolist()  # Python ints: Σx² of int64 values needs up to 127 bits
    total, total_sq = sum(values), sum(v * v for v in values)
    moments = IntegerMoments(len(values), (total,), (total_sq,))
    return FeatureSummary(moments, float(min(values)), float(max(values)))
