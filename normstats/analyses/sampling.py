"""Estimates from a random sample of images, with confidence intervals that respect images.

Pixels inside one image are strongly correlated, so a sample of m images holds far
less information than its m·H·W pixels suggest: intervals computed as if pixels were
independent are too narrow by a factor of ~sqrt(H·W·ρ). Here the sampling unit is
the image (a *cluster* of pixels), drawn uniformly without replacement:

- ``mean`` and pooled ``std`` are ratio estimators, Σ over sampled images of pixel sums
  divided by Σ of pixel counts; their variance comes from the linearization (delta
  method) of the ratio, which uses one number per image, the image's influence
  ``z_i`` (how much the estimate moves with that image), and a finite-population
  correction ``1 - m/N``.
- ``per_image_std`` (both ddofs) and ``rms_per_image_std`` are plain means over images:
  their standard error is the usual one of a mean of m independent draws.
- 95% intervals use Student's t with m - 1 degrees of freedom.

Point estimates are exactly the statistics of the sampled images. ``min``/``max`` have
no interval: a sample's extremes only bound the dataset's from inside.
See ``docs/sampling.md`` for the derivation and the coverage check.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from normstats.errors import InvalidOptionError
from normstats.maths.records import IntegerRecords, Records
from normstats.maths.summary import summarize
from normstats.results.findings import Estimate
from normstats.results.stats import DatasetStats

__all__ = ["estimate_from_records", "choose_images", "parse_seed", "t_quantile",
           "INTERVAL_FIELDS", "render_estimate"]

#: The statistics that get a confidence interval (min and max cannot).
INTERVAL_FIELDS = ("mean", "std", "std_ddof1", "per_image_std", "per_image_std_ddof1",
                   "rms_per_image_std")
_LEVEL = 0.95


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile, Cornish–Fisher expansion (error < 1e-3 for df ≥ 5).

    Examples
    --------
    >>> round(t_quantile(0.975, 10), 3), round(t_quantile(0.975, 10**6), 3)
    (2.228, 1.96)
    """
    from statistics import NormalDist

    z = NormalDist().inv_cdf(p)
    df = max(int(df), 1)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def parse_seed(seed: int | None) -> int | None:
    """Validate the seed of a draw: None or a non-negative integer (what numpy's
    `~numpy.random.SeedSequence` takes; ``--seed`` on the command line checks the same).

    Examples
    --------
    >>> parse_seed(7), parse_seed(None)
    (7, None)
    >>> parse_seed(-1)
    Traceback (most recent call last):
    ...
    normstats.errors.InvalidOptionError: seed must be a non-negative integer, got -1
    """
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InvalidOptionError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def choose_images(population: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` distinct image indices out of ``population``, uniformly, sorted.

    The first ``size`` of a random permutation, as `normstats.analyses.sampling_run` draws them,
    so the same seed gives the same images here and there.

    Examples
    --------
    >>> choose_images(10, 3, np.random.default_rng(0)).tolist()
    [2, 4, 6]
    """
    if size <= 0:
        raise InvalidOptionError(f"sample size must be positive, got {size}")
    return np.sort(rng.permutation(population)[:size])


def _per_image(records: Records, scale: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pixel counts (N,), means (N, C) and population variances (N, C), in reported units."""
    n = records.pixels.astype(np.float64)
    if isinstance(records, IntegerRecords):
        means = records.sums.astype(np.float64) / n[:, None]
    else:
        means = records.means + records.residuals
    return n, means / scale, records.image_variance(0) / scale**2


def _se_of_mean(z: np.ndarray, fpc: float) -> np.ndarray:
    """Standard error of the mean of ``z`` over images (axis 0) under SRS without replacement."""
    m = z.shape[0]
    if m < 2:
        return np.full(z.shape[1:], np.inf)
    return np.sqrt(fpc * z.var(axis=0, ddof=1) / m)


def _sqrt_se(value: np.ndarray, se: np.ndarray) -> np.ndarray:
    """Delta method for a square root: se(sqrt V) = se(V) / (2 sqrt V)."""
    root = np.sqrt(value)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(root > 0, se / (2 * root), 0.0)


def standard_errors(records: Records, population: int,
                    scale: float) -> dict[str, np.ndarray]:
    """Cluster-robust standard errors of each statistic, images as clusters."""
    n, mu, var = _per_image(records, scale)
    m = len(n)
    fpc = max(0.0, 1.0 - m / population)
    share = (n / n.mean())[:, None]
    mean = (n[:, None] * mu).sum(axis=0) / n.sum()
    # each image's centred second moment about the pooled mean
    spread = var + (mu - mean) ** 2
    pooled = (n[:, None] * spread).sum(axis=0) / n.sum()
    se_mean = _se_of_mean(share * (mu - mean), fpc)
    se_pooled = _se_of_mean(share * (spread - pooled), fpc)
    se_std = _sqrt_se(pooled, se_pooled)
    total = n.sum()
    out = {"mean": se_mean, "std": se_std,
           "std_ddof1": se_std * math.sqrt(total / (total - 1)) if total > 1 else se_std,
           "per_image_std": _se_of_mean(np.sqrt(var), fpc),
           "rms_per_image_std": _sqrt_se(var.mean(axis=0), _se_of_mean(var, fpc))}
    several = records.pixels >= 2
    if several.any():
        sample_var = var[several] * (n[several] / (n[several] - 1))[:, None]
        out["per_image_std_ddof1"] = _se_of_mean(np.sqrt(sample_var), fpc)
    return out


def estimate_from_records(records: Records, population: int, *, seed: int | None = None,
                          scale: float | None = None, **stats_options: Any) -> DatasetStats:
    """Point estimates and 95% half-widths from the records of sampled images: the
    statistics of the sample, carrying their `Estimate` (``stats.estimate``).

    Parameters
    ----------
    records : Records
        Per-image records of a uniform random sample of images (without replacement).
    population : int
        Number of images in the dataset (for the finite-population correction).
    seed : int, optional
        Recorded in the result.
    scale : float, optional
        Reported scale (default: the dtype maximum, as `DatasetStats`).
    stats_options
        Passed to `DatasetStats.from_summary` (channels, mode, kind, source).

    Examples
    --------
    >>> import numpy as np
    >>> from normstats.maths.records import records_from_stack
    >>> rng = np.random.default_rng(0)
    >>> r = records_from_stack(rng.integers(0, 256, (40, 4, 4, 1), dtype=np.uint8))
    >>> stats = estimate_from_records(r, population=40)
    >>> stats.estimate.half_width["mean"]
    (0.0,)
    """
    if population < len(records):
        raise InvalidOptionError(f"population {population} is smaller than the sample "
                                 f"{len(records)}")
    stats = DatasetStats.from_summary(summarize(records), scale=scale, **stats_options)
    quantile = t_quantile(0.5 + _LEVEL / 2, len(records) - 1)
    errors = standard_errors(records, population, stats.scale)
    half = {name: tuple(float(v) for v in quantile * errors[name])
            for name in INTERVAL_FIELDS if name in errors and getattr(stats, name) is not None}
    return replace(stats, estimate=Estimate(half, len(records), population, seed, _LEVEL))


def render_estimate(s: DatasetStats) -> list[str]:
    """Report lines of a sampled result: the ESTIMATE banner and one ± line per statistic
    and channel.

    Examples
    --------
    >>> import numpy as np
    >>> from normstats.maths.records import records_from_stack
    >>> stack = np.random.default_rng(0).integers(0, 256, (40, 4, 4, 1), np.uint8)
    >>> render_estimate(estimate_from_records(records_from_stack(stack), 400, seed=1))[0][:50]
    'ESTIMATE from a uniform random sample of 40 of 400'
    """
    estimate = s.estimate
    if estimate is None:
        raise InvalidOptionError("not a sampled result: it has no estimate")
    if estimate.requested is not None:
        first = (f"EXACT: --sample {estimate.requested:,} is more than the "
                 f"{estimate.population:,} images of the dataset, so all of them were used: "
                 "these are the dataset's own values (half-widths 0).")
    elif estimate.exact:
        first = (f"EXACT: the sample grew to all {estimate.population:,} images, so these are "
                 "the dataset's own values (half-widths 0).")
    else:
        first = (f"ESTIMATE from a uniform random sample of {estimate.sampled:,} of "
                 f"{estimate.population:,} images (seed {estimate.seed}: --seed "
                 f"{estimate.seed} draws the same images); not the exact values.")
    lines = [first,
             "95% confidence intervals treat each image as one cluster of correlated "
             "pixels (see docs/sampling.md); min and max are those of the sample."]
    width = max(7, *(len(c) for c in s.channels))
    for name, half in estimate.half_width.items():
        values = s.mean if name == "mean" else s.variant(name)
        cells = "  ".join(f"{c}: {v:.4f} ± {h:.4f}" for c, v, h in zip(s.channels, values, half))
        lines.append(f"  {name:<{width + 13}}{cells}")
    return lines
