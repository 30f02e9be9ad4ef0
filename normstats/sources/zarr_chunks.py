"""The chunks a zarr array lacks, found by one listing of its store before any pixel is read.

zarr reads a chunk missing from the store as the array's fill value, by design, so a copy
that lost files (an interrupted upload, a partial ``rsync``) or a store whose shape claims
more images than were written gives statistics of zeros without a word. `missing_chunks`
lists the store once and compares the chunk keys found with the chunk grid; in a sharded
array, the index of each shard present (a few bytes at its end) says which inner chunks
it holds. zarr 3 also leaves out, by default (``write_empty_chunks=False``), chunks that
hold only the fill value: such a store is sound, and ``allow_missing_chunks`` reads it.
`failing_chunk` names the chunk that does not decode, once a read has failed.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from normstats.errors import InvalidOptionError, UnreadableInputError, numbered

__all__ = ["MissingChunks", "is_zarr_array", "missing_chunks", "holes_in", "failing_chunk",
           "store_name", "read_rows", "zarr_arrays_in_graph", "zarr_read_by",
           "with_absolute_store", "refuse_relative_stores"]

#: Missing chunk keys and image ranges a message names; the rest are counted.
_NAMED = 3


@dataclass(frozen=True)
class MissingChunks:
    """The chunks a zarr array's store lacks, and the images (axis-0 rows) they cover.

    Fields: ``missing`` of ``total`` chunks are absent; ``keys`` names the first few
    (C order); ``images`` rows of ``rows`` touch one, the first in ``ranges`` (start,
    stop); ``fill_value`` is what zarr reads in their place.
    """

    missing: int
    total: int
    keys: tuple[str, ...]
    images: int
    rows: int
    ranges: tuple[tuple[int, int], ...]
    fill_value: Any

    def where(self) -> str:
        """The first missing chunks and image ranges, in words."""
        keys = ", ".join(self.keys) + (", ..." if self.missing > len(self.keys) else "")
        spans = ", ".join(f"{a}" if b - a == 1 else f"{a}-{b - 1}" for a, b in self.ranges)
        return f"{keys}; images {spans}{', ...' if self.images > _span(self.ranges) else ''}"

    def error(self, store: str) -> UnreadableInputError:
        """The one-line refusal naming the store, the chunks and what to do."""
        return UnreadableInputError(
            f"{self.missing:,} of {self.total:,} chunks are missing from the zarr store "
            f"({self.where()}): zarr would read them as the fill value {self.fill_value}, so "
            f"{self.images:,} of {self.rows:,} images would be counted as made of it. Copy the "
            "store again if files were lost; if zarr left those chunks out because they held "
            "only the fill value (write_empty_chunks=False), pass --allow-missing-chunks "
            "(allow_missing_chunks=True)", store)

    def note(self, store: str = "") -> str:
        """What a report says when the holes were allowed (naming ``store`` if given)."""
        return (f"{self.images:,} of {self.rows:,} images read as the fill value "
                f"{self.fill_value} from {numbered(self.missing, 'missing chunk')} of the zarr "
                f"store "
                f"{store + ' ' if store else ''}({self.where()}): allow_missing_chunks")


def _span(ranges: tuple[tuple[int, int], ...]) -> int:
    return sum(b - a for a, b in ranges)


def is_zarr_array(array: Any) -> bool:
    """True for a zarr-python 3 array object (without importing zarr for anything else).

    Examples
    --------
    >>> import numpy as np, zarr
    >>> is_zarr_array(zarr.zeros((2, 2))), is_zarr_array(np.zeros((2, 2)))
    (True, False)
    """
    return type(array).__module__.startswith("zarr") and hasattr(array, "store_path") and \
        hasattr(array, "metadata")


def store_name(array: Any) -> str:
    """How messages name a zarr array's store: its folder when it has one, else its URL.

    Examples
    --------
    >>> import zarr
    >>> store_name(zarr.create_array({}, shape=(1,), dtype="uint8")).startswith("memory://")
    True
    """
    store, path = array.store_path.store, array.store_path.path
    root = getattr(store, "root", None) or getattr(store, "path", None)  # local, fsspec
    if not root:
        return str(array.store_path)
    return f"{str(root).rstrip('/')}/{path}" if path else str(root)


def with_absolute_store(array: Any) -> Any:
    """``array``, reopened read-only by its store's absolute folder when it was opened by a
    relative one (``zarr.open_array("train.zarr")``); any other array as it is.

    A zarr array pickles with its store's path, and a dask.distributed worker resolves a
    relative one in its own folder: where nothing lies there, zarr reads every chunk as
    missing, that is as the fill value, and the statistics are of zeros without a word.

    Examples
    --------
    >>> import os, tempfile, zarr
    >>> relative = os.path.relpath(os.path.join(tempfile.mkdtemp(), "x.zarr"))
    >>> _ = zarr.create_array(relative, shape=(1,), dtype="u1")
    >>> os.path.isabs(with_absolute_store(zarr.open_array(relative)).store_path.store.root)
    True
    """
    store = array.store_path.store if is_zarr_array(array) else None
    if type(store).__name__ != "LocalStore" or os.path.isabs(store.root):
        return array
    import zarr

    absolute = type(store)(os.path.abspath(store.root), read_only=True)
    return zarr.open_array(absolute, path=array.store_path.path, mode="r")


def refuse_relative_stores(graph: Any) -> None:
    """Refuse a Dask collection (or a tuple of them) bound for a cluster when a zarr array
    it reads was opened by a relative folder: the workers would look for the store in
    their own folders and, finding nothing there, read every chunk as the fill value.

    Examples
    --------
    >>> import os, tempfile, zarr, dask.array as da
    >>> relative = os.path.relpath(os.path.join(tempfile.mkdtemp(), "x.zarr"))
    >>> z = zarr.create_array(relative, shape=(2,), chunks=(1,), dtype="u1")
    >>> refuse_relative_stores(da.from_array(z))
    Traceback (most recent call last):
    ...
    normstats.errors.InvalidOptionError: ...x.zarr: a zarr store opened by a relative path...
    >>> refuse_relative_stores(da.from_array(with_absolute_store(z)))
    """
    for part in graph if isinstance(graph, tuple | list) else (graph,):
        for array in zarr_arrays_in_graph(part):
            store = array.store_path.store
            if type(store).__name__ == "LocalStore" and not os.path.isabs(store.root):
                raise InvalidOptionError(
                    f"{store_name(array)}: a zarr store opened by a relative path, which a "
                    "cluster's workers would look for in their own folders (reading every "
                    "chunk as the fill value where it is not): open it by its absolute path, "
                    "os.path.abspath(path)")


def holes_in(data: Any) -> list[tuple[str, MissingChunks]]:
    """(store, missing chunks) of ``data``: a zarr array, or each zarr array a Dask array
    was made from (``da.from_zarr``; ``da.from_array`` of a zarr array) with chunks missing.

    Dask keeps the array it slices in a materialized layer of the graph, where it is
    found; an array inlined into every task (``inline_array=True``) is not seen.

    Examples
    --------
    >>> import numpy as np, zarr, dask.array as da
    >>> z = zarr.create_array({}, shape=(4, 2), chunks=(2, 2), dtype="uint8")
    >>> z[:2] = 1
    >>> [holes.images for _, holes in holes_in(da.from_zarr(z))]
    [2]
    """
    arrays = [data] if is_zarr_array(data) else zarr_arrays_in_graph(data)
    found = [(store_name(array), missing_chunks(array)) for array in arrays]
    return [(store, holes) for store, holes in found if holes is not None]


def zarr_arrays_in_graph(x: Any) -> list[Any]:
    """The zarr arrays in the materialized layers of Dask array ``x``'s graph."""
    layers = getattr(getattr(x, "dask", None), "layers", None)
    if not layers or not type(x).__module__.startswith("dask"):
        return []
    from dask.highlevelgraph import MaterializedLayer

    found: dict[int, Any] = {}
    for layer in layers.values():
        if isinstance(layer, MaterializedLayer):
            for value in layer.mapping.values():
                value = getattr(value, "value", value)  # a DataNode holds its object
                if is_zarr_array(value):
                    found[id(value)] = value
    return list(found.values())


def zarr_read_by(x: Any) -> Any:
    """The zarr array that Dask array ``x`` reads whole and does nothing else to (as
    ``da.from_zarr(store)`` or ``da.from_array(zarr_array)`` make it), else None.

    Such an array is read faster by zarr's own slices of several chunks, which zarr
    decodes concurrently, than by one Dask task a chunk (`normstats.compute` reads it so
    on a local scheduler). Anything done to it (a slice, an operation, a ``rechunk``)
    adds a layer to its graph, and it is no longer found.

    Examples
    --------
    >>> import zarr, dask.array as da
    >>> z = zarr.create_array({}, shape=(4, 2), chunks=(2, 2), dtype="uint8")
    >>> zarr_read_by(da.from_zarr(z)) is z, zarr_read_by(da.from_zarr(z)[:2])
    (True, None)
    """
    layers = getattr(getattr(x, "dask", None), "layers", None)
    if not layers or len(layers) != 2 or x.name not in layers:
        return None
    from dask.array.core import getter
    from dask.blockwise import Blockwise

    reader = layers[x.name]
    (array,) = zarr_arrays_in_graph(x) or (None,)
    made_by = getattr(getattr(reader, "task", None), "func", None)
    if not isinstance(reader, Blockwise) or made_by is not getter or array is None:
        return None
    same = tuple(x.shape) == tuple(array.shape) and np.dtype(x.dtype) == array.dtype
    return array if same else None


def missing_chunks(array: Any) -> MissingChunks | None:
    """The chunks of ``array`` its store lacks, or None when every chunk is there.

    One listing of the store (and, for sharded arrays, one small read of each shard's
    index); no chunk is decoded.

    Examples
    --------
    >>> import numpy as np, zarr
    >>> z = zarr.create_array({}, shape=(6, 2), chunks=(2, 2), dtype="uint8")
    >>> z[:2] = 1
    >>> m = missing_chunks(z)
    >>> m.missing, m.keys, m.images, m.ranges
    (2, ('c/1/0', 'c/2/0'), 4, ((2, 6),))
    """
    grid = tuple(math.ceil(s / c) for s, c in zip(array.shape, array.chunks))
    total = math.prod(grid)
    if total == 0:
        return None
    present = _present_chunks(array, grid)
    if len(present) == total:
        return None
    per_row = math.prod(grid[1:])
    rows, counts = np.unique(present // per_row, return_counts=True)
    gaps = _gaps(rows[counts == per_row], grid[0])
    step, count = array.chunks[0], array.shape[0]
    ranges = tuple((a * step, min(b * step, count)) for a, b in gaps)
    return MissingChunks(total - len(present), total, _first_missing(array, grid, present, gaps),
                         _span(ranges), count, ranges[:_NAMED], array.fill_value)


def _gaps(complete: np.ndarray, rows: int) -> list[tuple[int, int]]:
    """The runs (start, stop) of chunk rows in 0..rows that are not in sorted ``complete``."""
    bounds = np.concatenate([[-1], complete, [rows]])
    where = np.flatnonzero(np.diff(bounds) > 1)
    return [(int(bounds[i]) + 1, int(bounds[i + 1])) for i in where]


def _first_missing(array: Any, grid: tuple[int, ...], present: np.ndarray,
                   gaps: list[tuple[int, int]]) -> tuple[str, ...]:
    """Names of the first few missing chunks, in C order (skipping complete rows at once)."""
    names: list[str] = []
    for start, stop in gaps:
        for row in range(start, stop):
            for rest in np.ndindex(*grid[1:]):
                coords = (row, *rest)
                index = np.ravel_multi_index(coords, grid)
                at = np.searchsorted(present, index)
                if at == len(present) or present[at] != index:
                    names.append(_chunk_name(array, coords))
                    if len(names) == _NAMED:
                        return tuple(names)
    return tuple(names)


def _chunk_name(array: Any, coords: tuple[int, ...]) -> str:
    """A chunk's store key, or its shard's key and its place in the shard."""
    if array.shards is None:
        return array.metadata.encode_chunk_key(coords)
    per_shard = tuple(s // c for s, c in zip(array.shards, array.chunks))
    shard = tuple(i // n for i, n in zip(coords, per_shard))
    inner = tuple(i % n for i, n in zip(coords, per_shard))
    return f"{array.metadata.encode_chunk_key(shard)} (inner chunk {','.join(map(str, inner))})"


def _present_chunks(array: Any, grid: tuple[int, ...]) -> np.ndarray:
    """Sorted C-order indices, in the chunk grid, of the chunks the store holds."""
    keys = _listing(array)
    stored = array.shards or array.chunks
    objects = tuple(math.ceil(s / c) for s, c in zip(array.shape, stored))
    coords = _parse_keys(array, keys, objects)
    if array.shards is not None:
        coords = _inner_chunks(array, coords, grid)
    if not len(coords):
        return np.zeros(0, np.int64)
    return np.unique(np.ravel_multi_index(coords.T, grid))


def _listing(array: Any) -> list[str]:
    """Every key under the array's prefix, relative to it: the one listing of the store."""
    from zarr.core.sync import sync

    path = array.store_path.path
    prefix = f"{path}/" if path else ""
    root = _local_root(array.store_path.store)
    if root is not None:
        return _walk(os.path.join(root, path))

    async def collect() -> list[str]:
        return [key async for key in array.store_path.store.list_prefix(prefix)]

    return [key[len(prefix):] for key in sync(collect()) if key.startswith(prefix)]


def _local_root(store: Any) -> str | None:
    """The folder of a store on the local file system (zarr's own, or fsspec's), else None."""
    if type(store).__name__ == "LocalStore":
        return os.fspath(store.root)
    fs = getattr(store, "fs", None)
    protocol = getattr(getattr(fs, "sync_fs", fs), "protocol", ())
    return store.path if "file" in protocol else None


def _walk(root: str) -> list[str]:
    """The files under ``root``, relative to it: `os.scandir` answers file or folder from
    the directory entry, where zarr's listing stats every file (4-5x slower on a store of
    one chunk an image: three nested folders a chunk)."""
    found: list[str] = []
    folders, linked = [(root, "")], set()
    while folders:
        folder, relative = folders.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                if not entry.is_dir():
                    found.append(relative + entry.name)
                elif not entry.is_symlink() or _first_visit(entry.path, linked):
                    folders.append((entry.path, f"{relative}{entry.name}/"))
    return found


def _first_visit(link: str, seen: set[str]) -> bool:
    """Follow a linked folder once (zarr reads through links; a loop ends here)."""
    target = os.path.realpath(link)
    if target in seen:
        return False
    seen.add(target)
    return True


def _parse_keys(array: Any, keys: list[str], objects: tuple[int, ...]) -> np.ndarray:
    """Grid coordinates (k, ndim) of the chunk keys in ``keys`` (metadata keys are left)."""
    metadata = array.metadata
    if metadata.zarr_format == 2:
        head, separator = "", metadata.dimension_separator
    else:
        encoding = metadata.chunk_key_encoding
        separator = encoding.separator
        head = f"c{separator}" if encoding.name == "default" else ""
    found = []
    for key in keys:
        parts = key[len(head):].split(separator) if key.startswith(head) else ()
        if len(parts) == len(objects) and all(p.isdigit() for p in parts):
            coords = tuple(map(int, parts))
            if all(i < n for i, n in zip(coords, objects)):
                found.append(coords)
    return np.array(found, dtype=np.int64).reshape(-1, len(objects))


def _inner_chunks(array: Any, shards: np.ndarray, grid: tuple[int, ...]) -> np.ndarray:
    """Grid coordinates of the inner chunks the present shards' indexes hold."""
    from zarr.codecs import ShardingCodec
    from zarr.core.sync import sync

    codec = next(c for c in array.metadata.codecs if isinstance(c, ShardingCodec))
    per_shard = tuple(s // c for s, c in zip(array.shards, array.chunks))
    keys = [array.metadata.encode_chunk_key(tuple(int(i) for i in row)) for row in shards]

    async def indexes() -> list[Any]:
        import asyncio

        return await asyncio.gather(*(codec._load_shard_index_maybe(array.store_path / key,
                                                                    per_shard) for key in keys))

    try:
        loaded = sync(indexes())
    except Exception as error:  # noqa: BLE001 - any failure means an unreadable shard index
        raise UnreadableInputError(f"a shard index cannot be read ({type(error).__name__}: "
                                   f"{error})", store_name(array)) from None
    found = [np.argwhere(index.get_full_chunk_map()) + shard * np.array(per_shard)
             for shard, index in zip(shards, loaded) if index is not None]
    coords = np.concatenate(found) if found else np.zeros((0, len(grid)), np.int64)
    return coords[(coords < np.array(grid)).all(axis=1)]


def failing_chunk(array: Any, start: int, stop: int) -> tuple[str, str] | None:
    """The first chunk holding rows ``start:stop`` that does not decode, and why; read one
    chunk at a time (after a read of the rows failed)."""
    step = array.chunks[0]
    grid = tuple(math.ceil(s / c) for s, c in zip(array.shape, array.chunks))
    for row in range(start // step, math.ceil(stop / step)):
        for rest in np.ndindex(*grid[1:]):
            try:
                array.blocks[(row, *rest)]
            except Exception as error:  # noqa: BLE001 - codecs raise many types
                reason = " ".join(f"{type(error).__name__}: {error}".split())[:200]
                return _chunk_name(array, (row, *rest)), reason
    return None


def read_rows(array: Any, rows: slice, name: str) -> np.ndarray:
    """``array[rows]`` in memory; a zarr chunk that does not decode is named in one line.

    Examples
    --------
    >>> read_rows(np.arange(4), slice(1, 3), "array").tolist()
    [1, 2]
    """
    if not is_zarr_array(array):
        return np.asarray(array[rows])
    try:
        return np.asarray(array[rows])
    except MemoryError:
        raise
    except Exception as error:  # noqa: BLE001 - zarr's codecs raise many types
        start, stop, _ = rows.indices(int(array.shape[0]))
        chunk, reason = failing_chunk(array, start, stop) or \
            ("?", " ".join(f"{type(error).__name__}: {error}".split()))
        raise UnreadableInputError(f"zarr chunk {chunk} cannot be read ({reason}): the store "
                                   "is damaged; copy it again",
                                   name if name != "array" else store_name(array)) from None
