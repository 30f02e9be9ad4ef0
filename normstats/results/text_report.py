"""Plain-text rendering of `DatasetStats` for the terminal."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # DatasetStats.__str__ calls render_report
    from normstats.results.stats import DatasetStats

__all__ = ["render_report", "normalize_line", "printable", "STD_EXPLANATION"]

STD_EXPLANATION = (
    "pooled std = spread of every pixel around the dataset mean (the constant for Normalize); "
    "per-image std = average of each image's own spread, smaller because it leaves out how "
    "image means differ (CIFAR-10: 0.2470 pooled vs the often-pasted 0.2023 per-image).")

_MAX_LISTED = 20


#: Characters that would break a one-line message or drive the terminal: C0 and C1
#: controls (newline, ESC sequences), DEL, line separators, bidirectional overrides.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f"
                          "\u202a-\u202e\u2066-\u2069]")


def printable(path: str) -> str:
    """A path safe to print on one line: undecodable bytes of non-UTF-8 names and
    control characters shown as Python escapes.

    Examples
    --------
    >>> printable("caf\\udce9.jpg")
    'caf\\\\xe9.jpg'
    >>> print(printable("two\\nlines\\x1b[31m.png"))
    two\\nlines\\x1b[31m.png
    """
    text = path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def normalize_line(stats: DatasetStats, variant: str = "std", digits: int = 6) -> str:
    """A ready-to-paste ``torchvision.transforms.Normalize(...)`` line.

    Examples
    --------
    >>> import numpy as np, normstats
    >>> s = normstats.compute(np.array([[[[0]]], [[[255]]]], np.uint8))
    >>> normalize_line(s)
    'torchvision.transforms.Normalize(mean=(0.5,), std=(0.5,))'
    """
    def fmt(values: tuple[float, ...]) -> str:
        parts = [f"{round(v, digits)!r}" for v in values]
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"

    return (f"torchvision.transforms.Normalize(mean={fmt(stats.mean)}, "
            f"std={fmt(stats.variant(variant))})")


def scaler_line(stats: DatasetStats, digits: int = 6) -> str:
    """scikit-learn ``StandardScaler``'s fitted attributes for vector data: ``mean_``,
    ``scale_`` (the ddof-0 std, 1.0 where it is 0, as scikit-learn sets it) and ``var_``.

    Examples
    --------
    >>> import numpy as np, normstats
    >>> scaler_line(normstats.compute(np.array([[1.0, 5.0], [3.0, 5.0]])))
    'StandardScaler: mean_=[2.0, 5.0], scale_=[1.0, 1.0], var_=[1.0, 0.0]'
    """
    def fmt(values: tuple[float, ...]) -> str:
        return "[" + ", ".join(f"{round(v, digits)!r}" for v in values) + "]"

    scale = tuple(v if v != 0 else 1.0 for v in stats.std)
    return (f"StandardScaler: mean_={fmt(stats.mean)}, scale_={fmt(scale)}, "
            f"var_={fmt(tuple(v * v for v in stats.std))}")


def _header(stats: DatasetStats) -> list[str]:
    scale = f"scale {stats.scale:g}" + (" (values shown in [0, 1])" if stats.scale != 1 else "")
    unit = "vectors" if stats.kind == "vectors" else "images"
    per = "pixels per channel"
    size = f"{stats.pixels_per_channel:,} {per}" if stats.kind == "images" else \
        f"{len(stats.channels):,} features"
    lines = [f"normstats: {printable(stats.source)}",
             f"  {stats.images:,} {unit}, {size}, {stats.dtype}, {scale}, mode {stats.mode}"]
    if stats.images_cached or stats.images_decoded:  # folders: what the record cache answered
        lines.append(f"  {stats.images_cached:,} file(s) from the cache, "
                     f"{stats.images_decoded:,} decoded")
    if stats.cache_checked:
        changed = stats.cache_changed
        lines.append(f"  cache verified: {stats.cache_checked:,} cached file(s) decoded again, "
                     + ("all identical" if not changed else
                        f"{len(changed):,} no longer matched and were replaced: "
                        + ", ".join(printable(p) for p in changed[:5])
                        + (", ..." if len(changed) > 5 else "")))
    return lines


def _table(stats: DatasetStats) -> list[str]:
    columns = [("mean", stats.mean), ("pooled std", stats.std)]
    if stats.per_image_std is not None:
        columns.append(("per-image std", stats.per_image_std))
    if stats.per_image_std_ddof1 is not None:
        columns.append(("per-image std ddof1", stats.per_image_std_ddof1))
    columns += [("min", stats.min), ("max", stats.max)]
    if stats.counts is not None and len(set(stats.counts)) > 1:
        columns.append(("values", tuple(float(c) for c in stats.counts)))
    name_width = max(7, *(len(c) for c in stats.channels))
    widths = [max(10, len(title)) for title, _ in columns]
    lines = ["  " + "channel".ljust(name_width) + "".join(
        f"  {title:>{w}}" for (title, _), w in zip(columns, widths))]
    for index, channel in enumerate(stats.channels):
        cells = "".join(f"  {values[index]:>{w}.4f}" if title != "values" else
                        f"  {int(values[index]):>{w},}"
                        for (title, values), w in zip(columns, widths))
        lines.append("  " + channel.ljust(name_width) + cells)
    return lines


def render_skipped(stats: DatasetStats) -> list[str]:
    """Lines naming the skipped inputs (the first few, then a count)."""
    if not stats.skipped:
        return []
    lines = [f"skipped {len(stats.skipped)} input(s):"]
    lines += [f"  {printable(s.path)}: {s.reason}" for s in stats.skipped[:_MAX_LISTED]]
    if len(stats.skipped) > _MAX_LISTED:
        lines.append(f"  ... and {len(stats.skipped) - _MAX_LISTED} more (--json lists all)")
    return lines


def render_report(stats: DatasetStats, variant: str = "std") -> str:
    """The full text report: header, per-channel table, explanation, paste line, skipped."""
    lines = _header(stats) + [""] + _table(stats) + [""]
    if stats.kind == "images":
        lines += [STD_EXPLANATION, ""]
    if stats.kind == "vectors":
        lines.append(scaler_line(stats))
        if stats.counts is not None and len(set(stats.counts)) > 1:
            lines.append("(NaN values are left out per feature, as StandardScaler does; "
                         "'values' counts what each feature kept)")
    else:
        lines.append(normalize_line(stats, variant))
    skipped = render_skipped(stats)
    return "\n".join(lines + ([""] + skipped if skipped else []))
