"""Parquet files with an image column, as Hugging Face datasets are distributed.

A Hugging Face ``Image`` column is a struct of ``bytes`` (the encoded file) and ``path``;
other datasets store the encoded bytes in a binary column, or file paths in a string
column (resolved relative to the Parquet file). The image column is found by its type;
``image_key=`` (``--image-key``) names it when a file has several. Row groups are the
units of reading: a task decodes the rows of one row group (a part of it when the dataset
has fewer row groups than workers need), with the same decoder and decode policy as a
folder. How a cell becomes pixels (`CellReader`) is shared with the readers of Arrow tables
(`normstats.sources.arrow`, Hugging Face datasets).
pyarrow is an optional dependency (``pip install 'normstats[parquet]'``).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from normstats.errors import (
    InvalidOptionError,
    NormstatsError,
    RefusedInputError,
    UnreadableInputError,
)
from normstats.maths.records import Skipped
from normstats.sources.base import Task, split_evenly
from normstats.sources.confined import outside_reason
from normstats.sources.decoding.decode import (
    DecodedImage,
    DecodePolicy,
    OutputBuffer,
    channel_names_for,
    decode_bytes,
    decode_file,
)
from normstats.sources.decoding.file_read import open_regular, too_large_reason
from normstats.sources.folder import DecodingTask
from normstats.sources.items import IMAGE_KEYS

__all__ = ["ParquetSource", "ParquetTask", "PARQUET_EXTENSIONS", "CellReader", "CellTask",
           "image_column", "column_kind"]

PARQUET_EXTENSIONS = (".parquet", ".pq")
_MISSING = ("reading Parquet needs pyarrow: pip install 'normstats[parquet]' "
            "(or pip install pyarrow)")


def _pyarrow() -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise NormstatsError(_MISSING) from None
    return pq


def column_kind(field_type: Any) -> str | None:
    """How a column of ``field_type`` holds images: "struct", "bytes", "path" or None.

    Examples
    --------
    >>> import pyarrow as pa
    >>> column_kind(pa.struct([("bytes", pa.binary()), ("path", pa.string())]))
    'struct'
    >>> column_kind(pa.int64()) is None
    True
    """
    import pyarrow as pa

    if pa.types.is_struct(field_type):
        names = {field_type.field(i).name for i in range(field_type.num_fields)}
        return "struct" if "bytes" in names or "path" in names else None
    if pa.types.is_binary(field_type) or pa.types.is_large_binary(field_type):
        return "bytes"
    if pa.types.is_string(field_type) or pa.types.is_large_string(field_type):
        return "path"
    return None


def image_column(schema: Any, path: str, column: str | None) -> tuple[str, str]:
    """The image column of ``schema`` (of the dataset ``path``) and its kind; ``column``
    chooses among several.

    Examples
    --------
    >>> import pyarrow as pa
    >>> image_column(pa.schema([("png", pa.binary()), ("label", pa.int64())]), "d", None)
    ('png', 'bytes')
    """
    if column is not None:
        if column not in schema.names:
            raise InvalidOptionError(f"{path}: no column {column!r}; the columns are "
                                     f"{', '.join(schema.names)}")
        kind = column_kind(schema.field(column).type)
        if kind is None:
            images = [name for name in schema.names
                      if column_kind(schema.field(name).type) is not None]
            hint = f"; the columns that can hold images are {', '.join(images)}" if images else \
                _pixel_arrays_hint(schema, [column])
            raise InvalidOptionError(f"{path}: column {column!r} ({schema.field(column).type}) "
                                     f"holds no images (bytes, a path, or a struct of them){hint}")
        return column, kind
    candidates = [(n, k) for n in schema.names
                  if (k := column_kind(schema.field(n).type)) in ("struct", "bytes")]
    if not candidates:  # a column of paths only when nothing holds bytes
        candidates = [(n, "path") for n in schema.names if column_kind(schema.field(n).type)
                      == "path" and any(word in n.lower() for word in ("image", "img", "path",
                                                                      "file"))]
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise NormstatsError("no image column (encoded bytes, an image path, or a struct of "
                             f"bytes and path); the columns are {', '.join(schema.names)}"
                             f"{_pixel_arrays_hint(schema, schema.names)}", path=path)
    raise NormstatsError(f"several image columns ({', '.join(n for n, _ in candidates)}); "
                         "choose one with --image-key (image_key=)", path=path)


def dataset_features(schema: Any) -> dict[str, Any]:
    """The features Hugging Face datasets wrote in a table's schema metadata (none when
    absent or unreadable).

    Examples
    --------
    >>> import pyarrow as pa
    >>> dataset_features(pa.schema([("x", pa.int64())]))
    {}
    """
    raw = (schema.metadata or {}).get(b"huggingface")
    try:
        features = json.loads(raw)["info"]["features"] if raw else {}
    except (ValueError, KeyError, TypeError):
        return {}
    return features if isinstance(features, dict) else {}


#: datasets' array features, the usual column of preprocessed pixels.
ARRAY_FEATURES = ("Array2D", "Array3D", "Array4D", "Array5D")
#: datasets' features of nested lists (``datasets.List(datasets.List(...))``, what ``map``
#: makes of a function returning numpy pixels; ``Sequence`` before datasets 4).
LIST_FEATURES = ("List", "Sequence", "LargeList")


def list_nesting(stored: Any) -> tuple[int, Any]:
    """How many list levels a column of Arrow type ``stored`` nests (an extension type's
    storage: an ``Array3D`` column's), and the numpy dtype of its numbers (None for
    anything else: strings, structs, booleans).

    Examples
    --------
    >>> import pyarrow as pa
    >>> list_nesting(pa.list_(pa.list_(pa.uint8())))
    (2, dtype('uint8'))
    >>> list_nesting(pa.list_(pa.string()))
    (1, None)
    """
    import numpy as np
    import pyarrow as pa

    stored = getattr(stored, "storage_type", stored)
    depth = 0
    while pa.types.is_list(stored) or pa.types.is_large_list(stored) or \
            pa.types.is_fixed_size_list(stored):
        stored, depth = stored.value_type, depth + 1
    numeric = pa.types.is_integer(stored) or pa.types.is_floating(stored)
    return depth, np.dtype(stored.to_pandas_dtype()) if numeric else None


def _pixel_arrays_hint(schema: Any, names: list[str]) -> str:
    """What to do when one of the columns ``names`` holds pixel arrays (an ``Array3D``
    feature, or the nested lists ``map`` makes of numpy pixels), which the file readers
    leave to the datasets library, or lists of numbers in a file of no dataset, or when
    every column is a number (a table of features); else ''."""
    import pyarrow as pa

    features = dataset_features(schema)
    for name in names:
        feature = features.get(name)
        kind = feature.get("_type") if isinstance(feature, dict) else None
        depth, dtype = list_nesting(schema.field(name).type)
        if kind in ARRAY_FEATURES:
            held = f"{kind} of shape {tuple(feature.get('shape') or ())}, {dtype}"
        elif kind in LIST_FEATURES and depth >= 2 and dtype is not None:
            held = f"{depth} levels of lists of {dtype}"
        elif not features and depth >= 1 and dtype is not None:  # no datasets file
            levels = "1 level" if depth == 1 else f"{depth} levels"
            return (f"; column {name!r} holds lists of {dtype} ({levels}): if they are "
                    "pixels or vectors, read them into one array and pass it, in Python "
                    f"normstats.compute(np.array(pq.read_table(path)[{name!r}].to_pylist()))")
        else:
            continue
        key = "" if name in IMAGE_KEYS else f", image_key={name!r}"
        return (f"; column {name!r} holds pixel arrays ({held}), which normstats reads from "
                "the dataset object, not from its files: in Python, load it with datasets "
                f"(load_from_disk, load_dataset) and pass it, normstats.compute(dataset{key})")
    kinds = [schema.field(name).type for name in schema.names]  # the table's, every one
    if kinds and all(pa.types.is_integer(t) or pa.types.is_floating(t)
                     or pa.types.is_boolean(t) for t in kinds):
        return ("; every column is a number: for per-feature statistics of the table, pass "
                "it as a pandas or polars DataFrame, in Python "
                "normstats.compute(pd.read_parquet(path)) for a Parquet file, "
                "normstats.compute(dataset.to_pandas()) for a Hugging Face dataset")
    return ""


def _layout(pq: Any, path: str, column: str | None) -> tuple[str, str, str, list[int]]:
    """``path`` made absolute (its tasks may run in a cluster's worker, in a folder of its
    own), its image column and that column's kind, and the rows of each row group."""
    try:
        with open_regular(path) as handle:  # never a FIFO: pyarrow would wait on it
            parquet = pq.ParquetFile(handle)
            schema, metadata = parquet.schema_arrow, parquet.metadata
    except UnreadableInputError:
        raise
    except OSError as error:
        raise NormstatsError(f"cannot read the Parquet file ({error.strerror or error})",
                             path=path) from None
    except Exception as error:  # noqa: BLE001 - pyarrow raises many types
        raise NormstatsError(f"not a readable Parquet file ({error})", path=path) from None
    name, kind = image_column(schema, path, column)
    return (os.path.abspath(path), name, kind, [metadata.row_group(g).num_rows
                                                for g in range(metadata.num_row_groups)])


@dataclass(frozen=True)
class CellReader:
    """How one cell of an image column becomes pixels: its encoded bytes, or the file its
    path names.

    Attributes
    ----------
    kind : {"struct", "bytes", "path"}
        How the column holds images (`image_column`).
    policy : DecodePolicy
        How encoded images become pixels.
    root : str or None
        The folder a path is relative to and must stay inside (`outside_reason`), or None
        for paths the user's own dataset object names, read as given.
    place : str
        How messages name ``root``.
    """

    kind: str
    policy: DecodePolicy
    root: str | None
    place: str = "the Parquet file's folder"

    def decode(self, key: str, cell: Any, scratch: OutputBuffer | None = None) -> DecodedImage:
        """The pixels of ``cell`` (the row named ``key``).

        Examples
        --------
        >>> import io
        >>> from PIL import Image
        >>> buf = io.BytesIO(); Image.new("RGB", (2, 3)).save(buf, "PNG")
        >>> reader = CellReader("struct", DecodePolicy(), None)
        >>> reader.decode("row 0", {"bytes": buf.getvalue(), "path": None}).pixels.shape
        (3, 2, 3)
        """
        data, path = (cell.get("bytes"), cell.get("path")) if isinstance(cell, dict) else (
            (cell, None) if self.kind == "bytes" else (None, cell))
        if data is not None:
            if len(data) > self.policy.file_byte_limit:
                raise RefusedInputError(too_large_reason(len(data), self.policy.file_byte_limit),
                                        key)
            return decode_bytes(data, key, self.policy, scratch)
        if not path:
            raise UnreadableInputError("no image in this row (empty cell)", key)
        if self.root is None:
            return decode_file(path, self.policy, key, scratch)
        reason = outside_reason(self.root, path)
        if reason is not None:
            raise RefusedInputError(f"image path {reason}: only images inside {self.place} "
                                    "are read", key)
        return decode_file(os.path.join(self.root, path), self.policy, key, scratch)


class CellTask(DecodingTask):
    """What tasks over the cells of an image column share: each cell decoded by their
    `CellReader`, what cannot be read skipped (or, with ``fail_fast``, raised)."""

    fail_fast: bool
    reader: CellReader

    def cells(self) -> Iterator[tuple[str, Any]]:
        """The task's rows as (key, cell) pairs, in order."""
        raise NotImplementedError

    def decoded(self, skipped: list[Skipped],
                scratch: OutputBuffer | None = None) -> Iterator[tuple[str, DecodedImage]]:
        """Decode row after row, yielding (key, image); the rest go to ``skipped``.

        With ``scratch``, each image is valid only until the next one is decoded.
        """
        reader = self.reader
        for key, cell in self.cells():
            try:
                image = reader.decode(key, cell, scratch)
            except UnreadableInputError as error:
                if self.fail_fast:
                    raise
                skipped.append(Skipped(key, error.reason, error.kind))
                continue
            yield key, image


@dataclass(frozen=True)
class ParquetTask(CellTask):
    """Decode rows ``start:stop`` of row group ``group`` of one Parquet file (whose first
    row is row ``first_row`` of the file)."""

    path: str
    group: int
    first_row: int
    start: int
    stop: int
    column: str
    kind: str
    policy: DecodePolicy
    fail_fast: bool = False

    @property
    def size(self) -> int:
        return self.stop - self.start

    @property
    def reader(self) -> CellReader:
        return CellReader(self.kind, self.policy, os.path.dirname(os.path.abspath(self.path)))

    def head(self, count: int) -> ParquetTask:
        """The task of this task's first ``count`` rows."""
        return dataclasses.replace(self, stop=min(self.stop, self.start + count))

    def cells(self) -> Iterator[tuple[str, Any]]:
        with open_regular(self.path) as handle:  # pyarrow reads what was checked
            table = _pyarrow().ParquetFile(handle).read_row_group(self.group,
                                                                  columns=[self.column])
        first = self.first_row
        values = table.column(0).slice(self.start, self.stop - self.start).to_pylist()
        name = os.path.basename(self.path)
        for offset, cell in enumerate(values):
            yield f"{name}:{first + self.start + offset}", cell


class ParquetSource:
    """The images of one or more Parquet files, read by row groups.

    Parameters
    ----------
    paths : sequence of str
        Parquet files, read in order.
    policy : DecodePolicy, optional
        How the encoded images become pixels (default RGB, as torchvision's loader).
    column : str, optional
        The image column, when a file has several.

    Examples
    --------
    >>> import io, tempfile, os
    >>> import pyarrow as pa, pyarrow.parquet as pq
    >>> from PIL import Image
    >>> buf = io.BytesIO(); Image.new("RGB", (2, 2)).save(buf, "PNG")
    >>> image = pa.array([{"bytes": buf.getvalue(), "path": "a.png"}] * 3)
    >>> p = os.path.join(tempfile.mkdtemp(), "train-00000-of-00001.parquet")
    >>> pq.write_table(pa.table({"image": image, "label": [0, 1, 0]}), p)
    >>> len(ParquetSource([p]))
    3
    """

    kind = "images"
    scheduler = "processes"

    def __init__(self, paths: Sequence[str], policy: DecodePolicy | None = None,
                 fail_fast: bool = False, column: str | None = None) -> None:
        if not paths:
            raise NormstatsError("no Parquet files given")
        pq = _pyarrow()
        self.policy = policy or DecodePolicy()
        self.fail_fast = fail_fast
        self.files: list[tuple[str, str, str, list[int]]] = []
        skipped: list[Skipped] = []
        for path in paths:
            try:
                self.files.append(_layout(pq, path, column))
            except UnreadableInputError as error:  # a FIFO or device named like a file:
                if fail_fast:                      # skipped unread, as in a folder
                    raise
                skipped.append(Skipped(path, error.reason, error.kind))
        self.mode = self.policy.mode
        self.channel_names = None if self.mode == "keep" else channel_names_for(self.mode, 0)
        self.description = paths[0] if len(paths) == 1 else f"{len(paths)} Parquet files"
        self.skipped: tuple[Skipped, ...] = tuple(skipped)
        self.ignored = 0

    def __len__(self) -> int:
        return sum(sum(rows) for *_, rows in self.files)

    def tasks(self, task_size: int | None = None, workers: int = 1) -> list[Task]:
        groups = sum(len(rows) for *_, rows in self.files)
        # Every task reads its whole row group's column: split a group only when there
        # are too few groups to keep the workers busy, or when the user asks.
        pieces = max(1, -(-2 * workers // max(1, groups)))
        tasks: list[Task] = []
        for path, column, kind, rows in self.files:
            first = 0
            for group, count in enumerate(rows):
                size = task_size or max(1, -(-count // pieces))
                tasks += [ParquetTask(path, group, first, a, b, column, kind, self.policy,
                                      self.fail_fast) for a, b in split_evenly(count, size)]
                first += count
        return tasks
