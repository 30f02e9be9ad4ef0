"""A cached run: which failures it keeps, and its group opened while the folder is walked.

A failure is kept (and answered from the cache while the file is unchanged) when it is a
verdict on the file: its content (`SkipKind.UNREADABLE`) or a refusal (`SkipKind.REFUSED`).
A failure of the moment (`SkipKind.TRANSIENT`) is tried again on the next run.

`compute` of a local folder opens, locks and loads its existing cache group in a thread
(`normstats.engine.cache.run.opening_early`) while the folder is walked; the run takes it
only if it is that folder's group, and a group nobody takes is unlocked on return.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from reliability_helpers import lock_for_decoder, replace_file_decoder

import normstats
import normstats.engine.cache.run as cache_run
import normstats.sources.folder as folder_module
from normstats import SkipKind, Skipped, UnreadableInputError
from normstats.engine.cache.store import DatasetCache
from normstats.sources.decoding.policy import DecodePolicy


def run(root: Path, cache: Path, **options) -> normstats.DatasetStats:
    """One process: monkeypatches reach the decoder."""
    return normstats.compute(root, cache=cache, scheduler="sync", **options)


def cached_failures(cache: Path) -> list[list]:
    """The failures every committed marker of the cache holds."""
    return [failure for marker in sorted(cache.rglob("markers/*.json"))
            for failure in json.loads(marker.read_text())["failures"]]


def test_a_content_failure_worded_like_a_transient_one_is_cached(png_folder, tmp_path,
                                                                  monkeypatch):
    """The reason begins as a permission failure does, yet the decoder says it is about the
    file's bytes: it is kept, and the next run answers it from the cache without decoding
    (matching the wording, the cache would have decoded the file again on every run)."""
    root, _ = png_folder
    Image.new("RGB", (4, 4)).save(root / "odd.png")
    reason = "permission denied by a flag in the file's own header"
    real = folder_module.decode_file

    def decode(path, *args, **kwargs):
        if path.endswith("odd.png"):
            raise UnreadableInputError(reason, "odd.png")
        return real(path, *args, **kwargs)

    replace_file_decoder(monkeypatch, decode)
    cache = tmp_path / "cache"
    first = run(root, cache)
    assert first.skipped == (Skipped("odd.png", reason, SkipKind.UNREADABLE),)
    assert [(f[0], f[4], f[5]) for f in cached_failures(cache)] == \
        [("odd.png", reason, "unreadable")]
    monkeypatch.undo()  # the file decodes now: only the cache can still say it failed
    second = run(root, cache)
    assert second.skipped == first.skipped and second.images_decoded == 0


def test_a_permission_failure_is_transient_and_never_cached(png_folder, tmp_path, monkeypatch):
    """The decoder's open() fails as it would for another user (`lock_for_decoder`)."""
    root, images = png_folder
    Image.new("RGB", (4, 4)).save(root / "locked.png")
    lock_for_decoder(monkeypatch, "locked.png")
    cache = tmp_path / "cache"
    first = run(root, cache)
    assert first.skipped == (Skipped("locked.png", "permission denied", SkipKind.TRANSIENT),)
    assert cached_failures(cache) == []
    with pytest.raises(normstats.TransientInputError, match="locked.png: permission denied"):
        run(root, cache, on_error="fail")
    monkeypatch.undo()
    second = run(root, cache)
    assert second.skipped == () and (second.images_cached, second.images_decoded) == \
        (len(images), 1)


def test_a_limit_of_the_callers_pillow_is_not_the_files_verdict(tmp_path, monkeypatch):
    """A sync run meets the caller's own Pillow limit, which normstats never changes; its
    reason says to raise that limit, and the run after it must decode the file rather than
    repeat a verdict the cache kept."""
    root, cache = tmp_path / "data", tmp_path / "cache"
    root.mkdir()
    rng = np.random.default_rng(5)
    for name, side in (("big.bmp", 50), ("small.bmp", 10)):  # 2500 > 2 x 1000 pixels
        Image.fromarray(rng.integers(0, 256, (side, side, 3), np.uint8)).save(root / name)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
    first = run(root, cache, max_pixels=10**6)
    assert [(s.path, s.kind) for s in first.skipped] == [("big.bmp", SkipKind.TRANSIENT)]
    assert "over the limit of Pillow in this process" in first.skipped[0].reason
    monkeypatch.undo()
    second = run(root, cache, max_pixels=10**6)
    assert second.skipped == () and (second.images_cached, second.images_decoded) == (1, 1)


def test_a_refused_file_is_cached_with_its_kind(png_folder, tmp_path):
    root, _ = png_folder
    (root / "huge.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(5000))
    cache = tmp_path / "cache"
    first = run(root, cache, max_file_bytes=4096)
    expected = Skipped("huge.png", "file of 5,008 bytes is over the limit of 4,096 bytes; "
                                   "raise --max-file-bytes if it is trusted", SkipKind.REFUSED)
    assert first.skipped == (expected,)
    second = run(root, cache, max_file_bytes=4096)
    assert second.skipped == (expected,) and second.images_decoded == 0
    with pytest.raises(normstats.RefusedInputError, match="huge.png: file of 5,008 bytes"):
        run(root, cache, max_file_bytes=4096, on_error="fail")


def opened_in(monkeypatch) -> tuple[list[str], threading.Event]:
    """The name of the thread of each `open_cache` from now on, and an event set when
    one outside the main thread has returned."""
    threads: list[str] = []
    done = threading.Event()
    real = cache_run.open_cache

    def open_cache(*args, **kwargs):
        threads.append(threading.current_thread().name)
        try:
            return real(*args, **kwargs)
        finally:
            if threading.current_thread() is not threading.main_thread():
                done.set()

    monkeypatch.setattr(cache_run, "open_cache", open_cache)
    return threads, done


def test_a_warm_run_loads_its_group_while_the_folder_is_walked(png_folder, tmp_path,
                                                                monkeypatch):
    """The second run opens the group the first made in the early thread, before the walk
    ends, and answers every image from it exactly as the cold run computed them."""
    root, _ = png_folder
    cache = tmp_path / "cache"
    threads, opened = opened_in(monkeypatch)
    cold = run(root, cache)
    assert threads == ["MainThread"]  # no group yet: the run makes it, nothing early
    real_walk = folder_module.walk_images

    def walk(*args, **kwargs):  # the group is opened while the walk has not returned
        assert opened.wait(30), "the group was not opened during the walk"
        return real_walk(*args, **kwargs)

    monkeypatch.setattr(folder_module, "walk_images", walk)
    warm = run(root, cache)
    assert threads == ["MainThread", "normstats-cache-open"]
    assert (warm.images_cached, warm.images_decoded) == (cold.images, 0)
    assert warm.mean == cold.mean and warm.std == cold.std
    group, = (cache).iterdir()
    assert DatasetCache(group, {}).try_lock(0.0)  # unlocked on return


def test_a_group_nobody_takes_is_unlocked_and_nothing_is_made(png_folder, tmp_path,
                                                              monkeypatch):
    """A folder whose images became tar shards is read as shards (never cached): its
    group, opened early, is left unused and unlocked; a folder never cached gets no group
    before its run makes one."""
    from format_writers import images, write_tar

    root, _ = png_folder
    cache = tmp_path / "cache"
    run(root, cache)
    group, = cache.iterdir()
    for path in sorted(root.rglob("*.png")):
        path.unlink()
    write_tar(root / "shard-000.tar", images(1, 5, 4, 4, 3))
    threads, _ = opened_in(monkeypatch)
    import normstats.engine.source_run as source_run

    real_run, free = source_run.run, []

    def pipeline(*args, **kwargs):  # unlocked, its thread ended, before a pool forks
        probe = DatasetCache(group, {})
        free.append(probe.try_lock(0.0))
        probe.unlock()
        return real_run(*args, **kwargs)

    monkeypatch.setattr(source_run, "run", pipeline)
    shards = run(root, cache)
    assert shards.images == 5 and threads == ["normstats-cache-open"] and free == [True]
    other = tmp_path / "other"
    other.mkdir()
    for path in sorted(root.iterdir()):
        path.rename(other / path.name)
    run(other, cache)
    assert [p.name for p in cache.iterdir()] == [group.name]  # shards: no group made


def test_an_error_opening_early_is_raised_by_the_run(png_folder, tmp_path, monkeypatch):
    """What the early thread meets is what a run opening its group itself meets."""
    root, _ = png_folder
    cache = tmp_path / "cache"
    run(root, cache)

    def load(self):
        raise MemoryError("no room for the records")

    monkeypatch.setattr(DatasetCache, "load", load)
    threads, _ = opened_in(monkeypatch)
    with pytest.raises(MemoryError, match="no room"):
        run(root, cache)
    assert threads == ["normstats-cache-open"]
    group, = cache.iterdir()
    assert DatasetCache(group, {}).try_lock(0.0)


def test_the_early_group_is_taken_only_by_its_own_folder(tmp_path):
    """Another folder, cache folder or decode policy opens its own group."""
    folder, cache = tmp_path / "data", tmp_path / "cache"
    folder.mkdir()
    cache_run.open_cache(cache, str(folder), DecodePolicy(), 0.0).store.unlock()
    with cache_run.opening_early(str(folder), None, cache) as early:
        assert not early.covers(tmp_path / "elsewhere", str(folder), DecodePolicy())
        assert not early.covers(cache, str(folder), DecodePolicy(mode="L"))
        assert not early.covers(cache, str(tmp_path), DecodePolicy())
        assert early.covers(cache, str(folder / ".." / "data"), DecodePolicy())
        opened = early.take()
        assert opened is not None and opened.writable
        assert not early.covers(cache, str(folder), DecodePolicy())  # taken once
        opened.store.unlock()


def test_a_cache_found_unusable_early_is_said_once_and_the_run_goes_on(png_folder, tmp_path,
                                                                       monkeypatch, caplog):
    """The early thread meets the cache it cannot use and says so; the run takes that
    answer (computing without the cache) instead of trying, and saying it, again."""
    root, _ = png_folder
    cache = tmp_path / "cache"
    cold = run(root, cache)

    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(DatasetCache, "open", refused)
    threads, _ = opened_in(monkeypatch)
    with caplog.at_level("WARNING", logger="normstats.engine.cache"):
        again = run(root, cache)
    said = [r.message for r in caplog.records if "cannot use the cache" in r.message]
    assert len(said) == 1 and threads == ["normstats-cache-open"]
    assert (again.images, again.images_cached, again.mean) == (cold.images, 0, cold.mean)


def test_the_blas_limit_of_a_run_that_decodes_holds_through_its_compaction(png_folder,
                                                                         tmp_path,
                                                                         monkeypatch):
    """Changing BLAS's thread count after the pool's fork restarts OpenBLAS's helper
    thread, which then spins ~0.1 s: the limit is held until the compaction is written,
    and a warm run, which decodes nothing, sets none (nor loads the pool's module)."""
    import sys

    import normstats.engine.process_pool as process_pool_module

    folder, _ = png_folder
    seen = []
    real = cache_run.write_listed

    def compacting(*args, **kwargs):
        seen.append(process_pool_module._blas_limits_open)
        return real(*args, **kwargs)

    monkeypatch.setattr(cache_run, "write_listed", compacting)
    assert normstats.compute(folder, cache=tmp_path / "c", workers=2).images_decoded == 24
    assert seen == [1] and process_pool_module._blas_limits_open == 0
    monkeypatch.delitem(sys.modules, "normstats.engine.process_pool")
    assert normstats.compute(folder, cache=tmp_path / "c", workers=2).images_cached == 24
    assert "normstats.engine.process_pool" not in sys.modules
