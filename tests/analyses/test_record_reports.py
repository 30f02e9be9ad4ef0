"""Statistics per sub-folder and outlier lists, from records alone (no decoding again)."""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image
from reliability_helpers import replace_file_decoder

import normstats
from normstats.analyses import record_reports
from normstats.analyses.record_reports import (
    OUTLIER_Z,
    RecordCollector,
    _equal_rgb,
    _robust_z,
    by_folder,
    find_outliers,
    folder_of,
    grayscale_check_off,
    image_means,
    outlier_report,
    render_by_folder,
    render_outliers,
    with_record_reports,
)
from normstats.errors import InvalidOptionError
from normstats.maths.records import Records, Skipped, records_from_stack
from normstats.maths.summary import summarize
from normstats.results.findings import Outlier, OutlierReport
from normstats.results.stats import DatasetStats
from normstats.sources.base import TaskResult
from normstats_cli import main


def save(path: Path, pixels: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels).save(path)


@pytest.fixture
def imagefolder(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    root = tmp_path / "data"
    for split in ("train", "val"):
        for i in range(12):
            save(root / split / f"cat{i % 2}" / f"{i}.png",
                 rng.integers(60, 200, (8, 8, 3), dtype=np.uint8))
    save(root / "train" / "blank.png", np.zeros((8, 8, 3), np.uint8))
    gray = rng.integers(60, 200, (8, 8), dtype=np.uint8)
    save(root / "val" / "gray.png", np.repeat(gray[:, :, None], 3, axis=2))
    save(root / "top.png", rng.integers(60, 200, (8, 8, 3), dtype=np.uint8))
    return root


def test_folder_of_takes_the_first_component():
    assert folder_of("train/cat/1.png") == "train"
    assert folder_of("1.png") == "."


def test_by_folder_equals_computing_each_folder_alone(imagefolder):
    collector = RecordCollector()
    stats = normstats.compute(imagefolder, cache=False, workers=1, on_result=collector)
    records = collector.records()
    per_folder = by_folder(records, scale=stats.scale, mode=stats.mode)
    assert list(per_folder) == [".", "train", "val"]
    for name in ("train", "val"):
        alone = normstats.compute(imagefolder / name, cache=False, workers=1)
        assert per_folder[name].mean == alone.mean and per_folder[name].std == alone.std
        assert per_folder[name].images == alone.images


def test_outliers_find_the_blank_and_the_grayscale_image(imagefolder):
    collector = RecordCollector()
    normstats.compute(imagefolder, cache=False, workers=1, on_result=collector)
    found = {o.path: o.reasons for o in find_outliers(collector.records())}
    assert found["train/blank.png"] == ("blank: every pixel is 0",)
    assert "grayscale stored as RGB (R = G = B)" in found["val/gray.png"]


def test_extreme_mean_and_std_are_flagged():
    rng = np.random.default_rng(1)
    stack = rng.integers(100, 140, (40, 6, 6, 3), dtype=np.uint8)
    stack[3] = rng.integers(240, 256, (6, 6, 3))          # very bright
    stack[5] = rng.choice(np.array([0, 255], np.uint8), (6, 6, 3))  # very contrasty
    records = records_from_stack(stack, keys=tuple(f"{i}.png" for i in range(40)),
                                 channel_names=("R", "G", "B"))
    found = {o.path: " ".join(o.reasons) for o in find_outliers(records)}
    assert "mean high" in found["3.png"] and "std high" in found["5.png"]
    assert len(found) == 2


def test_reports_come_from_the_cache_without_decoding(imagefolder, tmp_path, monkeypatch):
    cache = str(tmp_path / "cache")
    runner = CliRunner()
    first = runner.invoke(main, ["compute", str(imagefolder), "--cache", cache, "--workers", "1",
                                 "--by-folder", "--outliers", "--json"])
    assert first.exit_code == 0, first.output

    def no_decoding(*args, **kwargs):
        raise AssertionError("decoded again")
    replace_file_decoder(monkeypatch, no_decoding)
    second = runner.invoke(main, ["compute", str(imagefolder), "--cache", cache, "--workers",
                                  "1", "--by-folder", "--outliers", "--json"])
    assert second.exit_code == 0, second.output
    a, b = json.loads(first.output), json.loads(second.output)
    assert b["images_decoded"] == 0 and a["by_folder"] == b["by_folder"]
    assert a["outliers"] == b["outliers"] and set(b["by_folder"]) == {".", "train", "val"}
    text = runner.invoke(main, ["compute", str(imagefolder), "--cache", cache, "--workers",
                                "1", "--by-folder", "--outliers"]).output
    assert "by folder (3):" in text and "train/blank.png: blank" in text


def test_by_folder_with_no_cache_keeps_the_records(imagefolder):
    result = CliRunner().invoke(main, ["compute", str(imagefolder), "--no-cache", "--workers",
                                       "1", "--by-folder"])
    assert result.exit_code == 0 and "by folder (3):" in result.output


def test_by_folder_of_an_array_is_refused_and_its_outliers_still_found(tmp_path):
    """An array's images are rows, not files: its by-folder table would be empty (it
    printed "by folder (0):" under 50 images); the outliers need no folders."""
    stack = np.random.default_rng(0).integers(100, 156, (50, 8, 8, 3), dtype=np.uint8)
    stack[7] = 0
    np.save(tmp_path / "x.npy", stack)
    with pytest.raises(InvalidOptionError, match=r"^--by-folder groups image files by their "
                       r"sub-folder, and the images of array \(50, 8, 8, 3\) uint8 are rows "
                       r"of an array, not files"):
        normstats.compute(stack, by_folder=True, outliers=True, cache=False)
    found = normstats.compute(stack, outliers=True, cache=False).outliers
    assert [(o.path, o.reasons) for o in found.images] == [("#7", ("blank: every pixel is 0",))]
    result = CliRunner().invoke(main, ["compute", str(tmp_path / "x.npy"), "--by-folder"])
    assert result.exit_code == 1 and "by folder (" not in result.output
    assert "x.npy are rows of an array, not files" in result.output


# --- the reports on records built in memory, against exact values ------------------------

def stack_of(levels: list[tuple[int, int]], offsets: tuple[int, ...] = (0, 1, 2)) -> np.ndarray:
    """One 2×2 image per (low, high): columns low and high, each channel shifted by its
    offset (so R, G and B differ and no image is blank)."""
    base = np.array([[[lo, hi], [lo, hi]] for lo, hi in levels], dtype=np.int64)
    return np.stack([base + o for o in offsets], axis=-1).astype(np.uint8)


def rgb_records(levels: list[tuple[int, int]], **keywords: Any) -> Records:
    keys = tuple(f"{i:02d}.png" for i in range(len(levels)))
    return records_from_stack(stack_of(levels, **keywords), keys=keys,
                              channel_names=("R", "G", "B"))


def robust_z(values: list[float]) -> list[float]:
    centre = statistics.median(values)
    spread = 1.4826 * statistics.median([abs(v - centre) for v in values])
    return [(v - centre) / spread if spread > 0 else 0.0 for v in values]


#: Ten ordinary images whose means and stds both vary (so neither spread is zero).
TYPICAL = [(100 + i, 110 + 3 * i) for i in range(10)]


def rule_z(records: Records) -> tuple[list[float], list[float]]:
    """Robust z-scores of the channel-averaged per-image mean and std, by `statistics`."""
    means = [float(np.mean(m)) for m in image_means(records) / 255]
    stds = [float(np.mean(s)) for s in np.sqrt(records.image_variance(0)) / 255]
    return robust_z(means), robust_z(stds)


def flagged_by_rule(records: Records, threshold: float = OUTLIER_Z) -> list[str]:
    """Paths beyond ``threshold`` on the channel-averaged mean or std, most unusual first,
    by the rule written out with `statistics` (no blank or grayscale images here)."""
    z_mean, z_std = rule_z(records)
    rows = [(-max(abs(a), abs(b)), records.keys[i]) for i, (a, b) in enumerate(zip(z_mean, z_std))
            if abs(a) > threshold or abs(b) > threshold]
    return [path for _, path in sorted(rows)]


def test_outliers_are_exact_and_ordered_by_severity_then_path() -> None:
    levels = [*TYPICAL, (200, 230), (0, 240), (100, 100)]
    stack = stack_of(levels)
    stack[12] = 50  # blank
    records = records_from_stack(stack, keys=tuple(f"{i:02d}.png" for i in range(13)),
                                 channel_names=("R", "G", "B"))
    means = [[(int(stack[i, ..., c].sum()) / 4) / 255 for c in range(3)] for i in range(13)]
    stds = [[math.sqrt(float(statistics.pvariance([Fraction(int(v)) for v in
                                                   stack[i, ..., c].ravel()]))) / 255
             for c in range(3)] for i in range(13)]
    z_mean = robust_z([float(np.mean(m)) for m in means])
    z_std = robust_z([float(np.mean(s)) for s in stds])
    found = find_outliers(records)
    assert [o.path for o in found] == ["12.png", "11.png", "10.png"]
    blank, contrasty, bright = found
    assert blank == Outlier("12.png", ("blank: every pixel is 50",), tuple(means[12]),
                            (0.0, 0.0, 0.0))
    assert blank.severity == math.inf
    assert contrasty.reasons == (f"std high (z = {z_std[11]:+.1f})",)
    assert bright.reasons == (f"mean high (z = {z_mean[10]:+.1f})",)
    assert (contrasty.mean, contrasty.std) == (tuple(means[11]), tuple(stds[11]))
    assert bright.severity == pytest.approx(max(abs(z_mean[10]), abs(z_std[10])), rel=1e-12)
    assert contrasty.severity == pytest.approx(max(abs(z_mean[11]), abs(z_std[11])), rel=1e-12)
    assert abs(z_mean[10]) > 5 and abs(z_std[11]) > 5 and abs(z_std[10]) < 5
    assert abs(z_mean[11]) < 5


def test_low_values_and_the_threshold_and_scale_given() -> None:
    levels = [*TYPICAL, (2, 30), (120, 122)]
    records = rgb_records(levels)
    z = robust_z([float(np.mean([(lo + hi) / 2 + c for c in range(3)])) for lo, hi in levels])
    z_std = robust_z([(hi - lo) / 2 for lo, hi in levels])
    assert [(o.path, o.reasons) for o in find_outliers(records)] == [
        ("10.png", (f"mean low (z = {z[10]:+.1f})",))]
    assert dict((o.path, o.reasons) for o in find_outliers(records, 1.5))["11.png"] == (
        f"std low (z = {z_std[11]:+.1f})",)
    assert z[10] < -5 and z_std[11] < -1.5 and abs(z[11]) < 1.5
    assert [o.path for o in find_outliers(records)] == flagged_by_rule(records)
    for threshold in (0.5, 1.0, 2.0):
        found = find_outliers(records, threshold)
        assert [o.path for o in found] == flagged_by_rule(records, threshold)
        z_mean, z_std = rule_z(records)
        rows = {k: i for i, k in enumerate(records.keys)}
        for outlier in found:
            i = rows[outlier.path]
            expected = [f"{what} {'high' if z > 0 else 'low'} (z = {z:+.1f})"
                        for what, z in (("mean", z_mean[i]), ("std", z_std[i]))
                        if abs(z) > threshold]
            assert list(outlier.reasons) == expected
    exact_mean, exact_std = rule_z(records)
    assert [o.path for o in find_outliers(records, abs(exact_std[11]))] == ["10.png"]
    assert "11.png" in [o.path for o in find_outliers(records, abs(exact_std[11]) - 1e-9)]
    assert find_outliers(records, abs(exact_mean[10])) == []
    raw = find_outliers(records, scale=1)
    assert raw[0].mean == (16.0, 17.0, 18.0) and raw[0].std == (14.0, 14.0, 14.0)
    float_blank = records_from_stack(np.full((1, 2, 2, 1), 0.5), keys=("f.npy",))
    assert find_outliers(float_blank) == [Outlier("f.npy", ("blank: every pixel is 0.5",),
                                                  (0.5,), (0.0,))]


def test_identical_images_stand_out_in_nothing_and_unnamed_rows_get_numbers() -> None:
    records = records_from_stack(stack_of([(1, 3)] * 4))
    assert find_outliers(records) == []
    stack = stack_of([(1, 3)] * 3)
    stack[1] = 7
    assert [o.path for o in find_outliers(records_from_stack(stack))] == ["#1"]


def test_grayscale_images_among_colour_ones_are_flagged_once_they_are_few() -> None:
    levels = TYPICAL[:6]
    colour = stack_of(levels)
    gray = stack_of(levels, offsets=(0, 0, 0))
    for mixed, expected in ((np.concatenate([colour[:4], gray[4:]]), ["04.png", "05.png"]),
                            (np.concatenate([colour[:3], gray[3:]]), [])):
        records = records_from_stack(mixed, keys=tuple(f"{i:02d}.png" for i in range(6)),
                                     channel_names=("R", "G", "B"))
        flagged = sorted(o.path for o in find_outliers(records)
                         if "grayscale stored as RGB (R = G = B)" in o.reasons)
        assert flagged == expected
    half = records_from_stack(np.concatenate([colour[:3], gray[3:]]),
                              channel_names=("R", "G", "B"))
    assert grayscale_check_off(half) == ("grayscale check off: 3 of 6 images are grayscale "
                                         "stored as RGB, so grayscale is the norm here")
    fewer = records_from_stack(np.concatenate([colour[:4], gray[4:]]),
                               channel_names=("R", "G", "B"))
    assert grayscale_check_off(fewer) is None
    many = records_from_stack(np.repeat(gray, 200, axis=0), channel_names=("R", "G", "B"))
    assert grayscale_check_off(many) == ("grayscale check off: 1,200 of 1,200 images are "
                                         "grayscale stored as RGB, so grayscale is the norm here")
    rgba = np.concatenate([np.concatenate([colour[:4], gray[4:]]), np.zeros((6, 2, 2, 1),
                                                                                np.uint8)], -1)
    with_alpha = records_from_stack(rgba, keys=tuple(f"{i:02d}.png" for i in range(6)),
                                    channel_names=("R", "G", "B", "A"))
    assert grayscale_check_off(with_alpha) is None
    assert sorted(o.path for o in find_outliers(with_alpha)) == ["04.png", "05.png"]
    bgr = records_from_stack(np.concatenate([colour[:4], gray[4:]]),
                             channel_names=("B", "G", "R"))
    assert grayscale_check_off(bgr) == ("grayscale check off: the channels are B, G, R, not "
                                        "R, G, B")
    assert all("grayscale" not in " ".join(o.reasons) for o in find_outliers(bgr))


@pytest.mark.parametrize("column", range(4))
def test_every_moment_and_extreme_must_agree_for_grayscale(column: int) -> None:
    """Equal R, G, B in all but one of min, max, Σx and Σx² is colour, not grayscale."""
    pixels = np.array([[[10, 20], [30, 40]]], np.uint8)
    image = np.repeat(pixels[..., None], 3, axis=-1)
    variants = {0: [[10, 20], [30, 40]], 1: [[10, 20], [30, 40]], 2: [[10, 20], [30, 40]],
                3: [[10, 20], [30, 40]]}
    changed = image.copy()
    if column == 0:      # another minimum
        changed[0, 0, 0, 2] = 9
        changed[0, 1, 1, 2] = 41
    elif column == 1:    # another maximum only: 40 -> 41 and 30 -> 29 keeps Σx
        changed[0, 1, 1, 2] = 41
        changed[0, 1, 0, 2] = 29
    elif column == 2:    # another Σx: 20 -> 21
        changed[0, 0, 1, 2] = 21
    else:                # the same Σx, min and max, another Σx²: 20, 30 -> 25, 25
        changed[0, 0, 1, 2], changed[0, 1, 0, 2] = 25, 25
    assert variants
    records = records_from_stack(np.concatenate([changed, image[:0]]),
                                 channel_names=("R", "G", "B"))
    assert not _equal_rgb(records)[0]
    assert _equal_rgb(records_from_stack(image, channel_names=("R", "G", "B")))[0]
    red = changed.copy()
    red[..., 0], red[..., 2] = changed[..., 2], image[..., 2]  # R differs, G = B
    assert not _equal_rgb(records_from_stack(red, channel_names=("R", "G", "B")))[0]


def test_equal_sums_and_squares_with_other_extremes_are_colour() -> None:
    """{1, 5, 6} and {2, 3, 7}: the same Σx = 12 and Σx² = 62, another min and max."""
    ones, twos = np.array([1, 5, 6]), np.array([2, 3, 7])
    image = np.stack([ones, twos, ones], axis=-1)[None, None].astype(np.uint8)
    records = records_from_stack(image, channel_names=("R", "G", "B"))
    assert records.sums[0].tolist() == [12] * 3 and records.sums_sq[0].tolist() == [62] * 3
    assert not _equal_rgb(records)[0]


def test_float_grayscale_compares_means_and_second_moments() -> None:
    image = np.repeat(np.array([[[0.25, 0.5], [0.75, 1.0]]])[..., None], 3, axis=-1)
    assert _equal_rgb(records_from_stack(image, channel_names=("R", "G", "B")))[0]
    other = image.copy()
    other[0, 0, 1, 2], other[0, 1, 0, 2] = 0.625, 0.625  # same mean, min, max; other M2
    assert not _equal_rgb(records_from_stack(other, channel_names=("R", "G", "B")))[0]
    shifted = image.copy()
    shifted[0, 0, 1, 2] = 0.5625  # another mean
    assert not _equal_rgb(records_from_stack(shifted, channel_names=("R", "G", "B")))[0]


def test_image_means_in_pixel_units() -> None:
    ints = records_from_stack(np.array([[[[1], [2]], [[2], [2]]]], np.uint8))
    assert image_means(ints).tolist() == [[1.75]] and image_means(ints).dtype == np.float64
    floats = records_from_stack(np.array([[[[1e8 + 1], [1e8]], [[1e8], [1e8]]]]))
    assert image_means(floats).tolist() == [[1e8 + 0.25]]
    offset = np.random.default_rng(0).normal(1e8, 1, (50, 3, 5, 1))
    means = image_means(records_from_stack(offset))[:, 0]
    exact = [sum(map(Fraction, image.ravel().tolist())) / 15 for image in offset]
    assert all(abs(Fraction(m) - e) <= Fraction(np.spacing(m)) / 2 for m, e in zip(means, exact))


def test_robust_z_is_median_centred_over_the_scaled_mad() -> None:
    values = np.array([1.0, 2.0, 3.0, 4.0, 100.0])
    assert _robust_z(values).tolist() == [(v - 3.0) / 1.4826 for v in values.tolist()]
    assert _robust_z(np.array([5.0, 5.0, 5.0, 9.0])).tolist() == [0.0] * 4
    assert _robust_z(np.array([5.0, 5.0, 5.0, np.nan])).tolist() == [0.0] * 4


def test_folder_statistics_are_those_of_each_folder_s_records() -> None:
    stack = stack_of([(1, 3), (5, 9), (2, 2), (7, 8)])
    keys = ("b/x/1.png", "a/2.png", "top.png", "b/3.png")
    records = records_from_stack(stack, keys=keys, channel_names=("R", "G", "B"))
    skipped = (Skipped("b/bad.png", "damaged"), Skipped("top2.png", "empty"),
               Skipped("a/c/d.png", "odd"))
    found = by_folder(records, skipped, scale=1.0, mode="RGB", kind="images", source="s")
    assert list(found) == [".", "a", "b"] and all(type(k) is str for k in found)
    for name, rows in ((".", [2]), ("a", [1]), ("b", [0, 3])):
        alone = DatasetStats.from_summary(summarize(records.take(np.array(rows))), scale=1.0,
                                          mode="RGB", source="s")
        assert dataclasses.replace(found[name], skipped=()) == alone
    assert [s.path for s in found["b"].skipped] == ["b/bad.png"]
    assert [s.path for s in found["."].skipped] == ["top2.png"]
    assert [s.path for s in found["a"].skipped] == ["a/c/d.png"]
    assert found["a"].mean == (7.0, 8.0, 9.0) and found["a"].source == "s"
    named = by_folder(records, channels=("X", "Y", "Z"))
    assert named["a"].channels == ("X", "Y", "Z") and named["a"].scale == 255.0


def test_folder_of_reads_slashes_and_the_system_separator(monkeypatch: pytest.MonkeyPatch) -> None:
    assert [folder_of(k) for k in ("a/b/c", "a/", "x", "", "/abs")] == ["a", "a", ".", ".", ""]
    monkeypatch.setattr(record_reports.os, "sep", "\\")
    assert folder_of("cls\\1.png") == "cls"


def test_the_reports_come_with_the_statistics_they_were_asked_for() -> None:
    stack = stack_of([*TYPICAL[:4], (1, 3)])
    stack[4] = 51  # blank, in the reported scale (1.0) as in the statistics: 51, not 0.2
    keys = ("a/1.png", "a/2.png", "b/3.png", "b/4.png", "b/0.png")
    records = records_from_stack(stack, keys=keys, channel_names=("R", "G", "B"))
    stats = DatasetStats.from_summary(summarize(records), scale=1.0, mode="RGB",
                                      channels=("R", "G", "B"), kind="images")
    both = with_record_reports(stats, records, True, True)
    assert both == stats and list(both.by_folder) == ["a", "b"]
    assert both.by_folder["a"].scale == 1.0 and both.by_folder["a"].mode == "RGB"
    assert both.outliers == OutlierReport((Outlier("b/0.png", ("blank: every pixel is 51",),
                                                   (51.0, 51.0, 51.0), (0.0, 0.0, 0.0)),), 5.0)
    assert with_record_reports(stats, records, True, False).outliers is None
    assert with_record_reports(stats, records, False, True).by_folder is None
    plain = with_record_reports(stats, records, False, False)
    assert (plain.by_folder, plain.outliers) == (None, None)
    for source, named in (("x.npy", "x.npy"), ("", "this data")):
        with pytest.raises(InvalidOptionError) as caught:
            with_record_reports(dataclasses.replace(stats, source=source), None, True, False)
        assert str(caught.value) == (f"--by-folder and --outliers come from per-image records, "
                                     f"which {named} does not give (normstats.records gives "
                                     "those of a Dask array)")


def test_an_outlier_report_holds_its_threshold_and_note() -> None:
    records = records_from_stack(np.zeros((3, 2, 2, 1), np.uint8), channel_names=("L",))
    report = outlier_report(records, scale=1.0)
    assert report.threshold == OUTLIER_Z == 5.0
    assert report.note == "grayscale check off: the channels are L, not R, G, B"
    assert [o.path for o in report] == ["#0", "#1", "#2"]
    colour = outlier_report(rgb_records(TYPICAL))
    assert (colour.images, colour.note) == ((), None)
    blank = records_from_stack(np.full((2, 2, 2, 1), 51, np.uint8), channel_names=("L",))
    assert [o.mean for o in outlier_report(blank, scale=1.0)] == [(51.0,), (51.0,)]
    assert [o.mean for o in outlier_report(blank)] == [(0.2,), (0.2,)]


def test_the_collector_keeps_what_it_is_given_in_order() -> None:
    collector = RecordCollector()
    assert collector.records() is None
    first, second = rgb_records(TYPICAL[:2]), rgb_records(TYPICAL[2:5])
    for records in (first, None, second):
        collector(TaskResult(records, ()))
    assert len(collector.parts) == 2 and len(collector.records()) == 5
    assert collector.records().keys == first.keys + second.keys


def test_the_folder_table_word_for_word() -> None:
    stack = stack_of([(0, 250), (51, 102)])
    records = records_from_stack(stack, keys=("cats/1.png", "a-long-folder\n/2.png"),
                                 channel_names=("R", "G", "B"))
    table = render_by_folder(by_folder(records))
    assert table == [
        "by folder (2):",
        "  folder              images    mean R    mean G    mean B     std R     std G     "
        "std B",
        "  a-long-folder\\n          1    0.3000    0.3039    0.3078    0.1000    0.1000    "
        "0.1000",
        "  cats                     1    0.4902    0.4941    0.4980    0.4902    0.4902    "
        "0.4902"]
    assert render_by_folder({}) == ["by folder (0):", "  folder     images    "]
    big = {"x": dataclasses.replace(by_folder(records)["cats"], images=1234567)}
    assert render_by_folder(big)[2].startswith("  x       1,234,567    0.4902")


def test_the_outlier_list_word_for_word() -> None:
    outliers = tuple(Outlier(f"{i}.png", ("blank: every pixel is 0", "x"), (0.0,), (0.0,))
                     for i in range(4))
    report = OutlierReport(outliers[:1] + (Outlier("tab\t.png", ("mean high (z = +9.0)",),
                                                   (1.0,), (0.0,)),), 5.0)
    assert render_outliers(report) == [
        "outliers: 2 images (|robust z| > 5 on mean or std, blank, or grayscale among colour)",
        "  0.png: blank: every pixel is 0; x",
        "  tab\\t.png: mean high (z = +9.0)"]
    noted = OutlierReport(outliers, 2.5, "grayscale check off: why")
    assert render_outliers(noted, limit=2) == [
        "outliers: 4 images (|robust z| > 2.5 on mean or std, blank, or grayscale among "
        "colour)",
        "  (grayscale check off: why)",
        "  0.png: blank: every pixel is 0; x",
        "  1.png: blank: every pixel is 0; x",
        "  ... and 2 more (--json lists all)"]
    assert render_outliers(noted, limit=4)[-1] == "  3.png: blank: every pixel is 0; x"
    assert len(render_outliers(OutlierReport(outliers * 6, 5.0))) == 22
    assert render_outliers(OutlierReport(outliers * 6, 5.0))[-1] == (
        "  ... and 4 more (--json lists all)")


def test_folder_statistics_carry_the_names_and_skips_of_the_whole() -> None:
    stack = stack_of([*TYPICAL[:4]])
    records = records_from_stack(stack, keys=("a/1.png", "a/2.png", "b/3.png", "b/4.png"),
                                 channel_names=("R", "G", "B"))
    stats = dataclasses.replace(
        DatasetStats.from_summary(summarize(records), channels=("X", "Y", "Z")),
        skipped=(Skipped("b/bad.png", "damaged"),))
    found = with_record_reports(stats, records, True, False).by_folder
    assert found["a"].channels == ("X", "Y", "Z") and found["b"].channels == ("X", "Y", "Z")
    assert [s.path for s in found["b"].skipped] == ["b/bad.png"] and found["a"].skipped == ()
