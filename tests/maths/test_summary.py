"""`Summary`: exact dataset totals that merge in any order, keep every skip, and refuse to
pool images that differ, naming one of each."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from normstats.errors import IncompatibleImagesError
from normstats.maths.records import Skipped, records_from_stack
from normstats.maths.summary import Summary, summarize


def test_images_of_different_kinds_are_refused_naming_one_of_each():
    a = summarize(records_from_stack(np.zeros((1, 2, 2, 3), np.uint8), keys=("a.png",)))
    b = summarize(records_from_stack(np.zeros((1, 2, 2, 1), np.uint16), keys=("b.png",)))
    with pytest.raises(IncompatibleImagesError) as raised:
        a.merge(b)
    assert str(raised.value) == (
        "images cannot be pooled: a.png is uint8 c0,c1,c2 but b.png is uint16 L; choose a "
        "decode mode that makes them alike (--mode RGB or --mode L), or compute them separately")
    unnamed = summarize(records_from_stack(np.zeros((1, 2, 2, 1), np.float32)))
    assert (unnamed.example, unnamed.description) == ("an array", "float32 L")


def test_integer_and_float_images_are_told_to_share_a_dtype_not_a_decode_mode():
    """Arrays of uint8 beside float32 (or float64 beside float32) were told to choose a
    decode mode, which no array has: they are told to convert to one dtype and scale."""
    import normstats

    pixels = np.zeros((5, 4, 3), np.uint8)
    with pytest.raises(IncompatibleImagesError, match=r"is float32 c0,c1,c2; convert them to "
                       r"one dtype and one scale \(8-bit images to x.astype\(np.float32\) "
                       r"/ 255 where the floats lie in \[0, 1\]\), or compute them "
                       r"separately$"):
        normstats.compute([pixels, pixels, pixels.astype(np.float32)], workers=1)
    with pytest.raises(IncompatibleImagesError, match=r"convert them to one dtype "
                       r"\(x.astype\(np.float64\)\), or compute them separately$"):
        normstats.compute([pixels.astype(np.float64), pixels.astype(np.float32)], workers=1)


def test_skips_are_kept_in_order_whichever_side_is_empty():
    one, two, three = (Skipped(f"{i}.png", "truncated") for i in range(3))
    full = summarize(records_from_stack(np.ones((2, 1, 1, 1), np.uint8), keys=("x", "y")),
                     (one,))
    empty = summarize(None, (two,))
    assert empty.merge(full).skipped == (two, one) and empty.merge(full).images == 2
    assert full.merge(empty).skipped == (one, two) and full.merge(empty).images == 2
    assert empty.merge(summarize(None, (three,))) == Summary(skipped=(two, three))
    assert summarize(records_from_stack(np.ones((0, 1, 1, 1), np.uint8)), (one,)) == \
        Summary(skipped=(one,))


def test_totals_add_up_and_extremes_are_kept():
    images = np.arange(2 * 3 * 1 * 2, dtype=np.uint8).reshape(2, 3, 1, 2)
    a = summarize(records_from_stack(images[:1]))
    b = summarize(records_from_stack(images[1:]))
    both = summarize(records_from_stack(images))
    assert a.merge(b) == both == b.merge(a)
    assert (both.minimum, both.maximum, both.images, both.images_ddof1) == \
        ((0.0, 1.0), (10.0, 11.0), 2, 2)


def test_only_images_of_two_pixels_or_more_have_a_sample_std():
    single = summarize(records_from_stack(np.full((3, 1, 1, 1), 7, np.uint8)))
    assert (single.images, single.images_ddof1, single.std_ddof1_sum) == (3, 0, (0,))
    pair = summarize(records_from_stack(np.array([0, 2], np.uint8).reshape(1, 1, 2, 1)))
    assert pair.images_ddof1 == 1 and pair.std_ddof1_sum != (0,)  # sqrt(2) > 0
    merged = single.merge(pair)
    assert (merged.images, merged.images_ddof1) == (4, 1)


def test_integer_records_summarise_the_same_with_or_without_the_compiled_spreads(
        rng, monkeypatch):
    """Each image's std, sample std and variance take one compiled pass for integer
    records (`fused.integer_spreads`); numpy's passes give the same exact sums, images
    of one pixel (no sample std) among them."""
    from normstats.maths import fused
    from normstats.maths.records import concat_records

    records = concat_records([
        records_from_stack(rng.integers(0, 256, (300, 5, 7, 3), dtype=np.uint8)),
        records_from_stack(rng.integers(0, 256, (20, 1, 1, 3), dtype=np.uint8)),
        records_from_stack(np.full((4, 3, 3, 3), 9, np.uint8))])
    compiled = summarize(records)
    monkeypatch.setattr(fused, "integer_spreads", lambda *arguments: None)
    assert summarize(records) == compiled
    assert compiled.images_ddof1 == 304 and compiled.std_sum != compiled.std_ddof1_sum


def test_the_totals_the_kernel_made_as_it_read_are_the_summary(rng, monkeypatch):
    """Records of a uint8 stack carry the totals the compiled pass made as it read the
    images (spreads, extremes); the summary takes them, with no pass over the records,
    and they are the exact totals the records give."""
    from normstats.maths import fused, summary

    records = records_from_stack(rng.integers(0, 256, (300, 5, 7, 3), dtype=np.uint8))
    assert records.kernel_totals is not None
    with_kernel = summarize(records)
    monkeypatch.setattr(fused, "integer_spreads", lambda *arguments: None)  # numpy's way
    assert with_kernel == summarize(records.replaced())

    def no_pass(*arguments):
        raise AssertionError("the summary passed over records whose totals it holds")
    monkeypatch.setattr(fused, "integer_spreads", no_pass)
    monkeypatch.setattr(summary, "_columns", no_pass)
    assert summarize(records) == with_kernel


@pytest.mark.parametrize("shape", [(300, 5, 7, 3), (9, 1, 1, 1), (4, 2, 3, 128),
                                   (1, 6, 6, 5), (0, 3, 3, 3)])
def test_a_stack_summarised_without_records_is_its_records_summary(shape, rng):
    """`summarize_stack`: the summary of a uint8 stack from the pass that reads it, without
    records, is the summary of its records, field for field, with its channel names, and
    against Python ints for the pooled sums."""
    from normstats.maths.summary import summarize_stack

    stack = rng.integers(0, 256, shape, dtype=np.uint8)
    names = tuple(f"b{i}" for i in range(shape[3]))
    for channel_names in (None, names):
        made = summarize_stack(stack, channel_names)
        assert made == summarize(records_from_stack(stack, channel_names=channel_names))
    if len(stack):
        assert made.signature[2] == names
        assert made.moments.total == tuple(int(v) for v in stack.astype(np.int64).sum(
            axis=(0, 1, 2)))


@pytest.mark.parametrize("shape", [(300, 5, 7, 3), (4, 2, 3, 5), (3, 1, 1, 1)])
def test_a_stack_summarised_with_cross_sums_is_its_records_summary(shape, rng):
    """With the channel cross sums wanted, their totals too (Python ints of the pairs)."""
    from normstats.maths.records import cross_sums_wanted
    from normstats.maths.summary import summarize_stack

    stack = rng.integers(0, 256, shape, dtype=np.uint8)
    with cross_sums_wanted(True):
        made = summarize_stack(stack)
        assert made == summarize(records_from_stack(stack))
    wide = stack.reshape(-1, shape[3]).astype(np.int64).tolist()
    pairs = [(c, d) for c in range(shape[3]) for d in range(c + 1, shape[3])]
    assert made.cross == tuple(sum(p[c] * p[d] for p in wide) for c, d in pairs)


def test_a_stack_the_summary_pass_does_not_make_is_left_to_records(rng):
    """None (the caller summarises records): another dtype, more channels than one call
    takes, or images whose spreads numpy must compute."""
    from normstats.maths import fused
    from normstats.maths.summary import summarize_stack

    assert summarize_stack(np.zeros((2, 3, 3, 3), np.uint16)) is None
    assert summarize_stack(np.zeros((2, 3, 3, fused.KERNEL_CHANNELS + 1), np.uint8)) is None
    assert summarize_stack(np.full((1, 8192, 8192, 1), 255, np.uint8)) is None


def test_records_made_from_records_never_carry_stale_spreads(rng):
    """Records made from records (other rows, channels or values) drop the kernel's
    totals (`replaced`, `take`, `concat_records`); and totals that no longer match their
    records (other images, pixel counts or sums: made by `dataclasses.replace`, which
    keeps them) are never summed: the summary is that of the records as they stand."""
    from dataclasses import replace

    from normstats.maths.records import concat_records

    stack = rng.integers(0, 256, (50, 4, 4, 3), dtype=np.uint8)
    records = records_from_stack(stack)
    assert records.kernel_totals is not None
    assert records.take(np.arange(10)).kernel_totals is None
    assert concat_records([records, records]).kernel_totals is None
    assert records.replaced(keys=()).kernel_totals is None

    def fresh(changed):  # the changed records' own summary: numpy's way from their values
        return summarize(changed.replaced())

    black = np.zeros_like(records.sums)  # a black tile of 16 pixels added: Σx unchanged
    for changed in (replace(records, pixels=records.pixels + 16, sums_sq=records.sums_sq + black),
                    replace(records, sums=records.sums + 1),
                    replace(records, sums=records.sums[:, :2], sums_sq=records.sums_sq[:, :2],
                            minimum=records.minimum[:, :2], maximum=records.maximum[:, :2],
                            channel_names=records.channel_names[:2]),
                    replace(records.take(np.arange(49)), kernel_totals=records.kernel_totals)):
        assert changed.kernel_totals is records.kernel_totals
        assert summarize(changed) == fresh(changed) != summarize(records)


def _float_sqrt_sum(cells: list[Fraction]) -> int:
    """Fixed-point sum of the square roots of correctly rounded variances."""
    from normstats.maths.exact import fixed_sum

    return fixed_sum(np.sqrt(np.array([[float(v)] for v in cells])))[0]


def test_a_summary_with_nodata_counts_each_band_over_its_valid_values():
    """Images of two pixels with 0, 1 or 2 valid values per band: the per-image std of a
    band is summed over the images with one valid value or more, the sample std over
    those with two; no RuntimeWarning for the others (0/0, x/0)."""
    import warnings

    from normstats.maths.exact import fixed_sum
    from normstats.maths.masked import masked_records
    from normstats.maths.records import describe_signature

    pixels = np.array([[[0, 5], [0, 9]], [[4, 1], [0, 2]], [[3, 0], [6, 0]],
                       [[1, 8], [2, 0]]], np.uint16).reshape(4, 1, 2, 2)
    records = masked_records(pixels, nodata=0, keys=("k0", "k1", "k2", "k3"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        summary = summarize(records, (Skipped("bad.png", "damaged"),))
    bands = [[[int(v) for v in image[..., c].ravel() if v] for image in pixels]
             for c in range(2)]

    def variance(values: list[int], ddof: int) -> Fraction:
        mean = Fraction(sum(values), len(values))
        return sum((v - mean) ** 2 for v in values) / (len(values) - ddof)

    assert summary.images == 4 and summary.images_ddof1 == 4
    assert summary.channel_images == (3, 3) and summary.channel_images_ddof1 == (2, 2)
    for c, band in enumerate(bands):
        with_values = [variance(v, 0) for v in band if len(v) >= 1]
        with_two = [variance(v, 1) for v in band if len(v) >= 2]
        assert summary.std_sum[c] == _float_sqrt_sum(with_values)
        assert summary.std_ddof1_sum[c] == _float_sqrt_sum(with_two)
        assert summary.var_sum[c] == fixed_sum(np.array([[float(v)] for v in with_values]))[0]
    assert (summary.minimum, summary.maximum) == ((1.0, 1.0), (6.0, 9.0))
    assert summary.example == "k0" and summary.description == describe_signature(records)
    assert summary.skipped == (Skipped("bad.png", "damaged"),)
    unnamed = summarize(masked_records(pixels, nodata=0))
    assert unnamed.example == "an array"


def test_summaries_with_and_without_nodata_counts_merge():
    from normstats.maths.masked import masked_records

    pixels = np.arange(1, 17, dtype=np.uint16).reshape(4, 1, 2, 2)
    pixels[0, 0, 0, 0] = 0
    with_nodata = summarize(masked_records(pixels, nodata=0), (Skipped("a", "x"),))
    plain = summarize(masked_records(pixels[:3]), (Skipped("b", "y"),))
    assert plain.channel_images is None
    for merged in (with_nodata.merge(plain), plain.merge(with_nodata)):
        assert merged.channel_images == (7, 7) and merged.channel_images_ddof1 == (6, 7)
    assert with_nodata.merge(plain).skipped == (Skipped("a", "x"), Skipped("b", "y"))


def test_the_sample_std_of_float_images_of_two_pixels():
    images = np.array([[[0.5], [2.0]], [[1.0], [1.25]]]).reshape(2, 1, 2, 1)
    summary = summarize(records_from_stack(images))
    sample = [Fraction(9, 8), Fraction(1, 32)]  # (a − b)²/2 of each image
    assert summary.std_ddof1_sum[0] == _float_sqrt_sum(sample)
    assert summary.images_ddof1 == 2


def test_a_raster_pooled_with_other_images_is_told_to_compute_them_apart():
    from normstats.maths.masked import masked_records

    raster = summarize(masked_records(np.zeros((1, 2, 2, 3), np.uint16), raw_units=True))
    photo = summarize(records_from_stack(np.zeros((1, 2, 2, 3), np.uint8)))
    for a, b in ((raster, photo), (photo, raster)):
        with pytest.raises(IncompatibleImagesError) as caught:
            a.merge(b)
        assert str(caught.value).endswith(
            "rasters are pooled only with rasters of the same band count and dtype: compute "
            "them separately")


def test_a_summary_merged_with_one_without_cross_sums_has_none():
    stack = np.arange(12, dtype=np.uint8).reshape(1, 2, 2, 3)
    with_cross = summarize(records_from_stack(stack, cross=True))
    without = summarize(records_from_stack(stack))
    assert with_cross.cross is not None
    assert with_cross.merge(without).cross is None and without.merge(with_cross).cross is None
    assert with_cross.merge(with_cross).cross == tuple(2 * v for v in with_cross.cross)
