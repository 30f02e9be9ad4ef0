"""What `normstats compute` and `compare` print keeps its word: JSON that reads back,
skipped files never hidden, contradictory options refused, seeds that repeat a run."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from click.testing import CliRunner

import normstats
from normstats.results.stats import DatasetStats
from normstats_cli import main


@pytest.fixture
def array_file(tmp_path, rng):
    path = tmp_path / "images.npy"
    np.save(path, rng.integers(0, 256, (60, 5, 5, 3), dtype=np.uint8))
    return str(path)


def _invoke(*args: str):
    return CliRunner().invoke(main, [*args])


@pytest.mark.parametrize("mode", [[], ["--sample", "20", "--seed", "4"],
                                  ["--precision", "0.2", "--seed", "4"], ["--percentiles"]],
                         ids=["exact", "sample", "precision", "percentiles"])
def test_json_of_every_mode_reads_back_as_dataset_stats(array_file, mode):
    result = _invoke("compute", array_file, "--json", "--workers", "1", *mode)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    stats = DatasetStats.from_json(result.stdout)
    assert stats.images == data["images"] and stats.mean == tuple(data["mean"])
    if mode and mode[0] != "--percentiles":
        assert data["estimate"]["seed"] == 4 and data["estimate"]["population"] == 60
    if not mode:
        assert stats == normstats.compute(array_file)


def test_precision_without_a_seed_prints_the_seed_that_repeats_it(array_file):
    first = _invoke("compute", array_file, "--sample", "10", "--workers", "1")
    assert first.exit_code == 0
    seed = re.search(r"\(seed (\d+): --seed \1 draws the same images\)", first.stdout).group(1)
    again = _invoke("compute", array_file, "--sample", "10", "--seed", seed, "--workers", "1")
    assert again.stdout == first.stdout


def test_a_sample_larger_than_the_dataset_says_so(array_file):
    result = _invoke("compute", array_file, "--sample", "500", "--workers", "1")
    assert result.stdout.startswith("EXACT: --sample 500 is more than the 60 images of the "
                                    "dataset, so all of them were used")
    exact = normstats.compute(array_file)
    data = json.loads(_invoke("compute", array_file, "--sample", "500", "--json").stdout)
    assert DatasetStats.from_dict(data) == exact and data["estimate"]["requested"] == 500


def test_an_export_still_reports_skipped_files_on_stderr(png_folder):
    root, _ = png_folder
    (root / "cat" / "broken.png").write_bytes(b"not a png")
    result = _invoke("compute", str(root), "--to", "torchvision", "--no-cache")
    assert result.exit_code == 0
    assert result.stdout.splitlines()[-1].startswith("torchvision.transforms.Normalize(")
    assert "skipped 1 input:" in result.stderr
    assert "cat/broken.png: not an image" in result.stderr


def test_contradictory_options_are_refused(png_folder, tmp_path):
    root, _ = png_folder
    both = _invoke("compute", str(root), "--to", "keras", "--json")
    assert both.exit_code == 2 and "--json the whole result: choose one" in both.output
    extra = _invoke("compute", "--manifest", "mnist-test", "--root", str(tmp_path), str(root))
    assert extra.exit_code == 2 and f"remove the extra PATH {root}" in extra.output
    cache = _invoke("compute", str(root), "--cache", str(tmp_path / "c"), "--no-cache")
    assert cache.exit_code == 2 and "and --no-cache neither: choose one" in cache.output
    assert not (tmp_path / "c").exists()  # once: no cache, without a word


def test_no_cache_prints_nothing_about_the_cache(png_folder):
    root, _ = png_folder
    for env in ({}, {"NORMSTATS_CACHE": "off"}):
        args = ["compute", str(root), "--workers", "1"] + ([] if env else ["--no-cache"])
        result = CliRunner().invoke(main, args, env=env)
        assert result.exit_code == 0 and "from the cache" not in result.output


def test_compare_shows_a_minus_b_and_what_a_constants_do_to_b(tmp_path):
    a, b = tmp_path / "a.npy", tmp_path / "b.npy"
    np.save(a, np.array([0, 255], np.uint8).reshape(2, 1, 1, 1))  # mean 0.5, std 0.5
    np.save(b, np.array([0, 51], np.uint8).reshape(2, 1, 1, 1))   # mean 0.1, std 0.1
    data = json.loads(_invoke("compare", str(a), str(b), "--json").stdout)
    assert data["differences"] == [{
        "a": str(a), "b": str(b), "channel": "L", "b_channel": "L", "mean_diff": 0.4,
        "std_diff": 0.4, "mean_ratio": 5.0, "std_ratio": 5.0, "b_mean_under_a": -0.8,
        "b_std_under_a": 0.2}]
    text = _invoke("compare", str(a), str(b)).stdout
    assert f"Using {a}'s constants on {b} leaves its channel L at mean -0.800 and std " \
           "0.200 instead of 0 and 1" in text
    row = next(line.split() for line in text.splitlines() if line.startswith(str(b)))
    assert row[-2:] == ["-0.8000", "0.2000"]  # mean vs 1st, std vs 1st: b under a's constants
