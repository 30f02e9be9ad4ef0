"""The exact reduction of a Dask array of images, as a `dask.array.reduction`.

The shape of Dask's own ``moment_chunk`` / ``moment_combine`` / ``moment_agg``, with
normstats' exact steps:

- **chunk** (blockwise, so Dask fuses it with the tasks that make the block: a zarr read,
  a decode, a ``map_blocks``; and so that it can take the files the block's reader task
  skipped): a block becomes the per-image records of the pixels it holds (one vectorised
  `stack_records` call: pixel counts, Σx and Σx² as int64 or float64 mean and M2, minimum,
  maximum). A block holding whole images becomes a `Part` at once: the records of its
  images, with those holding NaN or inf left out by position, or their exact `Summary`
  where the compiled pass made its totals as it read the block (uint8: microseconds, so
  the combines above merge summaries, not records).
- **combine** (``split_every``: every H, W and C block of 8 N-chunks, then 8 parts at a
  time): the records of the blocks holding the same images merge first (along H and W
  integer sums add exactly, float moments by Chan's pairwise update in float64; along C
  the channels go side by side); the records of the 8 N-chunks become one exact `Summary`
  in one call (summarising has a fixed cost per call), and summaries merge exactly, in order.
- **aggregate**: the last combine; `finish_summary` then names the images left out.

With the covariance asked (``Plan.cross``), the chunk step's records hold the channel
cross sums too; blocks split along C are joined first (``rechunk``: a pair of channels
must meet in one block), and along H and W integer cross sums add, float co-moments merge
by the same pairwise update ``C = C_a + C_b + δ_c·δ_d·n_a·n_b/n``.

Blocks are reduced where they live; records (a few hundred bytes per image) go to the
first combine, summaries above it. Integer data gives bit-identical statistics for every
chunking; floats do for chunks along N and C, and to ~1e-15 relative when images are
split along H or W.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from functools import partial, reduce
from typing import Any

import numpy as np

from normstats.errors import InvalidOptionError
from normstats.maths.image_moments import MAX_INTEGER_BITS
from normstats.maths.records import (
    NON_FINITE,
    FloatRecords,
    Records,
    Skipped,
    concat_records,
    cross_sums_wanted,
    default_channel_names,
    has_cross_sums,
    without_cross_sums,
)
from normstats.maths.summary import Summary, summarize, summarize_stack
from normstats.sources.arrays import as_nhwc, check_axes, layout_of, stack_records

__all__ = ["Plan", "Part", "is_dask_array", "as_image_blocks", "chunk_parts", "fresh_name",
           "reduce_parts", "merge_parts", "boxed", "finish_summary", "merge_pixel_parts",
           "join_channels"]

#: Parts merged by one combine task along N (Dask's ``split_every``).
FAN_IN = 8


@dataclass(frozen=True)
class Plan:
    """What the steps know of the array, fixed when the graph is built.

    Channels keep their default names (L, or c0, c1, ...) in every step: names are a
    matter of the report, given once at the end.

    Attributes
    ----------
    whole : bool
        Every block holds whole images (one block across H, W and C).
    collect : bool
        Keep the per-image records (`normstats.records`) instead of summarising them.
    cross : bool
        The records hold the channel cross sums (the covariance was asked).
    """

    whole: bool = True
    collect: bool = False
    cross: bool = False


@dataclass(frozen=True)
class Part:
    """A run of consecutive images of the array, reduced: what each step hands the next.

    Attributes
    ----------
    rows : int
        Images in the run, those left out included, so that they are named by position.
    value : Records or Summary or None
        The records of the images kept (their exact summary above the first combine, unless
        collecting), or None.
    dropped : tuple of int
        Positions in the run of the images left out for holding NaN or inf.
    skipped : tuple of Skipped
        Files the reader tasks of these blocks skipped (arrays made by `images`).
    """

    rows: int
    value: Summary | Records | None = None
    dropped: tuple[int, ...] = ()
    skipped: tuple[Skipped, ...] = ()


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
    layout = layout_of(shape, layout)
    if layout in ("HWC", "CHW", "HW"):
        raise InvalidOptionError(f"a Dask array of one image ({layout}) has nothing to "
                                 "chunk; pass it as a numpy array")
    check_axes(shape, layout, "dask array")
    kind = np.dtype(x.dtype).kind
    if kind not in "biuf" or (kind in "iu" and x.dtype.itemsize * 8 > MAX_INTEGER_BITS):
        raise InvalidOptionError(f"{x.dtype} arrays have no exact statistics here (integers "
                                 "of at most 16 bits, bool or float); convert with astype")
    return as_nhwc(x, layout), layout


def boxed(value: Any, ndim: int = 4) -> np.ndarray:
    """``value`` as the one element of an object array: what a Dask block of objects is."""
    out = np.empty((1,) * ndim, dtype=object)
    out[(0,) * ndim] = value
    return out


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
            co = None
            if has_cross_sums(total) and has_cross_sums(part):
                rows, cols = np.triu_indices(total.channels, 1)
                co = total.co_moments + part.co_moments + \
                    delta[:, rows] * delta[:, cols] * (na * nb / n)
            total = total.replaced(pixels=pixels, means=means, m2s=m2s, minimum=low,
                                   maximum=high, residuals=np.zeros_like(means), co_moments=co)
        else:
            cross = total.cross_sums + part.cross_sums \
                if has_cross_sums(total) and has_cross_sums(part) else None
            total = total.replaced(pixels=pixels, sums=total.sums + part.sums,
                                   sums_sq=total.sums_sq + part.sums_sq, minimum=low,
                                   maximum=high, cross_sums=cross)
    return total


def join_channels(parts: list[Records]) -> Records:
    """Records of the same images whose channels came in separate blocks, side by side."""
    first = parts[0]
    if len(parts) == 1:
        return first
    parts = [without_cross_sums(p) for p in parts]  # pairs across blocks were never made
    first = parts[0]
    arrays = {name: np.concatenate([getattr(p, name) for p in parts], axis=1)
              for name in first.array_fields() if getattr(first, name).ndim == 2}
    channels = sum(p.channels for p in parts)
    return first.replaced(channel_names=default_channel_names(channels), **arrays)


def _image_part(records: Records, plan: Plan, skipped: tuple[Skipped, ...] = ()) -> Part:
    """The `Part` of whole images: the finite ones summarised (or kept), the others dropped."""
    dropped: tuple[int, ...] = ()
    if not records.dtype.startswith(("uint", "int", "bool")):
        finite = (np.isfinite(records.minimum) & np.isfinite(records.maximum)).all(axis=1)
        if not finite.all():
            dropped = tuple(int(i) for i in np.flatnonzero(~finite))
            records = records.take(finite)
    return Part(len(records) + len(dropped), records if len(records) else None, dropped, skipped)


def _chunk(block: np.ndarray, lost: np.ndarray | None = None, *, plan: Plan) -> np.ndarray:
    """Chunk step: a block's records, or the `Part` of its images when it holds them whole.

    ``lost`` holds the files skipped by the one reader task that made this block.
    """
    skipped = () if lost is None else lost.item()
    block = np.asarray(block)
    if plan.whole and not plan.collect:
        # 8-bit blocks: the summary straight from the pass that reads them, no records
        with cross_sums_wanted(plan.cross):
            summary = summarize_stack(block)
        if summary is not None:
            return boxed(Part(len(block), summary if len(block) else None, (), skipped))
    with np.errstate(invalid="ignore", over="ignore"), cross_sums_wanted(plan.cross):
        records = stack_records(block)  # NaN images are named, then dropped
    if not plan.whole:
        return boxed(records)
    part = _image_part(records, plan, skipped)
    if not plan.collect and _summarized_as_read(part.value):
        # the pass that read the block made its totals: its summary costs microseconds
        # here, where summarising 8 blocks' records in a combine costs milliseconds with
        # the GIL held (the GIL is what reading a zarr store runs short of)
        part = replace(part, value=summarize(part.value))
    return boxed(part)


def _summarized_as_read(records: Records | None) -> bool:
    """True for records whose exact summary the compiled pass made as it read them."""
    kernel = getattr(records, "kernel_totals", None)
    return kernel is not None and kernel.covers(records.pixels, records.sums)


def _n_chunk_part(cells: list, plan: Plan) -> Part:
    """The `Part` of one N-chunk from its [H][W][C] nested blocks (records or one part)."""
    first = cells[0][0][0].item()
    if isinstance(first, Part):  # the blocks held whole images, or a lower combine ran
        return first
    h, w, c = len(cells), len(cells[0]), len(cells[0][0])
    # C-major: all H×W blocks of the first channel block, then the next channel block
    groups = [merge_pixel_parts(*(cells[i][j][k].item() for i in range(h) for j in range(w)))
              for k in range(c)]
    return _image_part(join_channels(groups), plan)


def merge_parts(parts: list[Part]) -> Part:
    """Consecutive parts as one, exactly: sums merge, positions shift, files concatenate.

    Examples
    --------
    >>> merge_parts([Part(3, dropped=(1,)), Part(2, dropped=(0,))]).dropped
    (1, 3)
    """
    rows, dropped, values, skipped = 0, [], [], []
    for part in parts:
        dropped.extend(rows + i for i in part.dropped)
        rows += part.rows
        skipped.extend(part.skipped)
        if part.value is not None:
            values.append(part.value)
    if not values:
        value = None
    elif any(isinstance(v, Summary) for v in values):
        value = reduce(Summary.merge, [v if isinstance(v, Summary) else summarize(v)
                                       for v in values])
    else:
        value = concat_records(values)
    return Part(rows, value, tuple(dropped), tuple(skipped))


def _combine(nested: list, axis: Any = None, keepdims: bool = True, *, plan: Plan) -> np.ndarray:
    """Combine step: nested [N][H][W][C] blocks of 8 N-chunks to one `Part`."""
    part = merge_parts([_n_chunk_part(cells, plan) for cells in nested])
    if plan.collect or isinstance(part.value, Summary):
        return boxed(part)
    return boxed(replace(part, value=summarize(part.value)))


def _aggregate(nested: list, axis: Any = None, keepdims: bool = False, *,
               plan: Plan) -> np.ndarray:
    """Aggregate step: the last combine, as a 0-d block."""
    return boxed(_combine(nested, plan=plan).item(), 0)


def _keep(block: np.ndarray, axis: Any = None, keepdims: bool = True) -> np.ndarray:
    return block  # the chunk step ran blockwise already (it may read a reader's skipped files)


def chunk_parts(x: Any, plan: Plan, lost: Any = None) -> Any:
    """The chunk step over (N, H, W, C) Dask array ``x``: an object array, one block a block.

    ``lost`` (optional) is a Dask object array with one block per N-chunk of ``x``: the
    files skipped by the reader task that made that chunk (see `normstats.engine.dask.images`).
    """
    import dask.array as da

    args = [x, "ijkl"] + ([lost, "i"] if lost is not None else [])
    return da.blockwise(partial(_chunk, plan=plan), "ijkl", *args, dtype=object,
                        align_arrays=False, adjust_chunks=dict.fromkeys("ijkl", 1),
                        meta=np.empty((0,) * 4, dtype=object), name=fresh_name("chunk"))


def fresh_name(step: str) -> str:
    """A key name of its own for each reduction built: a cluster still holding the parts of
    an earlier reduction (files since changed, a retried run) never answers this one."""
    return f"normstats-{step}-{uuid.uuid4().hex}"


def reduce_parts(parts: Any, plan: Plan) -> Any:
    """The 0-d Dask array of one `Part`: `dask.array.reduction` of the chunk step's blocks.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> x = da.from_array(np.arange(96, dtype=np.uint8).reshape(2, 4, 4, 3), chunks=(1, 2, 4, 1))
    >>> plan = Plan(whole=False)
    >>> part = reduce_parts(chunk_parts(x, plan), plan).compute(scheduler="sync").item()
    >>> part.rows, part.value.moments.total
    (2, (1488, 1520, 1552))
    """
    import dask.array as da

    # the first combine takes every H, W and C block of its N-chunks: whole images
    every = {0: FAN_IN, **{axis: max(1, parts.numblocks[axis]) for axis in (1, 2, 3)}}
    return da.reduction(parts, _keep, partial(_aggregate, plan=plan),
                        combine=partial(_combine, plan=plan), split_every=every,
                        concatenate=False, dtype=object, meta=np.empty((), dtype=object),
                        name="normstats-reduce")


def finish_summary(part: Part, name: str, skipped: tuple[Skipped, ...] = ()) -> Summary:
    """The `Summary` of a whole array's `Part`: files skipped, then images dropped by index.

    Examples
    --------
    >>> finish_summary(Part(4, dropped=(2,)), "array").skipped[0].path
    'array[2]'
    """
    named = tuple(Skipped(f"{name}[{i}]", NON_FINITE) for i in part.dropped)
    lost = part.skipped + tuple(skipped) + named
    value = part.value if isinstance(part.value, Summary) else Summary()
    return replace(value, skipped=lost)
