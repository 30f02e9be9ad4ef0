"""The record cache and the channel covariance: a warm run is the cold run, without a
decode; a cache written without cross sums never answers a run that asks for them (it
decodes again, and says so in ``images_decoded``); a run that does not ask reads none
of them, and checks the cache without them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import normstats
from normstats.engine.cache.segment import FORMAT, read_segment


@pytest.fixture
def folder(tmp_path, rng) -> Path:
    root = tmp_path / "data"
    root.mkdir()
    base = rng.integers(0, 200, (24, 9, 8, 1))
    pixels = np.concatenate([base, base + rng.integers(0, 50, base.shape),
                             rng.integers(0, 256, base.shape)], axis=3).astype(np.uint8)
    for i, image in enumerate(pixels):
        Image.fromarray(image[: 4 + i % 5]).save(root / f"{i:02d}.png")
    return root


def compute(root: Path, cache: Path | bool, **options) -> normstats.DatasetStats:
    return normstats.compute(root, cache=cache, workers=2, task_size=5, **options)


def markers(cache: Path) -> list[dict]:
    """The committed segments' markers (a compaction's trash, which a background thread is
    still deleting, is not the cache)."""
    return [json.loads(p.read_text()) for p in sorted(cache.glob("*/markers/*.json"))]


def test_a_warm_run_is_the_cold_run_without_a_decode(folder, tmp_path):
    cold = compute(folder, False, covariance=True)
    first = compute(folder, tmp_path / "c", covariance=True)
    warm = compute(folder, tmp_path / "c", covariance=True)
    assert first == warm == cold and warm.covariance is not None
    assert (first.images_decoded, warm.images_cached, warm.images_decoded) == (24, 24, 0)
    (marker,) = markers(tmp_path / "c")
    assert marker["format"] == FORMAT == 6 and marker["optional"] == ["cross_sums"]


def test_a_cache_without_cross_sums_is_decoded_again_when_they_are_asked(folder, tmp_path):
    cache = tmp_path / "c"
    plain = compute(folder, cache)
    asked = compute(folder, cache, covariance=True)
    assert plain.covariance is None and asked.covariance is not None
    assert (asked.images_cached, asked.images_decoded) == (0, 24)
    assert asked == compute(folder, False, covariance=True)
    # the compaction replaced the segment without them: the next run is answered
    assert [m.get("optional") for m in markers(cache)] == [["cross_sums"]]
    again = compute(folder, cache, covariance=True)
    assert (again.images_cached, again.images_decoded, again) == (24, 0, asked)


def test_a_run_that_does_not_ask_reads_none_and_keeps_them(folder, tmp_path):
    cache = tmp_path / "c"
    compute(folder, cache, covariance=True)
    plain = compute(folder, cache)
    assert plain == compute(folder, False) and plain.covariance is None
    assert plain.images_decoded == 0
    assert compute(folder, cache, covariance=True).images_decoded == 0  # still there
    # a check decodes the files without cross sums, and finds the cached records unchanged
    checked = compute(folder, cache, verify_cache="all")
    assert (checked.cache_checked, checked.cache_changed) == (24, ())


def test_new_files_of_a_plain_run_cost_the_cross_sums_of_all(folder, tmp_path, rng):
    """A plain run that decodes a new file compacts records without cross sums for it, so
    the cache holds none: the next covariance run decodes every file again (never a
    covariance of some of the files)."""
    cache = tmp_path / "c"
    compute(folder, cache, covariance=True)
    Image.fromarray(rng.integers(0, 256, (5, 5, 3), dtype=np.uint8)).save(folder / "new.png")
    assert compute(folder, cache).images_decoded == 1
    asked = compute(folder, cache, covariance=True)
    assert (asked.images_cached, asked.images_decoded) == (0, 25)
    assert asked == compute(folder, False, covariance=True)


def test_a_segment_reads_back_its_cross_sums(folder, tmp_path):
    cache = tmp_path / "c"
    compute(folder, cache, covariance=True)
    (marker,) = sorted(cache.rglob("markers/*.json"))
    loaded = read_segment(marker.parent.parent / "segments", marker)
    expected = normstats.compute(folder, cache=False, covariance=True, workers=1)
    records = loaded.records
    assert records.cross_sums.shape == (24, 3) and records.cross_sums.dtype == np.int64
    total = [int(v) for v in records.cross_sums.sum(axis=0)]
    n = int(records.pixels.sum())
    sums = records.sums.sum(axis=0)
    covariance = (n * total[0] - int(sums[0]) * int(sums[1])) / n / n / 255**2
    assert covariance == pytest.approx(expected.covariance[0][1], rel=1e-15)


def test_a_marker_naming_arrays_a_segment_cannot_hold_is_not_read(folder, tmp_path):
    cache = tmp_path / "c"
    compute(folder, cache, covariance=True)
    (path,) = sorted(cache.rglob("markers/*.json"))
    marker = json.loads(path.read_text())
    marker["optional"] = ["co_moments"]  # float arrays in a segment of integer records
    path.write_text(json.dumps(marker))
    assert read_segment(path.parent.parent / "segments", path) is None
    assert compute(folder, cache, covariance=True).images_decoded == 24
