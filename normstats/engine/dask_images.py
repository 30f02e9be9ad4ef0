"""Readers as Dask arrays: `images` gives any source's pixels as a lazy (N, H, W, C) array.

Each source task (a run of files, a shard's members, a slice of an array) becomes one
chunk, decoded when the chunk is computed by the same task object, decode policy and
transforms that `normstats.compute` runs, so the pixels are exactly those it reduces.
The graph holds two layers: a decode layer whose tasks return (pixels, keys, skipped)
and the array's layer that takes the pixels; `normstats.compute` of an untouched
`images` array runs its source through the one engine (pipeline, cache, cluster), and
of anything derived from it reduces the blocks (`normstats.engine.dask_reduce`).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from normstats.engine.pipeline import default_workers
from normstats.errors import (
    IncompatibleImagesError,
    InvalidOptionError,
    NormstatsError,
    UnreadableInputError,
)
from normstats.maths.records import Skipped
from normstats.sources import open_source
from normstats.sources.arrays import ArraySource, ArrayTask, is_zarr_folder
from normstats.sources.base import Task
from normstats.sources.decoding.transforms import transformed_source
from normstats.sources.iterable import IterableSource
from normstats.sources.zarr_chunks import (
    failing_chunk,
    holes_in,
    is_zarr_array,
    store_name,
    zarr_arrays_in_graph,
)

__all__ = ["images", "decode_chunk", "source_of", "allowing_missing_chunks", "reading_zarr"]

#: Sources of the `images` arrays made in this process, by array name (newest kept).
_SOURCES: OrderedDict[str, Any] = OrderedDict()
_KEEP = 64
_PROBE = 8
_UNIFORM_HINT = ("pass resize= and center_crop= (--resize/--center-crop) to make them "
                 "uniform, or use normstats.records(...), which keeps each image's own size")


def decode_chunk(task: Task, shape: tuple[int, ...], dtype: str,
                 first: str) -> tuple[np.ndarray, tuple[str, ...], tuple[Skipped, ...]]:
    """Run ``task``'s reader: its images stacked as (n, *shape), their keys, the skipped.

    Raises
    ------
    IncompatibleImagesError
        When an image's shape or dtype differs from the array's, naming both images.
    """
    if isinstance(task, ArrayTask):
        stack = task.stack()
        return stack, (), ()
    decoded, skipped = task.decode_all()
    out = np.empty((len(decoded), *shape), dtype=dtype)
    for row, (key, image) in enumerate(decoded):
        if image.pixels.shape != shape or image.pixels.dtype != out.dtype:
            raise IncompatibleImagesError(
                f"images differ: {first} is {_describe(shape, dtype)} but {key} is "
                f"{_describe(image.pixels.shape, image.pixels.dtype)}; {_UNIFORM_HINT}")
        out[row] = image.pixels
    return out, tuple(key for key, _ in decoded), tuple(skipped)


def _describe(shape: tuple[int, ...], dtype: Any) -> str:
    return f"{'×'.join(map(str, shape))} {np.dtype(dtype)}"


def _pixels(chunk: tuple) -> np.ndarray:
    return chunk[0]


def _probe(tasks: list[Task]) -> tuple[tuple[int, ...], str, str]:
    """Shape, dtype and key of the first readable image (decoding as few as possible)."""
    for task in tasks:
        if isinstance(task, ArrayTask):
            stack = task.head(1).stack()
            return tuple(stack.shape[1:]), str(stack.dtype), "image 0"
        for count in sorted({1, min(task.size, _PROBE), task.size}):
            decoded, _ = task.head(count).decode_all()
            if decoded:
                key, image = decoded[0]
                return tuple(image.pixels.shape), str(image.pixels.dtype), key
    raise IncompatibleImagesError("no readable image to take the array's shape from")


def images(data: Any, *, mode: str = "RGB", layout: str | None = None,
           resize: int | None = None, center_crop: int | None = None,
           on_error: str = "skip", max_pixels: int | None = None,
           format: str | None = None, task_size: int | None = None,
           channels: tuple[str, ...] | None = None, max_file_bytes: int | None = None,
           allow_missing_chunks: bool = False) -> Any:
    """The pixels of any source as a lazy `dask.array.Array` (N, H, W, C), one chunk a task.

    Parameters
    ----------
    data : str, os.PathLike or array
        What `normstats.compute` reads: a folder, an IDX, CIFAR, tar, ``.npz``, ``.npy``
        or zarr file, a URL, or an array.
    mode, layout, resize, center_crop, max_pixels, max_file_bytes, format, channels
        As in `normstats.compute`; the pixels are exactly those it reduces.
    on_error : {"skip", "fail"}
        ``"skip"``: unreadable files are left out, so image-file chunks have unknown
        sizes (``nan``); `normstats.compute` of the array names them in ``skipped``.
        ``"fail"``: computing a chunk raises at its first unreadable file, with the reason.
    task_size : int, optional
        Images per chunk (default: the source's task size).
    allow_missing_chunks : bool
        Read the chunks a zarr store lacks as its fill value instead of refusing the store
        (as in `normstats.compute`).

    Returns
    -------
    dask.array.Array
        Chunked along N only. Images of several sizes raise `IncompatibleImagesError`
        naming two of them when a chunk is computed; ``resize`` with ``center_crop``
        makes them uniform, and `normstats.records` accepts any sizes.

    Examples
    --------
    >>> import numpy as np
    >>> x = images(np.zeros((10, 4, 4, 3), np.uint8), task_size=4)
    >>> x.shape, x.chunks[0]
    ((10, 4, 4, 3), (4, 4, 2))
    """
    import dask.array as da
    from dask.base import tokenize
    from dask.highlevelgraph import HighLevelGraph

    if on_error not in ("skip", "fail"):
        raise InvalidOptionError(f"on_error must be 'skip' or 'fail', got {on_error!r}")
    if allow_missing_chunks:
        data = allowing_missing_chunks(data, layout, channels)
    source = open_source(data, mode=mode, layout=layout, max_pixels=max_pixels,
                         fail_fast=on_error == "fail", channel_names=channels, format=format,
                         max_file_bytes=max_file_bytes)
    if isinstance(source, IterableSource):
        raise InvalidOptionError("an iterable has no random access to cut into chunks; pass "
                                 "it to normstats.compute, or stack it into an array")
    source = transformed_source(source, resize, center_crop)
    tasks = source.tasks(task_size, default_workers())
    if not tasks:
        raise IncompatibleImagesError(f"no images in {source.description}")
    shape, dtype, first = _probe(tasks)
    token = tokenize(source.description, source.mode, [repr(t) for t in tasks], on_error)
    name, decode = f"normstats-images-{token}", f"normstats-decode-{token}"
    layer = {(decode, i): (decode_chunk, task, shape, dtype, first)
             for i, task in enumerate(tasks)}
    known = on_error == "fail" or isinstance(tasks[0], ArrayTask)
    sizes = tuple(float(task.size) if known else np.nan for task in tasks)
    blocks = {(name, i) + (0,) * len(shape): (_pixels, (decode, i)) for i in range(len(tasks))}
    graph = HighLevelGraph({decode: layer, name: blocks},
                           {decode: set(), name: {decode}})
    chunks = (tuple(int(s) if known else s for s in sizes), *((n,) for n in shape))
    array = da.Array(graph, name, chunks, meta=np.empty((0,) * (1 + len(shape)), dtype))
    _SOURCES[name] = source
    _SOURCES.move_to_end(name)
    while len(_SOURCES) > _KEEP:
        _SOURCES.popitem(last=False)
    return array


def source_of(x: Any) -> Any:
    """The source an untouched `images` array reads, or None for any other array.

    An array that was persisted, sliced or transformed has other tasks and is None.
    """
    source = _SOURCES.get(getattr(x, "name", ""))
    if source is None:
        return None
    decode = x.name.replace("normstats-images-", "normstats-decode-", 1)
    layers = getattr(x.dask, "layers", {})
    return source if decode in layers and set(layers) == {x.name, decode} else None



def allowing_missing_chunks(data: Any, layout: str | None = None,
                            channel_names: tuple[str, ...] | None = None) -> Any:
    """The `ArraySource` that reads a zarr array's missing chunks as its fill value (and
    says how many images that made) when ``data`` is a zarr array or path; else ``data``.

    Examples
    --------
    >>> import zarr
    >>> z = zarr.create_array({}, shape=(4, 2, 2, 1), chunks=(2, 2, 2, 1), dtype="uint8")
    >>> z[:2] = 1
    >>> allowing_missing_chunks(z).filled_images
    2
    """
    vectors = getattr(data, "ndim", 0) == 2 and layout in (None, "NC")  # read as one array
    if is_zarr_array(data) or (isinstance(data, str | os.PathLike) and is_zarr_folder(data)) \
            or (vectors and type(data).__module__.startswith("dask")):
        return ArraySource(data, layout=layout, channel_names=channel_names,
                           allow_missing_chunks=True)
    return data


@contextmanager
def reading_zarr(x: Any, allow: bool) -> Iterator[str]:
    """Around the computation of Dask array ``x``: refuse it first when a zarr array it was
    made from lacks chunks (see `normstats.sources.zarr_chunks.holes_in`), else give the
    words a report adds (allowed holes); name the chunk that does not decode if it fails.

    Examples
    --------
    >>> import dask.array as da
    >>> with reading_zarr(da.zeros((2, 2)), allow=False) as note:
    ...     note
    ''
    """
    found = holes_in(x)
    if found and not allow:
        store, holes = found[0]
        raise holes.error(store)
    try:
        yield "; ".join(holes.note(store) for store, holes in found)
    except (NormstatsError, MemoryError):
        raise
    except Exception:
        for array in zarr_arrays_in_graph(x):  # the error path only: read chunk by chunk
            damaged = failing_chunk(array, 0, int(array.shape[0]))
            if damaged is not None:
                raise UnreadableInputError(f"zarr chunk {damaged[0]} cannot be read "
                                           f"({damaged[1]}): the store is damaged; copy it "
                                           "again", store_name(array)) from None
        raise
