"""The text report, line by line: what a user reads in the terminal is written out here in
full, for images and for vectors, with and without a cache, skips and counts."""

from __future__ import annotations

import dataclasses

import pytest

from normstats.maths.records import Skipped
from normstats.results.stats import DatasetStats
from normstats.results.text_report import (
    STD_EXPLANATION,
    normalize_line,
    printable,
    render_report,
    render_skipped,
    scaler_line,
)

IMAGES = DatasetStats(
    channels=("R", "G", "B"), mean=(0.5, 0.25, 0.1234567), std=(0.25, 0.0, 0.0625),
    std_ddof1=(0.26, 0.0, 0.07), per_image_std=(0.2, 0.0, 0.05),
    per_image_std_ddof1=(0.21, 0.0, 0.06), rms_per_image_std=(0.22, 0.0, 0.055),
    min=(0.0, 0.25, 0.0), max=(1.0, 0.25, 0.5), images=1234, pixels_per_channel=5678901,
    dtype="uint8", scale=255.0, mode="RGB", source="/data/caf\udce9",
    skipped=(Skipped("a\nb.png", "truncated PNG"),))

VECTORS = DatasetStats(
    channels=("height", "w"), mean=(1.5, -2.0), std=(0.5, 0.0), std_ddof1=None,
    per_image_std=None, per_image_std_ddof1=None, rms_per_image_std=None,
    min=(1.0, -2.0), max=(2.0, -2.0), images=4, pixels_per_channel=4, dtype="float64",
    scale=1.0, mode="NC", kind="vectors", source="table.npy", counts=(4, 1234))

IMAGES_TABLE = [
    "  channel        mean  pooled std  per-image std  per-image std ddof1         min"
    "         max",
    "  R            0.5000      0.2500         0.2000               0.2100      0.0000"
    "      1.0000",
    "  G            0.2500      0.0000         0.0000               0.0000      0.2500"
    "      0.2500",
    "  B            0.1235      0.0625         0.0500               0.0600      0.0000"
    "      0.5000",
]


def test_an_image_report_in_full():
    assert render_report(IMAGES).split("\n") == [
        "normstats: /data/caf\\xe9",
        "  1,234 images, 5,678,901 pixels per channel, uint8, scale 255 (values shown in "
        "[0, 1]), mode RGB",
        "", *IMAGES_TABLE, "",
        STD_EXPLANATION,
        "",
        "torchvision.transforms.Normalize(mean=(0.5, 0.25, 0.123457), std=(0.25, 0.0, 0.0625))",
        "(channel G is constant (std 0), which Normalize divides by: drop it, or give it std 1)",
        "",
        "skipped 1 input:",
        "  a\\nb.png: truncated PNG",
    ]


def test_the_paste_line_follows_the_variant_and_nothing_is_skipped():
    stats = dataclasses.replace(IMAGES, skipped=(), scale=1.0, source="raw")
    lines = render_report(stats, "per_image_std_ddof1").split("\n")
    assert lines[:2] == ["normstats: raw",
                         "  1,234 images, 5,678,901 pixels per channel, uint8, scale 1, mode RGB"]
    assert lines[-2:] == [("torchvision.transforms.Normalize(mean=(0.5, 0.25, 0.123457), "
                           "std=(0.21, 0.0, 0.06))"),
                          "(channel G is constant (std 0), which Normalize divides by: drop "
                          "it, or give it std 1)"]


def test_the_cache_lines_say_what_was_cached_decoded_and_replaced():
    changed = tuple(f"{i}.png" for i in range(1, 7))
    cached = dataclasses.replace(IMAGES, images_cached=1000, images_decoded=0,
                                 cache_checked=7, cache_changed=changed)
    assert render_report(cached).split("\n")[2:4] == [
        "  1,000 files from the cache, 0 decoded",
        "  cache verified: 7 cached files decoded again, 6 no longer matched and were "
        "replaced: 1.png, 2.png, 3.png, 4.png, 5.png, ..."]
    five = dataclasses.replace(cached, images_cached=0, images_decoded=3,
                               cache_changed=changed[:4] + ("e\x1b.png",))
    assert render_report(five).split("\n")[2:4] == [
        "  0 files from the cache, 3 decoded",
        "  cache verified: 7 cached files decoded again, 5 no longer matched and were "
        "replaced: 1.png, 2.png, 3.png, 4.png, e\\x1b.png"]
    same = dataclasses.replace(cached, cache_changed=())
    assert render_report(same).split("\n")[3] == \
        "  cache verified: 7 cached files decoded again, all identical"
    one = dataclasses.replace(cached, images_cached=1, images_decoded=2, cache_checked=1,
                              cache_changed=())
    assert render_report(one).split("\n")[2:4] == [
        "  1 file from the cache, 2 decoded",
        "  cache verified: 1 cached file decoded again, all identical"]
    assert render_report(IMAGES).split("\n")[2] == ""  # no cache: no cache lines


def test_a_vector_report_in_full():
    assert render_report(VECTORS).split("\n") == [
        "normstats: table.npy",
        "  4 vectors, 2 features, float64, scale 1, mode NC",
        "",
        "  channel        mean  pooled std         min         max      values",
        "  height       1.5000      0.5000      1.0000      2.0000           4",
        "  w           -2.0000      0.0000     -2.0000     -2.0000       1,234",
        "",
        "StandardScaler: mean_=[1.5, -2.0], scale_=[0.5, 1.0], var_=[0.25, 0.0]",
        "(NaN values are left out per feature, as StandardScaler does; 'values' counts what "
        "each feature kept)",
    ]


def test_one_image_or_vector_is_counted_in_the_singular():
    """"1 images" in the report's header and compare's footer."""
    one = dataclasses.replace(IMAGES, images=1)
    assert render_report(one).split("\n")[1].startswith("  1 image, 5,678,901 pixels")
    assert render_report(dataclasses.replace(VECTORS, images=1)).split("\n")[1] == \
        "  1 vector, 2 features, float64, scale 1, mode NC"


def test_vectors_with_every_value_kept_show_no_count_column():
    stats = dataclasses.replace(VECTORS, counts=(4, 4), channels=("a_long_name", "b"))
    assert render_report(stats).split("\n")[3:7] == [
        "  channel            mean  pooled std         min         max",
        "  a_long_name      1.5000      0.5000      1.0000      2.0000",
        "  b               -2.0000      0.0000     -2.0000     -2.0000",
        "",
    ]
    assert render_report(stats).split("\n")[-1].startswith("StandardScaler: ")


def test_images_without_a_two_pixel_image_have_no_ddof1_column():
    stats = dataclasses.replace(IMAGES, per_image_std_ddof1=None, skipped=())
    assert render_report(stats).split("\n")[3] == \
        "  channel        mean  pooled std  per-image std         min         max"


@pytest.mark.parametrize("count, last", [(1, "  s0.png: reason 0"),
                                         (20, "  s19.png: reason 19"),
                                         (21, "  ... and 1 more (--json lists all)"),
                                         (25, "  ... and 5 more (--json lists all)")])
def test_skips_are_listed_up_to_twenty_then_counted(count, last):
    skipped = tuple(Skipped(f"s{i}.png", f"reason {i}") for i in range(count))
    lines = render_skipped(dataclasses.replace(IMAGES, skipped=skipped))
    assert lines[0] == f"skipped {count} input{'s' if count > 1 else ''}:"
    assert lines[1:21] == [f"  s{i}.png: reason {i}" for i in range(min(count, 20))]
    assert lines[-1] == last and len(lines) == min(count, 20) + 1 + (count > 20)
    assert render_skipped(dataclasses.replace(IMAGES, skipped=())) == []


def test_images_skipped_for_nan_name_the_way_to_keep_their_other_values():
    """A float array's image holding one NaN is skipped whole; the report (and the error
    when no image is left) now says how to leave only the NaN values out."""
    import numpy as np

    import normstats

    hint = ("  (an image holding NaN is skipped whole; nodata=nan (--nodata nan) on a file or "
            "numpy array, or a numpy masked array, leaves NaN values out one by one)")
    pixels = np.random.default_rng(4).random((6, 3, 3, 2))
    pixels[2, 0, 0, 1] = np.nan
    stats = normstats.compute(pixels)
    assert render_skipped(stats) == ["skipped 1 input:",
                                     "  array[2]: contains NaN or infinite values", hint]
    assert normstats.compute(pixels, nodata=float("nan")).images == 6
    assert hint not in render_skipped(dataclasses.replace(
        stats, skipped=(Skipped("a.png", "truncated PNG"),)))
    with pytest.raises(normstats.NormstatsError, match=r"e\.g\. array\[0\]: contains NaN or "
                       r"infinite values\): an image holding NaN is skipped whole; "
                       r"nodata=nan \(--nodata nan\)"):
        normstats.compute(np.full((2, 3, 3, 2), np.nan))


def test_paste_lines_round_to_six_digits_and_keep_one_channel_a_tuple():
    one = dataclasses.replace(IMAGES, channels=("L",), mean=(0.1234567,), std=(0.5,))
    assert normalize_line(one) == "torchvision.transforms.Normalize(mean=(0.123457,), std=(0.5,))"
    assert normalize_line(one, digits=3) == \
        "torchvision.transforms.Normalize(mean=(0.123,), std=(0.5,))"
    assert normalize_line(IMAGES, "per_image_std") == \
        "torchvision.transforms.Normalize(mean=(0.5, 0.25, 0.123457), std=(0.2, 0.0, 0.05))"
    assert scaler_line(dataclasses.replace(VECTORS, mean=(0.1234567, 2.0), std=(3.0, 0.0))) == \
        "StandardScaler: mean_=[0.123457, 2.0], scale_=[3.0, 1.0], var_=[9.0, 0.0]"
    assert scaler_line(VECTORS, digits=0) == \
        "StandardScaler: mean_=[2.0, -2.0], scale_=[0.0, 1.0], var_=[0.0, 0.0]"


@pytest.mark.parametrize("path, shown", [
    ("plain/é.png", "plain/é.png"),                   # printable non-ASCII stays as it is
    ("caf\udce9.jpg", "caf\\xe9.jpg"),                # an undecodable byte of the name
    ("a\nb\r\tc\x00.png", "a\\nb\\r\\tc\\x00.png"),   # C0 controls
    ("\x1b[31mred\x7f\x9f", "\\x1b[31mred\\x7f\\x9f"),  # ESC, DEL, a C1 control
    ("x\u2028y\u202ez\u2066", "x\\u2028y\\u202ez\\u2066"),  # line separator, bidi controls
])
def test_printable_escapes_what_would_break_a_line_or_drive_the_terminal(path, shown):
    assert printable(path) == shown
