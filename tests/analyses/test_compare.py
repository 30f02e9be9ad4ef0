"""`normstats compare`: the table equals the exact oracle; plots; JSON; errors."""

from __future__ import annotations

import json
import math
import sys

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import random_images
from oracle import exact_stats
from PIL import Image

from normstats.analyses.compare import Compared, between_image_share, render_comparison
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
    assert between_image_share(vectors) is None
    assert "-" in render_comparison([Compared("v", vectors)])
