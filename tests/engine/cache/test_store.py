"""The per-image record cache: re-runs, incremental updates, damage, CLI."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

import normstats
from normstats.engine.cache import run as cache_run
from normstats.engine.cache.store import DatasetCache, resolve_cache_dir
from normstats.maths.records import records_from_stack
from normstats.sources.decoding.policy import DecodePolicy
from normstats_cli import main


def write_image(path: Path, seed: int, size: int = 8) -> None:
    rng = np.random.default_rng(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)).save(path)


def make_folder(root: Path, count: int, start: int = 0) -> Path:
    for i in range(start, start + count):
        write_image(root / f"class_{i % 3}" / f"img_{i:04d}.png", seed=i)
    return root


def modify(path: Path, seed: int) -> None:
    """New content and a later mtime, so the change is seen even on coarse clocks."""
    old = os.stat(path).st_mtime_ns
    write_image(path, seed, size=9)
    os.utime(path, ns=(old + 10**9, old + 10**9))


def cached(root: Path, cache: Path, **options) -> normstats.DatasetStats:
    return normstats.compute(root, cache=cache, workers=1, **options)


def cold(root: Path) -> normstats.DatasetStats:
    return normstats.compute(root, cache=False, workers=1)


def assert_identical(a: normstats.DatasetStats, b: normstats.DatasetStats) -> None:
    assert a == b  # every float compared exactly; cache counts are left out of ==
    assert {**a.to_dict(), "images_cached": 0, "images_decoded": 0} == \
        {**b.to_dict(), "images_cached": 0, "images_decoded": 0}


def group_of(cache: Path) -> Path:
    (group,) = [p for p in cache.iterdir() if p.is_dir()]
    return group


def only_segment(cache: Path) -> Path:
    (segment,) = [p for p in (group_of(cache) / "segments").iterdir() if p.is_dir()]
    return segment


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return make_folder(tmp_path / "data", 30)


def test_second_run_decodes_nothing_and_is_bit_identical(folder, tmp_path):
    cache = tmp_path / "cache"
    first = cached(folder, cache, task_size=4)
    second = cached(folder, cache)
    assert (first.images_cached, first.images_decoded) == (0, 30)
    assert (second.images_cached, second.images_decoded) == (30, 0)
    assert_identical(first, second)
    assert_identical(second, cold(folder))


def test_add_modify_delete_decodes_exactly_those(folder, tmp_path):
    cache = tmp_path / "cache"
    cached(folder, cache, task_size=4)
    make_folder(folder, 10, start=100)
    files = sorted(folder.rglob("img_00*.png"))
    for number, path in enumerate(files[:3]):
        modify(path, seed=1000 + number)
    for path in files[3:5]:
        path.unlink()
    stats = cached(folder, cache)
    assert (stats.images_decoded, stats.images_cached, stats.images) == (13, 25, 38)
    assert_identical(stats, cold(folder))
    again = cached(folder, cache)
    assert (again.images_decoded, again.images_cached) == (0, 38)


def test_processes_scheduler_and_task_sizes_give_the_same_bits(folder, tmp_path):
    stats = normstats.compute(folder, cache=tmp_path / "c", workers=2, task_size=3)
    assert stats.images_decoded == 30
    assert_identical(stats, cached(folder, tmp_path / "c"))


def test_truncated_chunk_and_deleted_metadata_are_recomputed(folder, tmp_path):
    cache = tmp_path / "cache"
    cached(folder, cache)
    segment = only_segment(cache)
    chunk = segment / "sums" / "c.0.0"
    chunk.write_bytes(chunk.read_bytes()[:7])
    stats = cached(folder, cache)
    assert (stats.images_decoded, stats.images_cached) == (30, 0)
    assert_identical(stats, cold(folder))

    segment = only_segment(cache)
    (segment / "maximum" / "zarr.json").unlink()
    (group_of(cache) / "zarr.json").unlink()
    stats = cached(folder, cache)
    assert (stats.images_decoded, stats.images_cached) == (30, 0)
    assert_identical(stats, cold(folder))
    assert cached(folder, cache).images_cached == 30  # healed


def test_missing_chunk_is_not_read_as_fill_values(folder, tmp_path):
    cache = tmp_path / "cache"
    cached(folder, cache)
    segment = only_segment(cache)
    (segment / "pixels" / "c.0").unlink()
    stats = cached(folder, cache)
    assert stats.images_decoded == 30
    assert_identical(stats, cold(folder))


def test_damaged_marker_is_ignored(folder, tmp_path):
    cache = tmp_path / "cache"
    cached(folder, cache)
    marker = next((group_of(cache) / "markers").glob("*.json"))
    marker.write_text(marker.read_text()[:-20])
    assert cached(folder, cache).images_decoded == 30


def test_unreadable_files_are_cached_by_key_and_still_reported(folder, tmp_path):
    cache = tmp_path / "cache"
    (folder / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    first = cached(folder, cache)
    second = cached(folder, cache)
    assert [s.path for s in second.skipped] == ["broken.png"]
    assert second.skipped == first.skipped == cold(folder).skipped
    assert (second.images_cached, second.images_decoded) == (31, 0)
    with pytest.raises(normstats.UnreadableInputError, match="broken.png"):
        cached(folder, cache, on_error="fail")
    write_image(folder / "broken.png", seed=5)  # fixed: new size and mtime
    assert cached(folder, cache).images_decoded == 1


def test_busy_cache_goes_read_only_and_says_so(folder, tmp_path, monkeypatch, caplog):
    cache = tmp_path / "cache"
    cached(folder, cache)
    holder = DatasetCache.open(cache, str(folder), DecodePolicy())
    assert holder.try_lock(0)
    monkeypatch.setattr(cache_run, "LOCK_WAIT_SECONDS", 0.1)
    make_folder(folder, 2, start=200)
    with caplog.at_level(logging.WARNING, logger="normstats.engine.cache"):
        stats = cached(folder, cache)
    holder.unlock()
    assert "another normstats run" in caplog.text
    assert (stats.images_cached, stats.images_decoded) == (30, 2)
    assert cached(folder, cache).images_decoded == 2  # nothing was written while busy


def test_unwritable_cache_never_fails_the_computation(folder, tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with caplog.at_level(logging.WARNING, logger="normstats.engine.cache"):
        stats = cached(folder, blocker / "cache")
    assert stats.images == 30 and "cannot use the cache" in caplog.text


def test_library_default_writes_no_cache_unless_the_environment_asks(folder, tmp_path,
                                                                       monkeypatch):
    monkeypatch.delenv("NORMSTATS_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    stats = normstats.compute(folder, workers=1)
    assert (stats.images, stats.images_decoded, stats.images_cached) == (30, 0, 0)
    assert not (tmp_path / "xdg").exists()
    assert resolve_cache_dir(True) == tmp_path / "xdg" / "normstats"
    monkeypatch.setenv("NORMSTATS_CACHE", str(tmp_path / "env"))
    normstats.compute(folder, workers=1)
    assert normstats.compute(folder, workers=1).images_cached == 30
    monkeypatch.setenv("NORMSTATS_CACHE", "off")
    assert resolve_cache_dir(None) is None


def test_the_cli_default_cache_is_the_suites_temporary_folder(folder,
                                                               user_cache_in_a_temporary_folder):
    """The CLI caches by default; in the suite that lands in a temporary folder (the
    autouse fixture of conftest.py), never in the user's real cache."""
    real = Path(os.path.expanduser("~")) / ".cache" / "normstats"
    before = sorted(real.iterdir()) if real.is_dir() else None
    result = CliRunner().invoke(main, ["compute", str(folder), "--json", "--workers", "1"])
    assert result.exit_code == 0, result.output
    assert resolve_cache_dir(True) == user_cache_in_a_temporary_folder != real
    group = DatasetCache.open(user_cache_in_a_temporary_folder, str(folder), DecodePolicy())
    assert sum(len(s.index.paths) for s in group.load()[0]) == 30
    assert (sorted(real.iterdir()) if real.is_dir() else None) == before


def test_float_records_and_odd_names_round_trip_through_a_segment(tmp_path):
    rng = np.random.default_rng(3)
    keys = ("caf\udce9.tif", "a/b\nc.tif")
    records = records_from_stack(rng.normal(1e4, 1, (2, 3, 3, 1)), keys=keys)
    store = DatasetCache.open(tmp_path, str(tmp_path), DecodePolicy("keep"))
    store.write_segment(records, np.array([1, 2]), np.array([3, 4]), ())
    ((loaded,), junk) = store.load()
    assert junk == 0 and loaded.records.keys == keys
    for name in ("pixels", "minimum", "maximum", "means", "residuals", "m2s"):
        np.testing.assert_array_equal(getattr(loaded.records, name), getattr(records, name))
    assert loaded.index.sizes.tolist() == [1, 2]


def test_stats_json_round_trips_with_the_new_fields(folder, tmp_path):
    stats = cached(folder, tmp_path / "c")
    again = normstats.DatasetStats.from_dict(json.loads(stats.to_json()))
    assert again.to_dict() == stats.to_dict() and again.images_decoded == 30
    old = {k: v for k, v in stats.to_dict().items() if not k.startswith("images_")}
    assert normstats.DatasetStats.from_dict({**old, "images": 30}).images_cached == 0


def test_cli_reports_counts_and_manages_the_cache(folder, tmp_path):
    runner, cache = CliRunner(), str(tmp_path / "cache")
    first = runner.invoke(main, ["compute", str(folder), "--cache", cache, "--workers", "1"])
    assert first.exit_code == 0, first.output
    assert "0 files from the cache, 30 decoded" in first.output
    second = runner.invoke(main, ["compute", str(folder), "--cache", cache, "--workers", "1"])
    assert "30 files from the cache, 0 decoded" in second.output
    listing = runner.invoke(main, ["cache", "list", "--cache", cache])
    assert listing.exit_code == 0 and str(folder) in listing.output and "30" in listing.output
    shown = runner.invoke(main, ["cache", "show", str(folder), "--cache", cache])
    assert "30 verified records" in shown.output
    no_cache = runner.invoke(main, ["compute", str(folder), "--no-cache", "--workers", "1"])
    off = runner.invoke(main, ["compute", str(folder), "--workers", "1"],
                        env={"NORMSTATS_CACHE": "off"})
    for result in (no_cache, off):  # no cache was read: no line about it
        assert "30 images" in result.output and "from the cache" not in result.output
    cleared = runner.invoke(main, ["cache", "clear", str(folder), "--cache", cache])
    assert "cleared 1 dataset " in cleared.output
    assert "no cached datasets" in runner.invoke(main, ["cache", "list", "--cache",
                                                        cache]).output


def test_cli_clear_all_asks_first(folder, tmp_path):
    runner, cache = CliRunner(), str(tmp_path / "cache")
    runner.invoke(main, ["compute", str(folder), "--cache", cache, "--workers", "1"])
    assert runner.invoke(main, ["cache", "clear", "--cache", cache], input="n\n").exit_code == 1
    assert "cleared 1" in runner.invoke(main, ["cache", "clear", "--cache", cache,
                                               "--yes"]).output


def test_ctrl_c_commits_what_has_arrived(folder, tmp_path, monkeypatch):
    from normstats.sources import folder as folder_module

    monkeypatch.setattr(cache_run, "FLUSH_SECONDS", 3600.0)  # only the final flush commits
    original, calls = folder_module.FolderTask.run, []

    def interrupted(self):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return original(self)
    monkeypatch.setattr(folder_module.FolderTask, "run", interrupted)
    with pytest.raises(KeyboardInterrupt):
        cached(folder, tmp_path / "cache", task_size=5)
    monkeypatch.undo()
    stats = cached(folder, tmp_path / "cache")
    assert (stats.images_cached, stats.images_decoded) == (10, 20)
    assert_identical(stats, cold(folder))


def test_clear_never_removes_a_dataset_folder_that_holds_a_markers_class(tmp_path):
    """A class folder named ``markers`` once made `cache clear DATASET` delete the dataset."""
    data = make_folder(tmp_path / "data", 6)
    write_image(data / "markers" / "img_9000.png", seed=9000)
    before = sorted(p.relative_to(data) for p in data.rglob("*"))
    runner, cache = CliRunner(), str(tmp_path / "cache")
    assert runner.invoke(main, ["compute", str(data), "--cache", cache,
                                "--workers", "1"]).exit_code == 0
    cleared = runner.invoke(main, ["cache", "clear", str(data), "--cache", cache])
    assert cleared.exit_code == 0, cleared.output
    assert "cleared 1 dataset " in cleared.output
    assert sorted(p.relative_to(data) for p in data.rglob("*")) == before
    assert not [p for p in Path(cache).iterdir() if p.is_dir()]  # the real cache went


def test_clear_of_a_folder_outside_the_cache_that_looks_like_a_group_removes_nothing(tmp_path):
    lookalike = tmp_path / "elsewhere"
    (lookalike / "markers").mkdir(parents=True)
    (lookalike / "zarr.json").write_text(json.dumps(
        {"zarr_format": 3, "node_type": "group", "attributes": {"normstats": {"format": 1}}}))
    (lookalike / "normstats-group.json").write_text('{"normstats": "cache-group", "format": 1}')
    cache = tmp_path / "cache"
    cache.mkdir()
    cleared = CliRunner().invoke(main, ["cache", "clear", str(lookalike), "--cache", str(cache)])
    assert cleared.exit_code == 1 and "nothing cached for it" in cleared.output
    assert (lookalike / "markers").is_dir() and (lookalike / "zarr.json").is_file()


def test_a_folder_whose_sub_folders_are_cached_names_them(png_folder, tmp_path):
    """`cache show` and `cache clear` of a folder computed class by class said "nothing
    cached for it" alone: they name the cached datasets inside it, and clear none."""
    root, _ = png_folder
    cache = tmp_path / "cache"
    for name in ("cat", "dog"):
        cached(root / name, cache)
    for command in ("show", "clear"):
        result = CliRunner().invoke(main, ["cache", command, str(root), "--cache", str(cache)])
        assert result.exit_code == 1
        inside = [os.path.realpath(root / name) for name in ("cat", "dog")]
        assert (f"nothing cached for it; 2 cached datasets inside it: {inside[0]}, {inside[1]} "
                f"(normstats cache {command} {inside[0]})") in result.output
    assert len([p for p in cache.iterdir() if p.is_dir()]) == 2


def test_group_with_damaged_metadata_is_still_found_by_its_marker_file(folder, tmp_path):
    cache = tmp_path / "cache"
    cached(folder, cache)
    (group_of(cache) / "zarr.json").write_text("{damaged")
    cleared = CliRunner().invoke(main, ["cache", "clear", "--cache", str(cache), "--yes"])
    assert "cleared 1 dataset " in cleared.output
    assert not [p for p in cache.iterdir() if p.is_dir()]


def test_out_of_memory_is_reported_as_such_and_never_cached(folder, tmp_path, monkeypatch):
    """A valid TIFF that hit a memory limit once must be decoded on the next run."""
    from PIL import TiffImagePlugin

    rng = np.random.default_rng(3)
    Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)).save(folder / "big.tif")
    cache = tmp_path / "cache"

    def out_of_memory(self):
        raise MemoryError
    monkeypatch.setattr(TiffImagePlugin.TiffImageFile, "load", out_of_memory)
    first = cached(folder, cache)
    (skip,) = first.skipped
    assert skip.path == "big.tif" and skip.reason.startswith("out of memory while decoding")
    assert "corrupt" not in skip.reason
    with pytest.raises(normstats.UnreadableInputError, match="big.tif: out of memory"):
        cached(folder, cache, on_error="fail")
    monkeypatch.undo()
    second = cached(folder, cache)
    assert second.skipped == () and (second.images_cached, second.images_decoded) == (30, 1)
    assert_identical(second, cold(folder))
    assert cached(folder, cache, on_error="fail").images_decoded == 0
