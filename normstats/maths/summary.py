"""The mergeable reduction of per-image records into dataset totals.

A `Summary` is what a Dask task returns and what the tree reduction merges. Every
field merges exactly (integer or fixed-point sums, min/max, counts), so the final
statistics are bit-identical whatever the task size, order or worker count.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from normstats.errors import IncompatibleImagesError
from normstats.maths import fused
from normstats.maths.covariance import float_cross_totals, integer_cross_totals
from normstats.maths.exact import fixed_sum
from normstats.maths.moments import IntegerMoments, Moments
from normstats.maths.records import (
    IntegerRecords,
    Records,
    Skipped,
    describe_signature,
    has_cross_sums,
    pooling_hint,
    records_from_stack,
    wants_cross_sums,
)

__all__ = ["Summary", "summarize", "summarize_stack"]


@dataclass(frozen=True)
class Summary:
    """Exact dataset totals, or an empty summary holding only skipped inputs.

    Attributes
    ----------
    signature : tuple or None
        (record kind, dtype, channels) shared by every pooled image; None when empty.
    description : str
        Readable dtype and channel count of the pooled images.
    example : str
        One image key, to name in an error about incompatible images.
    images : int
        Number of pooled images.
    moments : IntegerMoments or FloatMoments or None
        Pooled per-channel moments over every pixel.
    std_sum, std_ddof1_sum, var_sum : tuple of int
        Exact fixed-point sums over images of the per-image std (ddof 0 and 1) and
        variance (ddof 0), per channel.
    images_ddof1 : int
        Images with at least two pixels (the only ones with a sample std).
    channel_images, channel_images_ddof1 : tuple of int, optional
        Where nodata was left out: per channel, the images with at least one (two) valid
        values, over which that channel's per-image std is averaged (None: ``images`` and
        ``images_ddof1`` in every channel).
    minimum, maximum : tuple of float
        Per-channel extremes over all pixels (valid values only).
    cross : tuple of int, optional
        Exact totals over images of the channel cross sums Σx_c·x_d, pairs c < d (float
        images: of the co-moments plus n·m_c·m_d, in the moments' fixed point): what the
        channel covariance needs beside ``moments``. None when some record had none (the
        covariance was not asked).
    skipped : tuple of Skipped
        Inputs that were named and left out.

    Examples
    --------
    >>> import numpy as np
    >>> from normstats.maths.records import records_from_stack
    >>> a = summarize(records_from_stack(np.zeros((1, 2, 2, 1), np.uint8)))
    >>> b = summarize(records_from_stack(np.full((1, 2, 2, 1), 255, np.uint8)))
    >>> a.merge(b).images
    2
    """

    signature: tuple | None = None
    description: str = ""
    example: str = ""
    images: int = 0
    moments: Moments | None = None
    std_sum: tuple[int, ...] = ()
    std_ddof1_sum: tuple[int, ...] = ()
    var_sum: tuple[int, ...] = ()
    images_ddof1: int = 0
    channel_images: tuple[int, ...] | None = None
    channel_images_ddof1: tuple[int, ...] | None = None
    minimum: tuple[float, ...] = ()
    maximum: tuple[float, ...] = ()
    skipped: tuple[Skipped, ...] = ()
    cross: tuple[int, ...] | None = None

    def merge(self, other: Summary) -> Summary:
        """Exact, commutative and associative combination of two summaries."""
        if other.signature is None or self.signature is None:
            base = other if self.signature is None else self
            return _with_skipped(base, self.skipped + other.skipped)
        if other.signature != self.signature:
            hint = pooling_hint(self.signature[3] or other.signature[3],
                                (self.signature[1], other.signature[1]))
            raise IncompatibleImagesError(
                f"images cannot be pooled: {self.example} is {self.description} but "
                f"{other.example} is {other.description}; {hint}")
        return Summary(
            signature=self.signature, description=self.description, example=self.example,
            images=self.images + other.images,
            moments=self.moments.merge(other.moments),
            std_sum=_add(self.std_sum, other.std_sum),
            std_ddof1_sum=_add(self.std_ddof1_sum, other.std_ddof1_sum),
            var_sum=_add(self.var_sum, other.var_sum),
            images_ddof1=self.images_ddof1 + other.images_ddof1,
            channel_images=_merged_counts(self.channel_images, other.channel_images,
                                          self.images, other.images),
            channel_images_ddof1=_merged_counts(self.channel_images_ddof1,
                                                other.channel_images_ddof1,
                                                self.images_ddof1, other.images_ddof1),
            # a channel with no valid value in one part has NaN extremes there: fmin skips it
            minimum=tuple(float(v) for v in np.fmin(self.minimum, other.minimum)),
            maximum=tuple(float(v) for v in np.fmax(self.maximum, other.maximum)),
            skipped=self.skipped + other.skipped,
            cross=None if self.cross is None or other.cross is None else
            _add(self.cross, other.cross),
        )


def _add(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(x + y for x, y in zip(a, b))


def _merged_counts(a: tuple[int, ...] | None, b: tuple[int, ...] | None, all_a: int,
                   all_b: int) -> tuple[int, ...] | None:
    """Per-channel image counts of two parts; None stands for ``all_a`` (``all_b``) in
    every channel."""
    if a is None and b is None:
        return None
    size = len(a if a is not None else b)
    return _add(a if a is not None else (all_a,) * size, b if b is not None else (all_b,) * size)


def _with_skipped(base: Summary, skipped: tuple[Skipped, ...]) -> Summary:
    return replace(base, skipped=skipped)


def summarize(records: Records | None, skipped: tuple[Skipped, ...] = ()) -> Summary:
    """Reduce one batch of per-image records (possibly none) to a `Summary`.

    Examples
    --------
    >>> summarize(None, (Skipped("x.jpg", "zero-byte file"),)).images
    0
    """
    if records is None or len(records) == 0:
        return Summary(skipped=tuple(skipped))
    if records.valid is not None:
        return _summarize_valid(records, skipped)
    kernel = records.kernel_totals if isinstance(records, IntegerRecords) else None
    if kernel is not None and kernel.covers(records.pixels, records.sums):
        # made by the pass that read the images: no pass over the records
        return _kernel_summary(kernel, records, skipped, _cross_totals(records))
    (std_sum, std_ddof1_sum, var_sum), moments = _spread_sums(records)
    images_ddof1 = int((records.pixels >= 2).sum())
    minimum = tuple(float(v) for v in _columns(records.minimum).min(axis=1))
    maximum = tuple(float(v) for v in _columns(records.maximum).max(axis=1))
    return Summary(
        signature=records.signature,
        description=describe_signature(records),
        example=records.keys[0] if records.keys else "an array",
        images=len(records),
        moments=moments,
        std_sum=tuple(std_sum),
        std_ddof1_sum=tuple(std_ddof1_sum),
        var_sum=tuple(var_sum),
        images_ddof1=images_ddof1,
        minimum=minimum,
        maximum=maximum,
        skipped=tuple(skipped),
        cross=_cross_totals(records),
    )


def summarize_stack(stack: np.ndarray, channel_names: tuple[str, ...] | None = None
                    ) -> Summary | None:
    """The `Summary` of a uint8 (N, H, W, C) stack straight from the compiled pass that
    reads it, without records (`normstats.maths.fused.uint8_summary`): what
    ``summarize(records_from_stack(stack))`` gives, bit for bit, where no one keeps the
    records; with the channel cross sums where they are wanted (`wants_cross_sums`),
    read right after the moments, a part of the stack at a time, from cache. None where
    that pass does not make it (another dtype, more than `fused.KERNEL_CHANNELS`
    channels, no compiled kernel, or images whose spreads numpy must compute): the
    caller summarises records then.

    Examples
    --------
    >>> stack = np.arange(24, dtype=np.uint8).reshape(2, 2, 2, 3)
    >>> summarize_stack(stack) == summarize(records_from_stack(stack))
    True
    """
    if stack.dtype != np.uint8 or stack.ndim != 4 or stack.shape[-1] > fused.KERNEL_CHANNELS:
        return None
    if len(stack) == 0:
        return Summary()
    cross = wants_cross_sums()
    kernel = fused.uint8_summary(stack, cross)
    if kernel is None:
        return None
    # the records' signature and description, from records of no image
    template = records_from_stack(stack[:0], channel_names=channel_names, cross=False)
    return _kernel_summary(kernel, template, (), kernel.cross)


def _kernel_summary(kernel: fused.KernelTotals, records: Records,
                    skipped: tuple[Skipped, ...], cross: tuple[int, ...] | None) -> Summary:
    """The `Summary` of the images a compiled pass read, from its totals; ``records``
    (theirs, or of none of them) give the signature, description and example."""
    (std_sum, std_ddof1_sum, var_sum), totals, squares = kernel.spreads()
    return Summary(
        signature=records.signature,
        description=describe_signature(records),
        example=records.keys[0] if records.keys else "an array",
        images=kernel.images,
        moments=IntegerMoments(kernel.images * kernel.pixels, tuple(totals), tuple(squares)),
        std_sum=tuple(std_sum),
        std_ddof1_sum=tuple(std_ddof1_sum),
        var_sum=tuple(var_sum),
        images_ddof1=kernel.images_ddof1,
        minimum=kernel.minimum,
        maximum=kernel.maximum,
        skipped=tuple(skipped),
        cross=cross,
    )


def _spread_sums(records: Records) -> tuple[tuple[list[int], list[int], list[int]], Moments]:
    """Exact fixed-point sums over images of each image's std, sample std (images of two
    pixels or more) and variance, per channel, and the records' pooled moments: one
    compiled pass over integer records (`normstats.maths.fused.integer_spreads`: on small
    images the summary is a sizeable share of a task, a fifth of the reading of 32x32
    ones), or numpy's: the same values, so the same sums."""
    compiled = None
    if isinstance(records, IntegerRecords):
        compiled = fused.integer_spreads(records.pixels, records.sums, records.sums_sq)
    if compiled is None:
        var0 = records.image_variance(0)
        sample = records.image_variance(1)[records.pixels >= 2]
        return ((fixed_sum(np.sqrt(var0)), fixed_sum(np.sqrt(sample)), fixed_sum(var0)),
                records.moments())
    (std, sample_std, variance), totals, squares = compiled
    return ((std, sample_std, variance),
            IntegerMoments(int(np.sum(records.pixels, dtype=np.int64)), tuple(totals),
                           tuple(squares)))


def _cross_totals(records: Records) -> tuple[int, ...] | None:
    """Exact totals of the records' cross sums (co-moments), or None without them."""
    if not has_cross_sums(records):
        return None
    if isinstance(records, IntegerRecords):
        return integer_cross_totals(records.cross_sums)
    return float_cross_totals(records.pixels, records.means, records.residuals,
                              records.co_moments)


def _summarize_valid(records: Records, skipped: tuple[Skipped, ...]) -> Summary:
    """`summarize` of records where nodata was left out: each channel's per-image std is
    summed over the images with valid values in it (two for the sample std), the others
    counted apart; the extremes are those of valid values."""
    counts = records.channel_counts()
    has_values, has_sample_std = counts >= 1, counts >= 2
    with np.errstate(invalid="ignore", divide="ignore"):
        var0 = np.where(has_values, records.image_variance(0), 0.0)
        var1 = np.where(has_sample_std, records.image_variance(1), 0.0)
    return Summary(
        signature=records.signature,
        description=describe_signature(records),
        example=records.keys[0] if records.keys else "an array",
        images=len(records),
        moments=records.moments(),
        std_sum=tuple(fixed_sum(np.sqrt(var0))),
        std_ddof1_sum=tuple(fixed_sum(np.sqrt(var1))),
        var_sum=tuple(fixed_sum(var0)),
        images_ddof1=int((records.pixels >= 2).sum()),
        channel_images=tuple(int(v) for v in has_values.sum(axis=0)),
        channel_images_ddof1=tuple(int(v) for v in has_sample_std.sum(axis=0)),
        minimum=tuple(float(v) for v in np.fmin.reduce(_columns(records.minimum), axis=1)),
        maximum=tuple(float(v) for v in np.fmax.reduce(_columns(records.maximum), axis=1)),
        skipped=tuple(skipped),
    )


def _columns(per_image: np.ndarray) -> np.ndarray:
    """(C, N) contiguous copy of (N, C) values: reducing rows of it is ~10x faster."""
    return np.ascontiguousarray(per_image.T)
