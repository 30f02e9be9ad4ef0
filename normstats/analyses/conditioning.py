"""What feature scaling buys gradient descent: condition numbers of XᵀX/n.

For least squares on features x ∈ R^d, the Hessian is H = (1/n) Σ x xᵀ, and gradient
descent converges at a rate set by its condition number λmax/λmin (Shusen Wang, "Feature
Scaling for Linear Models"). With income in dollars ~ N(3000, 400²) and height in inches
~ N(69, 3²), κ(H) ≈ 10⁵ (one sample in those slides shows 9.2·10⁴; the population value is
9.95·10⁴, and the small eigenvalue moves a lot from sample to sample); standardizing each
feature makes H the correlation matrix, κ ≈ 1; min-max scaling lands in between (the
features stay uncentred).

Everything follows from one streaming pass: per-feature mean, min, max and the
covariance (accumulated around the first row, so large offsets do not cancel):

- raw:          H = C + μμᵀ
- standardized: H = D C D with D = diag(1/σ)
- min-max:      H = S (C + (μ - min)(μ - min)ᵀ) S with S = diag(1/(max - min))

Scaling each feature cannot remove correlation between features; whitening can. The
report also gives κ of the covariance C itself as is, standardized (the correlation
matrix) and ZCA-whitened (the identity, κ = 1): for the channels of an image dataset
(`channel_conditioning`, from the exact channel covariance of ``compute(...,
covariance=True)``) as for vectors. RGB channels of photos correlate at ~0.9, so κ of
their correlation matrix stays far above 1 after standardizing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from normstats.errors import (
    EmptyDatasetError,
    InvalidOptionError,
    UnreadableInputError,
    numbered,
)
from normstats.maths.whitening import condition_number, covariance_conditions
from normstats.results.text_report import counted
from normstats.sources.zarr_chunks import holes_in

__all__ = ["SecondMoments", "Conditioning", "conditioning", "condition_number",
           "render_conditioning", "CovarianceConditioning", "channel_conditioning",
           "render_channel_conditioning"]

_BLOCK_ROWS = 65536


@dataclass(frozen=True)
class SecondMoments:
    """Streaming totals of (N, d) vectors around a shift: count, Σ(x - s), Σ(x - s)(x - s)ᵀ,
    min and max."""

    count: int
    shift: np.ndarray
    sum: np.ndarray
    outer: np.ndarray
    minimum: np.ndarray
    maximum: np.ndarray

    @classmethod
    def from_array(cls, x: np.ndarray, block_rows: int = _BLOCK_ROWS) -> SecondMoments:
        """Totals of an (N, d) array (or memory map), read in blocks of rows."""
        if x.ndim != 2:
            raise InvalidOptionError(f"conditioning needs vector data (N, d), got shape "
                                     f"{x.shape}")
        if x.shape[0] == 0:
            raise EmptyDatasetError("no vectors")
        if x.shape[1] == 0:
            raise UnreadableInputError(f"vectors of shape {x.shape} have no features (axis 1 "
                                       "has length 0): there is nothing to condition")
        for store, holes in holes_in(x):  # zarr would read missing chunks as fill values
            raise holes.error(store)
        shift = np.asarray(x[0], dtype=np.float64)
        d = x.shape[1]
        total, outer = np.zeros(d), np.zeros((d, d))
        low, high = np.full(d, np.inf), np.full(d, -np.inf)
        nan, inf = np.zeros(d, np.int64), np.zeros(d, np.int64)
        for start in range(0, x.shape[0], block_rows):
            block = np.asarray(x[start:start + block_rows], dtype=np.float64)
            nan, inf = nan + np.isnan(block).sum(axis=0), inf + np.isinf(block).sum(axis=0)
            block = block - shift
            total += block.sum(axis=0)
            outer += block.T @ block
            low, high = np.minimum(low, block.min(axis=0)), np.maximum(high, block.max(axis=0))
        _check_finite(nan, inf)
        return cls(int(x.shape[0]), shift, total, outer, low + shift, high + shift)

    @property
    def mean(self) -> np.ndarray:
        return self.shift + self.sum / self.count

    @property
    def covariance(self) -> np.ndarray:
        """Population covariance (ddof 0)."""
        centre = self.sum / self.count
        return self.outer / self.count - np.outer(centre, centre)


def _check_finite(nan: np.ndarray, inf: np.ndarray) -> None:
    """Refuse vectors holding NaN or infinite values, counted per feature: XᵀX/n needs
    every value of every vector (its eigenvalues would not converge)."""
    bad = np.flatnonzero(nan + inf)
    if not bad.size:
        return
    counts = ", ".join(f"feature {j}: {_values(int(nan[j]), int(inf[j]))}" for j in bad[:5])
    raise UnreadableInputError(
        f"{_values(int(nan.sum()), int(inf.sum()))} in {numbered(bad.size, 'feature')} ({counts}"
        f"{', ...' if bad.size > 5 else ''}): the condition number needs every value of "
        "every vector; drop or impute those rows first (normstats compute leaves NaN out "
        "per feature)")


def _values(nan: int, inf: int) -> str:
    return " and ".join(text for count, text in ((nan, f"{nan:,} NaN"), (inf, f"{inf:,} infinite"))
                        if count)


def _finite(number: float) -> float | None:
    """``number``, or None where it is infinite or NaN: JSON has neither."""
    return number if np.isfinite(number) else None


@dataclass(frozen=True)
class Conditioning:
    """Condition numbers of the second-moment matrix XᵀX/n under three scalings."""

    raw: float
    standardized: float
    min_max: float
    features: int
    vectors: int
    covariance: CovarianceConditioning | None = None

    def to_dict(self) -> dict[str, Any]:
        """The numbers as JSON holds them: an infinite one (a singular matrix) as None."""
        return {"raw": _finite(self.raw), "standardized": _finite(self.standardized),
                "min_max": _finite(self.min_max), "features": self.features,
                "vectors": self.vectors,
                "covariance": None if self.covariance is None else self.covariance.to_dict()}


@dataclass(frozen=True)
class CovarianceConditioning:
    """κ of a covariance matrix as is, standardized (correlation) and ZCA-whitened."""

    raw: float
    standardized: float
    whitened: float

    @classmethod
    def of(cls, covariance: Any) -> CovarianceConditioning:
        return cls(*covariance_conditions(covariance))

    def to_dict(self) -> dict[str, float | None]:
        """The numbers as JSON holds them: an infinite one (a singular matrix) as None."""
        return {"raw": _finite(self.raw), "standardized": _finite(self.standardized),
                "whitened": _finite(self.whitened)}

    def lines(self, what: str) -> list[str]:
        return [f"  condition number of the {what} covariance:",
                f"    as is                {self.raw:12.4g}",
                f"    standardized         {self.standardized:12.4g}   (the correlation matrix)",
                f"    ZCA-whitened         {self.whitened:12.4g}"]


def channel_conditioning(stats: Any) -> CovarianceConditioning:
    """κ of the channel covariance of a `DatasetStats` computed with ``covariance=True``.

    Examples
    --------
    >>> import normstats
    >>> x = np.array([[[[0, 0]]], [[[255, 200]]], [[[10, 60]]]], np.uint8)
    >>> stats = normstats.compute(x, covariance=True, layout="NHWC")
    >>> round(channel_conditioning(stats).whitened, 6)
    1.0
    """
    if getattr(stats, "covariance", None) is None:
        raise InvalidOptionError("the result has no channel covariance: compute it with "
                                 "covariance=True (--covariance)")
    return CovarianceConditioning.of(stats.covariance)


def render_channel_conditioning(result: CovarianceConditioning, stats: Any) -> str:
    """A short text report of `channel_conditioning` for ``stats``."""
    return "\n".join([
        f"normstats conditioning: {stats.source or 'images'} ({counted(stats)}, "
        f"channels {', '.join(stats.channels)})", *result.lines("channel"),
        "  standardizing scales each channel; only whitening removes their correlation."])


def conditioning(x: np.ndarray) -> Conditioning:
    """Condition numbers of XᵀX/n for ``x`` (N, d) as is, standardized and min-max scaled.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = np.column_stack([rng.normal(3000, 400, 10**5), rng.normal(69, 3, 10**5)])
    >>> c = conditioning(x)
    >>> f"{c.raw:.1e}", round(c.standardized, 2), round(c.min_max)
    ('9.9e+04', 1.0, 42)
    """
    moments = SecondMoments.from_array(x)
    cov, mean = moments.covariance, moments.mean
    std = np.sqrt(np.diag(cov))
    span = moments.maximum - moments.minimum
    if (std == 0).any():
        constant = np.flatnonzero(std == 0).tolist()
        which = f"feature {constant[0]} is" if len(constant) == 1 else \
            f"features {constant} are"
        raise InvalidOptionError(f"{which} constant: standardization is undefined")
    offset = mean - moments.minimum
    return Conditioning(
        raw=condition_number(cov + np.outer(mean, mean)),
        standardized=condition_number(cov / np.outer(std, std)),
        min_max=condition_number((cov + np.outer(offset, offset)) / np.outer(span, span)),
        features=int(x.shape[1]), vectors=moments.count,
        covariance=CovarianceConditioning.of(cov))


def render_conditioning(result: Conditioning, source: str = "") -> str:
    """A short text report: the three condition numbers and what they mean."""
    return "\n".join([
        f"normstats conditioning: {source or 'vectors'} ({numbered(result.vectors, 'vector')}, "
        f"{result.features} features)",
        "  condition number of the second-moment matrix XᵀX/n (the least-squares Hessian):",
        f"    raw features         {result.raw:12.4g}",
        f"    min-max to [0, 1]    {result.min_max:12.4g}",
        f"    standardized         {result.standardized:12.4g}",
        *(result.covariance.lines("feature") if result.covariance is not None else []),
        "  gradient descent needs ~κ iterations per digit of accuracy: standardize when the "
        "raw number is large (income in dollars and height in inches: ~1e5, ~1 after)."])
