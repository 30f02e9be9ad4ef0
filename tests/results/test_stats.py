"""`DatasetStats`: built from exact totals, refused with one clear line when it cannot be,
and carried through ``to_dict``/``from_dict`` without losing a field."""

from __future__ import annotations

import dataclasses
import json
import math
from fractions import Fraction

import numpy as np
import pytest

import normstats
from normstats.errors import EmptyDatasetError, InvalidOptionError
from normstats.maths.records import Skipped, records_from_stack
from normstats.maths.scale import default_scale, parse_scale
from normstats.maths.summary import summarize
from normstats.maths.vectors import summarize_vectors
from normstats.results.stats import DatasetStats


def summary_of(images: np.ndarray, keys=()):
    return summarize(records_from_stack(images, keys=keys))


def test_no_usable_image_says_so_naming_the_first_skip_and_the_source():
    skipped = (Skipped("x.jpg", "zero-byte file"), Skipped("y.jpg", "truncated"))
    with pytest.raises(EmptyDatasetError) as raised:
        DatasetStats.from_summary(summarize(None, skipped), source="/data")
    assert str(raised.value) == "/data: no usable image (2 skipped, e.g. x.jpg: zero-byte file)"
    with pytest.raises(EmptyDatasetError) as raised:
        DatasetStats.from_summary(summarize(None, ()))
    assert str(raised.value) == "no usable image"


def test_one_image_is_enough():
    stats = DatasetStats.from_summary(summary_of(np.full((1, 1, 1, 1), 51, np.uint8)))
    assert (stats.images, stats.mean, stats.std, stats.std_ddof1) == (1, (0.2,), (0.0,), None)
    assert stats.per_image_std_ddof1 is None  # no image has two pixels


def test_what_was_computed_is_kept_beside_the_constants():
    images = np.arange(24, dtype=np.uint16).reshape(2, 2, 2, 3) * 1000
    summary = summarize(records_from_stack(images), (Skipped("bad.png", "truncated"),))
    stats = DatasetStats.from_summary(summary, channels=("R", "G", "B"), mode="RGB",
                                      source="/data")
    assert (stats.channels, stats.dtype, stats.scale, stats.mode, stats.kind, stats.source,
            stats.images, stats.pixels_per_channel) == \
        (("R", "G", "B"), "uint16", 65535.0, "RGB", "images", "/data", 2, 8)
    assert stats.skipped == (Skipped("bad.png", "truncated"),)
    assert stats.mean == tuple((sum(range(c, 24, 3)) * 1000 / 8) / 65535 for c in range(3))
    default = DatasetStats.from_summary(summarize(records_from_stack(images)))
    assert (default.channels, default.mode, default.kind, default.source) == \
        (("c0", "c1", "c2"), "array", "images", "")


def test_a_given_scale_is_used_and_checked():
    summary = summary_of(np.array([0, 255], np.uint8).reshape(2, 1, 1, 1))
    assert DatasetStats.from_summary(summary, scale="1").mean == (127.5,)
    assert DatasetStats.from_summary(summary, scale=0.5).max == (510.0,)
    with pytest.raises(InvalidOptionError, match="^scale must be positive and finite, got 0$"):
        DatasetStats.from_summary(summary, scale=0)


def test_channel_names_must_match_the_channels():
    with pytest.raises(InvalidOptionError) as raised:
        DatasetStats.from_summary(summary_of(np.zeros((1, 2, 2, 3), np.uint8)),
                                  channels=("a", "b"))
    assert str(raised.value) == "2 channel names given for 3 channels"
    vectors = summarize_vectors(np.zeros((3, 2)))
    with pytest.raises(InvalidOptionError) as raised:
        DatasetStats.from_vectors(vectors, channels=("a",))
    assert str(raised.value) == "1 channel names given for 2 features"


@pytest.mark.parametrize("value, message", [
    ("x", "scale must be a number, got 'x'"), (None, "scale must be a number, got None"),
    (0, "scale must be positive and finite, got 0"),
    (-1, "scale must be positive and finite, got -1"),
    (math.inf, "scale must be positive and finite, got inf"),
    (math.nan, "scale must be positive and finite, got nan")])
def test_a_scale_is_a_positive_finite_number(value, message):
    with pytest.raises(InvalidOptionError) as raised:
        parse_scale(value)
    assert str(raised.value) == message


def test_valid_scales():
    assert (parse_scale("255"), parse_scale(1e-300), parse_scale(0.5)) == (255.0, 1e-300, 0.5)
    assert (default_scale("bool"), default_scale("int16"), default_scale("uint16")) == \
        (1.0, 32767.0, 65535.0)


def test_vectors_keep_their_names_mode_source_and_sample_std():
    stats = DatasetStats.from_vectors(summarize_vectors(np.array([[1.0, 4.0], [3.0, 4.0]])),
                                      channels=("a", "b"), mode="rows", source="t.npy",
                                      scale=2)
    assert (stats.channels, stats.mode, stats.source, stats.kind, stats.scale) == \
        (("a", "b"), "rows", "t.npy", "vectors", 2.0)
    assert (stats.mean, stats.std, stats.std_ddof1) == ((1.0, 2.0), (0.5, 0.0),
                                                         (math.sqrt(0.5), 0.0))
    assert (stats.images, stats.pixels_per_channel, stats.counts) == (2, 2, (2, 2))
    one = DatasetStats.from_vectors(summarize_vectors(np.array([[1.0, 4.0]])))
    assert (one.std_ddof1, one.mode, one.source, one.channels) == (None, "NC", "", ("c0", "c1"))


def test_a_variant_is_chosen_by_name_and_refused_when_unknown_or_undefined():
    stats = DatasetStats.from_summary(summary_of(np.arange(8, dtype=np.uint8)
                                                 .reshape(2, 2, 2, 1)))
    assert stats.variant("per_image_std") == stats.per_image_std
    with pytest.raises(InvalidOptionError) as raised:
        stats.variant("nope")
    assert str(raised.value) == ("unknown std variant 'nope'; choose one of std, std_ddof1, "
                                 "per_image_std, per_image_std_ddof1, rms_per_image_std")
    for words, meant in (("pooled", "std"), ("pooled std", "std"),
                         ("per-image std ddof1", "per_image_std_ddof1")):  # the report's
        with pytest.raises(InvalidOptionError) as raised:
            stats.variant(words)
        assert str(raised.value).endswith(f"rms_per_image_std: the report's {words!r} is {meant}")
    vectors = DatasetStats.from_vectors(summarize_vectors(np.zeros((3, 1))))
    with pytest.raises(InvalidOptionError) as raised:
        vectors.variant("per_image_std")
    assert str(raised.value) == \
        "variant 'per_image_std' is not defined for this data (vectors, 3 values)"


def test_every_field_round_trips_through_json():
    images = np.arange(24, dtype=np.uint8).reshape(2, 2, 2, 3)
    stats = DatasetStats.from_summary(
        summarize(records_from_stack(images), (Skipped("a.png", "truncated"),)),
        channels=("R", "G", "B"), source="/d")
    data = json.loads(stats.to_json())
    assert data["skipped"] == [{"path": "a.png", "reason": "truncated", "kind": "unreadable"}]
    assert data["channels"] == ["R", "G", "B"] and data["images"] == 2
    back = DatasetStats.from_json(stats.to_json(indent=None))
    assert back == stats and type(back.channels) is tuple and type(back.mean) is tuple
    assert back.skipped == stats.skipped and type(back.skipped) is tuple
    assert DatasetStats.from_dict({k: v for k, v in data.items() if k != "skipped"}).skipped \
        == ()
    assert stats.to_json().startswith('{\n  "channels": [\n    "R",')
    assert "\n" not in stats.to_json(indent=None)


def test_how_a_result_was_obtained_round_trips_too():
    stats = DatasetStats.from_summary(summary_of(np.zeros((1, 2, 2, 1), np.uint8)))
    cached = dataclasses.replace(stats, images_cached=3, images_decoded=1, cache_checked=2,
                                 cache_changed=("x.png",))
    back = DatasetStats.from_dict(json.loads(cached.to_json()))
    assert (back.images_cached, back.images_decoded, back.cache_checked, back.cache_changed) \
        == (3, 1, 2, ("x.png",))


@pytest.mark.parametrize("dtype, scale", [("uint8", None), ("uint16", 1000), ("int16", None),
                                          ("float32", 2.0)])
def test_every_variant_of_images_of_several_sizes_against_the_exact_oracle(rng, dtype, scale):
    """Summaries of images of different sizes (one of a single pixel: no sample std),
    finalized in a scale other than 1: each variant divides by its own count."""
    from oracle import assert_matches_oracle, exact_stats

    info = np.iinfo(dtype) if dtype != "float32" else None
    sizes = ((5, 7), (1, 1), (3, 4), (2, 9))
    images = [(rng.integers(info.min, info.max, (h, w, 2), endpoint=True) if info else
               rng.normal(3.0, 2.0, (h, w, 2))).astype(dtype) for h, w in sizes]
    summary = summarize(records_from_stack(images[0][None]))
    for image in images[1:]:
        summary = summary.merge(summarize(records_from_stack(image[None])))
    stats = DatasetStats.from_summary(summary, scale=scale)
    expected_scale = scale or (float(info.max) if info else 1.0)
    assert stats.scale == expected_scale and summary.images_ddof1 == 3
    if info:  # integer images: pooled values bit for bit
        assert_matches_oracle(stats, images, expected_scale)
    else:  # float images: within 1e-12 of the exact value
        for name, values in exact_stats(images, expected_scale).items():
            assert getattr(stats, name) == pytest.approx(values, rel=1e-12, abs=0), name


def _sampled(half_width: dict[str, tuple[float, ...]]) -> DatasetStats:
    from normstats.results.findings import Estimate

    stats = DatasetStats.from_summary(summary_of(np.array(
        [[[[0, 255], [64, 0]]], [[[128, 255], [255, 0]]]], np.uint8)), scale=1.0)
    return dataclasses.replace(stats, estimate=Estimate(half_width, 2, 10, 1))


def test_an_interval_is_each_value_plus_and_minus_its_half_width():
    stats = _sampled({"mean": (0.5, 1.5), "std": (2.0, 0.25),
                      "per_image_std_ddof1": (1.0, 0.0)})
    assert stats.mean == (111.75, 127.5) and stats.std[1] == 127.5
    assert stats.interval("mean") == ((111.25, 112.25), (126.0, 129.0))
    assert stats.interval("std") == ((stats.std[0] - 2.0, stats.std[0] + 2.0),
                                     (127.25, 127.75))
    ddof1 = stats.per_image_std_ddof1
    assert stats.interval("per_image_std_ddof1") == ((ddof1[0] - 1.0, ddof1[0] + 1.0),
                                                     (ddof1[1], ddof1[1]))


def test_intervals_are_refused_where_there_is_none():
    stats = _sampled({"mean": (0.5, 1.5), "std": (2.0, 0.25)})
    with pytest.raises(InvalidOptionError) as caught:
        stats.interval("min")
    assert str(caught.value) == "no interval for 'min'; there are intervals for mean, std"
    with pytest.raises(InvalidOptionError) as caught:
        dataclasses.replace(stats, estimate=None).interval("mean")
    assert str(caught.value) == ("only a sampled result (sample= or precision=) has "
                                 "confidence intervals")


def test_what_a_run_found_is_in_the_dict_and_comes_back():
    from normstats.results.findings import Estimate, Outlier, OutlierReport

    base = DatasetStats.from_summary(summary_of(np.zeros((1, 2, 2, 1), np.uint8)))
    folder = DatasetStats.from_summary(summary_of(np.full((1, 1, 2, 1), 51, np.uint8)),
                                       source="a")
    report = OutlierReport((Outlier("a/1.png", ("blank: every pixel is 0",), (0.0,), (0.0,)),),
                           5.0, "grayscale check off: the channels are c0, not R, G, B")
    found = dataclasses.replace(
        base, estimate=Estimate({"mean": (0.25,)}, 1, 4, 7, requested=9),
        percentiles={"p0.5": (0.0,), "p99.5": (0.2,)}, by_folder={"a": folder, ".": base},
        outliers=report)
    data = found.to_dict()
    assert data["estimate"] == {"sampled": 1, "population": 4, "seed": 7, "level": 0.95,
                                "requested": 9, "half_width": {"mean": [0.25]}}
    assert data["percentiles"] == {"p0.5": [0.0], "p99.5": [0.2]}
    assert data["by_folder"] == {"a": folder.to_dict(), ".": base.to_dict()}
    assert list(data["by_folder"]) == ["a", "."]
    assert data["outliers"] == report.to_dict()
    back = DatasetStats.from_json(found.to_json())
    assert back == found and back.estimate == found.estimate
    assert back.percentiles == {"p0.5": (0.0,), "p99.5": (0.2,)}
    assert type(back.percentiles["p0.5"]) is tuple
    assert back.by_folder == {"a": folder, ".": base} and back.by_folder["a"].source == "a"
    assert type(back.by_folder["a"]) is DatasetStats and back.outliers == report
    plain = base.to_dict()
    assert [plain[k] for k in ("estimate", "percentiles", "by_folder", "outliers")] == \
        [None] * 4
    again = DatasetStats.from_dict(plain)
    assert (again.estimate, again.percentiles, again.by_folder, again.outliers) == \
        (None, None, None, None)
    older = {k: v for k, v in plain.items()
             if k not in ("estimate", "percentiles", "by_folder", "outliers")}
    assert DatasetStats.from_dict(older) == base  # written before these fields existed


@pytest.mark.parametrize("scale", [255.0, 0.3, 7.0, 1e-3, 2.0**-100])
def test_every_std_is_its_definition_rounded_once_in_any_scale(scale):
    """Mean and pooled std are Σx / (n·scale) and the root of the exact variance / scale²,
    rounded once; the per-image stds are the exact mean of each image's float std (its
    variance the exact numerator and denominator, each rounded to float64, divided) over
    the scale, rounded once; the rms std the root of the same of the variances. Bit for
    bit, in scales that are no whole number too (0.3 is 5404319552844595 / 2**54)."""
    rng = np.random.default_rng(11)
    images = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
              for h, w in ((5, 4), (1, 1), (7, 3), (2, 9), (6, 6))]
    stats = normstats.compute(images, scale=scale, layout="HWC", workers=1)
    exact = Fraction(scale)
    for c in range(3):
        sums = [(v.size, int(v.sum()), int((v.astype(np.int64) ** 2).sum()))
                for v in (image[:, :, c] for image in images)]
        n = sum(k for k, _, _ in sums)
        total, squares = sum(s for _, s, _ in sums), sum(q for _, _, q in sums)
        assert stats.mean[c] == float(Fraction(total) / (n * exact))
        assert stats.std[c] == math.sqrt(float(Fraction(n * squares - total * total)
                                                / (n * n * exact * exact)))
        numerators = [k * q - s * s for k, s, q in sums]
        variances = [float(m) / float(k * k) for m, (k, _, _) in zip(numerators, sums)]
        samples = [math.sqrt(float(m) / float(k * (k - 1)))
                   for m, (k, _, _) in zip(numerators, sums) if k > 1]
        assert stats.per_image_std[c] == float(
            sum(Fraction(math.sqrt(v)) for v in variances) / (len(images) * exact))
        assert stats.per_image_std_ddof1[c] == float(
            sum(map(Fraction, samples)) / (len(samples) * exact))
        assert stats.rms_per_image_std[c] == math.sqrt(float(
            sum(map(Fraction, variances)) / (len(images) * exact * exact)))


@pytest.mark.parametrize("data, scale, options", [
    (np.arange(48, dtype=np.uint8).reshape(1, 4, 4, 3), 1e-300, {}),
    (np.arange(48, dtype=np.uint8).reshape(1, 4, 4, 3), 1e-300, {"covariance": True}),
    (np.full((2, 3, 3, 1), 200, np.uint8), 1e-307, {}),  # no spread: the mean passes
    (np.arange(12.0).reshape(6, 2) * 1e10, 1e-300, {}),  # vectors
])
def test_a_scale_too_small_for_float64_is_one_line(data, scale, options):
    """A scale of 1e-300 divides variances into 1e600: an OverflowError reached the user
    as "a normstats bug". It is an option error naming the scale."""
    with pytest.raises(InvalidOptionError, match=rf"^scale {scale:g} makes the statistics "
                       r"too large for float64 .*: choose a larger scale \(--scale\)$"):
        normstats.compute(data, scale=scale, **options)
