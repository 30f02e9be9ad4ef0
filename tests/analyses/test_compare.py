"""`normstats compare`: the table equals the exact oracle; plots; JSON; errors."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import random_images
from oracle import exact_stats
from PIL import Image

import normstats
from normstats.analyses.compare import (
    EXPLANATION,
    VERSUS_FIRST,
    BetweenShare,
    Compared,
    Comparison,
    _cell,
    _pairwise_sum,
    _squared_sums_by_size,
    between_image_share,
    compare,
    comparison_json,
    comparison_rows,
    difference_rows,
    per_image_stds,
    render_comparison,
)
from normstats.errors import InvalidOptionError, NormstatsError
from normstats.maths.records import IntegerRecords, Skipped, concat_records, records_from_stack
from normstats.results.stats import DatasetStats
from normstats.sources.base import TaskResult
from normstats_cli import main


def checkerboards(count: int, spread: int) -> list[np.ndarray]:
    """Images whose pixels are centre ± spread in a checkerboard: per-image std = spread."""
    centres = np.linspace(40, 200, count).round().astype(int)
    board = (np.indices((6, 6)).sum(axis=0) % 2) * 2 - 1
    return [np.repeat((c + spread * board)[:, :, None], 3, axis=2).astype(np.uint8)
            for c in centres]


@pytest.fixture
def two_datasets(tmp_path, rng):
    boards = checkerboards(10, 20)
    folder = tmp_path / "boards"
    folder.mkdir()
    for i, pixels in enumerate(boards):
        Image.fromarray(pixels).save(folder / f"{i}.png")
    photos = random_images(rng, 30, sizes=((7, 9),))
    array = tmp_path / "photos.npy"
    np.save(array, np.stack(photos))
    return (str(folder), boards), (str(array), photos)


def test_table_equals_the_exact_oracle(two_datasets):
    result = CliRunner().invoke(main, ["compare", two_datasets[0][0], two_datasets[1][0],
                                       "--json", "--workers", "1"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)["rows"]
    for name, images in two_datasets:
        expected = exact_stats(images, 255)
        mine = [r for r in rows if r["dataset"] == name]
        assert len(mine) == 3
        for c, row in enumerate(mine):
            assert row["mean"] == expected["mean"][c]
            assert row["std"] == expected["std"][c]
            for key in ("per_image_std", "per_image_std_ddof1"):
                assert row[key] == pytest.approx(expected[key][c], rel=4e-16, abs=0)
            assert row["ratio"] == pytest.approx(expected["per_image_std"][c]
                                                 / expected["std"][c], rel=1e-15)


def test_checkerboards_have_the_constructed_stds(two_datasets):
    folder, boards = two_datasets[0]
    rows = json.loads(CliRunner().invoke(main, ["compare", folder, "--json",
                                                "--workers", "1"]).output)["rows"]
    centres = np.array([b[0, 0, 0] + 20 for b in boards], dtype=float)
    pooled = math.sqrt(20**2 + centres.var()) / 255
    for row in rows:
        assert row["per_image_std"] == pytest.approx(20 / 255, rel=1e-14)
        assert row["std"] == pytest.approx(pooled, rel=1e-14)
        assert row["between"] == pytest.approx(centres.var() / (20**2 + centres.var()),
                                               rel=1e-12)


def test_text_table_and_explanation(two_datasets):
    result = CliRunner().invoke(main, ["compare", two_datasets[0][0], two_datasets[1][0],
                                       "--workers", "1"])
    assert result.exit_code == 0
    assert "per-image/pooled" in result.output
    assert "law of total variance" in result.output
    assert result.output.count("\n") > 8


def test_plot_is_written(two_datasets, tmp_path):
    import matplotlib  # noqa: F401 - in the test extra: fail, never skip
    out = tmp_path / "cmp.png"
    result = CliRunner().invoke(main, ["compare", two_datasets[0][0], two_datasets[1][0],
                                       "--plot", str(out), "--workers", "1"])
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_is_a_clear_error(two_datasets, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    result = CliRunner().invoke(main, ["compare", two_datasets[0][0], "--plot",
                                       str(tmp_path / "x.png")])
    assert result.exit_code == 1
    assert "pip install 'normstats[plot]'" in result.output


def test_manifest_name_needs_root():
    result = CliRunner().invoke(main, ["compare", "cifar10-train"])
    assert result.exit_code == 1 and "--root" in result.output


def test_between_share_and_render_for_vectors():
    import normstats

    vectors = normstats.compute(np.arange(12, dtype=np.float64).reshape(6, 2))
    assert between_image_share([]) is None
    assert "-" in render_comparison([Compared("v", vectors)])


def exact_between_share(images: list[np.ndarray]) -> list[Fraction | None]:
    """Σ_i n_i·(μ_i − μ)² / Σ (x − μ)² per channel, from the pixels as Fractions (None
    for a constant channel): the law of total variance with pixel-count weights."""
    shares = []
    for c in range(images[0].shape[2]):
        values = [[Fraction(v) for v in img[:, :, c].ravel().tolist()] for img in images]
        everything = [v for image in values for v in image]
        mean = sum(everything) / len(everything)
        total = sum((v - mean) ** 2 for v in everything)
        between = sum(len(image) * (sum(image) / len(image) - mean) ** 2 for image in values)
        shares.append(between / total if total else None)
    return shares


def unequal_images(rng: np.random.Generator) -> list[np.ndarray]:
    """Unequal sizes, where the unweighted mean of per-image variances misleads: a 1×2
    image of 0 and 255 beside large flat ones in R (1 − rms²/std², the old formula, gave
    −8.8 there; the per-image/pooled ratio is 2.14), per-image flat images of different
    levels in G (share 1), and B the same constant everywhere (no share: '-')."""
    images = [np.zeros((1, 2, 3), np.uint8), np.full((40, 30, 3), 128, np.uint8),
              rng.integers(0, 256, (9, 13, 3), dtype=np.uint8), np.full((25, 2, 3), 90, np.uint8)]
    images[0][0, 1, 0] = 255
    for image, level in zip(images, (10, 200, 30, 77)):
        image[:, :, 1] = level
        image[:, :, 2] = 7
    return images


def test_between_share_weighs_each_image_by_its_pixels(tmp_path, rng):
    images = unequal_images(rng)
    folder = tmp_path / "unequal"
    folder.mkdir()
    for i, pixels in enumerate(images):
        Image.fromarray(pixels).save(folder / f"{i}.png")
    expected = exact_between_share(images)
    assert expected[1] == 1 and expected[2] is None and 0 < expected[0] < 1
    result = CliRunner().invoke(main, ["compare", str(folder), "--json", "--workers", "1"])
    assert result.exit_code == 0, result.output
    shares = [row["between"] for row in json.loads(result.output)["rows"]]
    assert shares == [float(expected[0]), 1.0, None]
    text = CliRunner().invoke(main, ["compare", str(folder), "--workers", "1"]).output
    rows = [line.split() for line in text.splitlines()[1:4]]
    assert [row[-3] for row in rows] == [f"{float(expected[0]):.4f}", "1.0000", "-"]
    assert "each image weighted by its pixel count" in text and "'-' for a constant" in text


def test_between_share_of_large_16_bit_and_float_images_against_the_oracle(rng):
    """uint16 images past 46,000 pixels (Σx² of a record's Σx passes int64: Python ints)
    and float images of unequal sizes, in several batches."""
    from normstats.maths.records import records_from_stack

    big = [rng.integers(60000, 65536, (h, 300, 2), dtype=np.uint16) for h in (200, 170, 1)]
    share = between_image_share([records_from_stack(b[None]) for b in big])
    assert list(share) == [float(s) for s in exact_between_share(big)]
    floats = [rng.normal(m, s, (h, w, 1)) for m, s, h, w in ((1e3, 1, 3, 5), (1e3 + 2, 3, 9, 9),
                                                             (999.5, 0.5, 1, 2))]
    share = between_image_share([records_from_stack(f[None]) for f in floats])
    expected = [float(s) for s in exact_between_share(floats)]
    assert share == pytest.approx(expected, rel=1e-12, abs=0)


def test_undefined_cells_render_as_a_dash_and_defined_zeros_as_numbers():
    """A cell shows '-' exactly where its number is undefined (None): no per-image std of
    vectors, no per-image/pooled ratio or between share of a constant channel, no ratio
    against a zero mean or std, nothing 'under A' for A's constant channels. A defined
    zero (the mean of a black channel, a ratio of 0) prints as 0.0000, never as '-'."""
    import normstats

    a = np.zeros((2, 4, 5, 3), np.uint8)
    a[1, ..., 1] = 255  # R black, G flat per image, B constant 7
    a[..., 2] = 7
    b = np.zeros((3, 4, 5, 3), np.uint8)
    b[0, ..., 1] = 51
    b[..., 2] = 7
    vectors = normstats.compute(np.arange(12, dtype=np.float64).reshape(6, 2))
    entries = [Compared("a", normstats.compute(a), between=(None, 1.0, None)),
               Compared("b", normstats.compute(b)), Compared("v", vectors)]
    lines = render_comparison(entries).splitlines()

    def cell(value):
        return "-" if value is None else f"{value:.4f}"

    table = [line.split()[2:] for line in lines[1:9]]
    rows = comparison_rows(entries)
    assert table == [[cell(r[k]) for k in ("mean", "std", "per_image_std",
                                           "per_image_std_ddof1", "ratio", "between",
                                           "mean_vs_first", "std_vs_first")]
                     for r in rows]
    # a black channel: std 0, no ratio, and nothing is measured in its std
    assert table[0] == ["0.0000"] * 4 + ["-"] * 4
    assert table[1] == ["0.5000", "0.5000", "0.0000", "0.0000", "0.0000", "1.0000", "0.0000",
                        "1.0000"]
    assert table[4] == ["0.0667", "0.0943", "0.0000", "0.0000", "0.0000", "-",
                        "-0.8667", "0.1886"]  # b's G against a's
    assert table[6] == ["5.0000", "3.4157", "-", "-", "-", "-", "-", "-"]  # vectors
    differences = difference_rows(entries)
    assert [cell(r[k]) for r in differences[:1] for k in ("mean_diff", "mean_ratio",
                                                          "std_diff", "std_ratio")] == \
        ["0.0000", "-", "0.0000", "-"]
    assert [cell(differences[3][k]) for k in ("mean_diff", "mean_ratio", "std_diff",
                                              "std_ratio", "b_mean_under_a")] == \
        ["-5.0000", "0.0000", "-3.4157", "0.0000", "-"]



# --- normstats.compare: many datasets, from Python and the command line -----------------

@pytest.fixture
def three_datasets(tmp_path, rng):
    """A folder of PNGs of three sizes, a .npy stack, and an in-memory array: each with
    its own brightness and spread."""
    folder = tmp_path / "folder"
    folder.mkdir()
    first = random_images(rng, 12)
    for i, pixels in enumerate(first):
        Image.fromarray(pixels).save(folder / f"{i}.png")
    second = list(rng.integers(0, 120, (15, 6, 6, 3), dtype=np.uint8))
    np.save(tmp_path / "second.npy", np.stack(second))
    third = [np.clip(img.astype(int) + 60, 0, 255).astype(np.uint8) for img in second[:9]]
    return [(str(folder), first), (str(tmp_path / "second.npy"), second),
            ("dataset 3", third)]


def expected_rows(datasets) -> list[dict]:
    """Every number of the comparison from exact rational arithmetic (the distances from
    the first are the float arithmetic on the exactly rounded constants)."""
    rows, first = [], exact_stats(datasets[0][1], 255)
    for name, images in datasets:
        exact = exact_stats(images, 255)
        shares = exact_between_share(images)
        for c, channel in enumerate("RGB" if name.endswith("folder") else ("c0", "c1", "c2")):
            rows.append({"dataset": name, "channel": channel, "mean": exact["mean"][c],
                         "std": exact["std"][c], "per_image_std": exact["per_image_std"][c],
                         "per_image_std_ddof1": exact["per_image_std_ddof1"][c],
                         "ratio": exact["per_image_std"][c] / exact["std"][c],
                         "between": float(shares[c]),
                         "mean_vs_first": (exact["mean"][c] - first["mean"][c])
                         / first["std"][c],
                         "std_vs_first": exact["std"][c] / first["std"][c]})
    return rows


def assert_rows(found: list[dict], expected: list[dict]) -> None:
    assert [(r["dataset"], r["channel"]) for r in found] == \
        [(r["dataset"], r["channel"]) for r in expected]
    for mine, exact in zip(found, expected):
        for key in ("mean", "std", "between"):  # exact fractions rounded once
            assert mine[key] == exact[key], (mine["dataset"], key)
        for key in ("per_image_std", "per_image_std_ddof1", "ratio"):
            assert mine[key] == pytest.approx(exact[key], rel=4e-16, abs=0), key
        for key in ("mean_vs_first", "std_vs_first"):
            assert mine[key] == pytest.approx(exact[key], rel=1e-15, abs=1e-16), key


def test_compare_three_datasets_from_python_equals_the_exact_oracle(three_datasets):
    import normstats

    data = {name: (np.stack(images) if name == "dataset 3" else name)
            for name, images in three_datasets}
    comparison = normstats.compare(list(data.values()), workers=1)
    assert isinstance(comparison, normstats.Comparison)
    assert_rows(comparison.rows, expected_rows(three_datasets))
    assert [e.per_image_std.shape for e in comparison.entries] == [(12, 3), (15, 3), (9, 3)]
    assert json.loads(comparison.to_json())["rows"] == comparison.rows
    assert str(comparison).splitlines()[0].split()[-6:] == ["mean", "vs", "1st", "std", "vs",
                                                           "1st"]
    named = normstats.compare({"a": data["dataset 3"], "b": data[three_datasets[1][0]]})
    assert [e.name for e in named.entries] == ["a", "b"]
    assert named.differences[0]["b_std_under_a"] == named.rows[3]["std_vs_first"]


def test_compare_three_datasets_on_the_command_line(three_datasets, tmp_path):
    import matplotlib  # noqa: F401 - in the test extra: fail, never skip
    from PIL import Image as PILImage

    third = tmp_path / "third.npy"
    np.save(third, np.stack(three_datasets[2][1]))
    paths = [three_datasets[0][0], three_datasets[1][0], str(third)]
    plot = tmp_path / "three.png"
    result = CliRunner().invoke(main, ["compare", *paths, "--json", "--workers", "1",
                                       "--plot", str(plot)])
    assert result.exit_code == 0, result.output
    expected = expected_rows([(p, images) for p, (_, images) in zip(paths, three_datasets)])
    assert_rows(json.loads(result.stdout)["rows"], expected)
    assert 10_000 < plot.stat().st_size < 2_000_000
    with PILImage.open(plot) as figure:  # three channel panels side by side
        assert figure.format == "PNG" and figure.width > 2 * figure.height
        saturation = np.asarray(figure.convert("RGB").convert("HSV"))[..., 1]
    assert (saturation > 80).mean() > 0.01  # the datasets' coloured violins are drawn
    text = CliRunner().invoke(main, ["compare", *paths, "--workers", "1"]).stdout
    assert [line.split()[0] for line in text.splitlines()[1:10]] == \
        [p for p in paths for _ in range(3)]


def test_compare_needs_a_dataset_and_a_root_for_manifest_names():
    import normstats
    from normstats.errors import InvalidOptionError, NormstatsError

    with pytest.raises(InvalidOptionError, match="at least one dataset"):
        normstats.compare([])
    with pytest.raises(NormstatsError, match="manifest name: give the folder"):
        normstats.compare(["cifar10-train"])


# --- the share, the rows and the text, on records and statistics built in memory ---------

def int_records(sums: list[int], pixels: list[int], dtype: str = "uint16") -> IntegerRecords:
    """One-channel integer records with the given Σx (Σx² = (Σx)²: each image flat)."""
    column = np.array(sums, np.int64)[:, None]
    return IntegerRecords(dtype=dtype, channel_names=("c0",), keys=(),
                          pixels=np.array(pixels, np.int64), minimum=column * 0.0,
                          maximum=column * 1.0, sums=column, sums_sq=column * 0)


def test_squared_sums_are_grouped_by_size_exactly() -> None:
    records = int_records([5, 7, -3, 2, 11], [3, 1, 3, 2, 1])
    assert _squared_sums_by_size(records) == [(1, [49 + 121]), (2, [4]), (3, [25 + 9])]
    top = 3_037_000_499  # the largest |Σx| whose square fits int64
    for big in (top, top + 1, -top - 1, 2**40):
        records = int_records([big, big, big, 1, -big], [4, 4, 4, 4, 9])
        assert _squared_sums_by_size(records) == [(4, [3 * big * big + 1]), (9, [big * big])]
        assert all(type(v) is int for _, values in _squared_sums_by_size(records) for v in values)
    two = IntegerRecords(dtype="uint8", channel_names=("a", "b"), keys=(),
                         pixels=np.array([2, 2]), minimum=np.zeros((2, 2)),
                         maximum=np.zeros((2, 2)), sums=np.array([[1, 2], [3, 4]]),
                         sums_sq=np.zeros((2, 2), np.int64))
    assert _squared_sums_by_size(two) == [(2, [1 + 9, 4 + 16])]


def test_pairwise_sum_is_the_exact_sum() -> None:
    values = [Fraction(1, k) for k in range(1, 12)]
    assert _pairwise_sum(values) == sum(values)
    assert _pairwise_sum([Fraction(3, 7)]) == Fraction(3, 7)
    assert _pairwise_sum([]) == 0 and type(_pairwise_sum([])) is Fraction
    assert _pairwise_sum([Fraction(1, 2), Fraction(1, 3)]) == Fraction(5, 6)


def test_the_share_of_unequal_images_fed_in_batches_is_exact(rng) -> None:
    images = [rng.integers(0, 256, (h, w, 2), dtype=np.uint8)
              for h, w in ((1, 3), (2, 2), (1, 1), (3, 5), (2, 2), (1, 3))]
    images[2][...] = 9
    share = BetweenShare()
    assert share.images == 0 and share.shares() is None
    for start, stop in ((0, 2), (2, 2), (2, 3), (3, 6)):
        share.add(concat_records([records_from_stack(i[None]) for i in images[start:stop]])
                  if stop > start else records_from_stack(np.zeros((0, 1, 1, 2), np.uint8)))
    expected = tuple(float(s) for s in exact_between_share(images))
    assert share.images == 6 and share.shares() == expected
    assert share.shares(images=6) == expected and share.shares(images=5) is None
    flat = [np.full((2, 2, 1), v, np.uint8) for v in (1, 5, 5)]
    assert between_image_share([records_from_stack(np.stack(flat))]) == (1.0,)
    constant = [np.full((1, 2, 1), 5, np.uint8)] * 3
    assert between_image_share([records_from_stack(np.stack(constant))]) == (None,)
    same_means = [np.array([[[0], [4]]], np.uint8), np.array([[[1], [3]]], np.uint8)]
    assert between_image_share([records_from_stack(np.stack(same_means))]) == (0.0,)


def test_the_share_of_float_images_fed_in_batches(rng) -> None:
    images = [rng.normal(m, s, (h, w, 2)) for m, s, h, w in ((5.0, 1.0, 1, 3), (8.0, 2.0, 2, 2),
                                                            (5.5, 0.5, 3, 1), (7.0, 1.0, 1, 1))]
    share = BetweenShare()
    share.add(records_from_stack(images[0][None]))
    share.add(concat_records([records_from_stack(i[None]) for i in images[1:3]]))
    share.add(records_from_stack(images[3][None]))
    assert share.images == 4
    assert share.shares() == pytest.approx([float(s) for s in exact_between_share(images)],
                                           rel=1e-13, abs=0)
    assert between_image_share([records_from_stack(np.full((2, 1, 2, 1), 0.5))]) == (None,)


def test_the_share_refuses_to_mix_kinds_and_takes_task_results() -> None:
    share = BetweenShare()
    share(TaskResult(None, ()))
    assert share.images == 0
    share(TaskResult(records_from_stack(np.zeros((2, 1, 2, 1), np.uint8)), ()))
    assert share.images == 2
    with pytest.raises(ValueError) as caught:
        share.add(records_from_stack(np.zeros((1, 1, 2, 1))))
    assert str(caught.value) == "records of different kinds cannot share one variance"
    with pytest.raises(ValueError):
        share.add(records_from_stack(np.zeros((1, 1, 2, 2), np.uint8)))


def test_per_image_stds_of_collected_records() -> None:
    parts = [records_from_stack(np.array([[[[0], [2]]], [[[3], [3]]]], np.uint8)),
             records_from_stack(np.array([[[[1], [7]]]], np.uint8))]
    assert per_image_stds(parts, 2.0).tolist() == [[0.5], [0.0], [1.5]]


def _stats(**changes: Any) -> DatasetStats:
    values: dict[str, Any] = dict(
        channels=("R", "G"), mean=(0.5, 0.25), std=(0.25, 0.0), std_ddof1=(0.25, 0.0),
        per_image_std=(0.125, 0.0), per_image_std_ddof1=(0.1875, 0.0),
        rms_per_image_std=(0.15625, 0.0), min=(0.0, 0.25), max=(1.0, 0.25), images=1234,
        pixels_per_channel=64, dtype="uint8", scale=255.0, mode="RGB", source="/data/toy")
    values.update(changes)
    return DatasetStats(**values)


FIRST = Compared("first", _stats(), between=(0.75, None))
SECOND = Compared("second-long-name", _stats(mean=(0.0, 0.5), std=(0.5, 0.125), images=3,
                                             skipped=(Skipped("x", "y"),)), between=(0.5, 1.0))
VECTORS = Compared("v", _stats(channels=("R",), mean=(0.625,), std=(0.25,), per_image_std=None,
                               per_image_std_ddof1=None, dtype="float64", scale=1.0, mode="NC",
                               kind="vectors"))


def test_comparison_rows_hold_every_number_or_none() -> None:
    assert comparison_rows([]) == []
    assert comparison_rows([FIRST, SECOND, VECTORS]) == [
        {"dataset": "first", "channel": "R", "mean": 0.5, "std": 0.25, "per_image_std": 0.125,
         "per_image_std_ddof1": 0.1875, "ratio": 0.5, "between": 0.75, "mean_vs_first": 0.0,
         "std_vs_first": 1.0},
        {"dataset": "first", "channel": "G", "mean": 0.25, "std": 0.0, "per_image_std": 0.0,
         "per_image_std_ddof1": 0.0, "ratio": None, "between": None, "mean_vs_first": None,
         "std_vs_first": None},
        {"dataset": "second-long-name", "channel": "R", "mean": 0.0, "std": 0.5,
         "per_image_std": 0.125, "per_image_std_ddof1": 0.1875, "ratio": 0.25,
         "between": 0.5, "mean_vs_first": -2.0, "std_vs_first": 2.0},
        {"dataset": "second-long-name", "channel": "G", "mean": 0.5, "std": 0.125,
         "per_image_std": 0.0, "per_image_std_ddof1": 0.0, "ratio": 0.0, "between": 1.0,
         "mean_vs_first": None, "std_vs_first": None},
        {"dataset": "v", "channel": "R", "mean": 0.625, "std": 0.25, "per_image_std": None,
         "per_image_std_ddof1": None, "ratio": None, "between": None, "mean_vs_first": 0.5,
         "std_vs_first": 1.0}]
    three = Compared("three", _stats(channels=("R", "G", "B"), mean=(0.5,) * 3, std=(0.5,) * 3,
                                     std_ddof1=(0.5,) * 3, per_image_std=None,
                                     per_image_std_ddof1=None, rms_per_image_std=None,
                                     min=(0.0,) * 3, max=(1.0,) * 3))
    assert [r["std_vs_first"] for r in comparison_rows([VECTORS, three])] == [1.0, 2.0, None,
                                                                             None]


def test_channels_are_compared_by_name_by_position_or_not_at_all(tmp_path) -> None:
    """Rows used to pair channels by position, whatever they were: a grayscale dataset's L
    was "compared" with the first's R, and a BGR-named one's B with R. Now the same names
    pair in any order, as many unnamed channels pair by position (an array against a
    folder), and different counts pair only channels of one name."""
    rng = np.random.default_rng(11)
    rgb = rng.integers(0, 256, (6, 4, 5, 3), dtype=np.uint8)
    named = normstats.compute(rgb, channels="R,G,B")
    reversed_names = normstats.compute(rgb[..., ::-1], channels="B,G,R")
    unnamed = normstats.compute(rgb)
    gray = normstats.compute(rgb[..., :1], channels="L")
    entries = [Compared("rgb", named), Compared("bgr", reversed_names),
               Compared("array", unnamed), Compared("gray", gray)]
    rows = comparison_rows(entries)
    assert [(r["dataset"], r["channel"], r["mean_vs_first"], r["std_vs_first"])
            for r in rows[3:]] == [
        ("bgr", "B", 0.0, 1.0), ("bgr", "G", 0.0, 1.0), ("bgr", "R", 0.0, 1.0),
        ("array", "c0", 0.0, 1.0), ("array", "c1", 0.0, 1.0), ("array", "c2", 0.0, 1.0),
        ("gray", "L", None, None)]
    assert [(r["b"], r["channel"], r["b_channel"], r["mean_diff"])
            for r in difference_rows(entries)] == [
        ("bgr", "R", "R", 0.0), ("bgr", "G", "G", 0.0), ("bgr", "B", "B", 0.0),
        ("array", "R", "c0", 0.0), ("array", "G", "c1", 0.0), ("array", "B", "c2", 0.0)]
    text = render_comparison(entries)
    assert "gray has 1 channel (L) and rgb 3 channels (R, G, B): one set of constants " \
        "cannot serve both; no channel of the same name to compare ('-')." in text
    shifted = normstats.compute(rgb // 2, channels=None)
    assert "leaves its channel c0 (rgb's R) at mean" in \
        render_comparison([Compared("rgb", named), Compared("half", shifted)])


def test_difference_rows_against_the_first_dataset() -> None:
    assert difference_rows([FIRST]) == [] and difference_rows([]) == []
    assert difference_rows([FIRST, SECOND, VECTORS]) == [
        {"a": "first", "b": "second-long-name", "channel": "R", "b_channel": "R", "mean_diff": 0.5,
         "std_diff": -0.25, "mean_ratio": None, "std_ratio": 0.5, "b_mean_under_a": -2.0,
         "b_std_under_a": 2.0},
        {"a": "first", "b": "second-long-name", "channel": "G", "b_channel": "G",
         "mean_diff": -0.25,
         "std_diff": -0.125, "mean_ratio": 0.5, "std_ratio": 0.0, "b_mean_under_a": None,
         "b_std_under_a": None},
        {"a": "first", "b": "v", "channel": "R", "b_channel": "R", "mean_diff": -0.125,
         "std_diff": 0.0,
         "mean_ratio": 0.8, "std_ratio": 1.0, "b_mean_under_a": 0.5, "b_std_under_a": 1.0}]


TABLE = """\
dataset           channel      mean  pooled std  per-image std  per-image ddof1  \
per-image/pooled   between  mean vs 1st  std vs 1st
first             R          0.5000      0.2500         0.1250           0.1875            \
0.5000    0.7500       0.0000      1.0000
first             G          0.2500      0.0000         0.0000           0.0000                 \
-         -            -           -
second-long-name  R          0.0000      0.5000         0.1250           0.1875            \
0.2500    0.5000      -2.0000      2.0000
second-long-name  G          0.5000      0.1250         0.0000           0.0000            \
0.0000    1.0000            -           -
v                 R          0.6250      0.2500              -                -                 \
-         -       0.5000      1.0000

first: 1,234 images, uint8, scale 255, mode RGB
second-long-name: 3 images, uint8, scale 255, mode RGB, 1 input skipped
v: 1,234 vectors, float64, scale 1, mode NC

Using first's constants on second-long-name leaves its channel R at mean -2.000 and std 2.000 \
instead of 0 and 1: compute constants for the data the model will see.
v has 1 channel (R) and first 2 channels (R, G): one set of constants cannot serve both; only \
channels of the same name are compared (R).

"""


def test_the_comparison_text_word_for_word() -> None:
    assert render_comparison([FIRST, SECOND, VECTORS]) == TABLE + EXPLANATION
    alone = render_comparison([FIRST]).split("\n")
    assert alone[:5] == [
        "dataset  channel      mean  pooled std  per-image std  per-image ddof1  "
        "per-image/pooled   between  mean vs 1st  std vs 1st",
        "first    R          0.5000      0.2500         0.1250           0.1875            "
        "0.5000    0.7500       0.0000      1.0000",
        "first    G          0.2500      0.0000         0.0000           0.0000                 "
        "-         -            -           -", "",
        "first: 1,234 images, uint8, scale 255, mode RGB"]
    assert alone[5:] == ["", EXPLANATION]
    assert EXPLANATION.startswith("Why they differ: the pooled std measures every pixel")
    assert EXPLANATION.endswith("each dataset normalized with the first one's constants, 0 "
                                "and 1 when they agree.")
    assert str(Comparison((FIRST, SECOND, VECTORS))) == TABLE + EXPLANATION
    # vector data alone has no per-image columns: only the last two are explained
    vectors = render_comparison([VECTORS, VECTORS]).split("\n")
    assert vectors[-2:] == ["", VERSUS_FIRST] and "pixel" not in "\n".join(vectors)
    assert EXPLANATION.endswith(VERSUS_FIRST)


def test_the_verdict_on_sharing_constants() -> None:
    a = Compared("a", _stats(mean=(0.0, 0.5), std=(1.0, 0.0)))

    def verdict(mean: float, std: float) -> str:
        b = Compared("b", _stats(mean=(mean, 0.5), std=(std, 0.0)))
        return render_comparison([a, b]).split("\n\n")[-2].splitlines()[-1]

    assert verdict(0.0625, 1.0625) == (
        "Using a's constants on b leaves its channel R at mean +0.062 and std 1.062 instead of "
        "0 and 1: close enough to share one set of constants.")
    assert verdict(-0.0625, 0.9375).endswith("close enough to share one set of constants.")
    for mean, std in ((0.1, 1.0), (-0.1, 1.0), (0.0, 1.125), (0.0, 0.875), (2.0, 3.0)):
        assert verdict(mean, std).endswith("compute constants for the data the model will see.")
    flat_a = Compared("a", _stats(std=(0.0, 0.0)))  # nothing is measured in a zero std
    assert not any(line.startswith("Using") for line in
                   render_comparison([flat_a, a]).splitlines())


def test_cells_show_four_decimals_or_a_dash() -> None:
    assert [_cell(v, 8) for v in (None, math.nan, 0.0, -1.23456, 12345.0)] == [
        "       -", "       -", "  0.0000", " -1.2346", "12345.0000"]
    assert _cell(1, 3) == "1.0000"


def test_the_comparison_json_holds_rows_differences_and_statistics() -> None:
    entries = [FIRST, SECOND]
    assert json.loads(comparison_json(entries)) == {
        "rows": comparison_rows(entries), "differences": difference_rows(entries),
        "datasets": {"first": json.loads(json.dumps(FIRST.stats.to_dict())),
                     "second-long-name": json.loads(json.dumps(SECOND.stats.to_dict()))},
        "explanation": EXPLANATION}
    assert comparison_json(entries).startswith('{\n  "rows": [\n    {\n      "dataset"')


def test_a_comparison_holds_its_rows_differences_json_and_plot(tmp_path, monkeypatch) -> None:
    comparison = Comparison((FIRST, SECOND))
    assert comparison.rows == comparison_rows([FIRST, SECOND])
    assert comparison.differences == difference_rows([FIRST, SECOND])
    assert comparison.to_json() == comparison_json([FIRST, SECOND])
    from normstats.analyses import plots

    drawn = []
    monkeypatch.setattr(plots, "plot_comparison",
                        lambda entries, path, columns: drawn.append((entries, path, columns))
                        or "drawn")
    assert comparison.plot(tmp_path / "x.png") == "drawn"
    assert drawn == [([FIRST, SECOND], tmp_path / "x.png", [{0: 0, 1: 1}, {0: 0, 1: 1}])]


def test_compare_names_and_computes_each_dataset() -> None:
    a = np.array([0, 255, 51, 204], np.uint8).reshape(4, 1, 1, 1)
    named = compare({"a": a, "b": a // 5}, workers=1)
    assert [e.name for e in named.entries] == ["a", "b"]
    assert [(r["dataset"], r["std"], r["std_vs_first"]) for r in named.rows] == [
        ("a", normstats.compute(a).std[0], 1.0),
        ("b", normstats.compute(a // 5).std[0], normstats.compute(a // 5).std[0]
         / normstats.compute(a).std[0])]
    first = named.entries[0]
    assert first.stats == normstats.compute(a)
    assert first.per_image_std.tolist() == [[0.0]] * 4
    assert first.between == between_image_share([records_from_stack(a)])
    listed = compare([a, a], scale=1.0, channels=("Y",))
    assert [e.name for e in listed.entries] == ["dataset 1", "dataset 2"]
    assert listed.entries[1].stats.scale == 1.0 and listed.entries[1].stats.channels == ("Y",)
    vectors = compare([np.arange(12.0).reshape(6, 2)]).entries[0]
    assert vectors.per_image_std is None and vectors.between is None
    with pytest.raises(InvalidOptionError) as caught:
        compare([])
    assert str(caught.value) == "compare needs at least one dataset"


def test_compare_reads_paths_globs_and_manifest_names_under_a_root(tmp_path,
                                                                  monkeypatch) -> None:
    import importlib

    from normstats.analyses import manifests
    from normstats.analyses.manifest_schema import Manifest, SourceSpec

    fw = importlib.import_module("format_writers")
    for i in (1, 2):
        fw.write_folder(tmp_path / f"set{i}", fw.images(i, 3, 4, 4, 3))
    by_path = compare([tmp_path / "set1", str(tmp_path / "set*")], workers=1)
    assert [e.name for e in by_path.entries] == [str(tmp_path / "set1"),
                                                 str(tmp_path / "set*")]
    assert by_path.entries[1].stats.images == 6
    assert by_path.entries[0].per_image_std.shape == (3, 3)
    with pytest.raises(NormstatsError) as caught:
        compare(["cifar10-train"])
    assert str(caught.value) == ("cifar10-train is a manifest name: give the folder holding "
                                 "its files with root= (--root)")
    toy = Manifest("toy", "Toy", "train", "d", SourceSpec("folder", ("set2",),
                                                          channels=("X", "Y", "Z")), ())
    monkeypatch.setattr(manifests, "load_manifest",
                        lambda name: toy if name == "toy" else pytest.fail(name))
    entry = compare(["toy"], root=tmp_path, workers=1, resize=2).entries[0]
    assert (entry.name, entry.stats.channels, entry.stats.images) == ("toy", ("X", "Y", "Z"), 3)
    assert entry.stats.pixels_per_channel == 3 * 2 * 2
    both = compare(["toy"], root=tmp_path, workers=1, resize=3, center_crop=2).entries[0]
    assert both.stats == normstats.compute(tmp_path / "set2", resize=3, center_crop=2,
                                           channels="X,Y,Z", cache=False, workers=1)
    assert both.stats.pixels_per_channel == 3 * 2 * 2  # 4×4 → 3×3 → the central 2×2, once
    assert compare(["toy"], root=str(tmp_path), channels="A,B,C").entries[0].stats.channels \
        == ("A", "B", "C")
    damaged = dataclasses.replace(toy, source=dataclasses.replace(
        toy.source, checksums={"set2/0000.png": "md5:" + "0" * 32}))
    monkeypatch.setattr(manifests, "load_manifest", lambda name: damaged)
    with pytest.raises(NormstatsError, match="md5 checksum mismatch"):
        compare(["toy"], root=tmp_path)


def test_compare_reads_with_the_options_and_cache_given(tmp_path) -> None:
    import importlib

    from normstats.sources.options import ReadOptions

    fw = importlib.import_module("format_writers")
    folder = fw.write_folder(tmp_path / "set", fw.images(4, 3, 2, 2, 3))
    cache = tmp_path / "cache"
    cold = compare([folder], cache=cache, workers=1).entries[0]
    warm = compare([folder], cache=cache, workers=1).entries[0]
    assert cold.stats.images_decoded == 3 and warm.stats.images_cached == 3
    raw = compare([folder], options=ReadOptions(scale=1.0), workers=1).entries[0]
    assert raw.stats.scale == 1.0
    pixels = np.stack([np.asarray(Image.open(folder / f"{i:04d}.png")) for i in range(3)])
    stds = np.sqrt(records_from_stack(pixels).image_variance(0))
    assert raw.per_image_std.tolist() == stds.tolist()
    assert cold.per_image_std.tolist() == (stds / 255).tolist()


def test_a_dask_array_has_no_per_image_stds_to_plot() -> None:
    import dask.array as da

    pixels = np.arange(4 * 2 * 2 * 3, dtype=np.uint8).reshape(4, 2, 2, 3)
    entry = compare([da.from_array(pixels, chunks=(2, 2, 2, 3))]).entries[0]
    assert entry.per_image_std is None and entry.between is None
    assert entry.stats.mean == normstats.compute(pixels).mean


def test_a_share_of_the_smallest_nonzero_variance() -> None:
    """Two pixels 0 and 1: n·Σx² − (Σx)² = 1, the least a varying integer channel has."""
    one = records_from_stack(np.array([[[[0], [1]]]], np.uint8))
    assert between_image_share([one]) == (0.0,)
    two = records_from_stack(np.array([[[[0], [0]]], [[[1], [1]]]], np.uint8))
    assert between_image_share([two]) == (1.0,)
    tiny = records_from_stack(np.array([[[[0.0], [0.25]]], [[[0.5], [0.75]]]]))
    assert between_image_share([tiny]) == (0.8,)
