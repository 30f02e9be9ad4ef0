"""Dataset layouts on the command line (several PATHs, globs, braces, shards, Parquet, one
image) and the small options users trip over."""

import io
import json
import tarfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from oracle import assert_matches_oracle
from PIL import Image

import normstats
from normstats.engine.cache.run import run_cached
from normstats.sources.folder import FolderSource
from normstats_cli import main


@pytest.fixture
def photos(rng):
    from conftest import random_images

    return random_images(rng, 12)


def _png(pixels):
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "PNG")
    return buffer.getvalue()


def _stats(result):
    assert result.exit_code == 0, result.output
    return normstats.DatasetStats.from_json(result.output)


def test_several_paths_globs_and_brace_ranges_are_one_dataset(tmp_path, photos):
    for i, pixels in enumerate(photos):
        with tarfile.open(tmp_path / f"shard-{i // 4:06d}.tar", "a") as tar:
            data = _png(pixels)
            info = tarfile.TarInfo(f"{i:06d}.png")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    runs = {
        "paths": [str(tmp_path / f"shard-{i:06d}.tar") for i in range(3)],
        "glob": [str(tmp_path / "shard-*.tar")],
        "braces": [str(tmp_path / "shard-{000000..000002}.tar")],
        "folder": [str(tmp_path)],
    }
    for name, paths in runs.items():
        stats = _stats(CliRunner().invoke(main, ["compute", *paths, "--json", "--workers", "1"]))
        assert_matches_oracle(stats, photos, 255)
        if name != "folder":
            assert all(f"shard-{i:06d}.tar" in stats.source for i in range(3)), name


def test_a_parquet_dataset_folder_and_one_image(tmp_path, photos):
    cells = pa.array([{"bytes": _png(p), "path": f"{i}.png"} for i, p in enumerate(photos)])
    (tmp_path / "hf" / "data").mkdir(parents=True)
    pq.write_table(pa.table({"image": cells}), tmp_path / "hf" / "data" /
                   "train-00000-of-00001.parquet", row_group_size=5)
    stats = _stats(CliRunner().invoke(main, ["compute", str(tmp_path / "hf"), "--json"]))
    assert_matches_oracle(stats, photos, 255)
    Image.fromarray(photos[0]).save(tmp_path / "one.png")
    one = _stats(CliRunner().invoke(main, ["compute", str(tmp_path / "one.png"), "--json"]))
    assert_matches_oracle(one, photos[:1], 255)


def test_choices_ignore_case_and_help_shows_percent_once():
    result = CliRunner().invoke(main, ["compute", "--help"])
    assert "with 95%" in result.output and "95%%" not in result.output


def test_lower_case_mode_and_layout_are_understood(tmp_path, rng):
    stack = rng.integers(0, 256, (3, 2, 4, 4), dtype=np.uint8)
    np.save(tmp_path / "x.npy", stack)
    lower = _stats(CliRunner().invoke(main, ["compute", str(tmp_path / "x.npy"), "--layout",
                                             "nchw", "--json", "--scheduler", "SYNC"]))
    assert lower.images == 3 and len(lower.channels) == 2
    Image.fromarray(stack[0, 0]).save(tmp_path / "g.png")
    grey = _stats(CliRunner().invoke(main, ["compute", str(tmp_path / "g.png"), "--mode", "l",
                                            "--json", "--no-cache"]))
    assert grey.mode == "L"


def test_outliers_say_when_the_grayscale_check_is_off(tmp_path, rng):
    for i in range(4):
        Image.fromarray(rng.integers(0, 256, (6, 6), dtype=np.uint8)).save(tmp_path / f"{i}.png")
    result = CliRunner().invoke(main, ["compute", str(tmp_path), "--outliers", "--no-cache"])
    assert result.exit_code == 0, result.output
    assert "grayscale check off: 4 of 4 images are grayscale stored as RGB" in result.output
    as_json = CliRunner().invoke(main, ["compute", str(tmp_path), "--outliers", "--no-cache",
                                        "--json", "--mode", "L"])
    assert json.loads(as_json.output)["outliers"]["note"] == (
        "grayscale check off: the channels are L, not R, G, B")


def test_cache_list_labels_policies_and_hides_runs_that_produced_nothing(tmp_path, rng):
    data, cache = tmp_path / "data", tmp_path / "cache"
    data.mkdir()
    (tmp_path / "empty").mkdir()
    for i in range(3):
        Image.fromarray(rng.integers(0, 256, (9, 9, 3), dtype=np.uint8)).save(data / f"{i}.png")
    for extra in ([], ["--resize", "4", "--center-crop", "4"]):
        assert CliRunner().invoke(main, ["compute", str(data), "--cache", str(cache),
                                         *extra]).exit_code == 0
    # the entry of a run that produced nothing: an empty folder's, which normstats now
    # refuses before a run (as it was cached before)
    run_cached(FolderSource(tmp_path / "empty"), cache, workers=1)
    listing = CliRunner().invoke(main, ["cache", "list", "--cache", str(cache)]).output
    lines = [line for line in listing.splitlines() if str(data) in line]
    assert len(lines) == 2
    assert any("RGB, Resize(4), CenterCrop(4)" in line for line in lines)
    # the roots line up, past a policy longer than the column (it pushed its root right)
    header = listing.splitlines()[0]
    assert {line.index(str(data)) for line in lines} == {header.index("root")}
    assert str(tmp_path / "empty") not in listing
    assert "1 empty entry not shown" in listing
