"""Vector data (N, d) through the per-feature reduction, block of rows by block of rows.

Vector datasets are tables: a pass over row blocks in this process is faster than any
scheduler (a block takes milliseconds). The block size is fixed, so the bits never depend on
how the array is chunked (a zarr or Dask array gives what the numpy array gives).
"""

from __future__ import annotations

from normstats.errors import EmptyDatasetError
from normstats.maths.vectors import VectorSummary, summarize_vectors
from normstats.results.stats import DatasetStats
from normstats.sources.arrays import ArraySource
from normstats.sources.zarr_chunks import read_rows

__all__ = ["compute_vectors"]

#: Rows per block: fixed, so float results never depend on how the array is chunked.
BLOCK_ROWS = 1 << 16


def compute_vectors(source: ArraySource, *, fail_on_inf: bool = False,
                    channels: tuple[str, ...] | None = None,
                    scale: float | None = None, covariance: bool = False) -> DatasetStats:
    """Per-feature constants of an (N, d) array source (see `normstats.maths.vectors`),
    and with ``covariance`` the d×d covariance of its complete rows.

    Examples
    --------
    >>> import numpy as np
    >>> stats = compute_vectors(ArraySource(np.array([[1, 10], [3, 30]], np.int64)))
    >>> stats.mean, stats.scale
    ((2.0, 20.0), 1.0)
    """
    array = source.array
    count, rows = int(array.shape[0]), BLOCK_ROWS
    total: VectorSummary | None = None
    for start in range(0, count, rows):
        block = read_rows(array, slice(start, start + rows), source.path or "array")
        part = summarize_vectors(block, start, source.description, fail_on_inf, covariance)
        total = part if total is None else total.merge(part)
    if total is None:
        raise EmptyDatasetError("no vectors (the array has no rows)", path=source.description)
    return DatasetStats.from_vectors(total, channels=channels or source.channel_names,
                                     scale=scale, mode=source.mode, source=source.description)
