"""The exact reduction as a Dask reduction over the blocks of any Dask array.

A chunk step turns each block into per-image records of the pixels it holds (one
vectorised `records_from_stack` call: an (n, c) table of pixel counts, Σx and Σx² or
float64 (mean, M2), minimum and maximum); a combine step merges the records of the
blocks that hold parts of the same images (along H and W: integer sums add exactly,
float moments by Chan's pairwise update; along C: channels side by side) and turns
whole-image records into an exact `Summary`; a tree of fan-in 8 merges the summaries
along N. Every step is a task of the array's own graph, so blocks are reduced where
they live (threads, processes or the workers of a ``distributed`` cluster) and only
summaries travel. For integer data every chunking gives bit-identical statistics;
for floats, chunking along N or C does, and a split along H or W merges per-image
moments in float64.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

import dask
import numpy as np
from dask.delayed import Delayed, delayed

from normstats.engine.cluster import connect, is_distributed
from normstats.engine.pipeline import default_workers
from normstats.engine.process_pool import process_pool
from normstats.errors import InvalidOptionError
from normstats.maths.image_moments import MAX_INTEGER_BITS
from normstats.maths.records import (
    FloatRecords,
    Records,
    Skipped,
    concat_records,
    default_channel_names,
)
from normstats.maths.summary import Summary, summarize
from normstats.sources.arrays import (
    as_nhwc,
    check_axes,
    check_layout,
    detect_layout,
    stack_records,
)

__all__ = ["is_dask_array", "as_image_blocks", "summary_graph", "run_graph", "local_scheduler",
           "merge_pixel_parts", "join_channels"]

_FAN_IN = 8
_NON_FINITE = "contains NaN or infinite values"


def is_dask_array(data: Any) -> bool:
    """True for a `dask.array.Array` (without importing dask.array for other inputs).

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> is_dask_array(da.zeros((2, 2))), is_dask_array(np.zeros((2, 2)))
    (True, False)
    """
    return type(data).__module__.startswith("dask.array") and hasattr(data, "to_delayed")


def as_image_blocks(x: Any, layout: str | None = None) -> tuple[Any, str]:
    """View a Dask array in ``layout`` (detected when omitted) as (N, H, W, C) images.

    Raises
    ------
    InvalidOptionError
        For a layout that does not fit, or a dtype that has no exact statistics.
    """
    shape = tuple(x.shape)
    layout = check_layout(layout, len(shape)) if layout else detect_layout(shape)
    if layout in ("HWC", "CHW", "HW"):
        raise InvalidOptionError(f"a Dask array of one image ({layout}) has nothing to "
                                 "chunk; pass it as a numpy array")
    check_axes(shape, layout, "dask array")
    kind = np.dtype(x.dtype).kind
    if kind not in "biuf" or (kind in "iu" and x.dtype.itemsize * 8 > MAX_INTEGER_BITS):
        raise InvalidOptionError(f"{x.dtype} arrays have no exact statistics here (integers "
                                 "of at most 16 bits, bool or float); convert with astype")
    return as_nhwc(x, layout), layout


def _block_records(block: np.ndarray, names: tuple[str, ...] | None) -> Records:
    with np.errstate(invalid="ignore", over="ignore"):  # NaN images are named, then dropped
        return stack_records(np.asarray(block), channel_names=names)


def merge_pixel_parts(*parts: Records) -> Records:
    """Records of the same images from blocks holding different pixels (H or W splits).

    Integer Σx, Σx² and pixel counts add exactly; float (mean, M2) merge by Chan,
    Golub and LeVeque's pairwise update in float64; minima and maxima fold.
    """
    total = parts[0]
    for part in parts[1:]:
        low, high = np.minimum(total.minimum, part.minimum), np.maximum(total.maximum,
                                                                         part.maximum)
        pixels = total.pixels + part.pixels
        if isinstance(total, FloatRecords):
            na, nb = total.pixels[:, None].astype(np.float64), part.pixels[:, None]
            mean_a, mean_b = total.means + total.residuals, part.means + part.residuals
            delta = mean_b - mean_a
            n = na + nb
            means = mean_a + delta * (nb / n)
            m2s = total.m2s + part.m2s + delta * delta * (na * nb / n)
            total = replace(total, pixels=pixels, means=means, m2s=m2s, minimum=low,
                            maximum=high, residuals=np.zeros_like(means))
        else:
            total = replace(total, pixels=pixels, sums=total.sums + part.sums,
                            sums_sq=total.sums_sq + part.sums_sq, minimum=low, maximum=high)
    return total


def join_channels(parts: list[Records], names: tuple[str, ...] | None) -> Records:
    """Records of the same images whose channels came in separate blocks, side by side."""
    first = parts[0]
    if len(parts) == 1:
        return first if names is None else replace(first, channel_names=names)
    arrays = {name: np.concatenate([getattr(p, name) for p in parts], axis=1)
              for name in first.array_fields() if getattr(first, name).ndim == 2}
    channels = sum(p.channels for p in parts)
    return replace(first, channel_names=names or default_channel_names(channels), **arrays)


def finite_rows(records: Records, name: str, start: int | None,
                block: int) -> tuple[Records | None, tuple[Skipped, ...], np.ndarray]:
    """Drop (and name) the images holding NaN or inf, as the array reader does.

    Also returns the positions, within the block, of the images kept.
    """
    kept = np.arange(len(records))
    if records.dtype.startswith(("uint", "int", "bool")):
        return records, (), kept
    finite = (np.isfinite(records.minimum) & np.isfinite(records.maximum)).all(axis=1)
    if finite.all():
        return records, (), kept
    where = (lambda i: f"{name}[{start + i}]") if start is not None else \
        (lambda i: f"{name}[block {block}, image {i}]")
    skipped = tuple(Skipped(where(int(i)), _NON_FINITE) for i in np.flatnonzero(~finite))
    return (records.take(finite) if finite.any() else None), skipped, kept[finite]


def _image_part(name: str, start: int | None, block: int, names: tuple[str, ...] | None,
                counts: tuple[int, ...], *blocks: Any) -> tuple[Records | None, tuple]:
    """Whole-image records of one N-chunk from its blocks, and the images skipped."""
    records, skipped, _ = image_records(name, start, block, names, counts, *blocks)
    return records, skipped


def image_records(name: str, start: int | None, block: int, names: tuple[str, ...] | None,
                  counts: tuple[int, ...], *blocks: Any
                  ) -> tuple[Records | None, tuple[Skipped, ...], np.ndarray]:
    """Records of the whole images of one N-chunk, from its blocks in C-major groups.

    ``counts[k]`` blocks (the H×W blocks of channel block k) follow one another.
    Returns the records of the finite images, the skipped ones, and the kept positions.
    """
    groups, rest = [], list(blocks)
    for count in counts:
        groups.append(merge_pixel_parts(*(_block_records(b, None) for b in rest[:count])))
        rest = rest[count:]
    return finite_rows(join_channels(groups, names), name, start, block)


def _merge(*summaries: Summary) -> Summary:
    total = summaries[0]
    for summary in summaries[1:]:
        total = total.merge(summary)
    return total


def _offsets(chunks: tuple[float, ...]) -> list[int | None]:
    starts, at = [], 0.0
    for size in chunks:
        starts.append(None if np.isnan(at) else int(at))
        at += size
    return starts


def block_tasks(x: Any) -> list[tuple[int, int | None, list[Delayed], tuple[int, ...]]]:
    """For each N-chunk: its index, first image (None if unknown), blocks, C-group sizes."""
    blocks = x.to_delayed()
    starts = _offsets(x.chunks[0])
    out = []
    for i in range(blocks.shape[0]):
        row = blocks[i]
        # C-major: all H×W blocks of the first channel block, then the next channel block
        groups = [row[:, :, k].ravel().tolist() for k in range(row.shape[2])]
        out.append((i, starts[i], [b for g in groups for b in g], tuple(len(g) for g in groups)))
    return out


def _records_block(block: np.ndarray, name: str, names: tuple[str, ...] | None,
                   block_info: dict | None = None) -> np.ndarray:
    """Chunk step of whole-image blocks: (records, skipped) in a 1-element array."""
    where = (block_info or {}).get(0, {})
    index = where.get("chunk-location", (0,))[0]
    start = where.get("array-location", [(np.nan,)])[0][0]
    start = None if start is None or np.isnan(start) else int(start)
    out = np.empty(1, dtype=object)
    out[0] = _image_part(name, start, index, names, (1,), block)
    return out


def _chunk_parts(x: Any, name: str, names: tuple[str, ...] | None, run: str) -> list:
    """One Delayed (records, skipped) per N-chunk of ``x`` (whole-image blocks: in an array).

    Blocks holding whole images are reduced by a blockwise step, which Dask fuses with
    the tasks that make the block (read, decode, map_blocks): the pixels never leave
    the task that made them. Blocks split along H, W or C are combined per N-chunk.
    """
    if x.numblocks[1:] == (1, 1, 1):
        parts = x.map_blocks(_records_block, name, names, dtype=object,
                             drop_axis=[1, 2, 3], chunks=((1,) * x.numblocks[0],),
                             meta=np.empty((0,), dtype=object), name=f"normstats-records-{run}")
        return list(parts.to_delayed().ravel())
    return [delayed(_image_part, pure=True)(name, start, i, names, counts, *blocks,
                                            dask_key_name=f"normstats-records-{run}-{i}")
            for i, start, blocks, counts in block_tasks(x)]


def _summarize_parts(*parts: Any) -> Summary:
    """First combine level: the records of up to 8 chunks summarised in one exact call."""
    pairs = [p[0] if isinstance(p, np.ndarray) else p for p in parts]
    batches = [records for records, _ in pairs if records is not None]
    skipped = tuple(s for _, lost in pairs for s in lost)
    return summarize(concat_records(batches) if batches else None, skipped)


def summary_graph(x: Any, name: str = "array",
                  channel_names: tuple[str, ...] | None = None) -> Delayed:
    """One Delayed `Summary` of an (N, H, W, C) Dask array, built on its own graph.

    Chunk records (a few hundred bytes per image) go to the first combine level, which
    summarises groups of 8 chunks; the levels above merge summaries only.
    """
    # a fresh name per call: a result is never taken from an earlier run's keys
    run = f"{x.name}-{uuid.uuid4().hex[:8]}"
    parts = _chunk_parts(x, name, channel_names, run)
    if not parts:
        return delayed(Summary)()
    parts = [delayed(_summarize_parts, pure=True)(*parts[j:j + _FAN_IN],
                                                  dask_key_name=f"normstats-summary-{run}-{j}")
             for j in range(0, len(parts), _FAN_IN)]
    level = 0
    while len(parts) > 1:
        level += 1
        parts = [delayed(_merge, pure=True)(*parts[j:j + _FAN_IN],
                                            dask_key_name=f"normstats-merge-{run}-{level}-{j}")
                 for j in range(0, len(parts), _FAN_IN)]
    return parts[0]


def run_graph(graph: Any, scheduler: Any = None, workers: int | None = None) -> Any:
    """Compute ``graph`` on ``scheduler``: a local one by name, a cluster, or Dask's default.

    With no scheduler, Dask's own choice applies (an active ``distributed.Client``, the
    ``dask.config`` scheduler, or threads).
    """
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


def reduce_dask_array(x: Any, *, layout: str | None = None,
                      channel_names: tuple[str, ...] | None = None, scheduler: Any = None,
                      workers: int | None = None) -> Summary:
    """The exact `Summary` of a Dask array of images, reduced block by block.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> x = da.from_array(np.arange(96, dtype=np.uint8).reshape(2, 4, 4, 3), chunks=(1, 2, 4, 1))
    >>> reduce_dask_array(x, scheduler="sync").moments.total
    (1488, 1520, 1552)
    """
    images, _ = as_image_blocks(x, layout)
    return run_graph(summary_graph(images, "array", channel_names), scheduler, workers)
