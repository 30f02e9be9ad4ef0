"""`normstats compare`: the table equals the exact oracle; plots; JSON; errors."""

from __future__ import annotations

import json
import math
import sys
from fractions import Fraction

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import random_images
from oracle import exact_stats
from PIL import Image

from normstats.analyses.compare import (
    Compared,
    between_image_share,
    comparison_rows,
    difference_rows,
    render_comparison,
)
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
    assert [row[-1] for row in rows] == [f"{float(expected[0]):.4f}", "1.0000", "-"]
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
                                           "per_image_std_ddof1", "ratio", "between")]
                     for r in rows]
    assert table[0] == ["0.0000"] * 4 + ["-", "-"]  # a black channel: std 0, no ratio
    assert table[1] == ["0.5000", "0.5000", "0.0000", "0.0000", "0.0000", "1.0000"]
    assert table[6] == ["5.0000", "3.4157", "-", "-", "-", "-"]  # vectors: no images
    start = lines.index(next(line for line in lines if line.startswith("A = a;"))) + 2
    differences = [line.split()[2:] for line in lines[start:start + 5]]
    assert differences == [[cell(r[k]) for k in ("mean_diff", "mean_ratio", "std_diff",
                                                 "std_ratio", "b_mean_under_a",
                                                 "b_std_under_a")]
                           for r in difference_rows(entries)]
    assert differences[0] == ["0.0000", "-", "0.0000", "-", "-", "-"]
    assert differences[3] == ["-5.0000", "0.0000", "-3.4157", "0.0000", "-", "-"]
