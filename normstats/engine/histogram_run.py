"""Statistics and exact histograms in one pass, and the robust range read from them.

The histogram is a pixel accumulator of `normstats.engine.pixel_run`: tasks decode as
the plain ones do and count the values of the pixels they decode. The record cache is
not used (cached records hold no pixels), so asking for percentiles costs a decode.
"""

from __future__ import annotations

from typing import Any

from normstats.engine.pixel_run import compute_with_pixels
from normstats.maths.histogram import ROBUST_RANGE, Histogram
from normstats.results.stats import DatasetStats
from normstats.sources.options import ReadOptions

__all__ = ["compute_with_histogram", "robust_range"]


def compute_with_histogram(data: Any, options: ReadOptions | None = None,
                           **run: Any) -> tuple[DatasetStats, Histogram]:
    """`normstats.compute` plus the exact per-channel histogram of the same pixels.

    ``options`` say how ``data`` is read (default: the defaults); ``run`` are the run
    arguments of `compute_stats` (workers, scheduler, task_size, progress, on_result). The
    record cache is not used: cached records hold no pixels.

    Examples
    --------
    >>> import numpy as np
    >>> stats, hist = compute_with_histogram(np.arange(256, dtype=np.uint8).reshape(1, 16, 16, 1))
    >>> stats.images, hist.percentile(50.0)
    (1, (127.5,))
    """
    stats, found = compute_with_pixels(data, options, ("histogram",), **run)
    return stats, found["histogram"]


def robust_range(stats: DatasetStats, histogram: Histogram,
                 percentiles: tuple[float, ...] = ROBUST_RANGE) -> dict[str, tuple[float, ...]]:
    """Per-channel percentiles in the reported scale, for min-max scaling or clipping:
    0.5th/99.5th (the robust range) and 2nd/98th (what rasters are clipped by).

    Examples
    --------
    >>> import numpy as np
    >>> s, h = compute_with_histogram(np.arange(201, dtype=np.uint8).reshape(1, 201, 1, 1),
    ...                               ReadOptions(scale=1))
    >>> robust_range(s, h)
    {'p0.5': (1.0,), 'p2': (4.0,), 'p98': (196.0,), 'p99.5': (199.0,)}
    """
    return {f"p{q:g}": tuple(v / stats.scale for v in histogram.percentile(q))
            for q in percentiles}
