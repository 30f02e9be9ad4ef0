"""Arrays of images or vectors: in memory, ``.npy`` files (memory-mapped) and zarr arrays.

Layouts are detected by a documented rule, and ``layout=`` overrides it:

=========  ==========================================================
ndim       detected layout
=========  ==========================================================
2          ``NC``: N vectors of d features (per-feature statistics)
3          ``NHW``: N single-channel images (MNIST-style)
4          ``NHWC`` if the last axis has 1, 3 or 4 entries (with one line on
           stderr when axis 1 has 1 or 3: torch's images 1 to 4 pixels wide),
           else ``NCHW`` if axis 1 has 1, 3 or 4 entries, else an error asking
           for ``layout``
=========  ==========================================================

``HWC`` and ``HW`` name a single image. Records are computed vectorised over a whole
task of images; ``.npy`` files are never loaded with ``allow_pickle``. A zarr array whose
store lacks chunks is refused unless ``allow_missing_chunks`` (see
`normstats.sources.zarr_chunks`); an array with a zero-length image axis has no pixels
and is refused too.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from normstats.errors import (
    IncompatibleImagesError,
    InvalidOptionError,
    NormstatsError,
    UnreadableInputError,
    numbered,
)
from normstats.maths.covariance import integer_cross_sums
from normstats.maths.fused import KERNEL_CHANNELS
from normstats.maths.masked import (
    NON_FINITE_VALID,
    masked_records,
    unusable_images,
    valid_values,
)
from normstats.maths.records import (
    FLOAT_LIMIT,
    NON_FINITE,
    TOO_LARGE_REASON,
    Records,
    Skipped,
    default_channel_names,
    records_from_stack,
    wants_cross_sums,
)
from normstats.maths.summary import Summary, summarize, summarize_stack
from normstats.sources.base import Task, TaskResult, split_evenly
from normstats.sources.zarr_chunks import (
    holes_in,
    is_zarr_array,
    read_rows,
    with_absolute_store,
)

__all__ = ["ArraySource", "ArrayTask", "detect_layout", "check_layout", "parse_layout",
           "layout_of",
           "not_an_array_reason",
           "split_staggered", "split_at_chunks",
           "LAYOUTS", "open_array",
           "stack_records", "usable_rows", "is_zarr_folder", "check_axes",
           "with_known_lengths"]

LAYOUTS = ("NHWC", "NCHW", "NHW", "NC", "HWC", "CHW", "HW")
_SINGLE = ("HWC", "CHW", "HW")
_AXIS_NAMES = {"N": "image", "H": "height", "W": "width", "C": "channel"}
_CHANNEL_COUNTS = (1, 3, 4)
log = logging.getLogger(__name__)
_TASK_BYTES = 64 << 20
_TASKS_PER_WORKER = 1
#: A zarr array's task: whole chunks (or shards), about this many bytes (`split_at_chunks`).
_ZARR_TASK_BYTES = 16 << 20


def detect_layout(shape: tuple[int, ...]) -> str:
    """The layout of an array of ``shape`` by the rule in this module's docstring.

    Examples
    --------
    >>> detect_layout((60000, 28, 28)), detect_layout((10, 32, 32, 3))
    ('NHW', 'NHWC')
    >>> detect_layout((10, 3, 32, 32))
    'NCHW'
    """
    if len(shape) == 2:
        return "NC"
    if len(shape) == 3:
        return "NHW"
    if len(shape) == 4:
        if shape[-1] in _CHANNEL_COUNTS:
            return "NHWC"
        if shape[1] in _CHANNEL_COUNTS:
            return "NCHW"
        raise InvalidOptionError(f"cannot tell the channel axis of shape {shape}; "
                                 "pass layout='NHWC' or 'NCHW' (--layout)")
    raise InvalidOptionError(f"an array of shape {shape} is not images (N, H, W[, C]) or "
                             "vectors (N, d)")


def layout_of(shape: tuple[int, ...], layout: str | None) -> str:
    """``layout`` checked against ``shape``, or (None) detected by the rule, with one line
    on stderr when the rule reads as grey images (N, H, W) a 3-d array shaped like one
    image: its first or last axis has 3 or 4 entries, as one image from Pillow ``(H, W, 3)``
    or from torch or rasterio ``(3, H, W)`` has. The rule stands (MNIST is (N, 28, 28)); the
    report would show the reading only by its counts ("8 images", channel L). So too when
    it reads as channels last a 4-d array whose axis 1 has 1 or 3 entries: torch's
    (N, 3, H, W) or (N, 1, H, W) of images 1, 3 or 4 pixels wide.

    Examples
    --------
    >>> layout_of((60000, 28, 28), None), layout_of((32, 32, 3), "HWC")
    ('NHW', 'HWC')
    """
    if layout:
        return check_layout(layout, len(shape))
    detected = detect_layout(shape)
    one_image = [f"of {numbered(count, 'channel')} ({', '.join(reading)}) pass layout={reading!r}"
                 for reading, count in (("HWC", shape[-1]), ("CHW", shape[0]))
                 if detected == "NHW" and count in _CHANNEL_COUNTS[1:]]
    if one_image:
        log.warning("normstats: an array of shape %s is read as %s (N, H, W), the rule for "
                    "3-d arrays; for one image %s (--layout)", shape,
                    numbered(shape[0], "grey image"), ", or ".join(one_image))
    if detected == "NHWC" and shape[1] in (1, 3):
        # (N, 3, H, W) or (N, 1, H, W) of width 1, 3 or 4: torch's NCHW read channels last
        log.warning("normstats: an array of shape %s is read as NHWC (%s on the last axis), "
                    "the rule for 4-d arrays; for images of %s on axis 1 (N, C, H, W) pass "
                    "layout='NCHW' (--layout)", shape, numbered(shape[-1], "channel"),
                    numbered(shape[1], "channel"))
    return detected


def parse_layout(layout: str | None) -> str | None:
    """A layout in capitals whatever the case it was typed in (None: detect it).

    Examples
    --------
    >>> parse_layout("nhwc"), parse_layout(None)
    ('NHWC', None)
    """
    if layout is None:
        return None
    if not isinstance(layout, str) or layout.upper() not in LAYOUTS:
        raise InvalidOptionError(f"unknown layout {layout!r}; choose one of {', '.join(LAYOUTS)}")
    return layout.upper()


def check_layout(layout: str, ndim: int) -> str:
    """``layout`` if it is known and fits a ``ndim``-d array, else a one-line error."""
    layout = parse_layout(layout)
    if len(layout) != ndim:
        raise InvalidOptionError(f"layout {layout} needs a {len(layout)}-d array, got {ndim}-d")
    return layout


def as_nhwc(block: np.ndarray, layout: str) -> np.ndarray:
    """View an array block in ``layout`` as (N, H, W, C) images; vectors become 1×1 images.

    Examples
    --------
    >>> as_nhwc(np.zeros((5, 3, 8, 9)), "NCHW").shape
    (5, 8, 9, 3)
    """
    single = {"HWC": "NHWC", "CHW": "NCHW", "HW": "NHW"}
    if layout in single:
        block, layout = block[None], single[layout]
    if layout == "NC":
        return block[:, None, None, :]
    if layout == "NHW":
        return block[..., None]
    if layout == "NCHW":
        return block.transpose(0, 2, 3, 1)
    return block


def not_an_array_reason(path: str, error: Exception,
                        storage_options: dict | None = None) -> str:
    """Why zarr could not open ``path`` as an array: a group's arrays named, one of which
    is the path to give (``store.zarr/train``), else zarr's own ``error``."""
    import zarr

    try:
        group = zarr.open_group(path, mode="r", storage_options=storage_options)
        arrays = sorted(group.array_keys())
    except Exception:  # noqa: BLE001 - not a group either: zarr's first answer stands
        return f"not a readable zarr array ({error})"
    if not arrays:
        return "a zarr group without arrays: no images to compute"
    shown = ", ".join(arrays[:8]) + (f" and {len(arrays) - 8} more" if len(arrays) > 8 else "")
    return (f"a zarr group, not an array: give the path of one of its arrays ({shown}), "
            f"e.g. {path.rstrip('/')}/{arrays[0]}")


def open_array(path: str) -> Any:
    """Open a ``.npy`` file (memory-mapped, no pickle) or a zarr array, read-only.

    Raises
    ------
    NormstatsError
        Naming the file when it is not a readable array.
    """
    if os.path.isdir(path):
        if not is_zarr_folder(path):
            raise NormstatsError("a folder without zarr array metadata (zarr.json or .zarray): "
                                 "not an array; give a .npy file or a zarr array", path=path)
        import zarr

        try:  # by its absolute path: the array pickles with its store's, for a cluster
            return zarr.open_array(os.path.abspath(path), mode="r")
        except Exception as error:  # noqa: BLE001 - zarr raises many types; all mean the same
            raise NormstatsError(not_an_array_reason(path, error), path=path) from None
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except ValueError as error:
        if "mmap length is greater than file size" in str(error):
            raise NormstatsError("truncated .npy file: its header's shape needs more bytes than "
                                 "the file holds", path=path) from None
        if "malformed node" in str(error):  # the header names code, not a plain literal
            error = "its header is not a plain Python literal"
        elif "Cannot parse header" in str(error):  # numpy's wrapping of a SyntaxError
            error = "its header cannot be parsed: SyntaxError"
        raise NormstatsError(f"not a plain .npy array ({error})", path=path) from None
    except OSError as error:
        raise NormstatsError(f"cannot read .npy file ({error})", path=path) from None
    except Exception as error:  # noqa: BLE001 - a broken header raises SyntaxError, TokenError...
        raise NormstatsError(f"not a plain .npy array (its header cannot be parsed: "
                             f"{type(error).__name__})", path=path) from None
    _check_npy_length(array, path)
    return array


def _check_npy_length(array: Any, path: str) -> None:
    """Refuse a ``.npy`` whose data runs past what its header claims.

    numpy maps only the bytes the header's shape needs and ignores the rest, so a header
    that understates the image count would silently leave images out (IDX and ``.npz``
    members are held to the same exact-size rule).
    """
    offset = getattr(array, "offset", None)
    if offset is None:
        return
    held = os.path.getsize(path) - offset
    if held != array.nbytes:
        raise NormstatsError(f"header claims shape {array.shape} {array.dtype} = "
                             f"{array.nbytes:,} bytes but the file holds {held:,}: the header "
                             "and the data disagree", path=path)


@dataclass(frozen=True)
class ArrayTask:
    """Records of images ``start:stop`` of an array (in memory, or reopened by path).

    With ``nodata`` or ``mask`` (the whole array's mask, True where a value is left out),
    each band of each image keeps only its valid values (`normstats.maths.masked`).
    """

    array: Any
    start: int
    stop: int
    layout: str
    name: str
    channel_names: tuple[str, ...] | None = None
    nodata: float | None = None
    mask: Any = None

    @property
    def size(self) -> int:
        return self.stop - self.start

    def stack(self) -> np.ndarray:
        """The task's images as stored, viewed as one (n, H, W, C) array."""
        array = open_array(self.array) if isinstance(self.array, str) else self.array
        rows = slice(None) if self.layout in _SINGLE else slice(self.start, self.stop)
        return as_nhwc(read_rows(array, rows, self.name), self.layout)

    def head(self, count: int) -> ArrayTask:
        """The task of this task's first ``count`` images."""
        return replace(self, stop=min(self.stop, self.start + count))

    def run(self) -> TaskResult:
        return self.result_of(self.stack())

    def summary(self) -> Summary:
        """The summary of the task's images (`normstats.sources.base.summary_of`): straight
        from the compiled pass that reads 8-bit images where every value counts, without
        records (on 50,000 32x32x3 images in memory, two threads: 4.3 ms where the pass
        that makes records took 5.3, most of it page faults of new outputs); else their
        records summarised."""
        stack = self.stack()
        if self.nodata is None and self.mask is None:
            made = summarize_stack(stack, self.channel_names)
            if made is not None:
                return made
        result = self.result_of(stack)
        return summarize(result.records, result.skipped)

    def result_of(self, stack: np.ndarray) -> TaskResult:
        """The records of ``stack``, this task's images as `stack` reads them; images
        holding NaN, inf or values too large to square are skipped and named."""
        if self.nodata is not None or self.mask is not None:
            return self._masked_result(stack)
        if usable_rows(stack) is not None:
            return _without_non_finite(stack, self)
        return TaskResult(stack_records(stack, channel_names=self.channel_names))


    def _mask_of(self) -> np.ndarray | None:
        """The task's rows of the array's mask, viewed as its images are (None: no mask)."""
        if self.mask is None:
            return None
        rows = slice(None) if self.layout in _SINGLE else slice(self.start, self.stop)
        return as_nhwc(np.asarray(self.mask[rows]), self.layout)

    def valid_values(self, stack: np.ndarray) -> np.ndarray | None:
        """Bool (n, H, W, C): the values of ``stack`` that count (not nodata, NaN or
        masked); None when all of them do."""
        return valid_values(stack, self.nodata, self._mask_of())

    def _masked_result(self, stack: np.ndarray) -> TaskResult:
        """Records with nodata, NaN and masked values left out band by band; images with
        an infinite or too large valid value are skipped and named."""
        # keyed by index, as the records of arrays are (`normstats.records`)
        records = masked_records(stack, nodata=self.nodata, mask=self._mask_of(),
                                 keys=tuple(range(self.start, self.start + len(stack))),
                                 channel_names=self.channel_names)
        unusable = unusable_images(records)
        if not unusable.any():
            return TaskResult(records)
        skipped = tuple(Skipped(f"{self.name}[{self.start + i}]", NON_FINITE_VALID)
                        for i in np.flatnonzero(unusable))
        kept = records.take(~unusable)
        return TaskResult(kept if len(kept) else None, skipped)


def usable_rows(stack: np.ndarray) -> np.ndarray | None:
    """Which images of an (n, H, W, C) stack the statistics use: None when all of them,
    else a boolean mask leaving out those holding NaN, inf or values too large to square.

    Examples
    --------
    >>> usable_rows(np.zeros((2, 1, 1, 1)))
    >>> usable_rows(np.array([0.0, np.nan]).reshape(2, 1, 1, 1))
    array([ True, False])
    """
    if stack.dtype.kind != "f" or (np.isfinite(stack).all() and (not _can_be_too_large(
            stack.dtype) or float(np.abs(stack).max(initial=0)) <= FLOAT_LIMIT)):
        return None
    finite, small = _finite_and_small(stack.reshape(stack.shape[0], -1))
    return finite & small


def _can_be_too_large(dtype: np.dtype) -> bool:
    """False for float16/32: never beyond the limit, and comparing casts it (a warning)."""
    return float(np.finfo(dtype).max) > FLOAT_LIMIT


def stack_records(stack: np.ndarray, channel_names: tuple[str, ...] | None = None) -> Records:
    """`records_from_stack` of an (n, H, W, C) stack of any channel count: the uint8
    kernel takes 128 channels a call, so wider stacks go 128 at a time, side by side.

    Examples
    --------
    >>> r = stack_records(np.full((1, 2, 1, 300), 3, np.uint8))
    >>> r.channels, int(r.sums[0, 299]), r.channel_names[-1]
    (300, 6, 'c299')
    """
    channels = stack.shape[-1]
    if stack.dtype != np.uint8 or channels <= KERNEL_CHANNELS:
        return records_from_stack(stack, channel_names=channel_names)
    names = tuple(channel_names) if channel_names else default_channel_names(channels)
    if len(names) != channels:
        raise IncompatibleImagesError(f"{len(names)} channel names for {channels} channels")
    parts = [records_from_stack(stack[..., i:i + KERNEL_CHANNELS], cross=False)
             for i in range(0, channels, KERNEL_CHANNELS)]
    arrays = {name: np.concatenate([getattr(p, name) for p in parts], axis=1)
              for name in parts[0].array_fields() if getattr(parts[0], name).ndim == 2}
    if wants_cross_sums():  # pairs across the groups too: from the whole stack
        arrays["cross_sums"] = integer_cross_sums(stack)
    return parts[0].replaced(channel_names=names, **arrays)


def _finite_and_small(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of (n, values) floats: all finite; no value too large to square."""
    finite = np.isfinite(flat).all(axis=1)
    small = np.full(len(flat), True)
    if _can_be_too_large(flat.dtype):
        small = np.abs(np.where(np.isfinite(flat), flat, 0)).max(axis=1, initial=0) <= FLOAT_LIMIT
    return finite, small


def _without_non_finite(stack: np.ndarray, task: ArrayTask) -> TaskResult:
    """Skip (and name) the images holding NaN, inf or values too large to square; keep the
    rest exact."""
    finite, small = _finite_and_small(stack.reshape(stack.shape[0], -1))
    skipped = tuple(Skipped(f"{task.name}[{task.start + i}]",
                            NON_FINITE if not finite[i] else
                            TOO_LARGE_REASON)
                    for i in np.flatnonzero(~(finite & small)))
    finite = finite & small
    if not finite.any():
        return TaskResult(None, skipped)
    return TaskResult(stack_records(stack[finite], channel_names=task.channel_names), skipped)


def with_known_lengths(array: Any) -> Any:
    """``array``, with its chunk lengths computed when a Dask array does not know them.

    ``x[x[:, 0] > 0]`` and a Dask DataFrame's ``to_dask_array()`` give arrays of unknown
    lengths (NaN in the shape). A source cuts its tasks, a sample, the percentile passes
    and the vector blocks by row, so it needs them: the graph is computed once for them
    (dask's ``compute_chunk_sizes``), then read. A plain ``compute`` of such images does
    not come here: its reduction runs on the graph, in one pass (`normstats.engine.dask`).

    Examples
    --------
    >>> import dask.array as da
    >>> x = da.arange(6, chunks=2)
    >>> x[x % 2 == 0].shape, with_known_lengths(x[x % 2 == 0]).shape
    ((nan,), (3,))
    """
    shape = getattr(array, "shape", ())
    if not any(isinstance(n, float) and math.isnan(n) for n in shape) or \
            not hasattr(array, "compute_chunk_sizes"):
        return array
    return array.compute_chunk_sizes()


class ArraySource:
    """Images (or vectors) held in one array.

    Parameters
    ----------
    array : numpy.ndarray, zarr array, str or os.PathLike
        The data, or the path of a ``.npy`` file or zarr array.
    layout : str, optional
        One of `LAYOUTS`; detected by `detect_layout` when omitted.
    channel_names : tuple of str, optional
        Names of the channels (c0, c1, ... when omitted: the order is never guessed).

    Examples
    --------
    >>> source = ArraySource(np.zeros((10, 8, 8, 3), np.uint8))
    >>> len(source), source.layout, len(source.tasks(task_size=4))
    (10, 'NHWC', 3)
    """

    scheduler = "threads"
    skipped: tuple[Skipped, ...] = ()
    ignored = 0

    def __init__(self, array: Any, layout: str | None = None,
                 channel_names: tuple[str, ...] | None = None,
                 allow_missing_chunks: bool = False, nodata: float | None = None) -> None:
        self.path = os.fspath(array) if isinstance(array, (str, os.PathLike)) else None
        self.array = open_array(self.path) if self.path else \
            with_known_lengths(with_absolute_store(array))
        #: The value of missing measurements, and a masked array's mask (True: left out).
        self.nodata, self.mask = nodata, None
        if np.ma.isMaskedArray(self.array):
            self.mask = np.ma.getmaskarray(self.array)
            self.array = np.ma.getdata(self.array)
        shape = tuple(self.array.shape)
        self.layout = layout_of(shape, layout)
        self.kind = "vectors" if self.layout == "NC" else "images"
        self.mode = self.layout
        self.channel_names = tuple(channel_names) if channel_names else None
        self.description = self.path or f"array {shape} {self.array.dtype}"
        _check_dtype(self.array.dtype, self.description)
        check_axes(shape, self.layout, self.description)
        #: Images (rows) read as the zarr fill value from missing chunks, when allowed.
        self.filled_images = self._check_chunks(allow_missing_chunks)

    def _check_chunks(self, allow: bool) -> int:
        """Refuse a zarr array whose store lacks chunks, or say (allowed) how many images
        were read as the fill value."""
        found = holes_in(self.array)  # a zarr array, or a Dask array read from one
        if self.layout in _SINGLE:  # the whole array is one image
            found = [(store, replace(h, images=1, rows=1, ranges=((0, 1),))) for store, h in found]
        if found and not allow:
            raise found[0][1].error(self.path or found[0][0])
        for store, holes in found:
            self.description += f" ({holes.note('' if self.path else store)})"
        return sum(holes.images for _, holes in found)

    def __len__(self) -> int:
        return 1 if self.layout in _SINGLE else int(self.array.shape[0])

    def tasks(self, task_size: int | None = None, workers: int = 1) -> list[Task]:
        count = len(self)
        if task_size is None:
            per_image = max(1, int(np.prod(self.array.shape[1:])) * self.array.dtype.itemsize)
            # Reducing an array costs ~1 ms per 4 MB, as much as Dask spends per task: a
            # task's worth of images a worker (at most 64 MB a task), not the ~10 tasks
            # that balance decoding work: with two workers, 1.5 to 4% faster than tasks
            # of half that size on 10,000 and 50,000 32x32x3 images, 500 224x224x3 and
            # 20,000 64x64 grey ones (paired medians of 41 rounds, a 2-core Xeon).
            enough = math.ceil(count / (_TASKS_PER_WORKER * max(1, workers)))
            bounds = split_staggered(count, workers,
                                     max(1, min(_TASK_BYTES // per_image, enough)))
            if is_zarr_array(self.array) and self.layout not in _SINGLE:
                bounds = split_at_chunks(count, _rows_decoded_together(self.array),
                                         per_image, workers)
        else:
            bounds = split_evenly(count, task_size)
        # a path is reopened where the task runs: absolute, for a cluster's workers
        data = os.path.abspath(self.path) if self.path and self.scheduler == "processes" \
            else self.array
        name = self.path or "array"
        return [ArrayTask(data, a, b, self.layout, name, self.channel_names, self.nodata,
                          self.mask) for a, b in bounds]


def _rows_decoded_together(array: Any) -> int:
    """Images (axis-0 rows) of a zarr array's chunk, or of its shard when sharded."""
    shape = getattr(array, "shards", None) or array.chunks
    return max(1, int(shape[0]))


def split_at_chunks(count: int, rows: int, per_image: int, workers: int
                    ) -> list[tuple[int, int]]:
    """Cut ``range(count)`` into tasks of whole chunks of ``rows`` images (``per_image``
    bytes each): about `_ZARR_TASK_BYTES` a task, two tasks a worker at least.

    A task that began or ended inside a chunk would decode that chunk once more (a 24th of
    the work with 25 chunks and 3 tasks), and a task of many chunks leaves the workers to
    decode and then reduce in step. On 50,000 32x32x3 images in 25 chunks of 2,000 (zstd),
    2 threads, tasks of 2 chunks took 0.85 of the time of 3 tasks of 12,500 images, tasks
    of 1 chunk 1.0 to 1.07 and of 4 chunks 0.90 (best of 9 alternated rounds, a 2-core
    Xeon).

    Examples
    --------
    >>> split_at_chunks(10_000, 2_000, 12_288, 2)  # 2 chunks of 24 MB: 16 MB tasks hold 1
    [(0, 2000), (2000, 4000), (4000, 6000), (6000, 8000), (8000, 10000)]
    >>> split_at_chunks(10, 3, 1, 2)  # small chunks: two tasks a worker
    [(0, 3), (3, 6), (6, 9), (9, 10)]
    """
    chunks = math.ceil(count / rows)
    per_task = min(_ZARR_TASK_BYTES // (rows * per_image), math.ceil(chunks / (2 * workers)))
    step = max(1, per_task) * rows
    return [(start, min(count, start + step)) for start in range(0, count, step)]


def split_staggered(count: int, workers: int, task_size: int) -> list[tuple[int, int]]:
    """Cut ``range(count)`` into tasks of about ``task_size`` whose workers stay out of
    step: the first ``workers - 1`` tasks grow by a ``1 / workers`` of a task each, and as
    many at the end shrink the same way.

    A task reads its pixels (bound by memory: every worker shares it) and then summarises
    its records (bound by the CPU). Tasks of one size keep the workers in step, all reading
    at once and then all summarising, with memory idle; staggered by a fraction of a task,
    one worker summarises while the others read. On 50,000 32x32x3 images in memory and
    two workers of an AMD EPYC, when a summary cost a fifth of the reading, 4 tasks of
    12,500 images ran at 62% of the memory's read speed, tasks of 6,250, 12,500 (three)
    and 6,250 images at 74%. With one worker, or too few images for
    every task to hold one, the tasks are `split_evenly`.

    Examples
    --------
    >>> split_staggered(100, 2, 25)  # one worker half a task ahead of the other
    [(0, 12), (12, 37), (37, 62), (62, 87), (87, 100)]
    >>> split_staggered(100, 1, 25)
    [(0, 25), (25, 50), (50, 75), (75, 100)]
    """
    full = round(count / task_size) - (workers - 1)  # tasks of the whole size
    if workers <= 1 or full < 1 or count < workers * (full + workers - 1):
        return split_evenly(count, task_size)
    units = [*range(1, workers), *[workers] * full, *range(workers - 1, 0, -1)]
    ends = np.cumsum(units) * count // sum(units)
    return list(zip([0, *ends[:-1].tolist()], ends.tolist()))


def _check_dtype(dtype: np.dtype, name: str) -> None:
    if dtype.kind not in "biuf":
        raise UnreadableInputError(f"pixel dtype {dtype} is not numeric", name)


def is_zarr_folder(path: str | os.PathLike) -> bool:
    return any(os.path.exists(os.path.join(path, m)) for m in ("zarr.json", ".zarray"))


def check_axes(shape: tuple[int, ...], layout: str, name: str) -> None:
    """Refuse images (or vectors) with no values: a zero-length axis other than N (no
    images at all, N = 0, is the engine's empty-dataset error)."""
    for axis, (letter, size) in enumerate(zip(layout, shape)):
        if size == 0 and letter != "N":
            what = "features" if layout == "NC" else f"{_AXIS_NAMES[letter]} axis"
            raise UnreadableInputError(
                f"shape {shape} ({layout}): its {what} (axis {axis}) has length 0, so the "
                f"{'vectors have no features' if layout == 'NC' else 'images have no pixels'}"
                "; that is not a dataset", name)

