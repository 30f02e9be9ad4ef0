"""`Skipped`: an input left out, its reason and its kind, through JSON and pickling; the
per-image records: built from stacks, refused in words, selected, joined, and their
per-image variances against exact fractions."""

from __future__ import annotations

import dataclasses
import json
import pickle
from fractions import Fraction

import numpy as np
import pytest

import normstats
from normstats.errors import SkipKind
from normstats.maths.records import Skipped, concat_records, records_from_stack
from normstats.results.stats import DatasetStats


@pytest.mark.parametrize("kind", list(SkipKind), ids=str)
def test_a_skip_round_trips_through_json_and_pickle_with_its_kind(kind):
    skipped = Skipped("shard.tar:a b/é.png", "why, in words", kind)
    assert skipped.to_dict() == {"path": "shard.tar:a b/é.png", "reason": "why, in words",
                                 "kind": kind.value}
    assert Skipped.from_dict(json.loads(json.dumps(skipped.to_dict()))) == skipped
    loaded = pickle.loads(pickle.dumps(skipped))
    assert loaded == skipped and loaded.kind is kind


def test_a_report_written_before_kinds_reads_its_skips_as_content():
    assert Skipped.from_dict({"path": "a.png", "reason": "permission denied"}) == \
        Skipped("a.png", "permission denied", SkipKind.UNREADABLE)


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="'sometimes'"):
        Skipped.from_dict({"path": "a.png", "reason": "x", "kind": "sometimes"})


def test_the_stats_json_carries_each_kind():
    skipped = (Skipped("a.png", "permission denied", SkipKind.TRANSIENT),
               Skipped("b.png", "same file as a.png (named twice); read once",
                       SkipKind.DUPLICATE))
    stats = dataclasses.replace(normstats.compute(np.zeros((1, 2, 2, 1), np.uint8)),
                                skipped=skipped)
    data = json.loads(stats.to_json())
    assert [s["kind"] for s in data["skipped"]] == ["transient", "duplicate"]
    assert DatasetStats.from_dict(data).skipped == skipped


@pytest.mark.parametrize("dtype, shape", [("uint8", (3, 5, 4)), ("int16", (4, 3, 2)),
                                          ("uint16", (4, 3, 2)), ("uint16", (250, 250, 1)),
                                          ("bool", (3, 3, 2)), ("float64", (2, 3, 2))])
def test_per_image_variance_is_the_exact_value_rounded_once(rng, dtype, shape):
    """Σ(x − μ)²/(n − ddof) of each image and channel; uint16 images of 62,500 bright pixels
    take the Python-int path (n·Σx² passes int64); one-pixel images have no sample variance."""
    import warnings
    from fractions import Fraction

    from normstats.maths.records import records_from_stack

    if dtype == "float64":
        images = rng.normal(5.0, 3.0, (3, *shape))
    else:
        high = 1 if dtype == "bool" else np.iinfo(dtype).max
        low = 0 if dtype == "bool" else np.iinfo(dtype).min
        if shape[0] == 250:  # bright: n·Σx² ≈ 62,500² · 65,000² passes 2⁶³
            low = 60_000
        images = rng.integers(low, high, (3, *shape), endpoint=True).astype(dtype)
    records = records_from_stack(images)
    single = records_from_stack(images[:, :1, :1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 0/0 of a one-pixel image is NaN, quietly
        variances = [records.image_variance(ddof) for ddof in (0, 1)]
        assert np.isnan(single.image_variance(1)).all()
        assert (single.image_variance(0) == 0).all()
    for i, image in enumerate(images):
        for c in range(shape[2]):
            values = [Fraction(float(v)) for v in image[:, :, c].ravel().tolist()]
            mean = sum(values) / len(values)
            m2 = sum((v - mean) ** 2 for v in values)
            expected = [float(m2 / len(values)), float(m2 / (len(values) - 1))]
            got = [float(v[i, c]) for v in variances]
            if dtype == "float64":
                assert got == pytest.approx(expected, rel=1e-13, abs=0)
            elif shape[0] == 250:  # a numerator past 2⁵³ rounds once more, to float64
                assert got == pytest.approx(expected, rel=4e-16, abs=0)
            else:
                assert got == expected


@pytest.mark.parametrize("stack, message", [
    (np.zeros((1, 1, 1, 1), np.int32), "int32 images are not supported exactly (at most 16-bit "
     "integers); convert them to the type that holds their values, exactly (x.astype(np.uint8) "
     "for 0 to 255, np.uint16 to 65535: check x.min() and x.max() first), or to float64 for "
     "float statistics"),
    (np.zeros((1, 1, 1, 1), "datetime64[s]"), "unsupported pixel dtype datetime64[s]"),
    (np.full((1, 1, 2, 1), -(2.0**481)), "float values beyond ±3.12e+144: their squares "
     "overflow float64; divide the data by a power of two first (the statistics scale with "
     "it exactly)"),
])
def test_stacks_records_cannot_hold_exactly_are_refused_in_words(stack, message):
    from normstats.errors import IncompatibleImagesError
    from normstats.maths.records import records_from_stack

    with pytest.raises(IncompatibleImagesError) as raised:
        records_from_stack(stack)
    assert str(raised.value) == message


def test_records_keep_keys_names_and_counts_of_every_kind():
    from normstats.errors import IncompatibleImagesError
    from normstats.maths.records import FLOAT_LIMIT, records_from_stack

    for dtype in ("uint8", "uint16", "int8", "bool", "float32"):
        records = records_from_stack(np.ones((2, 3, 5, 2), dtype), keys=("a", "b"),
                                     channel_names=("x", "y"))
        assert (records.keys, records.channel_names, records.dtype) == \
            (("a", "b"), ("x", "y"), dtype)
        assert records.pixels.dtype == np.int64 and records.pixels.tolist() == [15, 15]
        assert records.signature[1:] == (dtype, ("x", "y"), False)
    assert records_from_stack(np.ones((1, 1, 1, 3), np.uint8)).channel_names == \
        ("c0", "c1", "c2")
    assert records_from_stack(np.ones((1, 1, 1, 1), np.uint8)).channel_names == ("L",)
    edge = records_from_stack(np.array([FLOAT_LIMIT, -FLOAT_LIMIT]).reshape(1, 1, 2, 1))
    assert edge.minimum.tolist() == [[-FLOAT_LIMIT]]  # the limit itself is kept
    with pytest.raises(IncompatibleImagesError) as raised:
        records_from_stack(np.zeros((1, 2, 2, 2), np.uint16), channel_names=("a", "b", "c"))
    assert str(raised.value) == "3 channel names for 2 channels"


def test_batches_that_cannot_be_pooled_are_named_by_an_example_of_each():
    from normstats.errors import IncompatibleImagesError
    from normstats.maths.records import concat_records, incompatible, records_from_stack

    colour = records_from_stack(np.zeros((2, 1, 1, 3), np.uint8), keys=("a.png", "b.png"))
    grey = records_from_stack(np.zeros((1, 1, 1, 1), np.uint16), keys=("c.png",))
    unnamed = records_from_stack(np.zeros((1, 1, 1, 1), np.uint16))
    tail = ("; choose a decode mode that makes them alike (--mode RGB or --mode L), or "
            "compute them separately")
    with pytest.raises(IncompatibleImagesError) as raised:
        concat_records([grey, colour])
    assert str(raised.value) == \
        "images cannot be pooled: c.png is uint16 L but a.png is uint8 c0,c1,c2" + tail
    assert str(incompatible(unnamed, colour)) == \
        "images cannot be pooled: one input is uint16 L but a.png is uint8 c0,c1,c2" + tail
    assert str(incompatible(colour, unnamed)) == \
        "images cannot be pooled: a.png is uint8 c0,c1,c2 but another input is uint16 L" + tail
    assert str(incompatible(colour, grey, "x", "y")) == \
        "images cannot be pooled: x is uint8 c0,c1,c2 but y is uint16 L" + tail
    more = records_from_stack(np.ones((2, 1, 1, 1), np.uint16), keys=("d", "e"))
    joined = concat_records([grey, more])
    assert joined.keys == ("c.png", "d", "e") and len(joined) == 3
    assert joined.sums.tolist() == [[0], [1], [1]]
    assert concat_records([more, grey]).keys == ("d", "e", "c.png")


def test_take_selects_rows_of_every_field_in_the_order_asked():
    from normstats.maths.records import records_from_stack

    stack = np.arange(4 * 2 * 3, dtype=np.uint8).reshape(4, 1, 2, 3)
    records = records_from_stack(stack, keys=("a", "b", "c", "d"))
    picked = records.take(np.array([2, 0]))
    assert picked.keys == ("c", "a") and picked.dtype == "uint8"
    for name in ("pixels", "minimum", "maximum", "sums", "sums_sq"):
        assert np.array_equal(getattr(picked, name), getattr(records, name)[[2, 0]]), name
    masked = records.take(np.array([False, True, False, True]))
    assert masked.keys == ("b", "d") and masked.sums.tolist() == records.sums[[1, 3]].tolist()
    floats = records_from_stack(stack.astype(np.float32))  # no keys
    taken = floats.take(np.array([3]))
    assert taken.keys == () and taken.means.tolist() == floats.means[[3]].tolist()
    assert taken.m2s.tolist() == floats.m2s[[3]].tolist()
    assert taken.residuals.tolist() == floats.residuals[[3]].tolist()


def test_a_variance_whose_exact_numerator_passes_int64_is_still_exact():
    """n²·σ² past 2⁶³ (n·Σx² − (Σx)² itself overflows, not only its terms): 160,000
    pixels, half 0 and half 65535, have σ² = 65535²/4 exactly."""
    from normstats.maths.records import records_from_stack

    image = np.zeros((1, 400, 400, 1), np.uint16)
    image[0, ::2] = 65535
    variance = records_from_stack(image).image_variance(0)
    assert 160_000**2 * variance[0, 0] > 2**63
    assert variance.tolist() == [[65535**2 / 4]]
    assert records_from_stack(image).image_variance(1).tolist() == \
        [[float(Fraction(65535**2 * 160_000, 4 * 159_999))]]


def test_batches_that_name_their_images_and_batches_that_do_not_are_not_mixed():
    """Every image of a batch has a key, or none has: a mix would leave fewer keys than
    rows, and the reports that name images by row (outliers, per-folder statistics)
    would name the wrong ones."""
    from normstats.errors import IncompatibleImagesError
    from normstats.maths.records import concat_records, records_from_stack

    stack = np.arange(2 * 1 * 2 * 1, dtype=np.uint8).reshape(2, 1, 2, 1)
    named = records_from_stack(stack, keys=("a/1.png", "a/2.png"))
    unnamed = records_from_stack(stack)
    for parts in ([named, unnamed], [unnamed, named]):
        with pytest.raises(IncompatibleImagesError) as caught:
            concat_records(parts)
        assert str(caught.value) == (
            "record batches cannot be joined: 2 images have keys (a/1.png, ...) and 2 have "
            "none; name every image or none")
    empty = named.take(np.array([], dtype=np.int64))
    assert concat_records([named, empty, named]).keys == named.keys * 2
    joined = concat_records([empty, unnamed])
    assert joined.keys == () and len(joined) == 2
    assert concat_records([unnamed, unnamed]).keys == ()


def test_a_batch_of_no_images_has_no_variances():
    from normstats.maths.records import records_from_stack

    for dtype in (np.uint8, np.uint16, np.float32):
        empty = records_from_stack(np.zeros((0, 2, 2, 3), dtype))
        for ddof in (0, 1):
            variance = empty.image_variance(ddof)
            assert variance.shape == (0, 3) and variance.dtype == np.float64


def test_records_without_cross_sums_and_what_describes_them():
    from normstats.maths.records import describe_signature, without_cross_sums

    ints = records_from_stack(np.zeros((2, 2, 2, 3), np.uint8), cross=True)
    floats = records_from_stack(np.zeros((2, 2, 2, 3)), cross=True)
    for records, name in ((ints, "cross_sums"), (floats, "co_moments")):
        bare = without_cross_sums(records)
        assert getattr(bare, name) is None and getattr(records, name) is not None
        assert bare.sums_sq.tolist() == records.sums_sq.tolist() if name == "cross_sums" \
            else bare.m2s.tolist() == records.m2s.tolist()
        assert without_cross_sums(bare) is bare
    names = ("B01", "B02", "B03", "B04", "B05")
    assert describe_signature(records_from_stack(np.zeros((1, 1, 1, 4), np.uint16),
                                                 channel_names=names[:4])) == \
        "uint16 B01,B02,B03,B04"
    assert describe_signature(records_from_stack(np.zeros((1, 1, 1, 5), np.uint16),
                                                 channel_names=names)) == \
        "uint16, 5 bands B01..B05"


def test_float_records_with_valid_counts_pool_each_band_over_them():
    from normstats.maths.masked import masked_records

    stack = np.array([[[[1.0, 2.0]], [[np.nan, 4.0]]], [[[5.0, np.nan]], [[7.0, 8.0]]]])
    records = masked_records(stack)
    moments = records.moments()
    assert moments.counts == (3, 3) and moments.count == 4
    assert [float(m) for m in moments.mean()] == [13 / 3, 14 / 3]


def test_joining_batches_with_and_without_valid_counts_keeps_every_count():
    from normstats.maths.masked import masked_records

    plain = records_from_stack(np.ones((2, 1, 3, 2), np.uint16))
    with_nodata = masked_records(np.array([[[[0, 1], [1, 1], [1, 0]]]], np.uint16), nodata=0)
    for parts, counts in (([plain, with_nodata], [[3, 3], [3, 3], [2, 2]]),
                          ([with_nodata, plain], [[2, 2], [3, 3], [3, 3]])):
        joined = concat_records(parts)
        assert joined.valid.tolist() == counts and len(joined) == 3
    assert concat_records([plain, plain]).valid is None


def test_batches_that_cannot_be_pooled_name_the_rasters_hint():
    from normstats.maths.masked import masked_records
    from normstats.maths.records import incompatible

    raster = masked_records(np.zeros((1, 1, 1, 3), np.uint16), raw_units=True)
    photo = records_from_stack(np.zeros((1, 1, 1, 3), np.uint8))
    for a, b in ((raster, photo), (photo, raster)):
        assert str(incompatible(a, b)).endswith(
            "rasters are pooled only with rasters of the same band count and dtype: compute "
            "them separately")
