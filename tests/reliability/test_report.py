"""Reliability matrix, part 6: every skipped file named, the rest exact (docs/reliability.md)."""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from oracle import assert_matches_oracle
from PIL import Image
from reliability_helpers import (
    encode,
    photo,
    png_header_only,
)

import normstats
from normstats_cli import main

fw = importlib.import_module("format_writers")



def write_messy_folder(root: Path, rng: np.random.Generator) -> dict[str, str]:
    """A mixture of the matrix's bad files; returns file -> words its reason must hold."""
    good_jpeg = encode(photo(rng), "JPEG")
    bad = {
        "cut.jpg": (good_jpeg[:200], "truncated or corrupt"),
        "half.webp": (encode(photo(rng), "WEBP")[:300], "truncated or corrupt"),
        "empty.png": (b"", "zero-byte file"),
        "README.jpg": (b"# my dataset\n", "not an image"),
        "bomb.png": (png_header_only(20_000, 20_000), "--max-pixels"),
        "deep.png": (encode(Image.fromarray(np.full((3, 3), 4000, np.uint16)), "PNG"),
                     "--mode keep"),
    }
    for name, (data, _) in bad.items():
        (root / name).write_bytes(data)
    (root / "folder.jpg").mkdir()  # a folder, walked like any other: not a skipped file
    os.symlink(root / "missing.png", root / "dangling.png")
    expected = {name: words for name, (_, words) in bad.items()}
    expected["dangling.png"] = "cannot stat file"
    return expected


def test_messy_folder_report_names_every_skipped_file_and_the_rest_is_exact(png_folder, rng):
    """The CLI's JSON report, with the default scheduler (a process pool)."""
    root, images = png_folder
    expected = write_messy_folder(root, rng)
    result = CliRunner().invoke(main, ["compute", str(root), "--json", "--no-cache",
                                       "--workers", "2"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    skipped = {s["path"]: s["reason"] for s in data["skipped"]}
    assert set(skipped) == set(expected)
    for name, words in expected.items():
        assert words in skipped[name] and "\n" not in skipped[name], (name, skipped[name])
    assert_matches_oracle(normstats.DatasetStats.from_dict(data), images, 255)


@pytest.mark.parametrize("name, data, advice", [
    ("deep.png", encode(Image.fromarray(np.full((3, 3), 4000, np.uint16)), "PNG"),
     "deep.png: 16-bit image (Pillow mode I;16): converting it to RGB would clip it to 8 bits; "
     "use --mode keep to compute it at its native depth"),
    ("bomb.png", png_header_only(20_000, 20_000),
     "bomb.png: decompression bomb: 400000000 pixels exceeds the limit of 89478485 pixels; "
     "raise it with --max-pixels if the file is trusted"),
    ("cut.tif", encode(Image.new("RGB", (30, 30)), "TIFF", compression="tiff_deflate")[:100],
     "cut.tif: truncated or corrupt TIFF file (its header cannot be read)"),
])
def test_on_error_fail_is_one_line_with_the_path_the_reason_and_the_advice(tmp_path, name,
                                                                           data, advice):
    (tmp_path / name).write_bytes(data)
    result = CliRunner().invoke(main, ["compute", str(tmp_path), "--on-error", "fail",
                                       "--no-cache", "--scheduler", "sync"])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [f"normstats: error: {advice}"]
