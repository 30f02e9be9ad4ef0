"""Statistics per sub-folder and outlier lists, from records alone (no decoding again)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

import normstats
from normstats.analyses.record_reports import RecordCollector, by_folder, find_outliers, folder_of
from normstats.maths.records import records_from_stack
from normstats.sources import folder as folder_module
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
    monkeypatch.setattr(folder_module, "decode_file", no_decoding)
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
