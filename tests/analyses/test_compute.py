"""`normstats.compute` is the command line: every analysis of ``normstats compute`` is an
argument of the same name whose result gives the same numbers, bit for bit, as the flag
(the command prints ``stats.to_json()``), and contradictory arguments are refused alike."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from oracle import numbers
from PIL import Image

import normstats
from normstats.analyses.sampling import choose_images
from normstats.errors import InvalidOptionError
from normstats.results.stats import DatasetStats
from normstats_cli import main


@pytest.fixture
def array_file(tmp_path: Path, rng: np.random.Generator) -> str:
    path = tmp_path / "images.npy"
    np.save(path, rng.integers(0, 256, (300, 5, 5, 3), dtype=np.uint8))
    return str(path)


@pytest.fixture
def classes(tmp_path: Path, rng: np.random.Generator) -> Path:
    """Two class folders and one image at the root; one blank image and one gray one."""
    root = tmp_path / "classes"
    for i in range(16):
        (root / f"class{i % 2}").mkdir(parents=True, exist_ok=True)
        pixels = rng.integers(40 + 40 * (i % 2), 220, (6, 7, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(root / f"class{i % 2}" / f"{i}.png")
    Image.fromarray(np.zeros((6, 7, 3), np.uint8)).save(root / "class0" / "blank.png")
    Image.fromarray(rng.integers(0, 256, (5, 5, 3), dtype=np.uint8)).save(root / "top.png")
    return root


def _cli(*args: str) -> dict:
    result = CliRunner().invoke(main, ["compute", *args, "--json", "--workers", "1"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _same(cli: dict, stats: DatasetStats) -> None:
    """The command's JSON is the result's JSON: every number, bit for bit."""
    assert cli == json.loads(stats.to_json())


@pytest.mark.parametrize("flags, arguments", [
    (["--sample", "40", "--seed", "3"], {"sample": 40, "seed": 3}),
    (["--sample", "20", "--precision", "0.05", "--seed", "0"],
     {"sample": 20, "precision": 0.05, "seed": 0}),
    (["--precision", "0.2", "--seed", "7"], {"precision": 0.2, "seed": 7}),
    (["--sample", "500", "--seed", "1"], {"sample": 500, "seed": 1}),
], ids=["sample", "sample-precision", "precision", "more-than-all"])
def test_sample_seed_and_precision_are_the_flags(array_file, flags, arguments):
    stats = normstats.compute(array_file, workers=1, **arguments)
    _same(_cli(array_file, *flags), stats)
    assert stats.estimate.seed == arguments["seed"]


def test_a_sample_is_exactly_the_statistics_of_the_drawn_images(array_file):
    stats = normstats.compute(array_file, sample=40, seed=5, workers=1)
    chosen = choose_images(300, 40, np.random.default_rng(5))
    assert numbers(stats) == numbers(normstats.compute(np.load(array_file)[chosen]))
    low, high = stats.interval("mean")[0]
    assert low < stats.mean[0] < high and high - low == pytest.approx(
        2 * stats.estimate.half_width["mean"][0], abs=1e-15)


def test_percentiles_are_the_flag_and_numpy_s_exact_percentiles(array_file):
    stats = normstats.compute(array_file, percentiles=True, workers=1)
    _same(_cli(array_file, "--percentiles"), stats)
    pixels = np.load(array_file).reshape(-1, 3)
    assert stats.percentiles == {
        f"p{q:g}": tuple(float(np.percentile(pixels[:, c], q)) / 255 for c in range(3))
        for q in (0.5, 99.5)}
    assert stats == normstats.compute(array_file)  # the same constants


def test_by_folder_and_outliers_are_the_flags(classes):
    stats = normstats.compute(classes, by_folder=True, outliers=True, cache=False, workers=1)
    _same(_cli(str(classes), "--by-folder", "--outliers", "--no-cache"), stats)
    assert list(stats.by_folder) == [".", "class0", "class1"]
    for name in ("class0", "class1"):
        assert numbers(stats.by_folder[name]) == \
            numbers(normstats.compute(classes / name, cache=False, workers=1))
    assert [o.path for o in stats.outliers][0] == "class0/blank.png"
    assert stats.outliers.threshold == 5.0


def test_per_folder_statistics_come_from_the_cache_too(classes, tmp_path):
    cold = normstats.compute(classes, by_folder=True, cache=tmp_path / "cache", workers=1)
    warm = normstats.compute(classes, by_folder=True, cache=tmp_path / "cache", workers=1)
    assert warm.images_cached == warm.images and warm.images_decoded == 0
    assert {k: numbers(v) for k, v in warm.by_folder.items()} == \
        {k: numbers(v) for k, v in cold.by_folder.items()}


def test_percentiles_with_per_folder_statistics_in_one_decode(classes):
    """A pair the command line could not give before: both come from one pass."""
    both = normstats.compute(classes, percentiles=True, by_folder=True, cache=False, workers=1)
    _same(_cli(str(classes), "--percentiles", "--by-folder", "--no-cache"), both)
    alone = normstats.compute(classes, percentiles=True, cache=False, workers=1)
    assert both.percentiles == alone.percentiles
    assert {k: numbers(v) for k, v in both.by_folder.items()} == {k: numbers(v) for k, v in
        normstats.compute(classes, by_folder=True, cache=False, workers=1).by_folder.items()}


def test_what_a_result_carries_round_trips_through_its_json(classes):
    stats = normstats.compute(classes, percentiles=True, by_folder=True, outliers=True,
                              cache=False, workers=1)
    again = DatasetStats.from_json(stats.to_json())
    assert again.to_dict() == stats.to_dict() and again == stats
    assert again.outliers == stats.outliers and again.percentiles == stats.percentiles
    sampled = normstats.compute(classes, sample=5, seed=2, cache=False, workers=1)
    assert DatasetStats.from_json(sampled.to_json()).estimate == sampled.estimate
    plain = json.loads(normstats.compute(classes, cache=False, workers=1).to_json())
    assert [plain[k] for k in ("estimate", "percentiles", "by_folder", "outliers")] == [None] * 4


def test_on_result_still_sees_every_task_beside_the_analyses(classes):
    seen = []
    stats = normstats.compute(classes, by_folder=True, outliers=True, cache=False, workers=1,
                              on_result=lambda r: seen.append(len(r.records)))
    assert sum(seen) == stats.images
    seen.clear()
    sampled = normstats.compute(classes, sample=6, seed=0, workers=1,
                                on_result=lambda r: seen.append(len(r.records)))
    assert sum(seen) == sampled.images == 6


@pytest.mark.parametrize("arguments, message", [
    ({"sample": 5, "percentiles": True}, "--percentiles needs every pixel"),
    ({"precision": 0.1, "by_folder": True}, "--by-folder and --outliers need every image"),
    ({"seed": 3}, "--seed draws a sample"),
    ({"verify_cache": 2, "cache": False}, "--verify-cache checks the record cache"),
    ({"threads_per_worker": 2}, "--threads-per-worker needs --local-cluster"),
    ({"local_cluster": True, "scheduler": "threads"}, "drop --scheduler"),
    ({"workers": 2, "scheduler": "tcp://127.0.0.1:1"}, "the cluster's workers decide"),
])
def test_contradictions_are_refused_alike_in_python_and_on_the_command_line(
        array_file, arguments, message):
    with pytest.raises(InvalidOptionError, match=message):
        normstats.compute(array_file, **arguments)
    flags = []
    for name, value in arguments.items():
        flag = "--" + name.replace("_", "-")
        flags += [flag] if value is True else ["--no-cache"] if value is False else [flag,
                                                                                   str(value)]
    result = CliRunner().invoke(main, ["compute", array_file, *flags])
    assert result.exit_code == 2 and message in result.output


def test_per_image_reports_of_data_without_per_image_records_are_refused(rng):
    x = rng.integers(0, 256, (6, 3), dtype=np.uint8)  # vectors: features, not images
    with pytest.raises(InvalidOptionError, match="come from per-image records"):
        normstats.compute(x, by_folder=True)


@pytest.mark.slow
def test_local_cluster_is_the_flag(classes):
    stats = normstats.compute(classes, local_cluster=True, workers=1, threads_per_worker=1,
                              by_folder=True, cache=False)
    cli = CliRunner().invoke(main, ["compute", str(classes), "--local-cluster", "--workers",
                                    "1", "--threads-per-worker", "1", "--by-folder",
                                    "--no-cache", "--json"])
    assert cli.exit_code == 0, cli.output
    _same(json.loads(cli.stdout), stats)
    assert numbers(stats) == numbers(normstats.compute(classes, cache=False, workers=1))
