"""Per-image records: the unit of data that flows from sources to the reduction.

A record holds, for one image and each channel, what every dataset statistic needs:
the pixel count, exact moments (integer Σx and Σx², or float64 mean, residual and M2),
and the minimum and maximum. Sources produce `IntegerRecords` or `FloatRecords` in
batches; the cache stores them; `normstats.maths.summary` pools them without decoding again.

Where nodata is left out (`normstats.maths.masked`), ``valid`` holds each image's count of
valid values per channel, and the moments, minimum and maximum cover those values only (a
channel without a valid value has NaN extremes); ``pixels`` still counts every pixel.
Records of data that had no nodata to leave out have ``valid`` None.

When a run asks for the channel covariance (`cross_sums_wanted`), records made from
pixels also hold, per image and pair of channels c < d (`normstats.maths.covariance`), the
exact cross sums Σx_c·x_d (``cross_sums``, integer images) or the co-moments
Σ(x_c − m_c)(x_d − m_d) (``co_moments``, float images); otherwise both are None and cost
nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, fields, replace

import numpy as np

from normstats.errors import IncompatibleImagesError, Skipped, numbered
from normstats.maths import fused
from normstats.maths.covariance import float_co_moments, integer_cross_sums
from normstats.maths.image_moments import MAX_INTEGER_BITS, extrema, float_moments, integer_sums
from normstats.maths.moments import FloatMoments, IntegerMoments, Moments

__all__ = ["Skipped", "IntegerRecords", "FloatRecords", "Records", "records_from_stack",
           "impossible_rows", "MAX_RECORD_PIXELS",
           "concat_records", "default_channel_names", "cross_sums_wanted",
           "wants_cross_sums", "without_cross_sums", "has_cross_sums", "NON_FINITE",
           "NAN_HINT", "TOO_LARGE_REASON", "FLOAT_LIMIT"]


@dataclass(frozen=True, eq=False)
class _RecordsBase:
    """Fields shared by both record kinds; arrays have one row per image."""

    dtype: str
    channel_names: tuple[str, ...]
    keys: tuple[str, ...]
    pixels: np.ndarray
    minimum: np.ndarray
    maximum: np.ndarray
    #: (N, C) int64 valid values per image and channel, where nodata was left out; None
    #: when every pixel counted (``pixels`` per channel).
    valid: np.ndarray | None = None
    #: Reported in raw units by default (rasters deeper than 8 bits or of more than 4
    #: bands, `normstats.maths.scale`), not divided by the dtype's maximum.
    raw_units: bool = False

    def __len__(self) -> int:
        return int(self.pixels.shape[0])

    @property
    def channels(self) -> int:
        return int(self.minimum.shape[1])

    @property
    def signature(self) -> tuple[str, str, tuple[str, ...], bool]:
        """What images must share to be pooled: kind, dtype, channel names and units."""
        return (type(self).__name__, self.dtype, self.channel_names, self.raw_units)

    def channel_counts(self) -> np.ndarray:
        """(N, C) int64 values counted per image and channel: ``valid``, or every pixel."""
        if self.valid is not None:
            return self.valid.astype(np.int64, copy=False)
        return np.broadcast_to(self.pixels.astype(np.int64)[:, None], self.minimum.shape)

    def array_fields(self) -> list[str]:
        """Names of the per-image array fields (one row per image)."""
        return [f.name for f in fields(self) if isinstance(getattr(self, f.name), np.ndarray)]

    def take(self, rows: np.ndarray) -> _RecordsBase:
        """The records of the selected rows (boolean mask or indices), in that order."""
        keys = tuple(np.asarray(self.keys, dtype=object)[rows]) if self.keys else ()
        arrays = {name: getattr(self, name)[rows] for name in self.array_fields()}
        return self.replaced(keys=keys, **arrays)

    def replaced(self, **changes: object) -> _RecordsBase:
        """These records with fields replaced (other rows, channels or values), without
        what was computed from the values they held (`IntegerRecords.kernel_totals`): the way
        to make records from records."""
        return replace(self, **changes)


@dataclass(frozen=True, eq=False)
class IntegerRecords(_RecordsBase):
    """Records of integer images: exact Σx and Σx² (int64) per image and channel.

    Examples
    --------
    >>> import numpy as np
    >>> r = records_from_stack(np.zeros((2, 4, 4, 3), dtype=np.uint8), keys=("a", "b"))
    >>> len(r), r.channels, r.sums.tolist()[0]
    (2, 3, [0, 0, 0])
    """

    sums: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.int64))
    sums_sq: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.int64))
    #: (N, C·(C−1)/2) int64 Σx_c·x_d per pair c < d, when the covariance was asked.
    cross_sums: np.ndarray | None = None
    #: The summary's totals of these rows, made by the compiled pass as it read them
    #: (`normstats.maths.fused.KernelTotals`); None: `summarize` computes them from the
    #: records. Records made from these drop them (`replaced`).
    kernel_totals: fused.KernelTotals | None = None

    def moments(self) -> Moments:
        return IntegerMoments.from_records(self.pixels, self.sums, self.sums_sq, self.valid)

    def replaced(self, **changes: object) -> IntegerRecords:
        return replace(self, kernel_totals=None, **changes)

    def image_variance(self, ddof: int) -> np.ndarray:
        """Per-image variance (N, C), ``(n·Σx² − (Σx)²) / (n·(n − ddof))``.

        The numerator is an exact integer; numerator and denominator are each rounded to
        float64, then divided. While both are below 2⁵³ (for 8-bit images, any image of up
        to 7.4·10⁵ pixels) that is one rounding, so the result is correctly rounded; past
        it, three, and the relative error stays below 3·2⁻⁵³. Either way the value depends
        on the image alone, not on the order of its pixels or of the images.
        """
        n = self.channel_counts() if self.valid is not None else \
            self.pixels.astype(np.int64)[:, None]
        bits = 8 * np.dtype(self.dtype).itemsize
        largest = int(n.max(initial=1)) ** 2 * (2**bits) ** 2
        # n·Σx² − (Σx)² overflows int64 for big 16-bit images: then use Python ints.
        if largest < 2**62:
            numerator = n * self.sums_sq - self.sums * self.sums
        else:
            numerator = n.astype(object) * self.sums_sq.astype(object) - \
                self.sums.astype(object) ** 2
        denominator = (n * (n - ddof)).astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            return numerator.astype(np.float64) / denominator


@dataclass(frozen=True, eq=False)
class FloatRecords(_RecordsBase):
    """Records of float images: float64 mean, mean residual and M2 per image and channel."""

    means: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    residuals: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    m2s: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    #: (N, C·(C−1)/2) float64 Σ(x_c − m_c)(x_d − m_d) per pair c < d, when the
    #: covariance was asked.
    co_moments: np.ndarray | None = None

    def moments(self) -> Moments:
        return FloatMoments.from_records(self.pixels, self.means, self.residuals, self.m2s,
                                         self.valid)

    def image_variance(self, ddof: int) -> np.ndarray:
        """Per-image variance (N, C) from M2 (population for ddof=0, sample for ddof=1)."""
        denominator = (self.channel_counts() - ddof).astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.m2s / denominator


Records = IntegerRecords | FloatRecords


def default_channel_names(count: int) -> tuple[str, ...]:
    """Names for arrays whose channel order is unknown: never guess RGB or BGR.

    Examples
    --------
    >>> default_channel_names(1), default_channel_names(3)
    (('L',), ('c0', 'c1', 'c2'))
    """
    return ("L",) if count == 1 else tuple(f"c{i}" for i in range(count))


#: Whether records made from pixels hold the channel cross sums: a run that asks for the
#: covariance sets it around each task (`cross_sums_wanted`), wherever the task runs, so
#: that every source's tasks make them without each carrying the choice.
_CROSS_SUMS: ContextVar[bool] = ContextVar("normstats_cross_sums", default=False)


@contextmanager
def cross_sums_wanted(wanted: bool = True) -> Iterator[None]:
    """Within the block, records made from pixels hold the channel cross sums (or not).

    Examples
    --------
    >>> import numpy as np
    >>> with cross_sums_wanted():
    ...     r = records_from_stack(np.ones((1, 2, 2, 3), np.uint8))
    >>> r.cross_sums.tolist()
    [[4, 4, 4]]
    """
    token = _CROSS_SUMS.set(bool(wanted))
    try:
        yield
    finally:
        _CROSS_SUMS.reset(token)


def wants_cross_sums() -> bool:
    """Whether records made now hold the channel cross sums (see `cross_sums_wanted`)."""
    return _CROSS_SUMS.get()


def without_cross_sums(records: Records) -> Records:
    """The records without cross sums or co-moments (what a run that did not ask holds)."""
    if isinstance(records, IntegerRecords):
        return records if records.cross_sums is None else replace(records, cross_sums=None)
    return records if records.co_moments is None else replace(records, co_moments=None)


def has_cross_sums(records: Records) -> bool:
    """Whether the records hold what the channel covariance needs."""
    cross = records.cross_sums if isinstance(records, IntegerRecords) else records.co_moments
    return cross is not None


def records_from_stack(stack: np.ndarray, keys: tuple[str, ...] = (),
                       channel_names: tuple[str, ...] | None = None,
                       cross: bool | None = None) -> Records:
    """Per-image records of a stack of same-shape images (N, H, W, C), vectorised.

    Parameters
    ----------
    stack : numpy.ndarray
        Integer (at most 16-bit), bool or float images in NHWC layout.
    keys : tuple of str, optional
        One identifier per image (a relative path), kept for the cache and reports.
    channel_names : tuple of str, optional
        Names of the C channels; `default_channel_names` when not given.
    cross : bool, optional
        Also the channel cross sums (co-moments for floats); default: `wants_cross_sums`.

    Examples
    --------
    >>> import numpy as np
    >>> r = records_from_stack(np.full((1, 2, 2, 1), 0.5))
    >>> type(r).__name__, r.means.tolist()
    ('FloatRecords', [[0.5]])
    """
    n, h, w, _ = stack.shape
    pixels = np.full(n, h * w, dtype=np.int64)
    cross = wants_cross_sums() if cross is None else cross
    if stack.dtype == np.uint8 and fused.available():
        sums, sums_sq, low, high, kernel = fused.uint8_moments(stack)
        return IntegerRecords(dtype="uint8", channel_names=_names(stack, channel_names),
                              keys=tuple(keys), pixels=pixels, minimum=low, maximum=high,
                              sums=sums, sums_sq=sums_sq,
                              cross_sums=integer_cross_sums(stack) if cross else None,
                              kernel_totals=kernel)
    low, high = extrema(stack)
    common = dict(dtype=str(stack.dtype), channel_names=_names(stack, channel_names),
                  keys=tuple(keys), pixels=pixels,
                  minimum=low, maximum=high)
    if stack.dtype == np.bool_ or np.issubdtype(stack.dtype, np.integer):
        if stack.dtype.itemsize * 8 > MAX_INTEGER_BITS:
            raise IncompatibleImagesError(f"{stack.dtype} {WIDE_INTEGERS_REASON}")
        sums, sums_sq = integer_sums(stack)
        return IntegerRecords(**common, sums=sums, sums_sq=sums_sq,
                              cross_sums=integer_cross_sums(stack) if cross else None)
    if not np.issubdtype(stack.dtype, np.floating):
        raise IncompatibleImagesError(f"unsupported pixel dtype {stack.dtype}")
    refuse_long_double(stack.dtype)
    bounds = np.abs(np.concatenate([low.ravel(), high.ravel()]))
    if (bounds[np.isfinite(bounds)] > FLOAT_LIMIT).any():  # NaN and inf are named elsewhere
        raise IncompatibleImagesError(TOO_LARGE_REASON)
    means, residuals, m2s = float_moments(stack)
    return FloatRecords(**common, means=means, residuals=residuals, m2s=m2s,
                        co_moments=float_co_moments(stack) if cross else None)


#: Float pixels beyond this magnitude would overflow float64 when their squares are summed
#: (2**480 squared is 2**960, leaving room for sums over any image).
FLOAT_LIMIT = 2.0**480
#: Why integer images wider than 16 bits are refused (after their dtype), and what to do.
WIDE_INTEGERS_REASON = ("images are not supported exactly (at most 16-bit integers); convert "
                        "them to the type that holds their values, exactly (x.astype(np.uint8) "
                        "for 0 to 255, np.uint16 to 65535: check x.min() and x.max() first), "
                        "or to float64 for float statistics")
#: Why float128 images are refused (after their dtype), and how to accept the rounding.
LONG_DOUBLE_REASON = ("(long double) values would be rounded to float64: convert them to "
                      "float64 yourself, x.astype(np.float64), to accept the rounding")


def refuse_long_double(dtype: np.dtype) -> None:
    """Refuse float128 (long double) values, which the float64 arithmetic of every record
    would round without a word.

    Examples
    --------
    >>> refuse_long_double(np.dtype(np.float64))
    """
    if dtype.kind == "f" and dtype.itemsize > 8:
        raise IncompatibleImagesError(f"{dtype} {LONG_DOUBLE_REASON}")


#: Why an image holding NaN or infinity is skipped, and how to keep its other values.
NON_FINITE = "contains NaN or infinite values"
NAN_HINT = ("an image holding NaN is skipped whole; nodata=nan (--nodata nan) on a file or "
            "numpy array, or a numpy masked array, leaves NaN values out one by one")
TOO_LARGE_REASON = (f"float values beyond ±{FLOAT_LIMIT:.2e}: their squares overflow float64; "
                    "divide the data by a power of two first (the statistics scale with it "
                    "exactly)")


def _names(stack: np.ndarray, channel_names: tuple[str, ...] | None) -> tuple[str, ...]:
    names = tuple(channel_names) if channel_names else default_channel_names(stack.shape[3])
    if len(names) != stack.shape[3]:
        raise IncompatibleImagesError(f"{len(names)} channel names for {stack.shape[3]} channels")
    return names


def concat_records(parts: list[Records]) -> Records:
    """Concatenate record batches of one kind, dtype and channel count.

    Raises
    ------
    IncompatibleImagesError
        When two batches cannot be pooled; the message names an example of each.
    """
    first = parts[0]
    for other in parts[1:]:
        if other.signature != first.signature:
            raise incompatible(first, other)
    _check_keys(parts)
    if any(p.valid is not None for p in parts):  # some had nodata: every part counts
        parts = [replace(p, valid=np.ascontiguousarray(p.channel_counts())) for p in parts]
        first = parts[0]
    if not all(has_cross_sums(p) == has_cross_sums(first) for p in parts):
        # never a covariance of some of the images: the records of all hold none
        parts = [without_cross_sums(p) for p in parts]
        first = parts[0]
    arrays = {name: np.concatenate([getattr(p, name) for p in parts])
              for name in first.array_fields()}
    keys = tuple(k for p in parts for k in p.keys)
    return first.replaced(keys=keys, **arrays)


def _check_keys(parts: list[Records]) -> None:
    """Refuse batches where some images have keys and others none: the joined batch would
    hold fewer keys than rows, and reports name images by row."""
    named = [p for p in parts if p.keys]
    unnamed = sum(len(p) for p in parts if not p.keys)
    if named and unnamed:
        count = sum(len(p) for p in named)
        raise IncompatibleImagesError(
            f"record batches cannot be joined: {numbered(count, 'image')} "
            f"{'has' if count == 1 else 'have'} keys ({named[0].keys[0]}, ...) and {unnamed:,} "
            f"{'has' if unnamed == 1 else 'have'} none; name every image or none")


def describe_signature(records: Records) -> str:
    """Readable 'uint8 R,G,B' description of what the records hold ('uint16, 13 bands
    B01..B12' beyond four channels)."""
    names = records.channel_names
    if len(names) > 4:
        return f"{records.dtype}, {len(names)} bands {names[0]}..{names[-1]}"
    return f"{records.dtype} {','.join(names)}"


def incompatible(a: Records, b: Records, example_a: str | None = None,
                 example_b: str | None = None) -> IncompatibleImagesError:
    """The error for two record batches that cannot be pooled, naming an example of each."""
    name_a = example_a or (a.keys[0] if a.keys else "one input")
    name_b = example_b or (b.keys[0] if b.keys else "another input")
    return IncompatibleImagesError(
        f"images cannot be pooled: {name_a} is {describe_signature(a)} but {name_b} is "
        f"{describe_signature(b)}; "
        f"{pooling_hint(a.raw_units or b.raw_units, (a.dtype, b.dtype))}")


def pooling_hint(rasters: bool, dtypes: tuple[str, str] = ("", "")) -> str:
    """What to do about images that cannot be pooled: a decode mode, one dtype, or
    separate runs. ``dtypes``: the two sides' pixel dtypes.

    Examples
    --------
    >>> pooling_hint(False, ("float64", "float32"))
    'convert them to one dtype (x.astype(np.float64)), or compute them separately'
    """
    if rasters:
        return ("rasters are pooled only with rasters of the same band count and dtype: "
                "compute them separately")
    floats = sum("float" in dtype for dtype in dtypes)
    # no decode mode makes arrays (or float TIFFs) alike: the values must change
    if floats == 2 and dtypes[0] != dtypes[1]:
        return "convert them to one dtype (x.astype(np.float64)), or compute them separately"
    if floats == 1:
        return ("convert them to one dtype and one scale (8-bit images to "
                "x.astype(np.float32) / 255 where the floats lie in [0, 1]), or compute them "
                "separately")
    return ("choose a decode mode that makes them alike (--mode RGB or --mode L), or "
            "compute them separately")


#: More pixels than any decodable image has (a terabyte of 8-bit greyscale): a record
#: claiming more is damaged, and the bound keeps the exact checks below in int64.
MAX_RECORD_PIXELS = 2**40


def impossible_rows(records: Records) -> np.ndarray:
    """Rows (bool, N) whose numbers no image could have produced.

    What every record of real pixels satisfies, per channel, with n pixels: n ≥ 1;
    finite min ≤ max (integers within the dtype's range); for integer images
    min·n ≤ Σx ≤ max·n, (Σx)²/n ≤ Σx² ≤ (min + max)·Σx − n·min·max (each pixel lies in
    [min, max]) and Σx² ≡ Σx (mod 2), all checked exactly; for float images a finite
    mean within [min, max] and 0 ≤ M2 ≤ n·(max − mean)·(mean − min) (Bhatia–Davis),
    with slack for rounding. Vectorised over rows: a cache can hold millions.

    Examples
    --------
    >>> import numpy as np
    >>> r = records_from_stack(np.arange(8, dtype=np.uint8).reshape(2, 2, 2, 1))
    >>> impossible_rows(r).tolist()
    [False, False]
    >>> impossible_rows(replace(r, sums=r.sums + [[0], [2000]])).tolist()
    [False, True]
    """
    n = records.pixels.astype(np.int64)
    # (C, N) copies: numpy is ~10x slower along a trailing axis of length 3.
    low, high = _columns(records.minimum), _columns(records.maximum)
    with np.errstate(invalid="ignore", over="ignore"):
        good = (n >= 1) & (n <= MAX_RECORD_PIXELS)
        counts = n
        if records.valid is not None:  # per channel: 0 to n valid values, none: NaN extremes
            counts = _columns(records.valid).astype(np.int64)
            empty = counts == 0
            good &= ((counts >= 0) & (counts <= n)).all(axis=0)
            good &= (~empty | (np.isnan(low) & np.isnan(high))).all(axis=0)
            # a channel without values must have zero sums: the bounds 0 ≤ x ≤ 0 say so below
            low, high = np.where(empty, 0.0, low), np.where(empty, 0.0, high)
        good &= (np.isfinite(low) & np.isfinite(high) & (low <= high)).all(axis=0)
        if isinstance(records, IntegerRecords):
            good &= _integer_records_possible(records, np.where(good, counts, 1), low, high,
                                              good)
        else:
            good &= _float_records_possible(records, counts.astype(np.float64), low, high)
        good &= _cross_possible(records)
    return ~good


def _columns(per_image: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(per_image).T)


def _cross_possible(records: Records) -> np.ndarray:
    """Rows whose cross sums (co-moments) some pixels could have made: |Σx_c·x_d| ≤
    √(Σx_c²·Σx_d²) (Cauchy–Schwarz; for floats |C_cd| ≤ √(M2_c·M2_d)), non-negative for
    unsigned pixels. Checked in float64 with a relative slack (2⁻⁴⁰ for exact integers,
    2⁻²⁰ for float co-moments summed in another order than M2): it never refuses a record
    of real pixels."""
    if not has_cross_sums(records):
        return np.ones(len(records), dtype=bool)
    integer = isinstance(records, IntegerRecords)
    cross = (records.cross_sums if integer else records.co_moments).astype(np.float64)
    squares = (records.sums_sq if integer else records.m2s).astype(np.float64)
    channels = records.channels
    if cross.ndim != 2 or cross.shape != (len(records), channels * (channels - 1) // 2):
        return np.zeros(len(records), dtype=bool)
    rows, cols = np.triu_indices(channels, 1)
    slack = 2.0**-40 if integer else 2.0**-20
    bound = np.sqrt(np.abs(squares[:, rows] * squares[:, cols])) * (1 + slack)
    if not integer:  # rounding of the deviations themselves (a constant channel's M2 is 0)
        size = np.abs(records.minimum) + np.abs(records.maximum)
        bound += records.pixels[:, None] * 2.0**-40 * size[:, rows] * size[:, cols]
    ok = np.isfinite(cross) & (np.abs(cross) <= bound)
    if integer and np.dtype(records.dtype).kind in "ub":
        ok &= cross >= 0
    return ok.all(axis=1)


def _integer_records_possible(records: IntegerRecords, n: np.ndarray, low: np.ndarray,
                              high: np.ndarray, good: np.ndarray) -> np.ndarray:
    kind = np.dtype(records.dtype)
    lowest, highest = (0, 1) if kind == np.bool_ else (np.iinfo(kind).min, np.iinfo(kind).max)
    ok = (low >= lowest) & (high <= highest) & (low == np.floor(low)) & (high == np.floor(high))
    safe = (ok & good).all(axis=0)  # other rows already fail: checked on zeros below
    low, high = (np.where(safe, v, 0).astype(np.int64) for v in (low, high))
    s, q = _columns(records.sums), _columns(records.sums_sq)
    ok &= (low * n <= s) & (s <= high * n) & ((q & 1) == (s & 1)) & (q >= 0)
    s, q = np.where(ok, s, 0), np.where(ok, q, 0)  # |Σx| < 2⁵⁶ now: negating it is safe
    ok &= _nonnegative([(n, q), (-s, s)])  # n·Σx² ≥ (Σx)²
    ok &= _nonnegative([(low + high, s), (-n, low * high), (-np.ones_like(q), q)])
    return ok.all(axis=0)


def _float_records_possible(records: FloatRecords, n: np.ndarray, low: np.ndarray,
                            high: np.ndarray) -> np.ndarray:
    mean, m2 = _columns(records.means), _columns(records.m2s)
    ok = np.isfinite(mean) & np.isfinite(_columns(records.residuals)) & np.isfinite(m2)
    # A float mean may round a few ulps past the extremes (0.1 three times is 0.3000...04).
    slack = 2.0**-30 * (np.abs(low) + np.abs(high))
    ok &= (low - slack <= mean) & (mean <= high + slack) & (m2 >= 0)
    spread = (high - mean) * (mean - low) + 2.0**-20 * (high - low) ** 2 + slack * slack
    return (ok & (m2 <= n * spread)).all(axis=0)


def _nonnegative(terms: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Exactly whether Σ a·b ≥ 0 elementwise, for int64 arrays that may overflow int64.

    Decided in float64 where the estimate is far from 0 (its error is below 2⁻⁴⁸ of
    Σ|a·b|), in int64 where Σ|a·b| < 2⁶¹, and in Python ints for what is left (constant
    or two-valued images of more than ~8 million pixels).
    """
    if sum(_magnitude(a) * _magnitude(b) for a, b in terms) < 2**61:
        return sum(a * b for a, b in terms) >= 0  # the usual case: no product overflows
    products = [a.astype(np.float64) * b.astype(np.float64) for a, b in terms]
    estimate, size = sum(products), sum(np.abs(p) for p in products)
    result = estimate >= 0
    small = size < 2.0**61
    if small.any():
        result[small] = sum(a[small] * b[small] for a, b in _broadcast(terms, small)) >= 0
    close = ~small & (np.abs(estimate) <= size * 2.0**-48)
    if close.any():
        result[close] = sum(a[close].astype(object) * b[close].astype(object)
                            for a, b in _broadcast(terms, close)) >= 0
    return result


def _broadcast(terms: list[tuple[np.ndarray, np.ndarray]],
               like: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(np.broadcast_to(a, like.shape), np.broadcast_to(b, like.shape)) for a, b in terms]


def _magnitude(values: np.ndarray) -> int:
    return max(abs(int(values.max(initial=0))), abs(int(values.min(initial=0))))
