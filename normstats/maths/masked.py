"""Per-image records of pixels with nodata left out, band by band.

Rasters mark missing measurements with a nodata value (a GeoTIFF's GDAL_NODATA tag,
``--nodata V``) or, in float bands, NaN; a numpy masked array marks them with its mask.
Each band of each image keeps its own count of valid values (``valid`` of the records),
and its sums, moments and extremes cover those values only: integer sums stay exact
integers, float moments are two-pass float64 over the valid values.

Integer bands of at most 16 bits go through a compiled one-pass loop
(`normstats.maths._masked`) where it was built, numpy's passes elsewhere, with the same
results. 32-bit integer bands (uint32, int32) are exact in float64 value by value and are
reduced as float moments (``FloatRecords`` of dtype uint32 or int32): their squares pass
the int64 range, so their statistics follow the float contract (relative error below
1e-12), not the integer one.

Examples
--------
>>> import numpy as np
>>> x = np.array([[[[0, 5], [7, 0]]]], np.uint16)  # one 1x2 image, two bands
>>> r = masked_records(x, nodata=0)
>>> r.valid.tolist(), r.sums.tolist(), r.minimum.tolist()
([[1, 1]], [[7, 5]], [[7.0, 5.0]])
"""

from __future__ import annotations

import functools
import math
from types import ModuleType

import numpy as np

from normstats.errors import IncompatibleImagesError
from normstats.maths.image_moments import MAX_INTEGER_BITS, integer_sums
from normstats.maths.records import (
    FLOAT_LIMIT,
    FloatRecords,
    IntegerRecords,
    Records,
    default_channel_names,
    refuse_long_double,
)

__all__ = ["masked_records", "valid_values", "nodata_applies", "MaskedRows", "RASTER_DTYPES",
           "unusable_images", "NON_FINITE_VALID"]

#: The sample types a raster band may hold (and a masked array of images).
RASTER_DTYPES = ("uint8", "uint16", "int16", "uint32", "int32", "float32", "float64")

_KERNEL_KINDS = {np.dtype(np.uint8): "B", np.dtype(np.uint16): "H", np.dtype(np.int16): "h"}


@functools.cache
def _kernel() -> ModuleType | None:
    """`normstats.maths._masked`, or None where it was not built (numpy's passes then)."""
    try:
        from normstats.maths import _masked
    except ImportError:
        return None
    return _masked


def nodata_applies(dtype: np.dtype, nodata: float | None) -> bool:
    """Whether a nodata value can match values of ``dtype``: an integer in its range for
    integer data (NaN or 0.5 never matches one), any value but NaN for float data (whose
    NaN is always nodata).

    Examples
    --------
    >>> nodata_applies(np.dtype(np.uint16), -1.0), nodata_applies(np.dtype(np.int16), -1.0)
    (False, True)
    """
    if nodata is None or math.isnan(nodata):
        return False
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return float(nodata).is_integer() and info.min <= nodata <= info.max
    return dtype.kind == "f" or (dtype.kind == "b" and nodata in (0.0, 1.0))


def valid_values(stack: np.ndarray, nodata: float | None = None,
                 mask: np.ndarray | None = None) -> np.ndarray | None:
    """Bool (N, H, W, C) of the values kept: not ``nodata``, not NaN, not masked (``mask``
    True marks a value left out, as in numpy's masked arrays); None when all are kept.

    Examples
    --------
    >>> valid_values(np.array([[[[1.0, np.nan]]]])).tolist()
    [[[[True, False]]]]
    """
    kept = None
    if nodata_applies(stack.dtype, nodata):
        kept = stack != stack.dtype.type(nodata)
    if stack.dtype.kind == "f":
        finite_or_inf = ~np.isnan(stack)
        kept = finite_or_inf if kept is None else kept & finite_or_inf
    if mask is not None:
        unmasked = ~np.broadcast_to(np.asarray(mask, dtype=bool), stack.shape)
        kept = unmasked if kept is None else kept & unmasked
    return kept


def masked_records(stack: np.ndarray, *, nodata: float | None = None,
                   mask: np.ndarray | None = None, keys: tuple[str, ...] = (),
                   channel_names: tuple[str, ...] | None = None,
                   raw_units: bool = False) -> Records:
    """Per-image records of a stack (N, H, W, C) with nodata, NaN and masked values left out.

    Parameters
    ----------
    stack : numpy.ndarray
        Images of one of `RASTER_DTYPES` (or bool, int8), channels last.
    nodata : float, optional
        The value that marks a missing measurement.
    mask : numpy.ndarray, optional
        True where a value is left out (broadcast to the stack).
    keys, channel_names, raw_units
        As the records hold them.

    Returns
    -------
    IntegerRecords or FloatRecords
        With ``valid`` (N, C) when anything could be left out (a nodata value that can
        match, a mask, or float values), None otherwise; a channel of an image with no
        valid value has NaN extremes and zero moments.

    Examples
    --------
    >>> x = np.array([[[[1.0], [np.nan], [3.0]]]])
    >>> r = masked_records(x)
    >>> r.valid.tolist(), r.means.tolist(), r.m2s.tolist()
    ([[2]], [[2.0]], [[2.0]])
    """
    n, h, w, c = stack.shape
    if h * w >= 2**31:
        raise IncompatibleImagesError("images of 2**31 pixels or more are not supported")
    names = tuple(channel_names) if channel_names else default_channel_names(c)
    if len(names) != c:
        raise IncompatibleImagesError(f"{len(names)} channel names for {c} channels")
    common = dict(dtype=str(stack.dtype), channel_names=names, keys=tuple(keys),
                  pixels=np.full(n, h * w, dtype=np.int64), raw_units=raw_units)
    kind = stack.dtype
    if kind == np.bool_ or (kind.kind in "iu" and kind.itemsize * 8 <= MAX_INTEGER_BITS):
        return _integer_records(stack, nodata, mask, common)
    refuse_long_double(kind)
    if kind.kind in "iu" and kind.itemsize == 4 or kind.kind == "f":
        return _float_records(stack, nodata, mask, common)
    raise IncompatibleImagesError(f"{kind} pixels have no statistics here (bands of "
                                  f"{', '.join(RASTER_DTYPES)})")


def _integer_records(stack: np.ndarray, nodata: float | None, mask: np.ndarray | None,
                     common: dict) -> IntegerRecords:
    applies = nodata_applies(stack.dtype, nodata)
    module = _kernel()
    if module is not None and mask is None and stack.dtype in _KERNEL_KINDS:
        n, _, _, c = stack.shape
        sums, squares, counts, lows, highs = (np.empty((n, c), np.int64) for _ in range(5))
        module.masked_moments(np.ascontiguousarray(stack), _KERNEL_KINDS[stack.dtype], n, c,
                              applies, int(nodata) if applies else 0, sums, squares, counts,
                              lows, highs)
    else:
        sums, squares, counts, lows, highs = _numpy_integer_moments(stack, nodata, mask)
    empty = counts == 0
    low = np.where(empty, np.nan, lows.astype(np.float64))
    high = np.where(empty, np.nan, highs.astype(np.float64))
    valid = counts if applies or mask is not None else None
    return IntegerRecords(**common, minimum=low, maximum=high, valid=valid, sums=sums,
                          sums_sq=squares)


def _numpy_integer_moments(stack: np.ndarray, nodata: float | None,
                           mask: np.ndarray | None) -> tuple[np.ndarray, ...]:
    """The kernel's outputs by numpy's passes: sums, squares, counts, lows, highs (N, C)."""
    kept = valid_values(stack, nodata, mask)
    n, h, w, c = stack.shape
    values = stack.view(np.uint8) if stack.dtype == np.bool_ else stack
    info = np.iinfo(values.dtype)
    if kept is None:
        kept = np.ones(stack.shape, dtype=bool)
    counts = kept.reshape(n, h * w, c).sum(axis=1, dtype=np.int64)
    sums, squares = integer_sums(np.where(kept, values, values.dtype.type(0)))
    lows = np.where(kept, values, info.max).reshape(n, h * w, c).min(axis=1).astype(np.int64)
    highs = np.where(kept, values, info.min).reshape(n, h * w, c).max(axis=1).astype(np.int64)
    return sums, squares, counts, lows, highs


def _float_records(stack: np.ndarray, nodata: float | None, mask: np.ndarray | None,
                   common: dict) -> FloatRecords:
    """Two-pass float64 moments over each band's valid values (the pixel axis contiguous,
    as `normstats.maths.image_moments.float_moments` sums it: with every value valid the
    numbers are the same)."""
    n, h, w, c = stack.shape
    values = np.ascontiguousarray(
        np.asarray(stack, dtype=np.float64).reshape(n, h * w, c).transpose(0, 2, 1))
    kept = valid_values(values, nodata if nodata_applies(stack.dtype, nodata) else None,
                        None if mask is None else _pixels_last(mask, stack.shape))
    counts = kept.sum(axis=2, dtype=np.int64)
    divisor = np.maximum(counts, 1).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):  # ±inf images: named by the callers
        means = np.where(kept, values, 0.0).sum(axis=2) / divisor
        deviations = np.where(kept, values - means[:, :, None], 0.0)
        residuals = deviations.sum(axis=2) / divisor
        m2s = np.einsum("ncp,ncp->nc", deviations, deviations) - counts * residuals * residuals
    empty = counts == 0
    low = np.where(empty, np.nan, np.where(kept, values, np.inf).min(axis=2, initial=np.inf))
    high = np.where(empty, np.nan, np.where(kept, values, -np.inf).max(axis=2,
                                                                         initial=-np.inf))
    return FloatRecords(**common, minimum=low, maximum=high, valid=counts, means=means,
                        residuals=residuals, m2s=np.maximum(m2s, 0.0))


#: Why an image whose valid values hold infinity or values too large to square is skipped.
NON_FINITE_VALID = ("contains infinite values, or values whose squares overflow float64 "
                    "(NaN and nodata are left out; these are not)")


def unusable_images(records: Records) -> np.ndarray:
    """Bool (N,): images whose valid values include ±inf or magnitudes beyond
    `normstats.maths.records.FLOAT_LIMIT` (float records only; integers never do).

    Examples
    --------
    >>> unusable_images(masked_records(np.array([[[[1.0]]], [[[np.inf]]]]))).tolist()
    [False, True]
    """
    if not isinstance(records, FloatRecords):
        return np.zeros(len(records), dtype=bool)
    counted = records.channel_counts() > 0
    with np.errstate(invalid="ignore"):
        bad = ~(np.isfinite(records.minimum) & np.isfinite(records.maximum))
        bad |= (np.abs(records.minimum) > FLOAT_LIMIT) | (np.abs(records.maximum) > FLOAT_LIMIT)
    return (bad & counted).any(axis=1)


def _pixels_last(mask: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """A mask broadcast to (N, H, W, C) and laid out as the values are: (N, C, H·W)."""
    n, h, w, c = shape
    full = np.broadcast_to(np.asarray(mask, dtype=bool), shape)
    return full.reshape(n, h * w, c).transpose(0, 2, 1)


class MaskedRows:
    """Per-image records of images with nodata, added one at a time as a task decodes them.

    Integer images of at most 16 bits are reduced at once by the compiled kernel into
    preallocated rows (one call an image, no stacking, no copy kept); the others (float,
    32-bit, or without the kernel) become records of their own. `records` gives one batch
    per (dtype, band names, units).

    Examples
    --------
    >>> rows = MaskedRows(capacity=2)
    >>> rows.add("a", np.array([[[0], [3]]], np.uint16), ("L",), 0.0, True)
    >>> rows.add("b", np.array([[[4], [0]]], np.uint16), ("L",), 0.0, True)
    >>> [(r.keys, r.valid.tolist(), r.sums.tolist()) for r in rows.records()]
    [(('a', 'b'), [[1], [1]], [[3], [4]])]
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, int(capacity))
        self._groups: dict[tuple, _KernelGroup] = {}
        self._parts: list[Records] = []

    def add(self, key: str, pixels: np.ndarray, channel_names: tuple[str, ...],
            nodata: float | None, raw_units: bool, mask: np.ndarray | None = None) -> None:
        """Reduce one (H, W, C) image with ``nodata`` (None: only NaN) and the values
        ``mask`` marks (True: left out; (H, W, 1) masks every band) left out."""
        module = _kernel()
        height, width, bands = pixels.shape
        per_band = mask is not None and mask.shape[2] != 1
        if module is None or per_band or pixels.dtype not in _KERNEL_KINDS or \
                height * width >= 2**31:
            self._parts.append(masked_records(
                pixels[None], nodata=nodata, mask=None if mask is None else mask[None],
                keys=(key,), channel_names=channel_names, raw_units=raw_units))
            return
        signature = (pixels.dtype.str, channel_names, raw_units)
        group = self._groups.get(signature)
        if group is None:
            group = self._groups[signature] = _KernelGroup(self.capacity, bands)
        if mask is not None:  # one mask for every band: the kernel reads the kept pixels
            pixels = pixels.reshape(height * width, 1, bands)[~mask.reshape(-1)]
        group.add(module, key, pixels, nodata, height * width, mask is not None)

    def records(self) -> list[Records]:
        """The records added so far: one batch per kind of image, rows in order."""
        batches = [group.records(dtype, names, raw)
                   for (dtype, names, raw), group in self._groups.items()]
        return batches + self._parts


class _KernelGroup:
    """Preallocated rows of one dtype and band layout, filled by the kernel in place."""

    def __init__(self, capacity: int, channels: int) -> None:
        self.keys: list[str] = []
        self.pixels = np.zeros(capacity, dtype=np.int64)
        self.outputs = [np.zeros((capacity, channels), np.int64) for _ in range(5)]
        self.any_nodata = False

    def add(self, module: ModuleType, key: str, pixels: np.ndarray, nodata: float | None,
            image_pixels: int, masked: bool = False) -> None:
        """Reduce ``pixels`` (H, W, C) into the next row: an image of ``image_pixels``
        pixels, of which those ``masked`` ones were left out before (then every row
        counts its valid values)."""
        row = len(self.keys)
        if row == len(self.pixels):  # more images than the task announced: grow
            self.pixels = np.concatenate([self.pixels, np.zeros_like(self.pixels)])
            self.outputs = [np.concatenate([o, np.zeros_like(o)]) for o in self.outputs]
        applies = nodata_applies(pixels.dtype, nodata)
        self.any_nodata |= applies or masked
        module.masked_moments(np.ascontiguousarray(pixels), _KERNEL_KINDS[pixels.dtype], 1,
                              pixels.shape[2], applies, int(nodata) if applies else 0,
                              *(o[row] for o in self.outputs))
        self.pixels[row] = image_pixels
        self.keys.append(key)

    def records(self, dtype: str, names: tuple[str, ...], raw_units: bool) -> IntegerRecords:
        n = len(self.keys)
        sums, squares, counts, lows, highs = (o[:n] for o in self.outputs)
        empty = counts == 0
        return IntegerRecords(
            dtype=str(np.dtype(dtype)), channel_names=names, keys=tuple(self.keys),
            pixels=self.pixels[:n], raw_units=raw_units,
            minimum=np.where(empty, np.nan, lows.astype(np.float64)),
            maximum=np.where(empty, np.nan, highs.astype(np.float64)),
            valid=counts if self.any_nodata else None, sums=sums, sums_sq=squares)
