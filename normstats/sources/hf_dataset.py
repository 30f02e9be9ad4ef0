"""Hugging Face ``datasets.Dataset`` objects, read through their Arrow table.

A ``Dataset`` is an Arrow table (``dataset.data``) and, after ``select``, ``shuffle``,
``filter`` or ``train_test_split``, an indices mapping (``dataset._indices``): the table
rows the dataset holds, in its order. Both are read here, not the items: the image
column's cells are decoded in parallel tasks by the Parquet reader's `CellReader`, so
``compute(dataset)`` costs what the same images in a folder cost, whatever the dataset's
format (``with_format("torch")``) or the ``Image(decode=False)`` of its column. Rows the
table holds and the dataset does not are never read; each row of the dataset is read
once, in its order.

A memory-mapped table (what ``load_dataset`` and ``load_from_disk`` give) travels to the
worker processes as datasets pickles it, the names of its files, and each task slices
its rows there; a table in memory sends each task its own rows. A path with no bytes is
read as datasets reads it (the dataset object names its own files: an ``imagefolder``
dataset holds the absolute paths of the user's images). Items are read one by one only
where they are not the table's images: a dataset with a transform (``with_transform``)
gives what its transform makes, and one without an image column but with pixel arrays
(``pixel_values``) gives arrays. A fixed-shape array column (``Array3D``) is read from the
table whole, with the dtype its feature declares (`_array_column`). A ``DatasetDict`` is
refused with its splits named, and an ``IterableDataset`` is an iterable like any other,
but for a column of pixel arrays, whose rows come typed as its feature declares
(`StreamedPixels`).
"""

from __future__ import annotations

import math
import pickle
from typing import Any

import numpy as np

from normstats.errors import InvalidOptionError, NormstatsError, numbered
from normstats.maths.records import Skipped
from normstats.sources.arrays import ArraySource
from normstats.sources.arrow import ArrowTask, choose_column, rows_per_task
from normstats.sources.base import Task, split_evenly
from normstats.sources.decoding.decode import DecodePolicy, channel_names_for
from normstats.sources.items import IMAGE_KEYS
from normstats.sources.mapped import MappedSource, Shipped
from normstats.sources.options import ReadOptions
from normstats.sources.parquet import (
    ARRAY_FEATURES,
    LIST_FEATURES,
    CellReader,
    column_kind,
    list_nesting,
)

__all__ = ["HFDatasetSource", "hf_source"]

_SPLITS = ("DatasetDict", "IterableDatasetDict")
#: A shared table is sent with every task: beyond this, each task carries its own rows.
_SHARED_BYTES = 1 << 20


def _datasets_class(data: Any) -> str | None:
    """The name of the ``datasets`` class ``data`` is an instance of (told by its type,
    without importing datasets), or None."""
    for cls in type(data).__mro__:
        if cls.__module__.startswith("datasets.") and cls.__name__ in (
                "Dataset", "IterableDataset", *_SPLITS):
            return cls.__name__
    return None


class StreamedPixels:
    """The rows of a streamed Hugging Face dataset (``IterableDataset``) whose image
    column holds pixel arrays, that column of each row as a numpy array of the type its
    feature declares: datasets streams Python lists (int64 arrays under the numpy
    format), which normstats refuses as pixels of no type, where a read ``Dataset``'s
    table gives the declared type (`_array_column`). A value the type cannot hold is an
    error naming the row, never wrapped.

    Examples
    --------
    >>> rows = StreamedPixels([{"pixels": [[1, 2], [3, 4]]}], "pixels", np.dtype("uint8"))
    >>> next(iter(rows))["pixels"].dtype
    dtype('uint8')
    """

    def __init__(self, dataset: Any, column: str, dtype: np.dtype) -> None:
        self.dataset, self.column, self.dtype = dataset, column, dtype

    def __iter__(self) -> Any:
        for index, row in enumerate(self.dataset):
            values = np.asarray(row[self.column])
            typed = values.astype(self.dtype)
            if values.dtype != self.dtype and not np.array_equal(typed, values):
                raise NormstatsError(f"row {index}: column {self.column!r} holds values its "
                                     f"feature's type {self.dtype} cannot hold")
            yield {**row, self.column: typed}


def _streamed_pixels(dataset: Any, options: ReadOptions) -> Any:
    """The source of a streamed dataset whose image column (``image_key`` or a usual
    name) is an array feature of numbers (``Array3D``, nested ``List``); None otherwise."""
    from normstats.sources.iterable import IterableSource

    features = dataset.features.to_dict() if dataset.features is not None else {}
    names = [options.image_key] if options.image_key is not None else \
        [key for key in IMAGE_KEYS if key in features]
    feature = features.get(names[0]) if names else None
    kind = feature.get("_type") if isinstance(feature, dict) else None
    if kind in ARRAY_FEATURES:
        declared = feature.get("dtype")
    elif kind in LIST_FEATURES:
        while isinstance(feature, dict) and feature.get("_type") in LIST_FEATURES:
            feature = feature.get("feature")
        declared = feature.get("dtype") if isinstance(feature, dict) else None
    else:
        return None
    try:
        dtype = np.dtype(declared)
    except TypeError:
        return None
    if dtype.kind not in "biuf":
        return None
    # arrays, never PIL images: no decode mode applies ("keep")
    source = IterableSource(StreamedPixels(dataset, names[0], dtype), layout=options.layout,
                            mode="keep", image_key=names[0], batched=False)
    source.description = (f"Hugging Face IterableDataset column {names[0]!r} ({kind} of "
                          f"{dtype}), streamed")
    return source


def hf_source(data: Any, options: ReadOptions) -> HFDatasetSource | ArraySource | None:
    """The source of a Hugging Face ``Dataset`` read through its Arrow table; None for
    anything else and for datasets whose items are to be read one by one (see the
    module's docstring). A ``DatasetDict`` is refused with its splits named.

    Examples
    --------
    >>> hf_source([1, 2], ReadOptions()) is None
    True
    """
    kind = _datasets_class(data)
    if kind in _SPLITS:
        splits = list(data)
        example = f"dataset[{splits[0]!r}]" if splits else "dataset['train']"
        raise InvalidOptionError(f"a Hugging Face {kind} of the splits "
                                 f"{', '.join(map(str, splits)) or '(none)'}: pass the one "
                                 f"to compute, e.g. {example}")
    streamed_as = getattr(getattr(data, "_formatting", None), "format_type", None)
    if kind == "IterableDataset" and streamed_as in (None, "python", "numpy", "torch"):
        return _streamed_pixels(data, options)  # pixel arrays typed; else None: its items
    if kind != "Dataset" or data.format.get("type") == "custom":
        return None  # an iterable, or a transform that makes the items: read them
    if (pixels := _array_column(data, options)) is not None:
        return pixels
    column = _image_column(data, options)
    if column is None:
        return None
    return HFDatasetSource(data, *column, options.policy, options.fail_fast)


def _array_column(dataset: Any, options: ReadOptions) -> ArraySource | MappedSource | None:
    """The source of a column of pixel arrays (``Array3D((32, 32, 3), "uint8")``, ``(None,
    32, 3)`` for images of several heights, or the nested ``List`` features ``map`` makes of
    numpy pixels; under ``image_key`` or a usual name), read from the Arrow table in the
    type it stores; None for any other column.

    Its items would come as Python lists (and numpy or torch formats give int64), so the
    uint8 pixels the table holds would be refused as 64-bit integers. The dataset's rows,
    in its order, are read into memory: one array when every row has one shape, else one
    array a row. A column of one list a row holds vectors (``x``, ``input``): (N, d).
    """
    features = dataset.features.to_dict()
    names = [options.image_key] if options.image_key is not None else \
        [key for key in IMAGE_KEYS if key in features]
    feature = features.get(names[0]) if names else None
    kind = feature.get("_type") if isinstance(feature, dict) else None
    if kind not in (*ARRAY_FEATURES, *LIST_FEATURES):
        return None
    name = names[0]
    stored = dataset.data.schema.field(name).type
    depth, dtype = list_nesting(stored)
    if dtype is None:
        return None
    where = f"Hugging Face Dataset column {name!r} ({len(dataset):,} rows, {kind})"
    column = dataset.with_format("arrow")[:].column(name)  # its rows, in its order
    if column.null_count:
        raise NormstatsError(f"{column.null_count:,} rows have no value: filter them out "
                             "first (dataset.filter)", path=where)
    flat, shapes = _nested_rows(column, depth, dtype, where)
    uniform = len(shapes) > 0 and bool((shapes == shapes[0]).all())
    if depth == 1 and len(shapes) and not uniform:
        raise NormstatsError(f"rows of {shapes.min()} to {shapes.max()} values: one list a "
                             "row is a vector, and vectors are read as one (N, d) array of "
                             "one length", path=where)
    if uniform:
        source: ArraySource | MappedSource = ArraySource(
            flat.reshape(len(shapes), *shapes[0].tolist()), layout=options.layout,
            channel_names=options.channels, nodata=options.nodata)
    else:
        ends = np.cumsum(shapes.prod(axis=1))
        rows = [flat[end - math.prod(shape):end].reshape(shape.tolist())
                for end, shape in zip(ends.tolist(), shapes)]
        source = MappedSource(rows, mode=options.mode, layout=options.layout,
                              fail_fast=options.fail_fast)
    source.description = where
    return source


def _nested_rows(column: Any, depth: int, dtype: np.dtype,
                 where: str) -> tuple[np.ndarray, np.ndarray]:
    """The numbers of a column of ``depth`` nested lists, flat and in row order, and each
    row's shape (rows, depth). Every row must be an array: at each level, the lists of a
    row have one length (a ragged row is refused, naming it)."""
    import pyarrow.compute as pc

    parts, shapes, first_row = [], [], 0
    for chunk in column.chunks:
        values = getattr(chunk, "storage", chunk)  # an Array feature's nested lists
        owner = np.arange(len(values))  # the row of each list at this level
        dims = np.zeros((len(values), depth), np.int64)
        for level in range(depth):
            if values.null_count:
                raise NormstatsError(f"a row holds a missing value (null) "
                                     f"{numbered(level, 'list')} deep: filter such rows out "
                                     "first", path=where)
            lengths = pc.list_value_length(values).to_numpy(zero_copy_only=False)
            if lengths.size:
                starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
                low = np.minimum.reduceat(lengths, starts)
                high = np.maximum.reduceat(lengths, starts)
                if (ragged := np.flatnonzero(low != high)).size:
                    row = first_row + int(owner[starts[ragged[0]]])
                    raise NormstatsError(f"row {row} is not an array: its lists at "
                                         f"nesting level {level + 1} hold {low[ragged[0]]} "
                                         f"to {high[ragged[0]]} values", path=where)
                dims[owner[starts], level] = low
            owner = np.repeat(owner, lengths)
            values = values.flatten()
        parts.append(values.to_numpy(zero_copy_only=False))
        shapes.append(dims)
        first_row += len(dims)
    flat = np.concatenate(parts).astype(dtype, copy=False) if parts else np.empty(0, dtype)
    return flat, np.concatenate(shapes) if shapes else np.empty((0, depth), np.int64)


def _image_column(dataset: Any, options: ReadOptions) -> tuple[str, str] | None:
    """The dataset's image column and its kind; None when its items hold pixel arrays
    instead (under ``image_key``, or a usual name when no column holds images)."""
    schema, key = dataset.data.schema, options.image_key
    features = dataset.features.to_dict()

    def holds_arrays(name: str) -> bool:
        return name in schema.names and column_kind(schema.field(name).type) is None

    if key is not None and holds_arrays(key):
        return None
    encoded = any(isinstance(f, dict) and f.get("_type") == "Image" for f in features.values())
    encoded = encoded or any(column_kind(t) in ("struct", "bytes") for t in schema.types)
    if key is None and not encoded and any(holds_arrays(k) for k in IMAGE_KEYS):
        return None
    where = f"Hugging Face Dataset ({len(dataset):,} rows)"
    return choose_column(schema, features, where, key, options.mode)


class SharedTable:
    """A memory-mapped datasets table as tasks carry it: pickled once (the names of its
    files and what was done to it), loaded once per worker process."""

    def __init__(self, table: Any, payload: bytes) -> None:
        self.shipped = Shipped(table, payload)

    def column(self, name: str) -> Any:
        return self.shipped.dataset.column(name)


def _shared(table: Any) -> SharedTable | None:
    """The table as every task can share it, when it lies in files (it then pickles as
    their names, and what was done to it, in a few kB); None for a table in memory."""
    from datasets.table import ConcatenationTable, MemoryMappedTable

    blocks = [block for row in table.blocks for block in row] \
        if isinstance(table, ConcatenationTable) else [table]
    if not all(isinstance(block, MemoryMappedTable) for block in blocks):
        return None
    payload = pickle.dumps(table)
    # what was done to it may hold arrays (add_column): then each task carries its rows
    return SharedTable(table, payload) if len(payload) <= _SHARED_BYTES else None


def _indices(dataset: Any, rows: int) -> np.ndarray | None:
    """The table rows of the dataset's items, in order (None: all rows, as they are)."""
    mapping = dataset._indices  # datasets' own name for it: there is no public one
    if mapping is None:
        return None
    indices = mapping.column(0).to_numpy().astype(np.int64)
    if len(indices) and (indices.min() < 0 or indices.max() >= rows):
        raise NormstatsError(f"the dataset's indices mapping names row {indices.max()} of a "
                             f"table of {rows} rows")
    return indices


class HFDatasetSource:
    """The images of a Hugging Face ``Dataset``, read from its Arrow table in parallel.

    Parameters
    ----------
    dataset : datasets.Dataset
        The dataset; its format and its column's ``decode`` do not matter.
    column, kind : str
        The image column and how it holds images (`normstats.sources.arrow.choose_column`).
    policy : DecodePolicy, optional
        How the encoded images become pixels (default RGB, as torchvision's loader).

    Examples
    --------
    >>> import io, datasets
    >>> from PIL import Image
    >>> buf = io.BytesIO(); Image.new("RGB", (2, 2)).save(buf, "PNG")
    >>> ds = datasets.Dataset.from_dict({"image": [buf.getvalue()] * 4, "label": [0, 1, 0, 1]})
    >>> ds = ds.cast_column("image", datasets.Image()).filter(lambda x: x["label"] == 1)
    >>> len(HFDatasetSource(ds, "image", "struct"))
    2
    """

    kind = "images"
    scheduler = "processes"
    skipped: tuple[Skipped, ...] = ()
    ignored = 0

    def __init__(self, dataset: Any, column: str, kind: str,
                 policy: DecodePolicy | None = None, fail_fast: bool = False) -> None:
        self.policy = policy or DecodePolicy()
        self.column, self.fail_fast = column, fail_fast
        self.count = len(dataset)
        table = dataset.data
        self.indices = _indices(dataset, table.num_rows)
        self.shared = _shared(table)
        self.cells = table.table.column(column)
        held = self.cells.length() if self.indices is None else len(self.indices)
        if held != self.count:  # never a number of other rows than the dataset's
            raise NormstatsError(f"the dataset has {self.count} rows and its table or indices "
                                 f"mapping {held}: datasets changed how it keeps them")
        self.cell_kind = kind
        self.mode = self.policy.mode
        self.channel_names = None if self.mode == "keep" else channel_names_for(self.mode, 0)
        mapping = "" if self.indices is None else ", an indices mapping"
        self.description = f"Hugging Face Dataset ({self.count:,} rows{mapping}, column " \
                           f"{column!r})"

    def __len__(self) -> int:
        return self.count

    def tasks(self, task_size: int | None = None, workers: int = 1) -> list[Task]:
        rows = self.cells.length()
        size = task_size or rows_per_task(self.count, self.cells.nbytes * self.count //
                                          max(1, rows), workers)
        reader = CellReader(self.cell_kind, self.policy, None)  # the policy as it is now
        return [self._task(start, stop, reader)
                for start, stop in split_evenly(self.count, size)]

    def _task(self, start: int, stop: int, reader: CellReader) -> ArrowTask:
        indices = None if self.indices is None else self.indices[start:stop]
        if self.shared is not None:
            return ArrowTask(self.shared, self.column, start, stop, start, indices, "item ",
                             reader, self.fail_fast)
        import pyarrow as pa

        rows = self.cells.slice(start, stop - start) if indices is None else \
            self.cells.take(pa.array(indices))
        return ArrowTask(OwnRows(pa.table({self.column: rows})), self.column, start, stop, 0,
                         None, "item ", reader, self.fail_fast)


class OwnRows:
    """A task's own rows of a table in memory, kept as an Arrow IPC stream: it holds only
    those rows (a pickled slice would carry the whole column's buffers) and is written
    and read without copying the images one by one."""

    def __init__(self, table: Any) -> None:
        import pyarrow as pa

        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        self.stream = sink.getvalue().to_pybytes()

    def column(self, name: str) -> Any:
        import pyarrow as pa

        return pa.ipc.open_stream(pa.py_buffer(self.stream)).read_all().column(name)
