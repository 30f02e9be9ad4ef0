"""Per-image records as Dask arrays: select any subset by key, label or mask, reduce it exactly.

`records` reads a source once through the one engine (the record cache answers what it
holds; the rest is decoded, and committed to the cache when one is in use) and returns
its per-image records as Dask arrays, one row per image, with the image keys (relative
path, or index in an array) and labels (the immediate sub-folder, as in an ImageFolder
layout). `reduce` turns any selection of those rows into `DatasetStats` with a Dask
reduction (a `Summary` per block, merged exactly), never decoding again: the subset's
statistics are bit-identical to computing that subset from its files.

`reduce_lazy` is the same reduction, of records or of any Dask array of images, left
lazy: a Dask object that ``dask.compute`` reduces with others in one graph.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from functools import partial
from typing import Any, Unpack

import numpy as np

from normstats.engine.dask.images import images, untouched_source, zarr_note
from normstats.engine.dask.lazy import (
    describe,
    finish_stats,
    finished,
    lazy_result,
    lazy_stats,
    run_graph,
)
from normstats.engine.dask.reduce import (
    Part,
    Plan,
    as_image_blocks,
    boxed,
    fresh_name,
    is_dask_array,
    reduce_parts,
)
from normstats.engine.source_run import run_source
from normstats.errors import EmptyDatasetError, InvalidOptionError
from normstats.maths.image_moments import MAX_INTEGER_BITS
from normstats.maths.records import (
    FLOAT_LIMIT,
    NON_FINITE,
    TOO_LARGE_REASON,
    FloatRecords,
    IntegerRecords,
    Records,
    Skipped,
    concat_records,
)
from normstats.maths.summary import summarize
from normstats.results.stats import DatasetStats
from normstats.sources import open_source
from normstats.sources.arrays import ArraySource
from normstats.sources.base import TaskResult
from normstats.sources.labelled import unlabelled
from normstats.sources.options import ReadArguments, ReadOptions, read_options

__all__ = ["ImageRecords", "records", "reduce", "reduce_lazy"]

#: Rows per chunk of the record arrays (~100 bytes a row).
CHUNK_ROWS = 65_536


@dataclass(frozen=True, eq=False)
class ImageRecords:
    """Per-image records of a dataset as Dask arrays, and each image's key and label.

    Attributes
    ----------
    keys : numpy.ndarray
        One key per row: the image's relative path, or its index in an array.
    labels : numpy.ndarray
        One label per row: the immediate sub-folder of the key ("." for the root).
    arrays : dict of str to dask.array.Array
        ``pixels`` (n,), and (n, C) per channel: ``sums`` and ``sums_sq`` (integer
        images, exact int64) or ``means``, ``residuals`` and ``m2s`` (float images, float64),
        ``minimum`` and ``maximum``.
    kind, dtype, channel_names, mode, source
        What the records hold and where they came from.
    scale, channels : optional
        How `reduce` reports them unless told otherwise (the ``scale`` and ``channels``
        `records` was given).
    skipped : tuple of Skipped
        Inputs left out while reading, with their reason.
    cached, decoded : int
        Images whose records the cache answered, and images decoded by this call.
    raw_units : bool
        The records are of rasters reported in raw units (`normstats.maths.scale`); where
        nodata was left out, ``arrays`` also holds ``valid``, the values each band kept.

    Examples
    --------
    >>> import numpy as np
    >>> rec = records(np.arange(48, dtype=np.uint8).reshape(4, 2, 2, 3))
    >>> len(rec), rec.arrays["sums"].compute()[1].tolist(), reduce(rec[[0, 1]]).images
    (4, [66, 70, 74], 2)
    """

    keys: np.ndarray
    labels: np.ndarray
    arrays: dict[str, Any]
    kind: str
    dtype: str
    channel_names: tuple[str, ...]
    mode: str = ""
    source: str = ""
    skipped: tuple[Skipped, ...] = ()
    cached: int = 0
    decoded: int = 0
    scale: float | None = None
    channels: tuple[str, ...] | None = None
    raw_units: bool = False

    def __len__(self) -> int:
        return len(self.keys)

    def __getattr__(self, name: str) -> Any:
        arrays = self.__dict__.get("arrays", {})
        if name in arrays:
            return arrays[name]
        raise AttributeError(name)

    def __getitem__(self, rows: Any) -> ImageRecords:
        """The records of the selected rows: a boolean mask, indices or a slice."""
        if isinstance(rows, slice):
            rows = np.arange(len(self))[rows]
        rows = np.asarray(rows)
        if rows.dtype == np.bool_ and rows.shape != (len(self),):
            raise InvalidOptionError(f"a mask of {rows.shape} rows for {len(self)} records")
        arrays = {name: array[rows] for name, array in self.arrays.items()}
        # a subset keeps the inputs skipped in the folders (labels) it selects
        labels = set(self.labels[rows].tolist())
        skipped = tuple(s for s in self.skipped if _label(s.path) in labels)
        return replace(self, keys=self.keys[rows], labels=self.labels[rows], arrays=arrays,
                       skipped=skipped)

    def to_records(self) -> Records:
        """The rows as one in-memory `Records` batch (computes the Dask arrays)."""
        import dask

        names = list(self.arrays)
        values = dask.compute(*(self.arrays[n] for n in names))
        return _records_class(self.kind)(dtype=self.dtype, channel_names=self.channel_names,
                                         raw_units=self.raw_units,
                                         keys=tuple(str(k) for k in self.keys),
                                         **dict(zip(names, values)))


def _records_class(kind: str) -> type:
    return FloatRecords if kind == "FloatRecords" else IntegerRecords


def _label(key: Any) -> str:
    if not isinstance(key, str):
        return "."
    head, sep, _ = key.replace(os.sep, "/").partition("/")
    return head if sep else "."


def _wrap(batch: Records, keys: np.ndarray, skipped: tuple[Skipped, ...], mode: str,
          source: str) -> ImageRecords:
    import dask.array as da

    arrays = {f.name: getattr(batch, f.name) for f in fields(batch)
              if isinstance(getattr(batch, f.name), np.ndarray)}
    return ImageRecords(
        keys=keys, labels=np.array([_label(k) for k in keys], dtype=object),
        arrays={name: da.from_array(value, chunks=(CHUNK_ROWS,) + value.shape[1:])
                for name, value in arrays.items()},
        kind=type(batch).__name__, dtype=batch.dtype, channel_names=batch.channel_names,
        raw_units=batch.raw_units,
        mode=mode, source=source, skipped=skipped)


def records(data: Any, *, options: ReadOptions | None = None,
            cache: str | os.PathLike | bool | None = None, workers: int | None = None,
            scheduler: Any = None, task_size: int | None = None,
            progress: bool | None = False, **read: Unpack[ReadArguments]) -> ImageRecords:
    """Per-image records of any source, read now (the cache first), as Dask arrays.

    Parameters are those of `normstats.compute`: ``options`` (a `ReadOptions`) or its
    fields as keyword arguments say how to read, and ``scale`` and ``channels`` are kept
    for `reduce`. A Dask array is reduced block by block on its own graph
    (``scheduler``); images of any sizes are welcome.

    Examples
    --------
    >>> import numpy as np
    >>> rec = records(np.zeros((3, 2, 2, 1), np.uint8))
    >>> rec.keys.tolist(), rec.arrays["pixels"].compute().tolist()
    ([0, 1, 2], [4, 4, 4])
    """
    options = read_options(options, dict(read))
    layout, channels = options.layout, options.channels
    reported = {"scale": options.scale, "channels": channels}
    source = untouched_source(data) if is_dask_array(data) else None
    if source is None and is_dask_array(data):
        if len(data.shape) == 2 and layout in (None, "NC"):
            reported["scale"] = _vector_scale(options.scale)
        if options.nodata is not None:
            raise InvalidOptionError("nodata is left out by the readers of files and numpy "
                                     "arrays, not on a Dask array's graph: pass the folder, "
                                     "or a numpy masked array")
        return replace(_dask_array_records(data, layout, channels, scheduler, workers),
                       **reported)
    if source is None:
        source = open_source(data, options=options)
    named = _left_out_per_feature(source)
    if isinstance(source, ArraySource) and source.nodata is None and source.mask is None:
        _refuse_wide_integer_vectors(source)
        if source.kind == "vectors":  # reduced as vectors: per feature, in raw units
            reported.update(scale=_vector_scale(options.scale), mode="NC")
        # images() gives (N, H, W, C) whatever the source's layout (vectors 1×1 images of d
        # channels): detected again, (N, 1, 1, d) or (N, 8, 8, 2) would read otherwise
        return replace(_dask_array_records(images(source, task_size=task_size, workers=workers),
                                           "NHWC", source.channel_names, scheduler, workers,
                                           name=source.path or "array",
                                           description=source.description), **reported)
    results: list[TaskResult] = []
    outcome = run_source(source, cache=cache, workers=workers, scheduler=scheduler,
                         task_size=task_size, progress=progress, on_result=results.append)
    parts = [r.records for r in results if r.records is not None and len(r.records)]
    if not parts:
        raise EmptyDatasetError("no usable image", path=source.description)
    batch = concat_records(parts)
    order = np.argsort(np.array(batch.keys, dtype=object), kind="stable")
    batch = batch.take(order)
    return replace(_wrap(batch, np.array(batch.keys, dtype=object),
                         named + tuple(outcome.summary.skipped), source.mode,
                         source.description),
                   cached=outcome.cached, decoded=outcome.decoded, **reported)


def _refuse_wide_integer_vectors(source: ArraySource) -> None:
    """Refuse the records of integer vectors wider than 16 bits, saying that `compute`
    reads them exactly: a row's record holds x² in the integer records' int64, which
    such values can pass."""
    dtype = np.dtype(source.array.dtype)
    if source.kind == "vectors" and dtype.kind in "iu" and dtype.itemsize * 8 > MAX_INTEGER_BITS:
        raise InvalidOptionError(
            f"records of {dtype} vectors are not kept (a row's record holds x² in int64, "
            "exact for integers of at most 16 bits): normstats.compute(x) gives their "
            "per-feature statistics exactly; for records, convert them, "
            "x.astype(np.float64) (the float contract)")


def _left_out_per_feature(source: Any) -> tuple[Skipped, ...]:
    """Mask the NaN, infinite and too large values of float vectors, so that each is left
    out of its feature alone, as `normstats.compute` leaves it out (a row holding one was
    skipped whole, and the records' features then differed from compute's); the
    infinite and too large ones are named as compute names them. Nothing for other data."""
    if not isinstance(source, ArraySource) or source.kind != "vectors" or \
            source.nodata is not None or source.mask is not None or \
            np.dtype(source.array.dtype).kind != "f":
        return ()
    values = np.asarray(source.array)
    infinite = np.isinf(values)
    large = np.zeros(values.shape, bool)
    if float(np.finfo(values.dtype).max) > FLOAT_LIMIT:  # float16/32 cannot be
        large = np.isfinite(values) & (np.abs(values) > FLOAT_LIMIT)
    left_out = np.isnan(values) | infinite | large
    if not left_out.any():
        return ()
    source.mask = left_out
    name = source.description
    return tuple(Skipped(f"{name}[{row}, {column}]", "infinite value" if infinite[row, column]
                         else TOO_LARGE_REASON)
                 for column, row in np.argwhere((infinite | large).T).tolist())


def _vector_scale(scale: float | None) -> float:
    """The scale of vector data's records: raw units (1), as `normstats.compute` reports
    them, unless one is given."""
    return 1.0 if scale is None else scale


def _collected(part: Part, skipped: tuple[Skipped, ...]) -> tuple[Part, tuple[Skipped, ...]]:
    return part, skipped


def _dask_array_records(x: Any, layout: str | None, channels: tuple[str, ...] | None,
                        scheduler: Any, workers: int | None, name: str = "array",
                        description: str | None = None) -> ImageRecords:
    """The records of a Dask array's images, by the reduction `normstats.compute` runs
    (collecting the records instead of summarising them)."""
    blocks, layout = as_image_blocks(x, layout)
    part, skipped = run_graph(lazy_result(x, blocks, _collected, collect=True), scheduler,
                              workers)
    if part.value is None:
        raise EmptyDatasetError("no usable image", path=name)
    batch = part.value
    if channels is not None:
        if len(channels) != batch.channels:
            raise InvalidOptionError(f"{len(channels)} channel names given for "
                                     f"{batch.channels} channels")
        batch = replace(batch, channel_names=tuple(channels))
    dropped = tuple(Skipped(f"{name}[{i}]", NON_FINITE) for i in part.dropped)
    return _wrap(batch, np.delete(np.arange(part.rows), part.dropped),
                 part.skipped + skipped + dropped, layout, description or describe(x))


def _rows_part(kind: str, dtype: str, names: tuple[str, ...], raw_units: bool,
               fields_: tuple[str, ...],
               *values: np.ndarray) -> np.ndarray:
    batch = _records_class(kind)(dtype=dtype, channel_names=names, keys=(), raw_units=raw_units,
                                 **dict(zip(fields_, values)))
    return boxed(Part(len(batch), summarize(batch)))


def _records_lazy(rec: ImageRecords, scale: float | None,
                  channels: tuple[str, ...] | None) -> Any:
    import dask.array as da

    names = tuple(rec.arrays)
    # every column went through the same selections, so their row blocks line up
    columns = [(rec.arrays[n], "i" if rec.arrays[n].ndim == 1 else "ic") for n in names]
    parts = da.blockwise(partial(_rows_part, rec.kind, rec.dtype, rec.channel_names,
                                 rec.raw_units, names),
                         "ijkl", *(v for column in columns for v in column), dtype=object,
                         concatenate=True, new_axes={"j": 1, "k": 1, "l": 1},
                         adjust_chunks={"i": 1}, name=fresh_name("rows"),
                         meta=np.empty((0,) * 4, dtype=object))
    then = partial(finish_stats, known=rec.skipped, mode=rec.mode, source=rec.source,
                   kind="vectors" if rec.mode == "NC" else "images",
                   channels=rec.channels if channels is None else channels,
                   scale=rec.scale if scale is None else scale)
    return finished(reduce_parts(parts, Plan()), [], then)


def reduce(rec: ImageRecords, *, scale: float | None = None,
           channels: tuple[str, ...] | None = None, scheduler: Any = None,
           workers: int | None = None) -> DatasetStats:
    """Exact `DatasetStats` of any selection of records, without decoding again.

    A Dask reduction: each block of rows becomes a `Summary`, merged exactly, so the
    result is bit-identical to computing the same images from their files. ``scale`` and
    ``channels`` default to those `records` was given.

    Examples
    --------
    >>> import numpy as np
    >>> rec = records(np.stack([np.zeros((2, 2, 1), np.uint8), np.ones((2, 2, 1), np.uint8)]))
    >>> reduce(rec[rec.keys == 1], scale=1).mean
    (1.0,)
    """
    if not isinstance(rec, ImageRecords):  # its columns are read as records' below
        raise InvalidOptionError(f"reduce takes records (normstats.records), not "
                                 f"{type(rec).__name__}; normstats.compute reads any data")
    return run_graph(_records_lazy(rec, scale, channels), scheduler, workers)


def reduce_lazy(data: Any, *, options: ReadOptions | None = None,
                **read: Unpack[ReadArguments]) -> Any:
    """The exact statistics of a Dask array of images, or of records, as a lazy Dask object.

    What `normstats.compute` (of a Dask array) and `reduce` (of records) compute, left
    as a `dask.delayed.Delayed` built on the data's own graph: ``.compute()`` gives the
    `DatasetStats`, ``dask.compute(a, b)`` reduces two datasets in one graph (each block
    read once, the readers shared), and ``dask.persist`` keeps the result where it was
    computed. The files the readers of an `images` array skipped are in
    ``stats.skipped`` (see ``docs/dask.md``).

    Parameters
    ----------
    data : dask.array.Array, xarray.DataArray or ImageRecords
        Images (N, H, W, C) or in another ``layout``, or records from `records`.
    options : ReadOptions, optional
        As in `normstats.compute`; ``layout``, ``scale``, ``channels`` and
        ``allow_missing_chunks`` apply here (records: ``scale`` and ``channels``).
    **read
        The same options as keyword arguments.

    Raises
    ------
    InvalidOptionError
        For data that is neither, or a Dask array of vectors (N, d): their per-feature
        statistics are `normstats.compute`'s.

    Examples
    --------
    >>> import dask, numpy as np, dask.array as da
    >>> a = reduce_lazy(da.zeros((4, 2, 2, 3), dtype=np.uint8, chunks=2))
    >>> b = reduce_lazy(da.ones((6, 2, 2, 3), dtype=np.uint8, chunks=2), scale=1)
    >>> [stats.mean[0] for stats in dask.compute(a, b, scheduler="sync")]
    [0.0, 1.0]
    """
    options = read_options(options, dict(read))
    if isinstance(data, ImageRecords):
        return _records_lazy(data, options.scale, options.channels)
    data, options = unlabelled(data, options)  # an xarray DataArray: its array, its layout
    if not is_dask_array(data):
        raise InvalidOptionError(f"reduce_lazy takes a Dask array or records, not "
                                 f"{type(data).__name__}; normstats.compute reads any data")
    if options.nodata is not None:
        raise InvalidOptionError("nodata is left out by the readers of files and numpy "
                                 "arrays, not on a Dask array's graph: use normstats.compute "
                                 "of the folder, or of a numpy masked array")
    note = zarr_note(data, options.allow_missing_chunks)
    return lazy_stats(data, layout=options.layout, scale=options.scale,
                      channels=options.channels, note=note)
