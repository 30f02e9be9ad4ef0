"""The cache group read while the folder is walked: used only while it still holds."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
from oracle import assert_matches_oracle
from PIL import Image

import normstats
from normstats.engine.cache import prefetch as prefetch_module
from normstats.engine.cache.prefetch import SegmentPrefetch
from normstats.engine.cache.run import run_cached
from normstats.sources.decoding.policy import DecodePolicy
from normstats.sources.folder import FolderSource
from normstats.sources.walk import _stat_names


def _takes(monkeypatch) -> list[bool]:
    """Whether each prefetch of the runs to come was used."""
    used: list[bool] = []
    real = SegmentPrefetch.take

    def take(self, store):
        read = real(self, store)
        used.append(read is not None)
        return read

    monkeypatch.setattr(prefetch_module.SegmentPrefetch, "take", take)
    return used


def test_a_warm_run_uses_the_group_read_while_walking(png_folder, tmp_path, monkeypatch):
    root, images = png_folder
    cache = tmp_path / "cache"
    cold = normstats.compute(root, cache=cache, workers=1)
    used = _takes(monkeypatch)
    warm = normstats.compute(root, cache=cache, workers=1)
    assert used == [True] and warm.images_cached == len(images)
    assert (warm.mean, warm.std, warm.per_image_std) == (cold.mean, cold.std,
                                                          cold.per_image_std)
    assert_matches_oracle(warm, images, 255)


def test_a_group_changed_since_it_was_read_is_read_again(png_folder, tmp_path, rng):
    """Another run commits a segment after the reading and before this run's lock: what
    was read is stale, and the run reads the group again (the new file comes from it)."""
    root, images = png_folder
    cache = tmp_path / "cache"
    run_cached(FolderSource(root), cache, workers=1)
    early = SegmentPrefetch(cache, str(root), DecodePolicy())
    early._thread.join()  # read: now another run changes the group
    extra = rng.integers(0, 256, (6, 5, 3), dtype=np.uint8)
    Image.fromarray(extra).save(root / "cat" / "new.png")
    assert run_cached(FolderSource(root), cache, workers=1).decoded == 1  # and compacts
    outcome = run_cached(FolderSource(root), cache, workers=1, prefetch=early)
    assert not early.used and (outcome.cached, outcome.decoded) == (len(images) + 1, 0)
    stats = normstats.compute(root, cache=cache, workers=1)
    assert_matches_oracle(stats, [*images, extra], 255)


def test_another_groups_reading_is_not_used(png_folder, tmp_path):
    root, images = png_folder
    cache = tmp_path / "cache"
    run_cached(FolderSource(root), cache, workers=1)
    run_cached(FolderSource(root, DecodePolicy("L")), cache, workers=1)
    early = SegmentPrefetch(cache, str(root), DecodePolicy("L"))
    outcome = run_cached(FolderSource(root), cache, workers=1, prefetch=early)
    assert not early.used and outcome.cached == len(images)


def test_the_walks_stats_let_other_threads_run(tmp_path):
    """The stat calls run without the GIL, so the cache is read beside them: here the
    caller's thread keeps running while one call stats a long batch of names."""
    names = [f"missing-{i}.png" for i in range(200_000)]
    out = np.zeros((len(names), 6), np.int64)
    descriptor = os.open(tmp_path, os.O_RDONLY)
    done = threading.Event()

    def stat_all() -> None:
        _stat_names(descriptor, names, out)
        done.set()

    worker = threading.Thread(target=stat_all)
    start = time.perf_counter()
    worker.start()
    seen = [start]
    while not done.is_set():
        seen.append(time.perf_counter())
    worker.join()
    took = time.perf_counter() - start
    os.close(descriptor)
    assert (out[:, 0] < 0).all()  # every name missing: -errno
    longest = max(b - a for a, b in zip(seen, seen[1:]))
    assert longest < 0.5 * took, (longest, took)
