"""Arrow tables with an image column: Hugging Face ``.arrow`` files and ``save_to_disk`` folders.

A Hugging Face dataset is an Arrow table whose ``Image`` column is a struct of ``bytes``
(the encoded file) and ``path``, as in its Parquet files; its ``.arrow`` files are Arrow
IPC streams. They are memory-mapped, never read whole: a task slices its rows, and each
cell is decoded by the Parquet reader's `CellReader`, with the same decoder and decode
policy as a folder (a path with no bytes is read inside the Arrow file's folder).

The image column is the dataset's one ``Image`` feature, or the column ``image_key``
(``--image-key``) names; without features, it is found by type as in a Parquet file.
A folder written by ``save_to_disk`` is read through its ``state.json``; the folder of a
``DatasetDict`` is refused with its splits named, one of which is the dataset to read.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import mmap
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from normstats.errors import InvalidOptionError, NormstatsError, UnreadableInputError
from normstats.maths.records import Skipped
from normstats.sources.base import Task, default_task_size, split_evenly
from normstats.sources.confined import outside_reason
from normstats.sources.decoding.decode import DecodePolicy, channel_names_for
from normstats.sources.decoding.file_read import open_regular
from normstats.sources.parquet import (
    CellReader,
    CellTask,
    _pyarrow,
    dataset_features,
    image_column,
)

__all__ = ["ArrowTask", "ArrowFile", "ArrowFileSource", "choose_column", "rows_per_task",
           "saved_dataset", "ARROW_EXTENSIONS"]

ARROW_EXTENSIONS = (".arrow",)

#: Encoded bytes a task decodes (~200 JPEGs of 256², as a folder's tasks hold).
_TASK_BYTES = 4 << 20
#: Rows a task holds when its cells are paths, whose files' sizes are not known here.
_TASK_PATHS = 256


class ColumnHolder(Protocol):
    """Where a task's rows are: anything with ``column(name)`` giving an Arrow column."""

    def column(self, name: str) -> Any: ...


@dataclass(frozen=True, eq=False)
class ArrowTask(CellTask):
    """Decode the rows ``start:stop`` of a dataset whose image column ``table`` holds.

    The rows are the table's rows ``indices`` (a dataset's indices mapping, in its
    order) or, without one, the consecutive rows from ``first_row``; row ``start + i``
    is named ``f"{label}{start + i}"``.
    """

    table: ColumnHolder
    column: str
    start: int
    stop: int
    first_row: int
    indices: np.ndarray | None
    label: str
    reader: CellReader
    fail_fast: bool = False

    @property
    def size(self) -> int:
        return self.stop - self.start

    def head(self, count: int) -> ArrowTask:
        """The task of this task's first ``count`` rows."""
        stop = min(self.stop, self.start + count)
        indices = None if self.indices is None else self.indices[:stop - self.start]
        return dataclasses.replace(self, stop=stop, indices=indices)

    def cells(self) -> Iterator[tuple[str, Any]]:
        column = self.table.column(self.column)
        if self.indices is not None:
            rows = column.take(self.indices)
        else:
            rows = column.slice(self.first_row, self.size)
        for offset, cell in enumerate(rows.to_pylist()):
            yield f"{self.label}{self.start + offset}", cell


def rows_per_task(rows: int, column_bytes: int, workers: int) -> int:
    """Rows a task decodes: ~4 MB of encoded images, at least ~10 tasks per worker.

    Examples
    --------
    >>> rows_per_task(10_000, 10_000 * 20_000, 2), rows_per_task(10_000, 10_000 * 30, 2)
    (209, 256)
    """
    mean = column_bytes // max(1, rows)
    preferred = _TASK_PATHS if mean < 1024 else min(1024, max(16, _TASK_BYTES // mean))
    return default_task_size(rows, workers, preferred)


def choose_column(schema: Any, features: dict[str, Any], where: str, image_key: str | None,
                  mode: str) -> tuple[str, str]:
    """The image column of a table and its kind: the one ``Image`` feature of
    ``features`` (a dataset's features as datasets stores them), or by `image_column`.

    An ``Image(mode=...)`` column is read only under that mode: it is what the dataset
    gives its users.

    Examples
    --------
    >>> import pyarrow as pa
    >>> image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    >>> schema = pa.schema([("a", image), ("b", image)])
    >>> choose_column(schema, {"a": {"_type": "Image"}, "b": {"_type": "Value"}}, "d", None, "RGB")
    ('a', 'struct')
    """
    images = [name for name, feature in features.items()
              if isinstance(feature, dict) and feature.get("_type") == "Image"]
    if image_key is None and len(images) > 1:
        raise NormstatsError(f"several Image columns ({', '.join(images)}); choose one with "
                             "--image-key (image_key=)", path=where)
    name, kind = (images[0], "struct") if image_key is None and images else \
        image_column(schema, where, image_key)
    wanted = (features.get(name) or {}).get("mode") if name in images else None
    if wanted and wanted != mode:
        raise InvalidOptionError(f"{where}: column {name!r} is Image(mode={wanted!r}), so the "
                                 f"dataset gives its images as {wanted}; read them so with "
                                 f"mode={wanted!r} (--mode {wanted})")
    return name, kind


class ArrowFile:
    """One Arrow IPC file (stream or file format), memory-mapped where a task reads it;
    it pickles as its path.

    Examples
    --------
    >>> import os, tempfile, pyarrow as pa
    >>> path = os.path.join(tempfile.mkdtemp(), "data-00000-of-00001.arrow")
    >>> with pa.ipc.new_stream(path, pa.schema([("x", pa.int64())])) as w:
    ...     w.write_table(pa.table({"x": [1, 2]}))
    >>> ArrowFile(path).column("x").to_pylist()
    [1, 2]
    """

    def __init__(self, path: str) -> None:
        self.path = path

    def table(self) -> Any:
        """The file's table; its data stay in the file until a row is read."""
        try:
            status = os.stat(self.path)
        except OSError as error:
            raise NormstatsError(f"cannot read the Arrow file ({error.strerror or error})",
                                 path=self.path) from None
        return _mapped(self.path, status.st_size, status.st_mtime_ns)

    def column(self, name: str) -> Any:
        return self.table().column(name)

    def __reduce__(self) -> tuple:
        return (ArrowFile, (self.path,))


@functools.lru_cache(maxsize=8)
def _mapped(path: str, size: int, mtime_ns: int) -> Any:
    """The table of ``path`` as it is now (its size and modification time key it)."""
    _pyarrow()  # says how to install pyarrow when it is missing
    import pyarrow as pa

    try:
        with open_regular(path) as handle:  # never a FIFO or device; maps what was checked
            if size == 0:
                raise NormstatsError("not an Arrow file (empty)", path=path)
            buffer = pa.py_buffer(mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ))
        if buffer[:6].to_pybytes() == b"ARROW1":
            return pa.ipc.open_file(buffer).read_all()
        return pa.ipc.open_stream(buffer).read_all()
    except (NormstatsError, UnreadableInputError):
        raise
    except OSError as error:
        raise NormstatsError(f"cannot read the Arrow file ({error.strerror or error})",
                             path=path) from None
    except Exception as error:  # noqa: BLE001 - pyarrow raises many types
        raise NormstatsError(f"not a readable Arrow file ({error})", path=path) from None


class ArrowFileSource:
    """The images of one or more Arrow files, read in runs of rows.

    Parameters
    ----------
    paths : sequence of str
        Arrow files, read in order.
    policy : DecodePolicy, optional
        How the encoded images become pixels (default RGB, as torchvision's loader).
    column : str, optional
        The image column, when a file has several.

    Examples
    --------
    >>> import io, os, tempfile, pyarrow as pa
    >>> from PIL import Image
    >>> buf = io.BytesIO(); Image.new("RGB", (2, 2)).save(buf, "PNG")
    >>> table = pa.table({"image": pa.array([{"bytes": buf.getvalue(), "path": None}] * 3)})
    >>> path = os.path.join(tempfile.mkdtemp(), "data-00000-of-00001.arrow")
    >>> with pa.ipc.new_stream(path, table.schema) as writer:
    ...     writer.write_table(table)
    >>> len(ArrowFileSource([path]))
    3
    """

    kind = "images"
    scheduler = "processes"
    ignored = 0

    def __init__(self, paths: Sequence[str], policy: DecodePolicy | None = None,
                 fail_fast: bool = False, column: str | None = None) -> None:
        if not paths:
            raise NormstatsError("no Arrow files given")
        self.policy = policy or DecodePolicy()
        self.fail_fast = fail_fast
        self.files: list[tuple[str, str, str, int, int]] = []
        skipped: list[Skipped] = []
        for path in paths:
            try:
                self.files.append(self._layout(path, column))
            except UnreadableInputError as error:  # a FIFO or device named like a file
                if fail_fast:
                    raise
                skipped.append(Skipped(path, error.reason, error.kind))
        self.mode = self.policy.mode
        self.channel_names = None if self.mode == "keep" else channel_names_for(self.mode, 0)
        self.description = paths[0] if len(paths) == 1 else f"{len(paths)} Arrow files"
        self.skipped: tuple[Skipped, ...] = tuple(skipped)

    def _layout(self, path: str, column: str | None) -> tuple[str, str, str, int, int]:
        """``path``, its image column and kind, its rows and the column's bytes."""
        table = ArrowFile(path).table()
        name, kind = choose_column(table.schema, dataset_features(table.schema), path, column,
                                   self.policy.mode)
        return path, name, kind, table.num_rows, table.column(name).nbytes

    def __len__(self) -> int:
        return sum(rows for *_, rows, _ in self.files)

    def tasks(self, task_size: int | None = None, workers: int = 1) -> list[Task]:
        tasks: list[Task] = []
        for path, column, kind, rows, nbytes in self.files:
            size = task_size or rows_per_task(rows, nbytes, workers)
            path = os.path.abspath(path)  # a cluster's worker resolves a relative one itself
            reader = CellReader(kind, self.policy, os.path.dirname(path),
                                "the Arrow file's folder")
            label = f"{os.path.basename(path)}:"
            tasks += [ArrowTask(ArrowFile(path), column, a, b, a, None, label, reader,
                                self.fail_fast) for a, b in split_evenly(rows, size)]
        return tasks


def saved_dataset(path: str, policy: DecodePolicy, fail_fast: bool = False,
                  column: str | None = None) -> ArrowFileSource | None:
    """The dataset a ``save_to_disk`` folder holds (its ``state.json`` names its Arrow
    files); None when ``path`` is not such a folder. The folder of a ``DatasetDict`` is
    refused with its splits named: each split is a folder of its own.

    Examples
    --------
    >>> import tempfile
    >>> saved_dataset(tempfile.mkdtemp(), DecodePolicy()) is None
    True
    """
    splits = _read_json(path, "dataset_dict.json")
    if splits is not None:
        names = [str(s) for s in splits.get("splits", [])] if isinstance(splits, dict) else []
        example = os.path.join(path, names[0] if names else "train")
        raise InvalidOptionError(f"{path} is a Hugging Face DatasetDict of the splits "
                                 f"{', '.join(names) or '(none)'}: name the one to read, "
                                 f"e.g. {example}")
    state = _read_json(path, "state.json")
    if state is None:
        return None
    entries = state.get("_data_files") if isinstance(state, dict) else None
    if not isinstance(entries, list) or not entries or state.get("_indices_data_files"):
        raise NormstatsError("a state.json that names no data files (or an indices mapping "
                             "this reader does not follow): not a save_to_disk folder it "
                             "reads", path=path)
    files = []
    for entry in entries:
        name = entry.get("filename", "") if isinstance(entry, dict) else ""
        reason = outside_reason(path, name) if name else "an entry without a file name"
        if reason is not None:
            raise NormstatsError(f"state.json names a data file outside the dataset's "
                                 f"folder ({reason}): only files inside it are read", path=path)
        files.append(os.path.join(path, name))
    source = ArrowFileSource(files, policy, fail_fast, column)
    count = "1 Arrow file" if len(files) == 1 else f"{len(files)} Arrow files"
    source.description = f"{path} (Hugging Face dataset, {count})"
    return source


def _read_json(folder: str, name: str) -> Any:
    """The JSON document ``folder/name``, or None when the folder has no such file."""
    path = os.path.join(folder, name)
    if not os.path.isfile(path):
        return None
    try:
        with open_regular(path) as handle:
            return json.loads(handle.read(16 << 20))
    except (OSError, ValueError) as error:
        raise NormstatsError(f"unreadable {name} ({error})", path=folder) from None
