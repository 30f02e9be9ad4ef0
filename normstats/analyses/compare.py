"""Several datasets side by side: pooled against per-image std, and why they differ.

`Compared` pairs a dataset's `DatasetStats` with what plots need (per-image stds
and, for integer images, the exact pixel histogram). `comparison_rows` is the table
(one row per dataset and channel), `render_comparison` the text and `comparison_json`
the same numbers as JSON. The explanation rests on the law of total variance: the
pooled variance is the pixel-weighted mean of the per-image variances plus the
pixel-weighted variance of the per-image means, so the per-image std leaves out how
images differ. `BetweenShare` computes the second part's share exactly from the records.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from normstats.maths.exact import FIXED_BITS, fixed_sum, int64_sum
from normstats.maths.histogram import Histogram
from normstats.maths.moments import FloatMoments
from normstats.maths.records import IntegerRecords, Records
from normstats.results.stats import DatasetStats

__all__ = ["Compared", "comparison_rows", "render_comparison", "comparison_json",
           "BetweenShare", "between_image_share", "per_image_stds", "difference_rows",
           "EXPLANATION"]

EXPLANATION = (
    "Why they differ: the pooled std measures every pixel around the dataset mean, so it "
    "includes how much images differ from one another (bright against dark scenes, "
    "different colour casts); the per-image std averages each image's spread around its own "
    "mean and leaves that between-image part out. By the law of total variance, with each "
    "image weighted by its pixel count, pooled variance = mean per-image variance + "
    "variance of the image means; 'between' is the share of the pooled variance that "
    "comes from differences between image means (0 when every image has the same mean, 1 "
    "when every image is flat; '-' for a constant channel). For images of one size the "
    "ratio per-image/pooled is at most 1 and falls as images differ more; with mixed "
    "sizes the per-image std weighs a small image like a large one, so the ratio can "
    "pass 1. Normalize with "
    "the pooled std to give the inputs unit variance over the dataset; the per-image "
    "std is what per-image standardization (or a published per-image constant) uses.")

_COLUMNS = ("mean", "std", "per_image_std", "per_image_std_ddof1", "ratio", "between")
_TITLES = ("mean", "pooled std", "per-image std", "per-image ddof1", "per-image/pooled",
           "between")


@dataclass(frozen=True)
class Compared:
    """One dataset of a comparison: its name, statistics and optional plot data."""

    name: str
    stats: DatasetStats
    per_image_std: np.ndarray | None = field(default=None, compare=False)
    histogram: Histogram | None = field(default=None, compare=False)
    between: tuple[float | None, ...] | None = None


def per_image_stds(records: list[Records], scale: float) -> np.ndarray:
    """Per-image population std (N, C) in the reported scale, from collected records."""
    return np.concatenate([np.sqrt(r.image_variance(0)) for r in records]) / scale


class BetweenShare:
    """The share of each channel's pooled variance due to differences between image means.

    By the law of total variance, with image i holding n_i of the n pixels, mean μ_i and
    variance σ_i², the pooled variance is σ² = Σ (n_i/n)·σ_i² + Σ (n_i/n)·(μ_i − μ)²;
    the share is the second term over σ². Fed each task's records (it is an
    ``on_result`` callback), it keeps exact totals: for integer images Σx, Σx² and, per
    distinct image size n_i, Σ(Σx)² as Python ints, so the share is a `Fraction` rounded
    once; for float images the exact fixed-point totals of the records. Never negative;
    None for a constant channel (σ² = 0), where no share is defined.

    Examples
    --------
    >>> import numpy as np
    >>> from normstats.maths.records import records_from_stack
    >>> share = BetweenShare()
    >>> share.add(records_from_stack(np.array([[[[0], [2]]], [[[4], [6]]]], np.uint8)))
    >>> share.add(records_from_stack(np.full((1, 1, 4, 1), 9, np.uint8)))
    >>> share.shares()  # Σ n_i·(μ_i − μ)² = 2·5² + 2·1² + 4·3² = 88 of n·σ² = 92
    (0.9565217391304348,)
    """

    def __init__(self) -> None:
        self.images = 0
        self._kind: tuple | None = None
        self._count = 0
        self._totals: list[int] = []
        self._squares: list[int] = []
        self._by_size: dict[int, list[int]] = {}
        self._between: FloatMoments | None = None

    def __call__(self, result: Any) -> None:
        if result.records is not None:
            self.add(result.records)

    def add(self, records: Records) -> None:
        """Take in a batch of records of the dataset."""
        if len(records) == 0:
            return
        if self._kind not in (None, records.signature):
            raise ValueError("records of different kinds cannot share one variance")
        self._kind, self.images = records.signature, self.images + len(records)
        self._count += int(records.pixels.sum(dtype=np.int64))
        if isinstance(records, IntegerRecords):
            self._accumulate(int64_sum(records.sums), int64_sum(records.sums_sq))
            for size, squares in _squared_sums_by_size(records):
                known = self._by_size.setdefault(size, [0] * len(squares))
                self._by_size[size] = [a + b for a, b in zip(known, squares)]
        else:
            self._accumulate([0] * records.channels, fixed_sum(records.m2s))
            means = FloatMoments.from_records(records.pixels, records.means, records.residuals,
                                              np.zeros_like(records.m2s))
            self._between = means if self._between is None else self._between.merge(means)

    def _accumulate(self, totals: list[int], squares: list[int]) -> None:
        self._totals = [a + b for a, b in zip(self._totals or [0] * len(totals), totals)]
        self._squares = [a + b for a, b in zip(self._squares or [0] * len(squares), squares)]

    def shares(self, images: int | None = None) -> tuple[float | None, ...] | None:
        """The share per channel (None where σ² = 0); None when no records were seen or
        their number is not ``images`` (the statistics came from elsewhere)."""
        if self.images == 0 or (images is not None and images != self.images):
            return None
        n = self._count
        if self._between is not None:  # float: within = Σ M2_i, between from the means
            between = [v * n for v in self._between.variance()]
            within = [Fraction(w, 1 << FIXED_BITS) for w in self._squares]
            totals = [b + w for b, w in zip(between, within)]
        else:  # integer: n·between = n·Σ_i (Σx_i)²/n_i − (Σx)², n·σ² = n·Σx² − (Σx)²
            parts = [_pairwise_sum([Fraction(a[c], size) for size, a in self._by_size.items()])
                     for c in range(len(self._totals))]
            between = [n * p - s * s for p, s in zip(parts, self._totals)]
            totals = [n * q - s * s for q, s in zip(self._squares, self._totals)]
        return tuple(float(b / t) if t > 0 else None for b, t in zip(between, totals))


def between_image_share(records: Iterable[Records]) -> tuple[float | None, ...] | None:
    """`BetweenShare` of a dataset's records, per channel (None for no records).

    Examples
    --------
    >>> import numpy as np
    >>> from normstats.maths.records import records_from_stack
    >>> images = np.stack([np.zeros((2, 2, 1), np.uint8), np.full((2, 2, 1), 255, np.uint8)])
    >>> between_image_share([records_from_stack(images)])
    (1.0,)
    """
    share = BetweenShare()
    for part in records:
        share.add(part)
    return share.shares()


def _squared_sums_by_size(records: IntegerRecords) -> list[tuple[int, list[int]]]:
    """Per distinct pixel count, Σ (Σx_i)² per channel over the images of that size, exact."""
    n = records.pixels.astype(np.int64)
    order = np.argsort(n, kind="stable")
    sizes, starts = np.unique(n[order], return_index=True)
    sums = records.sums[order]
    if int(np.abs(sums).max(initial=0)) <= 3_037_000_499:  # its square fits int64
        squares = sums * sums  # summed as 32-bit halves, so no group total overflows
        high = np.add.reduceat(squares >> 32, starts, axis=0).tolist()
        low = np.add.reduceat(squares & 0xFFFFFFFF, starts, axis=0).tolist()
        totals = [[(h << 32) + lo for h, lo in zip(hs, ls)] for hs, ls in zip(high, low)]
    else:  # 16-bit images of more than ~46,000 pixels: Python ints
        totals = np.add.reduceat(sums.astype(object) ** 2, starts, axis=0).tolist()
    return list(zip(sizes.tolist(), totals))


def _pairwise_sum(values: list[Fraction]) -> Fraction:
    """Sum in a balanced tree: partial denominators stay small (10⁵ sizes take ~1 s)."""
    while len(values) > 1:
        values = [sum(values[i:i + 2], Fraction(0)) for i in range(0, len(values), 2)]
    return values[0] if values else Fraction(0)


def comparison_rows(entries: list[Compared]) -> list[dict[str, Any]]:
    """One dict per dataset and channel with every compared number (None if undefined)."""
    rows = []
    for entry in entries:
        s = entry.stats
        between = entry.between
        for c, channel in enumerate(s.channels):
            pis = s.per_image_std[c] if s.per_image_std is not None else None
            rows.append({
                "dataset": entry.name, "channel": channel, "mean": s.mean[c], "std": s.std[c],
                "per_image_std": pis,
                "per_image_std_ddof1": (s.per_image_std_ddof1[c]
                                        if s.per_image_std_ddof1 is not None else None),
                "ratio": pis / s.std[c] if pis is not None and s.std[c] > 0 else None,
                "between": between[c] if between is not None else None})
    return rows


def difference_rows(entries: list[Compared]) -> list[dict[str, Any]]:
    """Each later dataset B against the first, A, per channel: A − B and A / B of the mean
    and pooled std, and what B looks like normalized with A's constants (its mean
    ``(mean_B − mean_A) / std_A`` and std ``std_B / std_A``, 0 and 1 when they agree).

    Examples
    --------
    >>> import numpy as np, normstats
    >>> a = normstats.compute(np.array([0, 255], np.uint8).reshape(2, 1, 1, 1))
    >>> b = normstats.compute(np.array([0, 51], np.uint8).reshape(2, 1, 1, 1))
    >>> row = difference_rows([Compared("a", a), Compared("b", b)])[0]
    >>> row["mean_diff"], row["std_ratio"], row["b_mean_under_a"], row["b_std_under_a"]
    (0.4, 5.0, -0.8, 0.2)
    """
    if len(entries) < 2 or entries[0].stats.channels is None:
        return []
    a = entries[0].stats
    rows = []
    for entry in entries[1:]:
        b = entry.stats
        for c, channel in enumerate(a.channels[:len(b.channels)]):
            scale = a.std[c] if a.std[c] > 0 else None
            rows.append({
                "a": entries[0].name, "b": entry.name, "channel": channel,
                "mean_diff": a.mean[c] - b.mean[c], "std_diff": a.std[c] - b.std[c],
                "mean_ratio": a.mean[c] / b.mean[c] if b.mean[c] else None,
                "std_ratio": a.std[c] / b.std[c] if b.std[c] else None,
                "b_mean_under_a": (b.mean[c] - a.mean[c]) / scale if scale else None,
                "b_std_under_a": b.std[c] / scale if scale else None})
    return rows


def _render_differences(entries: list[Compared]) -> list[str]:
    rows = difference_rows(entries)
    if not rows:
        return []
    a = entries[0].name
    titles = ("mean A−B", "mean A/B", "std A−B", "std A/B", "B mean under A", "B std under A")
    keys = ("mean_diff", "mean_ratio", "std_diff", "std_ratio", "b_mean_under_a",
            "b_std_under_a")
    name_w = max(7, *(len(r["b"]) for r in rows))
    chan_w = max(7, *(len(r["channel"]) for r in rows))
    widths = [max(8, len(t)) for t in titles]
    lines = [f"A = {a}; each other dataset is B (pooled std; 'under A': B normalized with "
             "A's constants, 0 and 1 when they agree):",
             f"{'B':<{name_w}}  {'channel':<{chan_w}}" +
             "".join(f"  {t:>{w}}" for t, w in zip(titles, widths))]
    for r in rows:
        lines.append(f"{r['b']:<{name_w}}  {r['channel']:<{chan_w}}" +
                     "".join(f"  {_cell(r[k], w)}" for k, w in zip(keys, widths)))
    worst = max(rows, key=lambda r: abs(r["b_mean_under_a"] or 0.0))
    if worst["b_mean_under_a"] is not None:
        lines.append(
            f"Using {a}'s constants on {worst['b']} leaves its channel {worst['channel']} "
            f"at mean {worst['b_mean_under_a']:+.3f} and std {worst['b_std_under_a']:.3f} "
            "instead of 0 and 1: " + ("close enough to share one set of constants."
                                     if abs(worst["b_mean_under_a"]) < 0.1 and
                                     abs(worst["b_std_under_a"] - 1) < 0.1 else
                                     "compute constants for the data the model will see."))
    return [""] + lines


def _cell(value: float | None, width: int) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-".rjust(width)
    return f"{value:>{width}.4f}"


def render_comparison(entries: list[Compared]) -> str:
    """The comparison table, the image counts, and the explanation paragraph.

    Examples
    --------
    >>> import numpy as np, normstats
    >>> s = normstats.compute(np.zeros((2, 2, 2, 1), np.uint8))
    >>> print(render_comparison([Compared("zeros", s)]).splitlines()[0].split())
    ['dataset', 'channel', 'mean', 'pooled', 'std', 'per-image', 'std', 'per-image', 'ddof1', \
'per-image/pooled', 'between']
    """
    rows = comparison_rows(entries)
    name_w = max(7, *(len(r["dataset"]) for r in rows))
    chan_w = max(7, *(len(r["channel"]) for r in rows))
    widths = [max(8, len(t)) for t in _TITLES]
    lines = [f"{'dataset':<{name_w}}  {'channel':<{chan_w}}" +
             "".join(f"  {t:>{w}}" for t, w in zip(_TITLES, widths))]
    for r in rows:
        lines.append(f"{r['dataset']:<{name_w}}  {r['channel']:<{chan_w}}" +
                     "".join(f"  {_cell(r[k], w)}" for k, w in zip(_COLUMNS, widths)))
    lines.append("")
    lines += [f"{e.name}: {e.stats.images:,} images, {e.stats.dtype}, scale {e.stats.scale:g}, "
              f"mode {e.stats.mode}" + (f", {len(e.stats.skipped)} input(s) skipped"
                                        if e.stats.skipped else "") for e in entries]
    return "\n".join(lines + _render_differences(entries) + ["", EXPLANATION])


def comparison_json(entries: list[Compared]) -> str:
    """The table rows plus each dataset's full statistics, as JSON."""
    return json.dumps({"rows": comparison_rows(entries),
                       "differences": difference_rows(entries),
                       "datasets": {e.name: e.stats.to_dict() for e in entries},
                       "explanation": EXPLANATION}, indent=2)
