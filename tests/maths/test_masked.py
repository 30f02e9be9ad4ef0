"""Records with nodata left out band by band, against Python-int and Fraction oracles; the
compiled kernel against numpy's passes; the records' checks and summaries with ``valid``."""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest

from normstats.errors import EmptyDatasetError
from normstats.maths import masked
from normstats.maths.masked import MaskedRows, masked_records, unusable_images, valid_values
from normstats.maths.records import concat_records, impossible_rows, records_from_stack
from normstats.maths.summary import summarize
from normstats.results.stats import DatasetStats

INTEGERS = ("uint8", "uint16", "int16")


def _stack(rng: np.random.Generator, dtype: str, shape=(6, 5, 7, 4)) -> np.ndarray:
    info = np.iinfo(dtype)
    stack = rng.integers(info.min, info.max, shape, endpoint=True, dtype=dtype)
    stack[0, :3] = 9  # nodata in blocks
    stack[1, ..., 2] = 9  # a band without one valid value in image 1
    stack[2, 1, 1] = 9
    return stack


def _oracle(stack: np.ndarray, keep: np.ndarray) -> dict[str, list]:
    """Per image and band from Python ints: count, Σx, Σx², min, max of the kept values."""
    out: dict[str, list] = {k: [] for k in ("count", "sum", "squares", "low", "high")}
    for image, kept in zip(stack, keep):
        row = {k: [] for k in out}
        for c in range(stack.shape[-1]):
            values = [int(v) for v in image[..., c][kept[..., c]].tolist()]
            row["count"].append(len(values))
            row["sum"].append(sum(values))
            row["squares"].append(sum(v * v for v in values))
            row["low"].append(min(values) if values else math.nan)
            row["high"].append(max(values) if values else math.nan)
        for k in out:
            out[k].append(row[k])
    return out


def _assert_exact(records, stack: np.ndarray, keep: np.ndarray) -> None:
    """Integer records with ``valid`` equal, value for value, to `_oracle` of the kept values."""
    expected = _oracle(stack, keep)
    assert records.valid.tolist() == expected["count"]
    assert records.sums.tolist() == expected["sum"]
    assert records.sums_sq.tolist() == expected["squares"]
    np.testing.assert_array_equal(records.minimum, np.array(expected["low"], float))
    np.testing.assert_array_equal(records.maximum, np.array(expected["high"], float))


@pytest.mark.parametrize("dtype", INTEGERS)
@pytest.mark.parametrize("compiled", [True, False], ids=["kernel", "numpy"])
def test_integer_records_are_the_exact_sums_of_the_valid_values(rng, monkeypatch, dtype,
                                                                compiled):
    if not compiled:
        monkeypatch.setattr(masked, "_kernel", lambda: None)
    stack = _stack(rng, dtype)
    records = masked_records(stack, nodata=9, keys=tuple("abcdef"))
    _assert_exact(records, stack, stack != 9)
    assert not impossible_rows(records).any()


def test_the_kernel_and_numpy_agree_on_extreme_values_and_images_of_many_bands(rng, monkeypatch):
    for dtype in INTEGERS:
        info = np.iinfo(dtype)
        stack = rng.choice(np.array([info.min, info.max, 0, 1], dtype), (3, 9, 11, 20))
        compiled = masked_records(stack, nodata=float(info.max))
        monkeypatch.setattr(masked, "_kernel", lambda: None)
        numpy_passes = masked_records(stack, nodata=float(info.max))
        monkeypatch.undo()
        for name in ("valid", "sums", "sums_sq", "minimum", "maximum"):
            np.testing.assert_array_equal(getattr(compiled, name), getattr(numpy_passes, name))


def test_a_mask_leaves_out_exactly_what_it_marks(rng):
    stack = _stack(rng, "uint16")
    mask = rng.random(stack.shape) < 0.3
    records = masked_records(stack, mask=mask)
    expected = _oracle(stack, ~mask)
    assert records.valid.tolist() == expected["count"]
    assert records.sums.tolist() == expected["sum"]


def test_without_a_nodata_that_can_match_the_records_are_the_plain_ones(rng):
    stack = _stack(rng, "uint8")
    for nodata in (None, 300.0, -1.0, 0.5, math.nan):  # none of them is a uint8 value
        records = masked_records(stack, nodata=nodata)
        plain = records_from_stack(stack)
        assert records.valid is None
        for name in ("sums", "sums_sq", "minimum", "maximum", "pixels"):
            np.testing.assert_array_equal(getattr(records, name), getattr(plain, name))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "uint32"])
def test_float_and_32_bit_moments_of_the_valid_values_match_fractions(rng, dtype):
    stack = rng.normal(1e4, 3.0, (4, 6, 5, 3))
    if dtype in ("int32", "uint32"):
        stack = rng.integers(0, 2**31 - 1, (4, 6, 5, 3))
        stack[0, :2] = 7
    stack = stack.astype(dtype)
    nodata = 7.0 if dtype.endswith("int32") else None
    if nodata is None:
        stack[0, :2] = np.nan
    stack[3, ..., 1] = np.nan if nodata is None else 7
    records = masked_records(stack, nodata=nodata)
    assert type(records).__name__ == "FloatRecords" and records.dtype == dtype
    keep = valid_values(stack, nodata)
    for i, image in enumerate(stack):
        for c in range(3):
            values = [Fraction(float(v)) for v in image[..., c][keep[i, ..., c]].tolist()]
            assert records.valid[i, c] == len(values)
            if not values:
                assert math.isnan(records.minimum[i, c]) and records.m2s[i, c] == 0
                continue
            mean = sum(values) / len(values)
            m2 = sum((v - mean) ** 2 for v in values)
            got = Fraction(records.means[i, c]) + Fraction(records.residuals[i, c])
            assert abs(got - mean) <= abs(mean) * Fraction(1, 10**15)
            assert abs(Fraction(records.m2s[i, c]) - m2) <= m2 * Fraction(1, 10**12) + 1e-9


def test_float_records_with_every_value_valid_are_the_plain_ones(rng):
    stack = rng.normal(5.0, 2.0, (3, 4, 6, 2))
    records, plain = masked_records(stack), records_from_stack(stack)
    assert records.valid.tolist() == [[24, 24]] * 3
    for name in ("means", "residuals", "m2s", "minimum", "maximum"):
        np.testing.assert_array_equal(getattr(records, name), getattr(plain, name))


def test_images_with_infinite_valid_values_are_unusable():
    stack = np.array([1.0, np.nan, np.inf, -np.inf]).reshape(4, 1, 1, 1)
    assert unusable_images(masked_records(stack)).tolist() == [False, False, True, True]


def test_masked_rows_reduce_one_image_at_a_time_as_a_stack_would(rng):
    stack = _stack(rng, "uint16")
    rows = MaskedRows(capacity=2)  # fewer rows than images: the group grows
    for i, image in enumerate(stack):
        rows.add(str(i), image, ("a", "b", "c", "d"), 9.0, True)
    (batch,) = rows.records()
    whole = masked_records(stack, nodata=9, keys=tuple(map(str, range(6))),
                           channel_names=("a", "b", "c", "d"), raw_units=True)
    assert batch.signature == whole.signature
    for name in ("pixels", "valid", "sums", "sums_sq", "minimum", "maximum"):
        np.testing.assert_array_equal(getattr(batch, name), getattr(whole, name))


def _pooled_oracle(stack: np.ndarray, keep: np.ndarray, c: int) -> tuple[float, float]:
    values = [int(v) for v in stack[..., c][keep[..., c]].tolist()]
    n, total = len(values), sum(values)
    return (float(Fraction(total, n)),
            math.sqrt(float(Fraction(n * sum(v * v for v in values) - total * total, n * n))))


def test_pooled_and_per_image_statistics_count_each_band_over_its_valid_values(rng):
    stack = _stack(rng, "int16")
    stats = DatasetStats.from_summary(summarize(masked_records(stack, nodata=9)), scale=1)
    keep = stack != 9
    for c in range(4):
        assert (stats.mean[c], stats.std[c]) == _pooled_oracle(stack, keep, c)
        assert stats.counts[c] == int(keep[..., c].sum())
        per_image = [math.sqrt(float(Fraction(
            len(v) * sum(x * x for x in v) - sum(v) ** 2, len(v) ** 2)))
            for v in ([int(x) for x in image[..., c][k[..., c]].tolist()]
                      for image, k in zip(stack, keep)) if v]
        assert stats.nodata_images[c] == len(stack) - len(per_image)
        assert stats.per_image_std[c] == pytest.approx(sum(per_image) / len(per_image),
                                                       rel=4e-16)
    assert stats.nodata_images == (0, 0, 1, 0)  # image 1 has no valid value in band 2


def test_records_with_and_without_valid_counts_pool_exactly(rng):
    stack = _stack(rng, "uint8")
    with_nodata = masked_records(stack[:3], nodata=9)
    plain = records_from_stack(stack[3:])
    pooled = summarize(concat_records([with_nodata, plain]))
    apart = summarize(with_nodata).merge(summarize(plain))
    keep = np.concatenate([stack[:3] != 9, np.ones_like(stack[3:], bool)])
    for c in range(4):
        values = [int(v) for v in stack[..., c][keep[..., c]].tolist()]
        assert pooled.moments.channel_counts()[c] == len(values)
        assert pooled.moments.total[c] == sum(values) == apart.moments.total[c]
    assert pooled.channel_images == apart.channel_images == (6, 6, 5, 6)
    assert pooled.minimum == apart.minimum and pooled.std_sum == apart.std_sum


def test_a_band_without_any_valid_value_is_a_clear_error():
    stack = np.zeros((2, 3, 3, 2), np.uint16)
    stack[..., 0] = 5
    with pytest.raises(EmptyDatasetError, match="band c1 has no valid pixel in any of the 2"):
        DatasetStats.from_summary(summarize(masked_records(stack, nodata=0)))


def test_impossible_valid_counts_and_extremes_are_caught(rng):
    records = masked_records(_stack(rng, "uint16"), nodata=9)
    assert not impossible_rows(records).any()
    broken = [replace(records, valid=records.valid + np.eye(6, 4, dtype=np.int64) * 1000),
              replace(records, minimum=np.where(records.valid == 0, 3.0, records.minimum)),
              replace(records, sums=np.where(records.valid == 0, 5, records.sums))]
    for damaged in broken:
        assert impossible_rows(damaged).any()


@pytest.mark.parametrize("dtype", INTEGERS)
@pytest.mark.parametrize("channels", [1, 2, 3, 5, 13, 17, 31, 64, 65, 100])
def test_every_band_count_of_the_kernel_is_exact(rng, dtype, channels):
    """The kernel reads an image `lanes` values at a time, a multiple of the band count and
    of 32 (512 values for 1 band, 416 for 13, 544 for 17), and beyond 2,048 of them (65
    bands, 100) one band at a time: both against Python ints, with images that end partway
    into a row of lanes, nodata in blocks and whole lanes of nodata."""
    info = np.iinfo(dtype)
    stack = rng.integers(info.min, info.max, (3, 11, 13, channels), endpoint=True, dtype=dtype)
    stack[0, :4] = 9  # nodata in blocks
    stack[1, ..., channels // 2] = 9  # a band without one valid value
    stack[2, ::2, :, 0] = info.max  # extremes beside nodata
    stack[2, 1::2, :, -1] = info.min
    records = masked_records(stack, nodata=9)
    _assert_exact(records, stack, stack != 9)


@pytest.mark.parametrize("dtype", INTEGERS)
def test_the_kernel_s_32_bit_lane_sums_are_flushed_before_they_overflow(dtype):
    """Each lane sums its values in 32 bits for 32,768 rows of lanes, then adds them into
    int64: an image of one band of 2²⁴ + 1,000 extreme values (over 32,768 rows of 512
    lanes) sums exactly. The oracle is Python's: n·v and n·v² of the image's one value."""
    info = np.iinfo(dtype)
    for value in (info.max, info.min):
        pixels = (1 << 24) + 1000
        image = np.full((1, pixels, 1, 1), value, dtype)
        records = masked_records(image, nodata=1.0)  # a nodata value that never matches
        assert records.valid.tolist() == [[pixels]]
        assert records.sums.tolist() == [[pixels * int(value)]]
        assert records.sums_sq.tolist() == [[pixels * int(value) ** 2]]
        assert records.minimum.tolist() == records.maximum.tolist() == [[float(value)]]


def test_the_kernel_refuses_calls_that_would_read_or_write_out_of_bounds():
    kernel = masked._kernel()
    image = np.zeros((2, 3, 4, 5), np.uint16)

    def outputs(cells: int = 10) -> list[np.ndarray]:
        return [np.zeros(cells, np.int64) for _ in range(5)]

    kernel.masked_moments(image, "H", 2, 5, True, 0, *outputs())  # the right sizes
    wrong = [(image, "Q", 2, 5), (image, "H", 3, 5), (image, "H", 2, 7), (image, "H", -1, 5),
             (image, "H", 2, 0), (image, "H", 2**62, 5)]
    for args in wrong:
        with pytest.raises((ValueError, OverflowError)):
            kernel.masked_moments(*args, True, 0, *outputs())
    with pytest.raises(ValueError, match="sums holds 72 bytes"):
        kernel.masked_moments(image, "H", 2, 5, True, 0, *outputs(9))
    lanes_of_nodata = np.zeros((1, 40, 1, 13), np.uint16)  # band 0 nodata in every lane
    lanes_of_nodata[..., 1:] = 7
    found = outputs(13)
    kernel.masked_moments(lanes_of_nodata, "H", 1, 13, True, 0, *found)
    sums, squares, counts, lows, highs = found
    assert (counts[0], lows[0], highs[0]) == (0, 2**63 - 1, -2**63)  # "none", not a value
    assert (counts[1], lows[1], highs[1], sums[1], squares[1]) == (40, 7, 7, 280, 1960)
    shared = outputs()
    with pytest.raises(ValueError, match="share memory"):
        kernel.masked_moments(image, "H", 2, 5, True, 0, shared[0], shared[0], *shared[2:])


# --- every path of the records, against masked_records of one image at a time -------------

def _same_records(found, expected) -> None:
    assert found.signature == expected.signature and found.keys == expected.keys
    names = ("pixels", "minimum", "maximum") + (
        ("sums", "sums_sq") if hasattr(found, "sums") else ("means", "residuals", "m2s"))
    for name in names:
        np.testing.assert_array_equal(getattr(found, name), getattr(expected, name))
    assert found.pixels.dtype == np.int64


def test_masked_rows_take_every_kind_of_image_as_masked_records_would(rng):
    names = ("a", "b", "c", "d")
    u16 = _stack(rng, "uint16")
    floats = rng.normal(3.0, 2.0, (2, 5, 7, 4))
    floats[0, 0, 0, 1] = np.nan
    floats[0, 1, 2] = 3.0  # the nodata value of f0
    int8 = rng.integers(-128, 128, (2, 5, 7, 4), dtype=np.int8)
    int8[0, 3] = -5  # the nodata value of i0
    one_mask = rng.random((5, 7, 1)) < 0.3  # one mask for every band
    band_mask = rng.random((5, 7, 4)) < 0.3
    cases = [("u0", u16[0], 9.0, None), ("u1", u16[1], 9.0, one_mask),
             ("u2", u16[2], None, one_mask), ("f0", floats[0], 3.0, None),
             ("f1", floats[1], None, band_mask), ("i0", int8[0], -5.0, None),
             ("i1", int8[1], None, None), ("u3", u16[3], None, band_mask)]
    rows = MaskedRows(capacity=1)
    for key, image, nodata, mask in cases:
        rows.add(key, image, names, nodata, True, mask)  # rasters: in raw units
    found = rows.records()
    # the kernel's batch holds the uint16 images without a per-band mask, in order
    assert [batch.keys for batch in found] == [("u0", "u1", "u2"), ("f0",), ("f1",), ("i0",),
                                              ("i1",), ("u3",)]
    expected = {key: masked_records(image[None], nodata=nodata,
                                    mask=None if mask is None else mask[None], keys=(key,),
                                    channel_names=names, raw_units=True)
                for key, image, nodata, mask in cases}
    for batch in found:
        for row, key in enumerate(batch.keys):
            _same_records(batch.take(np.array([row])), expected[key])
    np.testing.assert_array_equal(found[0].valid, np.concatenate(
        [expected["u0"].valid, expected["u1"].valid, expected["u2"].valid]))


def test_a_kernel_batch_counts_valid_values_only_when_something_was_left_out(rng):
    image = rng.integers(0, 2**16, (8, 8, 2), dtype=np.uint16)  # 64 pixels: the kernel
    plain = MaskedRows(capacity=4)
    plain.add("p", image, ("a", "b"), None, True)
    plain.add("q", image, ("a", "b"), None, True)
    (batch,) = plain.records()
    assert batch.valid is None and batch.keys == ("p", "q") and batch.raw_units
    assert batch.dtype == "uint16" and batch.pixels.tolist() == [64, 64]
    for first, second in (((0.0, None), (None, None)), ((None, None), (None, True))):
        rows = MaskedRows(capacity=1)
        for key, (nodata, left_out) in zip("xy", (first, second)):
            mask = None if left_out is None else np.zeros((8, 8, 1), bool)
            rows.add(key, image, ("a", "b"), nodata, False, mask)
        (batch,) = rows.records()
        assert batch.valid is not None and batch.valid.tolist()[1] == [64, 64]


def test_the_2_to_31_pixel_guard_and_the_dtypes_without_statistics():
    from normstats.errors import IncompatibleImagesError

    huge = np.broadcast_to(np.uint8(0), (1, 2**16, 2**15, 1))  # no memory behind it
    with pytest.raises(IncompatibleImagesError) as caught:
        masked_records(huge, channel_names=("a", "b"))  # refused before the names are read
    assert str(caught.value) == "images of 2**31 pixels or more are not supported"
    with pytest.raises(IncompatibleImagesError) as caught:
        masked_records(np.zeros((1, 2, 2, 1), np.uint8), channel_names=("a", "b"))
    assert str(caught.value) == "2 channel names for 1 channels"
    for dtype in ("int64", "uint64", "complex64"):
        with pytest.raises(IncompatibleImagesError) as caught:
            masked_records(np.zeros((1, 2, 2, 1), dtype))
        assert str(caught.value) == (f"{dtype} pixels have no statistics here (bands of "
                                     "uint8, uint16, int16, uint32, int32, float32, float64)")


def test_which_nodata_values_can_match():
    from normstats.maths.masked import nodata_applies

    assert nodata_applies(np.dtype(np.uint8), 255.0) and nodata_applies(np.dtype(np.uint8), 0.0)
    assert not nodata_applies(np.dtype(np.uint8), 256.0)
    assert nodata_applies(np.dtype(np.int16), -32768.0)
    assert nodata_applies(np.dtype(bool), 0.0) and nodata_applies(np.dtype(bool), 1.0)
    assert not nodata_applies(np.dtype(bool), 2.0) and not nodata_applies(np.dtype(bool), 0.5)
    assert not nodata_applies(np.dtype(complex), 0.0)
    assert nodata_applies(np.dtype(np.float32), -9999.0)
    assert not nodata_applies(np.dtype(np.float32), math.nan)


def test_nodata_and_a_mask_are_both_left_out(rng):
    stack = _stack(rng, "uint8")
    mask = (rng.random(stack.shape) < 0.3).astype(np.uint8)  # 0/1, not bool
    kept = valid_values(stack, 9, mask)
    assert kept.tolist() == ((stack != 9) & (mask == 0)).tolist()
    records = masked_records(stack, nodata=9, mask=mask)
    expected = _oracle(stack, kept)
    assert records.valid.tolist() == expected["count"]
    assert records.sums_sq.tolist() == expected["squares"]


def test_bool_and_int8_images_through_numpy_s_passes(rng):
    flags = rng.random((3, 4, 5, 2)) < 0.5
    records = masked_records(flags, nodata=1.0)
    expected = _oracle(flags.astype(np.uint8), ~flags)
    assert records.valid.tolist() == expected["count"] and records.sums.tolist() == \
        expected["sum"]
    masked = masked_records(flags, mask=flags)
    assert masked.sums.tolist() == [[0, 0]] * 3
    small = rng.integers(-128, 128, (3, 4, 5, 2), dtype=np.int8)
    plain = masked_records(small)
    assert plain.valid is None and plain.sums.tolist() == _oracle(
        small, np.ones(small.shape, bool))["sum"]
    np.testing.assert_array_equal(plain.minimum, small.reshape(3, -1, 2).min(axis=1))


def test_float_records_with_a_mask_nodata_and_edge_values(rng):
    import warnings

    stack = rng.normal(3.0, 2.0, (3, 4, 5, 3))
    stack[0, ..., 0] = np.nan  # no valid value: NaN extremes
    stack[1, ..., 1] = -1.0
    stack[1, 2, 3, 1] = 4.5  # one valid value after nodata -1
    mask = rng.random((3, 4, 5, 1)) < 0.3
    mask[1, 2, 3, 0] = False
    records = masked_records(stack, nodata=-1.0, mask=mask)
    keep = valid_values(stack, -1.0, mask)
    for i in range(3):
        for c in range(3):
            values = [Fraction(float(v)) for v in stack[i, ..., c][keep[i, ..., c]].tolist()]
            assert records.valid[i, c] == len(values)
            if not values:
                assert math.isnan(records.minimum[i, c]) and math.isnan(records.maximum[i, c])
                continue
            mean = sum(values) / len(values)
            assert abs(Fraction(records.means[i, c]) + Fraction(records.residuals[i, c])
                       - mean) <= abs(mean) * Fraction(1, 10**15)
            assert records.minimum[i, c] == min(values) and records.maximum[i, c] == max(values)
    assert records.means[1, 1] == 4.5 and records.m2s[1, 1] == 0.0
    # seven equal values whose float64 mean rounds off them: M2 is exactly 0
    equal = masked_records(np.full((1, 7, 1, 1), 3000000000000001.0))
    assert equal.m2s.tolist() == [[0.0]]
    empty = masked_records(np.zeros((2, 0, 3, 1)))  # images without pixels: nothing valid
    assert empty.valid.tolist() == [[0], [0]] and np.isnan(empty.maximum).all()
    assert np.isnan(empty.minimum).all()
    with warnings.catch_warnings():  # ±inf and squares past float64: no RuntimeWarning
        warnings.simplefilter("error")
        wild = masked_records(np.array([np.inf, 1.0, -np.inf, 1e200]).reshape(1, 4, 1, 1))
        past = masked_records(np.array([1.5e308, 1.5e308]).reshape(1, 2, 1, 1))  # sum: inf
    assert unusable_images(wild).tolist() == [True] and unusable_images(past).tolist() == [True]


def test_float32_images_give_the_records_of_their_float64_values(rng):
    stack = (rng.normal(1e4, 3.0, (3, 6, 5, 2))).astype(np.float32)
    records, plain = masked_records(stack), records_from_stack(stack.astype(np.float64))
    for name in ("means", "residuals", "m2s", "minimum", "maximum"):
        np.testing.assert_array_equal(getattr(records, name), getattr(plain, name))


def test_unusable_images_are_those_with_infinite_or_too_large_valid_values():
    from normstats.maths.records import FLOAT_LIMIT

    stack = np.array([[1.0, 2.0], [FLOAT_LIMIT, -FLOAT_LIMIT], [2.0**481, 1.0], [1.0, -(2.0**481)],
                      [np.nan, np.nan], [1.0, np.inf]]).reshape(6, 2, 1, 1)
    assert unusable_images(masked_records(stack)).tolist() == [False, False, True, True,
                                                               False, True]
    integers = unusable_images(masked_records(np.zeros((3, 1, 1, 1), np.uint8)))
    assert integers.dtype == bool and integers.tolist() == [False] * 3
