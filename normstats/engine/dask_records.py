"""Per-image records as Dask arrays: select any subset by key, label or mask, reduce it exactly.

`records` reads a source once through the one engine (the record cache answers what it
holds; the rest is decoded, and committed to the cache when one is in use) and returns
its per-image records as Dask arrays, one row per image, with the image keys (relative
path, or index in an array) and labels (the immediate sub-folder, as in an ImageFolder
layout). `reduce` turns any selection of those rows into `DatasetStats` with a Dask
reduction (a `Summary` per block, merged exactly), never decoding again: the subset's
statistics are bit-identical to computing that subset from its files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from normstats.engine.dask_images import images, source_of
from normstats.engine.dask_reduce import (
    as_image_blocks,
    block_tasks,
    image_records,
    is_dask_array,
    run_graph,
)
from normstats.engine.source_run import run_source
from normstats.errors import EmptyDatasetError, InvalidOptionError
from normstats.maths.records import FloatRecords, IntegerRecords, Records, Skipped, concat_records
from normstats.maths.stats import DatasetStats
from normstats.maths.summary import Summary, summarize
from normstats.sources import open_source
from normstats.sources.arrays import ArraySource
from normstats.sources.base import TaskResult
from normstats.sources.decoding.transforms import transformed_source

__all__ = ["ImageRecords", "records", "reduce"]

#: Rows per chunk of the record arrays (~100 bytes a row).
CHUNK_ROWS = 65_536
_FAN_IN = 8


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
    skipped : tuple of Skipped
        Inputs left out while reading, with their reason.
    cached, decoded : int
        Images whose records the cache answered, and images decoded by this call.

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
        mode=mode, source=source, skipped=skipped)


def records(data: Any, *, mode: str = "RGB", layout: str | None = None,
            resize: int | None = None, center_crop: int | None = None,
            on_error: str = "skip", max_pixels: int | None = None, format: str | None = None,
            channels: tuple[str, ...] | None = None,
            cache: str | os.PathLike | bool | None = None, workers: int | None = None,
            scheduler: Any = None, max_file_bytes: int | None = None) -> ImageRecords:
    """Per-image records of any source, read now (the cache first), as Dask arrays.

    Parameters are those of `normstats.compute`. A Dask array is reduced block by block
    on its own graph (``scheduler``); images of any sizes are welcome.

    Examples
    --------
    >>> import numpy as np
    >>> rec = records(np.zeros((3, 2, 2, 1), np.uint8))
    >>> rec.keys.tolist(), rec.arrays["pixels"].compute().tolist()
    ([0, 1, 2], [4, 4, 4])
    """
    if on_error not in ("skip", "fail"):
        raise InvalidOptionError(f"on_error must be 'skip' or 'fail', got {on_error!r}")
    source = source_of(data) if is_dask_array(data) else None
    if source is None and is_dask_array(data):
        return _dask_array_records(data, layout, channels, scheduler, workers)
    if source is None:
        source = open_source(data, mode=mode, layout=layout, max_pixels=max_pixels,
                             fail_fast=on_error == "fail", channel_names=channels,
                             format=format, max_file_bytes=max_file_bytes)
        source = transformed_source(source, resize, center_crop)
    if isinstance(source, ArraySource):
        return _dask_array_records(images(source), None, source.channel_names, scheduler,
                                   workers, name=source.path or "array")
    results: list[TaskResult] = []
    outcome = run_source(source, cache=cache, workers=workers, scheduler=scheduler,
                         on_result=results.append)
    parts = [r.records for r in results if r.records is not None and len(r.records)]
    if not parts:
        raise EmptyDatasetError("no usable image", path=source.description)
    batch = concat_records(parts)
    order = np.argsort(np.array(batch.keys, dtype=object), kind="stable")
    batch = batch.take(order)
    return replace(_wrap(batch, np.array(batch.keys, dtype=object), outcome.summary.skipped,
                         source.mode, source.description),
                   cached=outcome.cached, decoded=outcome.decoded)


def _dask_array_records(x: Any, layout: str | None, channels: tuple[str, ...] | None,
                        scheduler: Any, workers: int | None,
                        name: str = "array") -> ImageRecords:
    from dask.delayed import delayed

    blocks, layout = as_image_blocks(x, layout)
    parts = [delayed(image_records, pure=True)(name, start, i, channels, counts, *chunk)
             for i, start, chunk, counts in block_tasks(blocks)]
    out = run_graph(parts, scheduler, workers)
    kept, keys, skipped = [], [], []
    at = 0
    for batch, lost, rows in out:
        skipped.extend(lost)
        if batch is not None:
            kept.append(batch)
            keys.append(at + rows)
        at += len(rows) + len(lost)
    if not kept:
        raise EmptyDatasetError("no usable image", path=name)
    return _wrap(concat_records(kept), np.concatenate(keys), tuple(skipped), layout,
                 f"dask array {tuple(x.shape)} {x.dtype}")


def _block_summary(kind: str, dtype: str, names: tuple[str, ...], fields_: tuple[str, ...],
                   *values: np.ndarray) -> Summary:
    batch = _records_class(kind)(dtype=dtype, channel_names=names, keys=(),
                                 **dict(zip(fields_, values)))
    return summarize(batch)


def _merge(*summaries: Summary) -> Summary:
    total = summaries[0]
    for summary in summaries[1:]:
        total = total.merge(summary)
    return total


def reduce(rec: ImageRecords, *, scale: float | None = None,
           channels: tuple[str, ...] | None = None, scheduler: Any = None,
           workers: int | None = None) -> DatasetStats:
    """Exact `DatasetStats` of any selection of records, without decoding again.

    A Dask reduction: each block of rows becomes a `Summary`, merged exactly, so the
    result is bit-identical to computing the same images from their files.

    Examples
    --------
    >>> import numpy as np
    >>> rec = records(np.stack([np.zeros((2, 2, 1), np.uint8), np.ones((2, 2, 1), np.uint8)]))
    >>> reduce(rec[rec.keys == 1], scale=1).mean
    (1.0,)
    """
    from dask.delayed import delayed

    names = tuple(rec.arrays)
    # every column went through the same selections, so their row chunks line up
    blocks = [rec.arrays[n].to_delayed().reshape(-1) for n in names]
    level = [delayed(_block_summary, pure=True)(rec.kind, rec.dtype, rec.channel_names, names,
                                                *(b[i] for b in blocks))
             for i in range(len(blocks[0]))]
    while len(level) > 1:
        level = [delayed(_merge, pure=True)(*level[j:j + _FAN_IN])
                 for j in range(0, len(level), _FAN_IN)]
    summary = run_graph(level[0], scheduler, workers) if level else Summary()
    summary = Summary(skipped=rec.skipped).merge(summary)
    return DatasetStats.from_summary(summary, channels=channels, scale=scale, mode=rec.mode,
                                     kind="vectors" if rec.mode == "NC" else "images",
                                     source=rec.source)
