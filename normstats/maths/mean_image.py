"""The mean image: per-position moments over images of one size, merged exactly.

Caffe's ``compute_image_mean`` averages every pixel position over a dataset whose images
share one size. For N images x_i of shape (H, W, C), at each position p::

    mean[p] = Σ_i x_i[p] / N
    std[p]  = sqrt((N·Σ_i x_i[p]² − (Σ_i x_i[p])²) / N²)     (population std over images)

both divided by the reported scale. Integer images (at most 16 bits) keep Σx and Σx² per
position as exact integers: int64 arrays, with Σx² split as ``x² = high·2¹⁶ + low``
(both below 2¹⁶) so that neither part can overflow before 2⁴⁷ images; totals add
exactly, so any chunking, order or worker count gives the same bits, and the results are
the correctly rounded values of the exact fractions (the std is the square root of the
correctly rounded variance, as for the pooled std). Float images accumulate in float64
around a reference image (the first), by batch two-pass moments and Chan, Golub and
LeVeque's pairwise merge ``M2 = M2a + M2b + δ²·na·nb/n`` between batches and tasks; they
are accurate (relative error around 1e-15, also 1e8 away from zero) but not
bit-identical between chunkings.

A task keeps one image's worth of accumulators (`MeanImageBuilder`). 8-bit images, one by
one or as stacks, add into a uint16 run and their squares into a uint32 one (257 images
cannot overflow them), which are folded into int64 every 257 images; a task of at most
257 images sends its uint16 run as it is, and the process that pools the tasks adds
them into totals of its own. The adds are the compiled loop of
`normstats.maths.fused.uint8_running_sums` (AVX-512 or AVX2 where the CPU has them),
bound by reading and writing the runs: measured on one core of a shared 2-core AMD EPYC
(Zen 4), one 256×256×3 image in cache takes ~7–10 µs (~22–34 µs with its squares) where
numpy's passes took ~18–31 µs (~100 µs). Over the 10,000 photo-like 256² JPEGs of
benchmarks/section_mean_image.py, each task run in one process plain and with the mean
image in turn, the mean image adds 5.3% to a task's CPU time (19 µs an image; numpy's
adds: 10–12%) and its std 9–10% (numpy's: 32–35%); on a uint8 array, stacks add at
~20 GB/s (32×32×3; 9 with the std) and ~5 GB/s (256×256×3), 2–6.5× numpy's blocks.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np

from normstats.errors import IncompatibleImagesError, NormstatsError
from normstats.maths import fused
from normstats.maths.placement import line_aligned_zeros

__all__ = ["PositionSums", "PositionMoments", "MeanImageTotals", "MeanImageBuilder",
           "MAX_IMAGES", "size_hint"]

#: Σx and each part of Σx² are below 2¹⁶ per image: int64 totals are exact up to 2⁴⁷ images.
MAX_IMAGES = 2**47

#: 8-bit images added into uint16 before folding into int64: 257·255 = 65535.
_UINT8_RUN = 257

#: Bytes of scratch a stack of wider integers or floats is cut into (squares, deviations).
_SCRATCH_BYTES = 4 << 20

_UNIFORM_HINT = "give resize= and center_crop= (--resize/--center-crop) to make them one size"


def size_hint(shape: tuple[int, ...], dtype: str) -> str:
    """``256×256×3 uint8``: how errors name an image's size.

    Examples
    --------
    >>> size_hint((4, 5, 3), "uint8")
    '4×5×3 uint8'
    """
    return f"{'×'.join(map(str, shape))} {dtype}"


def _check_alike(a: tuple[tuple[int, ...], str, str], b: tuple[tuple[int, ...], str, str]) -> None:
    """Refuse to pool images of two sizes (or dtypes): (shape, dtype, key) of each."""
    if a[:2] != b[:2]:
        raise IncompatibleImagesError(
            f"the mean image needs images of one size: {a[2]} is {size_hint(*a[:2])} but "
            f"{b[2]} is {size_hint(*b[:2])}; {_UNIFORM_HINT}")


def _divide(numerators: np.ndarray, denominator: Fraction) -> np.ndarray:
    """Correctly rounded float64 of ``numerators / denominator`` (exact integers)."""
    p, q = denominator.numerator, denominator.denominator
    if numerators.dtype != object:
        numerators = numerators.astype(np.int64, copy=False)
        largest = int(np.abs(numerators).max(initial=0))
        if largest * q < 2**53 and p < 2**53:  # exact operands: one IEEE rounding
            return (numerators * q).astype(np.float64) / float(p)
    # Python's int / int is correctly rounded at any size
    flat = [int(v) * q / p for v in numerators.ravel()]
    return np.array(flat, dtype=np.float64).reshape(numerators.shape)


@dataclass(frozen=True, eq=False)
class PositionSums:
    """Exact per-position Σx and Σx² of N integer images of one shape.

    Attributes
    ----------
    shape : tuple of int
        (H, W, C) of every image.
    dtype : str
        Their dtype (at most 16 bits).
    example : str
        One image's name, for errors.
    count : int
        N.
    total : numpy.ndarray
        Σx per position (H, W, C): int64, or the uint16 run of one task of at most 257
        8-bit images (merges give int64).
    square_low, square_high : numpy.ndarray or None
        Σ (x² mod 2¹⁶) and Σ (x² div 2¹⁶) per position, int64 (uint32 in a run); None when
        the std was not asked (``square_high`` also None for 8-bit images, x² < 2¹⁶).

    Examples
    --------
    >>> import numpy as np
    >>> b = MeanImageBuilder(with_std=True)
    >>> b.add("a", np.array([[[0]], [[255]]], np.uint8))
    >>> b.add("b", np.array([[[255]], [[255]]], np.uint8))
    >>> mean, std = b.result().finalize(scale=255)
    >>> mean.ravel().tolist(), std.ravel().tolist()
    ([0.5, 1.0], [0.5, 0.0])
    """

    shape: tuple[int, ...]
    dtype: str
    example: str
    count: int
    total: np.ndarray
    square_low: np.ndarray | None = None
    square_high: np.ndarray | None = None

    def merge(self, other: PositionSums | PositionMoments) -> PositionSums:
        """Exact elementwise sum (commutative and associative)."""
        count = self._count_with(other)
        return replace(self, count=count, total=np.add(self.total, other.total, dtype=np.int64),
                       square_low=_add(self.square_low, other.square_low),
                       square_high=_add(self.square_high, other.square_high))

    def add_in_place(self, other: PositionSums | PositionMoments) -> PositionSums:
        """``self.merge(other)``, adding into this total's own int64 arrays (a running
        total its owner made by a merge: never a value a task returned, which a caller
        may still hold), so that pooling many tasks allocates nothing."""
        count = self._count_with(other)
        pairs = [(self.total, other.total), (self.square_low, other.square_low),
                 (self.square_high, other.square_high)]
        if any((mine is None) != (theirs is None) or mine is not None and mine.dtype != np.int64
               for mine, theirs in pairs):
            return self.merge(other)
        for mine, theirs in pairs:
            if mine is not None:
                np.add(mine, theirs, out=mine)
        return replace(self, count=count)

    def _count_with(self, other: PositionSums | PositionMoments) -> int:
        """The count of ``self`` and ``other`` pooled, checked: images alike, and few
        enough for the int64 totals."""
        _check_alike((self.shape, self.dtype, self.example),
                     (other.shape, other.dtype, other.example))
        count = self.count + other.count
        if count >= MAX_IMAGES:
            raise NormstatsError(f"the mean image is exact up to 2**47 images, not {count:,}")
        return count

    def mean(self, scale: float = 1) -> np.ndarray:
        """Per-position mean / ``scale``, float64 (H, W, C), correctly rounded."""
        return _divide(self.total, self.count * Fraction(scale))

    def std(self, scale: float = 1) -> np.ndarray:
        """Per-position population std over images / ``scale``: the square root of the
        correctly rounded variance ``(N·Σx² − (Σx)²) / N²``."""
        if self.square_low is None:
            raise NormstatsError("the std of the mean image was not computed (ask for it "
                                 "with mean_image_std=True)")
        n, peak = self.count, _peak(self.dtype)
        exact_in_int64 = n * n * peak * peak < 2**62
        kind = np.int64 if exact_in_int64 else object
        squares = self.square_low.astype(kind)
        if self.square_high is not None:
            squares = squares + self.square_high.astype(kind) * (1 << 16)
        totals = self.total.astype(kind)
        numerator = n * squares - totals * totals
        variance = _divide(numerator, Fraction(n * n) * Fraction(scale) ** 2)
        return np.sqrt(variance)

    def finalize(self, scale: float = 1) -> tuple[np.ndarray, np.ndarray | None]:
        """(mean, std or None) in the reported scale."""
        return self.mean(scale), None if self.square_low is None else self.std(scale)


@dataclass(frozen=True, eq=False)
class PositionMoments:
    """Per-position float64 moments of N float images of one shape, around a reference.

    The values are taken as ``x − reference`` (the first image: for data far from zero
    and close to one another the difference is exact, so an offset of 1e8 costs no
    digits), then averaged by Welford's update and merged by Chan's.

    Attributes are those of `PositionSums` but ``reference`` (H, W, C), ``offset_mean``,
    the mean of ``x − reference``, and ``m2``, Σ (x − mean)² (None when the std was not
    asked).

    Examples
    --------
    >>> import numpy as np
    >>> b = MeanImageBuilder(with_std=True)
    >>> b.add_stack("x[0]", np.array([1e8 + 1, 1e8 + 2, 1e8 + 3]).reshape(3, 1, 1, 1))
    >>> [float(v[0, 0, 0]) for v in b.result().finalize()]
    [100000002.0, 0.816496580927726]
    """

    shape: tuple[int, ...]
    dtype: str
    example: str
    count: int
    reference: np.ndarray
    offset_mean: np.ndarray
    m2: np.ndarray | None = None

    def merge(self, other: PositionSums | PositionMoments) -> PositionMoments:
        """Chan, Golub and LeVeque's pairwise update, elementwise in float64, around this
        accumulator's reference."""
        _check_alike((self.shape, self.dtype, self.example),
                     (other.shape, other.dtype, other.example))
        if other.count == 0 or self.count == 0:
            return self if other.count == 0 else other
        other_mean = (other.reference - self.reference) + other.offset_mean
        mean, m2 = _chan(self.count, self.offset_mean, self.m2, other.count, other_mean,
                         other.m2)
        return replace(self, count=self.count + other.count, offset_mean=mean, m2=m2)

    def add_in_place(self, other: PositionSums | PositionMoments) -> PositionMoments:
        """``self.merge(other)``: Chan's update makes new arrays either way."""
        return self.merge(other)

    def mean(self, scale: float = 1) -> np.ndarray:
        return (self.reference + self.offset_mean) / scale

    def std(self, scale: float = 1) -> np.ndarray:
        if self.m2 is None:
            raise NormstatsError("the std of the mean image was not computed (ask for it "
                                 "with mean_image_std=True)")
        return np.sqrt(np.maximum(self.m2, 0.0) / self.count) / scale

    def finalize(self, scale: float = 1) -> tuple[np.ndarray, np.ndarray | None]:
        """(mean, std or None) in the reported scale."""
        return self.mean(scale), None if self.m2 is None else self.std(scale)


MeanImageTotals = PositionSums | PositionMoments


def _add(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
    if a is None or b is None:
        return a if b is None else b
    return np.add(a, b, dtype=np.int64)


def _peak(dtype: str) -> int:
    """The largest |x| of ``dtype`` (1 for bool)."""
    kind = np.dtype(dtype)
    if kind == np.bool_:
        return 1
    info = np.iinfo(kind)
    return max(int(info.max), -int(info.min))


def _chan(na: int, ma: np.ndarray, m2a: np.ndarray | None, nb: int, mb: np.ndarray,
          m2b: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
    n = na + nb
    delta = mb - ma
    mean = ma + delta * (nb / n)
    if m2a is None or m2b is None:
        return mean, None
    return mean, m2a + m2b + delta * delta * (na * (nb / n))


class MeanImageBuilder:
    """One task's mean-image accumulator: images added one by one or as stacks.

    Memory is one image's worth of accumulators (int64 totals, plus the uint16/uint32
    runs of 8-bit images), whatever the number of images.

    Examples
    --------
    >>> import numpy as np
    >>> b = MeanImageBuilder()
    >>> for k in range(3):
    ...     b.add(str(k), np.full((2, 2, 1), k, np.uint8))
    >>> b.result().mean().ravel().tolist()
    [1.0, 1.0, 1.0, 1.0]
    """

    def __init__(self, with_std: bool = False) -> None:
        self.with_std = with_std
        self._first: tuple[tuple[int, ...], str, str] | None = None
        self._shape: tuple[int, ...] = ()
        self._dtype: np.dtype | None = None
        self._count = 0
        self._total: np.ndarray | None = None
        self._low: np.ndarray | None = None
        self._high: np.ndarray | None = None
        self._run: np.ndarray | None = None  # 8-bit: uint16 Σx of the current run
        self._run_squares: np.ndarray | None = None  # 8-bit: uint32 Σx² of the run
        self._in_run = 0
        self._moments: PositionMoments | None = None

    def add(self, key: str, pixels: np.ndarray) -> None:
        """Add one image (H, W, C)."""
        if pixels.shape != self._shape or pixels.dtype != self._dtype:  # ~0.3 µs when alike
            self.start(key, pixels.shape, pixels.dtype)
        kind = self._dtype.kind
        if kind == "b" or self._dtype.itemsize == 1 and kind == "u":
            self._add_uint8(pixels.view(np.uint8), 1)
        elif kind in "iu":
            self._add_integers(pixels[None])
        else:
            self._add_floats(pixels[None].astype(np.float64))

    def add_stack(self, key: str, stack: np.ndarray) -> None:
        """Add a stack of images (n, H, W, C); ``key`` names its first image."""
        if len(stack) == 0:
            return
        self.start(key, stack.shape[1:], stack.dtype)
        if stack.dtype == np.bool_ or stack.dtype == np.uint8:
            self._add_uint8(stack.view(np.uint8), len(stack))
            return
        image_values = max(1, int(np.prod(stack.shape[1:])))
        rows = max(1, _SCRATCH_BYTES // (8 * image_values))
        for start in range(0, len(stack), rows):
            block = stack[start:start + rows]
            if stack.dtype.kind in "iu":
                self._add_integers(block)
            else:
                self._add_floats(block.astype(np.float64))

    def result(self) -> MeanImageTotals | None:
        """What was added (None if nothing was)."""
        if self._first is None:
            return None
        shape, dtype, example = self._first
        if np.dtype(dtype).kind == "f":
            if self._moments is None:  # started, but no image added
                zeros = np.zeros(shape)
                return PositionMoments(shape, dtype, example, 0, zeros, zeros.copy(),
                                       zeros.copy() if self.with_std else None)
            return self._moments
        if self._total is None and self._in_run:  # one run of 8-bit images: sent as it is
            return PositionSums(shape, dtype, example, self._count, self._run,
                                self._run_squares)
        self._fold()
        self._totals()
        return PositionSums(shape, dtype, example, self._count, self._total, self._low,
                            self._high)

    def start(self, key: str, shape: tuple[int, ...], dtype: np.dtype) -> None:
        """Fix the image size and dtype (the first image does it; checked for every other):
        a builder started and given no image holds zero totals."""
        seen = (tuple(int(n) for n in shape), str(dtype), key)
        if self._first is not None:
            _check_alike(self._first, seen)
            return
        if len(seen[0]) != 3:
            raise IncompatibleImagesError(f"the mean image takes images (H, W, C); {key} "
                                          f"has shape {seen[0]}")
        self._first, self._shape, self._dtype = seen, tuple(shape), np.dtype(dtype)

    def _totals(self) -> np.ndarray:
        """The int64 totals, made when first needed: a task of at most 257 8-bit images
        never makes them (its uint16 run is a quarter of their size, to send and to add)."""
        if self._total is None:
            self._total = np.zeros(self._shape, np.int64)
            if self.with_std:
                self._low = np.zeros(self._shape, np.int64)
                if self._dtype.itemsize > 1:
                    self._high = np.zeros(self._shape, np.int64)
        return self._total

    def _add_uint8(self, images: np.ndarray, count: int) -> None:
        """Add ``count`` 8-bit images (one (H, W, C) image, or a stack of them) onto the
        runs, folding each run into the int64 totals as it fills."""
        if self._run is None:  # on cache lines: every image's stores land on them
            self._run = line_aligned_zeros(self._shape, np.uint16)
            if self.with_std:
                self._run_squares = line_aligned_zeros(self._shape, np.uint32)
        done = 0
        while done < count:
            take = min(count - done, _UINT8_RUN - self._in_run)
            part = images if take == count else images[done:done + take]
            fused.uint8_running_sums(part, self._run, self._run_squares)
            done += take
            self._count += take
            self._in_run += take
            if self._in_run == _UINT8_RUN:
                self._fold()

    def _fold(self) -> None:
        """Move the 8-bit run into the int64 totals."""
        if self._in_run == 0:
            return
        self._totals()
        self._total += self._run
        self._run[...] = 0
        if self._run_squares is not None:
            self._low += self._run_squares
            self._run_squares[...] = 0
        self._in_run = 0

    def _add_integers(self, block: np.ndarray) -> None:
        self._totals()
        self._total += block.sum(axis=0, dtype=np.int64)
        self._count += len(block)
        if self.with_std:
            squares = block.astype(np.int64)
            squares *= squares
            self._low += np.bitwise_and(squares, 0xFFFF).sum(axis=0)
            if self._high is not None:
                self._high += np.right_shift(squares, 16).sum(axis=0)

    def _add_floats(self, block: np.ndarray) -> None:
        reference = block[0].copy() if self._moments is None else self._moments.reference
        offsets = block - reference
        mean = offsets.mean(axis=0)
        m2 = None
        if self.with_std:
            offsets -= mean
            m2 = np.einsum("i...,i...->...", offsets, offsets)
        shape, dtype, example = self._first
        part = PositionMoments(shape, dtype, example, len(block), reference, mean, m2)
        self._moments = part if self._moments is None else self._moments.merge(part)
