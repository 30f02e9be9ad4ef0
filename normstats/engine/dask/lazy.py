"""The reduction of a Dask array as one lazy Dask object: its statistics, or its records.

`lazy_stats` puts together what `normstats.reduce_lazy` and `normstats.compute` of a Dask
array run: the exact reduction of the blocks (`normstats.engine.dask.reduce`) and the
files the array's reader tasks skipped (`normstats.engine.dask.images.reader_skips`), in
one graph that Dask optimizes as a whole, so a reader task is fused with the steps that
use its pixels and runs once. The result is a `dask.delayed.Delayed`: ``dask.compute``
of several reduces them in one graph, ``dask.persist`` keeps them; `run_graph` computes
one on the scheduler a call names.

When the array's N-chunks are exactly the chunks of one `images` array (untouched,
``map_blocks``, element-wise operations, a slice along N at chunk boundaries), each
chunk step carries its reader task's skipped files and Dask fuses the whole chain into
one task per chunk; otherwise (``rechunk``, ``concatenate``, several sources) a small
task per reader task reads them beside.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from normstats.engine.cluster import connect, default_client, is_distributed
from normstats.engine.dask.images import reader_skips, readers_in, reading_zarr
from normstats.engine.dask.reduce import (
    Part,
    Plan,
    as_image_blocks,
    chunk_parts,
    finish_summary,
    reduce_parts,
)
from normstats.engine.pipeline import default_workers
from normstats.engine.process_pool import process_pool
from normstats.errors import InvalidOptionError
from normstats.maths.records import Skipped
from normstats.results.stats import DatasetStats
from normstats.sources.zarr_chunks import refuse_relative_stores

__all__ = ["finished", "lazy_result", "finish_stats", "lazy_stats", "compute_dask_array",
           "describe", "run_graph", "local_scheduler"]


def _finish(box: np.ndarray, *lost: np.ndarray, then: Any) -> Any:
    skipped = tuple(s for block in lost for s in block.item())
    return then(box.item(), skipped)


def finished(part: Any, beside: list[Any], then: Any) -> Any:
    """A Delayed of ``then(part, skipped)``: ``part`` a 0-d Dask array of a `Part`, and
    ``skipped`` the files held by the ``beside`` arrays of `reader_skips`."""
    import dask.array as da
    from dask.base import tokenize
    from dask.core import flatten
    from dask.highlevelgraph import HighLevelGraph

    name = "normstats-finish-" + tokenize(part, *beside, then)
    keys = [key for lost in beside for key in flatten(lost.__dask_keys__())]
    graph = HighLevelGraph.from_collections(
        name, {(name,): (partial(_finish, then=then), (part.name,), *keys)},
        dependencies=[part, *beside])
    # an array collection, so that Dask's array optimization (fusion) covers the whole graph
    final = da.Array(graph, name, (), meta=np.empty((), dtype=object))
    return final.to_delayed(optimize_graph=True)[()]


def lazy_result(x: Any, blocks: Any, then: Any, collect: bool = False,
                covariance: bool = False) -> Any:
    """A Delayed of ``then(part, skipped)``: the reduced `Part` of Dask array ``x`` (viewed
    as (N, H, W, C) ``blocks``) and the files its reader tasks skipped beside it; with
    ``covariance``, the channel cross sums too (channel blocks joined first)."""
    if covariance and blocks.numblocks[3] > 1:
        blocks = blocks.rechunk({3: -1})  # every pair of channels in one block
    plan = Plan(whole=blocks.numblocks[1:] == (1, 1, 1), collect=collect, cross=covariance)
    skips = reader_skips(x)
    aligned = plan.whole and len(skips) == 1 and skips[0].numblocks[0] == blocks.numblocks[0]
    parts = chunk_parts(blocks, plan, skips[0] if aligned else None)
    return finished(reduce_parts(parts, plan), [] if aligned else skips, then)


def describe(x: Any, note: str = "") -> str:
    """What ``stats.source`` says of a Dask array: its shape and dtype, and what it reads."""
    sources = ", ".join(layer.source.description for _, layer in readers_in(x))
    return (f"dask array {tuple(x.shape)} {x.dtype}" + (f" of {sources}" if sources else "")
            + (f" ({note})" if note else ""))


def finish_stats(part: Part, skipped: tuple[Skipped, ...], *, scale: float | None,
                 channels: tuple[str, ...] | None, mode: str, source: str,
                 known: tuple[Skipped, ...] = (), kind: str = "images") -> DatasetStats:
    """The `DatasetStats` of a whole array's `Part` (``then`` of `finished`): the files
    ``known`` to be skipped already, those the reader tasks skipped, the images dropped."""
    summary = finish_summary(part, "array", tuple(known) + tuple(skipped))
    return DatasetStats.from_summary(summary, channels=channels, scale=scale, mode=mode,
                                     kind=kind, source=source)


def lazy_stats(x: Any, *, layout: str | None = None, scale: float | None = None,
               channels: tuple[str, ...] | None = None, note: str = "",
               covariance: bool = False) -> Any:
    """A Delayed `DatasetStats` of Dask array ``x``: see `normstats.reduce_lazy`.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> x = da.from_array(np.zeros((6, 4, 4, 3), np.uint8), chunks=(2, 4, 2, 3))
    >>> lazy_stats(x).compute(scheduler="sync").images
    6
    """
    blocks, layout = as_image_blocks(x, layout)
    if layout == "NC":
        raise InvalidOptionError("a Dask array of vectors (N, d) has per-feature statistics "
                                 "that ignore NaN: pass it to normstats.compute")
    then = partial(finish_stats, scale=scale, channels=channels, mode=layout,
                   source=describe(x, note))
    return lazy_result(x, blocks, then, covariance=covariance)


def compute_dask_array(x: Any, *, layout: str | None = None, scale: float | None = None,
                       channels: tuple[str, ...] | None = None, workers: int | None = None,
                       scheduler: Any = None, allow_missing_chunks: bool = False,
                       covariance: bool = False) -> DatasetStats:
    """`normstats.compute` of a Dask array: the exact reduction over its blocks, now.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> x = da.from_array(np.zeros((6, 4, 4, 3), np.uint8), chunks=(2, 4, 2, 3))
    >>> compute_dask_array(x, scheduler="sync").images
    6
    """
    with reading_zarr(x, allow_missing_chunks) as note:
        lazy = lazy_stats(x, layout=layout, scale=scale, channels=channels, note=note,
                          covariance=covariance)
        return run_graph(lazy, scheduler, workers)


def run_graph(graph: Any, scheduler: Any = None, workers: int | None = None) -> Any:
    """Compute ``graph`` on ``scheduler``: a local one by name, a cluster, or Dask's default.

    With no scheduler, Dask's own choice applies (an active ``distributed.Client``, the
    ``dask.config`` scheduler, or threads).
    """
    if is_distributed(scheduler) or (scheduler is None and default_client() is not None):
        refuse_relative_stores(graph)
    if is_distributed(scheduler):
        with connect(scheduler) as client:
            return client.gather(client.compute(graph, optimize_graph=False))
    options: dict[str, Any] = {}
    if scheduler is not None:
        if scheduler not in ("sync", "threads", "processes"):
            raise InvalidOptionError(f"unknown scheduler {scheduler!r}; choose sync, threads, "
                                     "processes, or a distributed Client or address")
        options["scheduler"] = local_scheduler(scheduler)
    if workers is not None and scheduler in (None, "threads", "processes"):
        options["num_workers"] = int(workers)
    import dask

    if scheduler == "processes":
        # the engine's forked pool: no re-import per worker, unlike dask's spawned one
        with process_pool(int(workers or default_workers())) as pool:
            (result,) = dask.compute(graph, optimize_graph=False, pool=pool, **options)
        return result
    (result,) = dask.compute(graph, optimize_graph=False, **options)
    return result


def local_scheduler(name: Any) -> Any:
    """Dask's get function for a local scheduler name; anything else as it is.

    Handing ``dask.compute`` the function instead of its name skips Dask's look for a
    default ``distributed`` client, which imports ``distributed`` (0.3 s) even when no
    cluster exists.

    Examples
    --------
    >>> local_scheduler("sync").__name__, local_scheduler("tcp://host:8786")
    ('get_sync', 'tcp://host:8786')
    """
    if name == "sync":
        from dask.local import get_sync

        return get_sync
    if name == "threads":
        from dask.threaded import get

        return get
    if name == "processes":
        from dask.multiprocessing import get

        return get
    return name
