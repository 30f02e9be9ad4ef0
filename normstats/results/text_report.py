"""Plain-text rendering of `DatasetStats` for the terminal."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from normstats.errors import numbered

if TYPE_CHECKING:  # DatasetStats.__str__ calls render_report
    from normstats.results.stats import DatasetStats

__all__ = ["render_report", "normalize_line", "printable", "STD_EXPLANATION", "render_covariance",
           "constant_channels_note"]

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


def constant_channels_note(channels: tuple[str, ...], stds: tuple[float, ...]) -> str:
    """Words on the channels whose std is 0 (an opaque alpha channel, a band of one
    value), which a Normalize would divide by; "" when there are none.

    Examples
    --------
    >>> constant_channels_note(("R", "A"), (0.25, 0.0))
    'channel A is constant (std 0), which Normalize divides by: drop it, or give it std 1'
    """
    constant = [name for name, std in zip(channels, stds) if std == 0]
    if not constant:
        return ""
    channel, are, them = ("channels", "are", "them") if len(constant) > 1 else \
        ("channel", "is", "it")
    return (f"{channel} {', '.join(constant)} {are} constant (std 0), which Normalize divides "
            f"by: drop {them}, or give {them} std 1")


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


def _scale_words(stats: DatasetStats) -> str:
    """The scale and what it means: [0, 1] values, or raw units (floats, and TIFF rasters
    deeper than 8 bits or of more than 4 bands, unless --scale said otherwise)."""
    if stats.scale != 1:
        return f"scale {stats.scale:g} (values shown in [0, 1])"
    if stats.kind == "images" and stats.mode == "keep" and stats.dtype.startswith(("uint", "int")):
        return ("scale 1 (raw units: TIFF rasters deeper than 8 bits or of more than 4 bands "
                "are reported as measured; --scale divides them)")
    return "scale 1"


def counted(stats: DatasetStats) -> str:
    """How many images (or vectors) ``stats`` counts, in words.

    Examples
    --------
    >>> import numpy as np, normstats
    >>> counted(normstats.compute(np.zeros((1, 2, 2, 3), np.uint8)))
    '1 image'
    """
    return numbered(stats.images, "vector" if stats.kind == "vectors" else "image")


def _header(stats: DatasetStats) -> list[str]:
    scale = _scale_words(stats)
    per = "pixels per channel"
    size = f"{stats.pixels_per_channel:,} {per}" if stats.kind == "images" else \
        f"{len(stats.channels):,} features"
    lines = [f"normstats: {printable(stats.source)}",
             f"  {counted(stats)}, {size}, {stats.dtype}, {scale}, mode {stats.mode}"]
    if stats.kind == "images" and stats.counts is not None:  # nodata was left out
        left = stats.pixels_per_channel * len(stats.counts) - sum(stats.counts)
        lines.append(f"  nodata left out band by band: {left:,} values ('values' counts what "
                     "each band kept)")
        if stats.nodata_images and any(stats.nodata_images):
            lines.append("  images without a valid pixel, left out of that band's per-image "
                         "std: " + ", ".join(f"{name} {count:,}" for name, count in
                                             zip(stats.channels, stats.nodata_images) if count))
    if stats.images_cached or stats.images_decoded:  # folders: what the record cache answered
        lines.append(f"  {numbered(stats.images_cached, 'file')} from the cache, "
                     f"{stats.images_decoded:,} decoded")
    if stats.cache_checked:
        changed = stats.cache_changed
        checked = numbered(stats.cache_checked, "cached file")
        lines.append(f"  cache verified: {checked} decoded again, "
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
    if stats.counts is not None and (len(set(stats.counts)) > 1 or stats.kind == "images"):
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
    # here, not at the top: the command line loads this module before numpy (--help)
    from normstats.maths.records import NAN_HINT, NON_FINITE

    lines = [f"skipped {numbered(len(stats.skipped), 'input')}:"]
    lines += [f"  {printable(s.path)}: {s.reason}" for s in stats.skipped[:_MAX_LISTED]]
    if len(stats.skipped) > _MAX_LISTED:
        lines.append(f"  ... and {len(stats.skipped) - _MAX_LISTED} more (--json lists all)")
    if any(s.reason == NON_FINITE for s in stats.skipped):
        lines.append(f"  ({NAN_HINT})")
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
        if note := constant_channels_note(stats.channels, stats.variant(variant)):
            lines.append(f"({note})")
    skipped = render_skipped(stats)
    return "\n".join(lines + ([""] + skipped if skipped else []))


def render_covariance(stats: DatasetStats) -> list[str]:
    """Lines of the channel covariance, correlation, principal axes and condition numbers
    of a result computed with ``covariance=True``."""
    from normstats.maths.whitening import covariance_conditions

    names = stats.channels
    width = max(11, *(len(n) for n in names))
    head = "  " + " " * width + "".join(f"  {n:>{width}}" for n in names)

    def matrix(rows: tuple[tuple[float, ...], ...], digits: str) -> list[str]:
        return [head] + ["  " + name.ljust(width) + "".join(f"  {v:>{width}{digits}}" for v in row)
                         for name, row in zip(names, rows)]

    units = f"pixels divided by {stats.scale:g}" if stats.scale != 1 else "raw units"
    lines = [f"channel covariance (population, ddof 0; {units}):",
             *matrix(stats.covariance, ".6g")]
    if stats.correlation is not None:
        lines += ["channel correlation:", *matrix(stats.correlation, ".4f")]
    axes = stats.pca()
    lines += ["principal axes (eigenvectors as columns, largest component positive):",
              "  " + "eigval".ljust(width) + "".join(f"  {v:>{width}.6g}"
                                                     for v in axes.eigenvalues),
              "  " + "share".ljust(width) + "".join(f"  {v:>{width}.2%}"
                                                    for v in axes.explained),
              *("  " + name.ljust(width) + "".join(f"  {v:>{width}.4f}" for v in row)
                for name, row in zip(names, axes.eigenvectors))]
    raw, standardized, whitened = covariance_conditions(stats.covariance)
    lines.append(f"condition number κ of the covariance: {raw:.4g} as is, {standardized:.4g} "
                 f"standardized, {whitened:.4g} whitened")
    return lines
