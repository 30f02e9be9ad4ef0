"""The mean image of a Dask array, as a `dask.array.reduction` over the image axis.

- **chunk**: a block (n, h, w, c) becomes its per-position totals
  (`normstats.maths.mean_image`: exact int64 Σx and split Σx² for integers, float64
  reference, mean and M2 for floats), kept as a dict of (1, h, w, c) arrays beside the image count.
- **combine**: the totals of the blocks at the same H, W and C position add exactly
  (integers) or merge by Chan's pairwise update (floats).
- **aggregate**: the last merge, as a structured (1, h, w, c) array of the exact totals
  (`INTEGER_TOTALS`, `FLOAT_TOTALS`), which the caller finalizes in the reported scale.

Blocks split along H, W or C keep their positions: each output block is the mean image of
its region, so any chunking gives the same bits for integer images. Float images holding
NaN or inf are left out, as the statistics leave them out, when a block holds whole images;
an array split along H, W or C cannot tell which images hold them, and is refused then.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from normstats.engine.dask.images import reading_zarr
from normstats.engine.dask.lazy import lazy_stats, run_graph
from normstats.engine.dask.reduce import FAN_IN, as_image_blocks
from normstats.errors import InvalidOptionError
from normstats.maths.mean_image import (
    MeanImageBuilder,
    MeanImageTotals,
    PositionMoments,
    PositionSums,
)
from normstats.results.stats import DatasetStats
from normstats.sources.options import ReadOptions

__all__ = ["lazy_mean_image", "compute_dask_with_mean_image", "INTEGER_TOTALS",
           "FLOAT_TOTALS"]


def _as_dict(totals: MeanImageTotals) -> dict[str, np.ndarray]:
    arrays = {"n": np.full((1, 1, 1, 1), totals.count, np.int64)}
    if isinstance(totals, PositionSums):
        fields = {"total": totals.total, "low": totals.square_low, "high": totals.square_high}
    else:
        fields = {"reference": totals.reference, "mean": totals.offset_mean, "m2": totals.m2}
    arrays.update({k: v[None] for k, v in fields.items() if v is not None})
    return arrays


def _from_dict(arrays: dict[str, np.ndarray], row: int, dtype: str) -> MeanImageTotals:
    def part(name: str) -> np.ndarray | None:
        return arrays[name][row] if name in arrays else None

    count = int(arrays["n"][row, 0, 0, 0])
    if "total" in arrays:
        total = arrays["total"][row]
        return PositionSums(total.shape, dtype, "a block", count, total, part("low"),
                            part("high"))
    mean = arrays["mean"][row]
    return PositionMoments(mean.shape, dtype, "a block", count, arrays["reference"][row], mean,
                           part("m2"))


def _chunk(block: np.ndarray, axis: Any = None, keepdims: bool = True, *, with_std: bool,
           whole: bool, computing_meta: bool = False) -> dict[str, np.ndarray] | np.ndarray:
    block = np.asarray(block)
    if computing_meta or 0 in block.shape[1:]:  # Dask's probe with an empty array
        return np.empty((0,) * 4, INTEGER_TOTALS if block.dtype.kind in "biu" else FLOAT_TOTALS)
    if block.dtype.kind == "f":
        finite = np.isfinite(block.reshape(len(block), -1)).all(axis=1)
        if not finite.all():
            if not whole:
                raise InvalidOptionError(
                    "the mean image of a Dask array split along H, W or C cannot leave out "
                    "the images holding NaN or inf: rechunk it to whole images "
                    "(x.rechunk({1: -1, 2: -1, 3: -1}))")
            block = block[finite]
    builder = MeanImageBuilder(with_std)
    builder.start("a block", block.shape[1:], block.dtype)  # zero totals if no image is left
    builder.add_stack("a block", block)
    return _as_dict(builder.result())


def _merged(arrays: dict[str, np.ndarray], dtype: str) -> dict[str, np.ndarray]:
    total: MeanImageTotals | None = None
    for row in range(arrays["n"].shape[0]):
        part = _from_dict(arrays, row, dtype)
        if part.count:
            total = part if total is None else total.merge(part)
    return _as_dict(total) if total is not None else {k: v[:1] for k, v in arrays.items()}


def _combine(arrays: dict[str, np.ndarray], axis: Any = None, keepdims: bool = True, *,
             dtype: str) -> dict[str, np.ndarray]:
    return _merged(arrays, dtype)


#: The totals the reduction gives per position, for integer and for float images.
INTEGER_TOTALS = np.dtype([("n", np.int64), ("total", np.int64), ("low", np.int64),
                           ("high", np.int64)])
FLOAT_TOTALS = np.dtype([("n", np.int64), ("reference", np.float64), ("mean", np.float64),
                         ("m2", np.float64)])


def _aggregate(arrays: dict[str, np.ndarray], axis: Any = None, keepdims: bool = True, *,
               dtype: str, totals: np.dtype) -> np.ndarray:
    merged = _merged(arrays, dtype)
    out = np.zeros(merged["total" if "total" in merged else "mean"].shape, totals)
    for name in totals.names:
        if name in merged:
            out[name] = merged[name]  # "n" (k, 1, 1, 1) broadcasts to every position
    return out


def _totals(found: np.ndarray, dtype: str, with_std: bool) -> MeanImageTotals:
    """The reduction's structured (H, W, C) array as `normstats.maths.mean_image` totals."""
    count = int(found["n"].flat[0]) if found.size else 0
    shape = tuple(found.shape)
    if "total" in found.dtype.names:
        high = found["high"] if with_std and np.dtype(dtype).itemsize > 1 else None
        return PositionSums(shape, dtype, "the array", count, found["total"],
                            found["low"] if with_std else None, high)
    return PositionMoments(shape, dtype, "the array", count, found["reference"],
                           found["mean"], found["m2"] if with_std else None)


def lazy_mean_image(x: Any, *, layout: str | None = None, with_std: bool = False) -> Any:
    """The per-position totals of Dask array ``x``'s images, as a lazy structured (H, W, C)
    array (`INTEGER_TOTALS` or `FLOAT_TOTALS`; the Σx² parts or M2 zero unless
    ``with_std``).

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> x = da.from_array(np.arange(16, dtype=np.uint8).reshape(4, 2, 2, 1), chunks=(3, 1, 2, 1))
    >>> lazy_mean_image(x).compute(scheduler="sync")["total"].ravel().tolist()
    [24, 28, 32, 36]
    """
    import dask.array as da

    blocks, _ = as_image_blocks(x, layout)
    dtype = str(blocks.dtype)
    totals = INTEGER_TOTALS if blocks.dtype.kind in "biu" else FLOAT_TOTALS
    whole = blocks.numblocks[1:] == (1, 1, 1)
    reduced = da.reduction(
        blocks, partial(_chunk, with_std=with_std, whole=whole),
        partial(_aggregate, dtype=dtype, totals=totals), combine=partial(_combine, dtype=dtype),
        axis=0, keepdims=True, dtype=totals, split_every=FAN_IN,
        meta=np.empty((0, 0, 0, 0), totals), name="normstats-mean-image")
    return reduced[0]


def compute_dask_with_mean_image(x: Any, options: ReadOptions, *, with_std: bool,
                                 workers: int | None = None, scheduler: Any = None
                                 ) -> tuple[DatasetStats, MeanImageTotals]:
    """`normstats.compute` of a Dask array and the totals of its mean image: the
    statistics' reduction and the mean image's, computed together.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> x = da.from_array(np.arange(8, dtype=np.uint8).reshape(2, 2, 2, 1), chunks=1)
    >>> stats, totals = compute_dask_with_mean_image(x, ReadOptions(), with_std=True,
    ...                                              scheduler="sync")
    >>> stats.images, totals.mean().ravel().tolist(), totals.std().ravel().tolist()
    (2, [2.0, 3.0, 4.0, 5.0], [2.0, 2.0, 2.0, 2.0])
    """
    with reading_zarr(x, options.allow_missing_chunks) as note:
        stats = lazy_stats(x, layout=options.layout, scale=options.scale,
                           channels=options.channels, note=note)
        image = lazy_mean_image(x, layout=options.layout, with_std=with_std)
        stats, found = run_graph((stats, image), scheduler, workers)
    return stats, _totals(found, str(x.dtype), with_std)
