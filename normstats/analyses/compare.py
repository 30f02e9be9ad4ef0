"""Several datasets side by side: pooled against per-image std, and why they differ.

`Compared` pairs a dataset's `DatasetStats` with what plots need (per-image stds
and, for integer images, the exact pixel histogram). `comparison_rows` is the table
(one row per dataset and channel), `render_comparison` the text and `comparison_json`
the same numbers as JSON. The explanation rests on the law of total variance: the
pooled variance is the (pixel-weighted) mean of the per-image variances plus the
variance of the per-image means, so the per-image std leaves out how images differ.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from normstats.maths.histogram import Histogram
from normstats.maths.records import Records
from normstats.maths.stats import DatasetStats

__all__ = ["Compared", "comparison_rows", "render_comparison", "comparison_json",
           "between_image_share", "per_image_stds", "difference_rows", "EXPLANATION"]

EXPLANATION = (
    "Why they differ: the pooled std measures every pixel around the dataset mean, so it "
    "includes how much images differ from one another (bright against dark scenes, "
    "different colour casts); the per-image std averages each image's spread around its own "
    "mean and leaves that between-image part out. By the law of total variance, pooled "
    "variance = mean per-image variance + variance of the image means, so the ratio "
    "per-image/pooled is below 1 and falls as images differ more; 'between' is the share "
    "of the pooled variance that comes from differences between images. Normalize with "
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


def per_image_stds(records: list[Records], scale: float) -> np.ndarray:
    """Per-image population std (N, C) in the reported scale, from collected records."""
    return np.concatenate([np.sqrt(r.image_variance(0)) for r in records]) / scale


def between_image_share(stats: DatasetStats) -> tuple[float, ...] | None:
    """1 - rms per-image variance / pooled variance, per channel (None for vectors).

    Exact for images of one size; with mixed sizes the image-weighted per-image variance
    stands in for the pixel-weighted one.

    Examples
    --------
    >>> import numpy as np, normstats
    >>> images = np.stack([np.zeros((2, 2, 1), np.uint8), np.full((2, 2, 1), 255, np.uint8)])
    >>> between_image_share(normstats.compute(images))
    (1.0,)
    """
    if stats.rms_per_image_std is None:
        return None
    return tuple(1.0 - (r * r) / (s * s) if s > 0 else 0.0
                 for r, s in zip(stats.rms_per_image_std, stats.std))


def comparison_rows(entries: list[Compared]) -> list[dict[str, Any]]:
    """One dict per dataset and channel with every compared number (None if undefined)."""
    rows = []
    for entry in entries:
        s = entry.stats
        between = between_image_share(s)
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
