"""Reports computed from per-image records without decoding again: by folder, outliers.

Both work on the records a run produced or reused from the cache. Statistics per
immediate sub-folder (the classes of an ImageFolder layout, or train/val splits) are
exact `DatasetStats` of the records whose key starts with that folder. Outliers are
images whose per-image mean or std is far from the others (robust z-score on the
median and the median absolute deviation), blank images, and grayscale images (R = G
= B) among colour ones.
"""

from __future__ import annotations

import math
import os
from dataclasses import replace
from typing import Any

import numpy as np

from normstats.errors import InvalidOptionError, numbered
from normstats.maths.records import IntegerRecords, Records, Skipped, concat_records
from normstats.maths.scale import default_scale
from normstats.maths.summary import summarize
from normstats.results.findings import Outlier, OutlierReport
from normstats.results.stats import DatasetStats
from normstats.results.text_report import printable

__all__ = ["folder_of", "by_folder", "find_outliers", "outlier_report", "grayscale_check_off",
           "with_record_reports", "OUTLIER_Z", "RecordCollector", "render_by_folder",
           "render_outliers"]

#: Robust z-score beyond which a per-image mean or std is reported.
OUTLIER_Z = 5.0
_ROOT = "."


def folder_of(key: str) -> str:
    """The immediate sub-folder of the dataset root holding ``key`` ("." for the root).

    Examples
    --------
    >>> folder_of("train/cat/1.png"), folder_of("1.png")
    ('train', '.')
    """
    head, sep, _ = key.replace(os.sep, "/").partition("/")
    return head if sep else _ROOT


def by_folder(records: Records, skipped: tuple[Skipped, ...] = (),
              **options: Any) -> dict[str, DatasetStats]:
    """Exact statistics of each immediate sub-folder, from the records alone.

    ``options`` go to `DatasetStats.from_summary` (scale, channels, mode, source).

    Examples
    --------
    >>> import numpy as np
    >>> from normstats.maths.records import records_from_stack
    >>> stack = np.stack([np.zeros((2, 2, 1), np.uint8), np.full((2, 2, 1), 255, np.uint8)])
    >>> r = records_from_stack(stack, keys=("a/1.png", "b/2.png"))
    >>> {name: s.mean for name, s in by_folder(r).items()}
    {'a': (0.0,), 'b': (1.0,)}
    """
    folders = np.array([folder_of(k) for k in records.keys], dtype=object)
    order = np.argsort(folders, kind="stable")
    names, starts = np.unique(folders[order], return_index=True)
    bounds = list(starts) + [len(order)]
    result = {}
    for index, name in enumerate(names):
        rows = order[bounds[index]:bounds[index + 1]]
        failed = tuple(s for s in skipped if folder_of(s.path) == name)
        result[str(name)] = DatasetStats.from_summary(summarize(records.take(rows), failed),
                                                      **options)
    return result


def image_means(records: Records) -> np.ndarray:
    """Per-image, per-channel mean (N, C) in pixel units."""
    if isinstance(records, IntegerRecords):
        return records.sums / records.pixels[:, None].astype(np.float64)
    return records.means + records.residuals


def find_outliers(records: Records, threshold: float = OUTLIER_Z,
                  scale: float | None = None) -> list[Outlier]:
    """Images that stand out, most unusual first.

    Flags: a robust z-score of the channel-averaged per-image mean or std beyond
    ``threshold``; blank (every pixel of every channel equal); grayscale (R = G = B)
    when fewer than half of the RGB images are.

    Examples
    --------
    >>> import numpy as np
    >>> from normstats.maths.records import records_from_stack
    >>> rng = np.random.default_rng(0)
    >>> stack = rng.integers(100, 156, (50, 8, 8, 3), dtype=np.uint8)
    >>> stack[7] = 0
    >>> r = records_from_stack(stack, keys=tuple(f"{i}.png" for i in range(50)),
    ...                        channel_names=("R", "G", "B"))
    >>> [(o.path, o.reasons[0]) for o in find_outliers(r)]
    [('7.png', 'blank: every pixel is 0')]
    """
    scale = default_scale(records.dtype) if scale is None else float(scale)
    means = image_means(records) / scale
    stds = np.sqrt(np.maximum(records.image_variance(0), 0.0)) / scale
    blank = np.all(records.minimum == records.maximum, axis=1)
    gray = _grayscale(records)
    z_mean, z_std = _robust_z(means.mean(axis=1)), _robust_z(stds.mean(axis=1))
    found = []
    for row in range(len(records)):
        reasons = _reasons(records, row, blank, gray, z_mean, z_std, threshold)
        if reasons:
            severity = math.inf if blank[row] else max(abs(z_mean[row]), abs(z_std[row]))
            found.append(Outlier(_name(records, row), tuple(reasons),
                                 tuple(means[row].tolist()), tuple(stds[row].tolist()),
                                 float(severity)))
    found.sort(key=lambda o: (-o.severity, o.path))
    return found


def _reasons(records: Records, row: int, blank: np.ndarray, gray: np.ndarray,
             z_mean: np.ndarray, z_std: np.ndarray, threshold: float) -> list[str]:
    if blank[row]:
        return [f"blank: every pixel is {records.minimum[row, 0]:g}"]
    reasons = []
    if abs(z_mean[row]) > threshold:
        reasons.append(f"mean {'high' if z_mean[row] > 0 else 'low'} (z = {z_mean[row]:+.1f})")
    if abs(z_std[row]) > threshold:
        reasons.append(f"std {'high' if z_std[row] > 0 else 'low'} (z = {z_std[row]:+.1f})")
    if gray[row]:
        reasons.append("grayscale stored as RGB (R = G = B)")
    return reasons


def _robust_z(values: np.ndarray) -> np.ndarray:
    """(x - median) / (1.4826 MAD); zeros when the spread is zero (nothing stands out)."""
    centre = np.median(values)
    spread = 1.4826 * np.median(np.abs(values - centre))
    if not spread > 0:
        return np.zeros_like(values)
    return (values - centre) / spread


def _grayscale(records: Records) -> np.ndarray:
    """Rows whose R, G and B channels have equal moments and extremes."""
    if grayscale_check_off(records) is not None:
        return np.zeros(len(records), dtype=bool)
    return _equal_rgb(records)


def _equal_rgb(records: Records) -> np.ndarray:
    columns = [records.minimum, records.maximum] + (
        [records.sums, records.sums_sq] if isinstance(records, IntegerRecords)
        else [records.means, records.m2s])
    gray = np.ones(len(records), dtype=bool)
    for values in columns:
        gray &= (values[:, 0] == values[:, 1]) & (values[:, 1] == values[:, 2])
    return gray


def grayscale_check_off(records: Records) -> str | None:
    """Why `find_outliers` does not flag grayscale images here, or None when it does.

    The check needs R, G, B channels, and it is off when half the images or more are
    grayscale: a dataset of grayscale photos decoded as RGB is not full of outliers.

    Examples
    --------
    >>> import numpy as np
    >>> from normstats.maths.records import records_from_stack
    >>> grey = records_from_stack(np.zeros((3, 2, 2, 1), np.uint8), channel_names=("L",))
    >>> grayscale_check_off(grey)
    'grayscale check off: the channels are L, not R, G, B'
    """
    names = records.channel_names
    if names[:3] != ("R", "G", "B"):
        return f"grayscale check off: the channels are {', '.join(names)}, not R, G, B"
    gray = int(_equal_rgb(records).sum())
    if gray * 2 >= len(records):
        return (f"grayscale check off: {gray:,} of {len(records):,} images are grayscale "
                "stored as RGB, so grayscale is the norm here")
    return None


def outlier_report(records: Records, scale: float | None = None) -> OutlierReport:
    """`find_outliers` at `OUTLIER_Z`, with the note of `grayscale_check_off`.

    Examples
    --------
    >>> import numpy as np
    >>> from normstats.maths.records import records_from_stack
    >>> r = records_from_stack(np.zeros((3, 2, 2, 1), np.uint8), channel_names=("L",))
    >>> len(outlier_report(r)), outlier_report(r).note[:22]
    (3, 'grayscale check off: t')
    """
    return OutlierReport(tuple(find_outliers(records, scale=scale)), OUTLIER_Z,
                         grayscale_check_off(records))


def with_record_reports(stats: DatasetStats, records: Records | None, by_folder_too: bool,
                        outliers_too: bool) -> DatasetStats:
    """``stats`` carrying its per-folder statistics and outliers (as asked), from the
    records of every image (a `RecordCollector`'s).

    Examples
    --------
    >>> import numpy as np
    >>> from normstats.maths.records import records_from_stack
    >>> r = records_from_stack(np.zeros((2, 2, 2, 1), np.uint8), keys=("a/1.png", "b/2.png"))
    >>> stats = DatasetStats.from_summary(summarize(r))
    >>> sorted(with_record_reports(stats, r, True, False).by_folder)
    ['a', 'b']
    """
    if records is None:
        raise InvalidOptionError("--by-folder and --outliers come from per-image records, "
                                 f"which {stats.source or 'this data'} does not give "
                                 "(normstats.records gives those of a Dask array)")
    if by_folder_too and not records.keys:
        # An array's images are rows, not files: an empty table would read as if the
        # dataset had no folders worth naming.
        raise InvalidOptionError(f"--by-folder groups image files by their sub-folder, "
                                 f"and the images of {stats.source or 'this data'} are rows "
                                 "of an array, not files: compute each part on its own")
    changes: dict[str, Any] = {}
    if by_folder_too:
        changes["by_folder"] = by_folder(records, stats.skipped, scale=stats.scale,
                                         channels=stats.channels, mode=stats.mode,
                                         kind=stats.kind)
    if outliers_too:
        changes["outliers"] = outlier_report(records, stats.scale)
    return replace(stats, **changes)


def _name(records: Records, row: int) -> str:
    return records.keys[row] if records.keys else f"#{row}"


class RecordCollector:
    """An ``on_result`` for `normstats.compute` that keeps every record it is given.

    With a cache, the reused records arrive too, so the collector ends up with the
    records of the whole dataset whether they were decoded or not.
    """

    def __init__(self) -> None:
        self.parts: list[Records] = []

    def __call__(self, result: Any) -> None:
        if result.records is not None:
            self.parts.append(result.records)

    def records(self) -> Records | None:
        return concat_records(self.parts) if self.parts else None


def render_by_folder(stats: dict[str, DatasetStats]) -> list[str]:
    """A table of images, mean and pooled std per sub-folder."""
    channels = next(iter(stats.values())).channels if stats else ()
    width = max([6] + [len(printable(name)) for name in stats])
    lines = [f"by folder ({len(stats)}):",
             f"  {'folder':<{width}}  {'images':>9}  " + "  ".join(
                 f"{'mean ' + c:>8}" for c in channels) + "  " + "  ".join(
                 f"{'std ' + c:>8}" for c in channels)]
    for name, s in stats.items():
        cells = "  ".join(f"{v:>8.4f}" for v in s.mean + s.std)
        lines.append(f"  {printable(name):<{width}}  {s.images:>9,}  {cells}")
    return lines


def render_outliers(report: OutlierReport, limit: int = 20) -> list[str]:
    """The most unusual images first, then a count of the rest; the report's note says
    when the grayscale check did not run."""
    outliers = report.images
    lines = [f"outliers: {numbered(len(outliers), 'image')} (|robust z| > "
             f"{report.threshold:g} on mean or std, blank, or grayscale among colour)"]
    if report.note:
        lines.append(f"  ({report.note})")
    for o in outliers[:limit]:
        lines.append(f"  {printable(o.path)}: {'; '.join(o.reasons)}")
    if len(outliers) > limit:
        lines.append(f"  ... and {len(outliers) - limit} more (--json lists all)")
    return lines
