"""Readers as Dask arrays: `images` gives any source's pixels as a lazy (N, H, W, C) array.

Each source task (a run of files, a shard's members, a slice of an array) becomes one
chunk, decoded when the chunk is computed by the same task object, decode policy and
transforms that `normstats.compute` runs, so the pixels are exactly those it reduces.

The array carries its provenance in its own graph, in three layers: the reader tasks (a
`ReaderLayer`, which holds the source), a decode layer whose tasks return (pixels, keys,
skipped files), and the array's layer that takes the pixels. Every Dask operation keeps
the layers of the arrays it reads (``x[:]`` is ``x``; ``rechunk``, ``concatenate``,
``map_blocks`` build on them), so the reduction of any array made from `images` finds
the reader tasks it runs and reports the files they skipped (`reader_skips`), and
`normstats.compute` of an untouched `images` array runs its source through the one
engine (pipeline, cache, cluster) instead (`untouched_source`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Unpack

import numpy as np
from dask.highlevelgraph import MaterializedLayer

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
from normstats.sources.iterable import IterableSource
from normstats.sources.options import ReadArguments, ReadOptions, read_options
from normstats.sources.zarr_chunks import (
    failing_chunk,
    holes_in,
    is_zarr_array,
    store_name,
    zarr_arrays_in_graph,
)

__all__ = ["images", "decode_chunk", "ReaderLayer", "readers_in", "reader_skips",
           "untouched_source", "allowing_missing_chunks", "zarr_note", "reading_zarr"]

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


def _boxed(value: Any) -> np.ndarray:
    out = np.empty(1, dtype=object)
    out[0] = value
    return out


def _decode_block(tasks: np.ndarray, shape: tuple[int, ...], dtype: str,
                  first: str) -> np.ndarray:
    return _boxed(decode_chunk(tasks.item(), shape, dtype, first))


def _pixels_block(decoded: np.ndarray) -> np.ndarray:
    return decoded.item()[0]


def _skipped_block(decoded: np.ndarray) -> np.ndarray:
    return _boxed(decoded.item()[2])


_OBJECTS = np.empty((0,), dtype=object)


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


def images(data: Any, *, options: ReadOptions | None = None, task_size: int | None = None,
           workers: int | None = None, **read: Unpack[ReadArguments]) -> Any:
    """The pixels of any source as a lazy `dask.array.Array` (N, H, W, C), one chunk a task.

    Parameters
    ----------
    data : str, os.PathLike or array
        What `normstats.compute` reads: a folder, an IDX, CIFAR, tar, ``.npz``, ``.npy``
        or zarr file, a URL, or an array.
    options : ReadOptions, optional
        How the data is read, as in `normstats.compute`; the pixels are exactly those it
        reduces. Pixels keep their dtype: ``scale`` applies to statistics, not to them.
        With ``on_error="skip"`` unreadable files are left out, so image-file chunks have
        unknown sizes (``nan``) and `normstats.compute` of the array names them in
        ``skipped``; with ``"fail"`` computing a chunk raises at its first unreadable file.
    **read
        The same options as keyword arguments (beside ``options``, they replace its fields).
    task_size : int, optional
        Images per chunk (default: the source's task size for ``workers``).
    workers : int, optional
        The workers the chunks are cut for (default: the usable CPUs), as
        `normstats.compute` cuts its tasks.

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

    options = read_options(options, dict(read))
    on_error = options.on_error
    if options.allow_missing_chunks:
        data = allowing_missing_chunks(data, options.layout, options.channels)
    source = open_source(data, options=options)
    if isinstance(source, IterableSource):
        raise InvalidOptionError("an iterable has no random access to cut into chunks; pass "
                                 "it to normstats.compute, or stack it into an array")
    tasks = source.tasks(task_size, workers or default_workers())
    if not tasks:
        raise IncompatibleImagesError(f"no images in {source.description}")
    shape, dtype, first = _probe(tasks)
    token = tokenize(source.description, source.mode, [repr(t) for t in tasks], on_error)
    read, decode, name = (f"normstats-{part}-{token}" for part in ("read", "decode", "images"))
    layer = ReaderLayer({(read, i): _boxed(task) for i, task in enumerate(tasks)},
                        source=source, decode=decode, pixels=name)
    readers = da.Array(HighLevelGraph({read: layer}, {read: set()}), read,
                       ((1,) * len(tasks),), meta=_OBJECTS)
    # blockwise layers: Dask fuses the decode with whatever uses its pixels (the reduction)
    decoded = readers.map_blocks(_decode_block, shape, dtype, first, name=decode,
                                 dtype=object, meta=_OBJECTS)
    known = on_error == "fail" or isinstance(tasks[0], ArrayTask)
    sizes = tuple(task.size if known else np.nan for task in tasks)
    return decoded.map_blocks(_pixels_block, name=name, new_axis=list(range(1, 1 + len(shape))),
                              chunks=(sizes, *((n,) for n in shape)), dtype=dtype,
                              meta=np.empty((0,) * (1 + len(shape)), dtype))


class ReaderLayer(MaterializedLayer):
    """The reader tasks of an `images` array, one per chunk, and the source they read.

    Attributes
    ----------
    source : Source
        What the tasks read (its ``description`` names it in reports).
    decode, pixels : str
        Names of the layers that decode the tasks and that take their pixels (the array).
    """

    def __init__(self, mapping: dict, *, source: Any, decode: str, pixels: str) -> None:
        super().__init__(mapping)
        self.source, self.decode, self.pixels = source, decode, pixels


def readers_in(x: Any) -> list[tuple[str, ReaderLayer]]:
    """The reader layers (name, layer) in Dask array ``x``'s graph, in the graph's order
    (that of the operands: ``concatenate([a, b])`` lists ``a``'s first).

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> a = images(np.zeros((4, 2, 2, 1), np.uint8))
    >>> len(readers_in(da.concatenate([a, a + 1]))), readers_in(da.zeros(3))
    (1, [])
    """
    layers = getattr(getattr(x, "dask", None), "layers", {})
    return [(name, layer) for name, layer in layers.items() if isinstance(layer, ReaderLayer)]


def untouched_source(x: Any) -> Any:
    """The source of an `images` array as `images` made it (``x[:]`` is the same array),
    or None for any other array, derived or persisted.

    Examples
    --------
    >>> import numpy as np
    >>> x = images(np.zeros((4, 2, 2, 1), np.uint8))
    >>> untouched_source(x[:]) is not None, untouched_source(x + 1)
    (True, None)
    """
    found = [layer for _, layer in readers_in(x) if layer.pixels == getattr(x, "name", None)]
    return found[0].source if found else None


def reader_skips(x: Any) -> list[Any]:
    """For each reader layer of ``x``: a Dask object array with one block per reader task
    that ``x`` runs, in order, holding the files that task skipped.

    Computing it with the reduction of ``x`` (one graph) decodes each task once.

    Examples
    --------
    >>> import numpy as np
    >>> x = images(np.zeros((10, 2, 2, 1), np.uint8), task_size=4)
    >>> [s.numblocks for s in reader_skips(x[:5])], reader_skips(x)[0].compute().tolist()
    ([(2,)], [(), (), ()])
    """
    import dask.array as da
    from dask.core import flatten
    from dask.optimization import cull

    readers = readers_in(x)
    if not readers:
        return []
    # the tasks x runs (a slice runs fewer): its tasks culled to those its keys need
    kept, _ = cull(dict(x.__dask_graph__()), list(flatten(x.__dask_keys__())))
    out = []
    for name, layer in readers:
        count = len(layer)
        decoded = da.Array(x.dask.cull_layers([layer.decode]), layer.decode, ((1,) * count,),
                           meta=_OBJECTS)
        skips = decoded.map_blocks(_skipped_block, dtype=object, meta=_OBJECTS)
        run = [i for i in range(count) if (name, i) in kept]
        if run:
            out.append(skips if len(run) == count else skips.blocks[run])
    return out


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


def zarr_note(x: Any, allow: bool) -> str:
    """Refuse Dask array ``x`` when a zarr array it was made from lacks chunks (see
    `normstats.sources.zarr_chunks.holes_in`) unless ``allow``; else the words a report
    adds (the holes allowed), or "".

    Examples
    --------
    >>> import dask.array as da
    >>> zarr_note(da.zeros((2, 2)), allow=False)
    ''
    """
    found = holes_in(x)
    if found and not allow:
        store, holes = found[0]
        raise holes.error(store)
    return "; ".join(holes.note(store) for store, holes in found)


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
    note = zarr_note(x, allow)
    try:
        yield note
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
