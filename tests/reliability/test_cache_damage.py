"""Reliability matrix, parts 5, 7 and 8: a damaged or rewritten record cache (docs/reliability.md).

Two kinds of damage that the marker's digest cannot catch. A record rewritten *with*
its marker's digest recomputed (what the issue did: R mean 0.408 became 0.256 without a
word) passes every integrity check, so each record is checked for plausibility when it
is read. And a cache file replaced by something that is not a file of its size (a link
to ``/dev/zero``: killed at 23 GB; a FIFO: a hang; a large file: read whole) must be
refused before zarr reads it; those runs happen in a child process with a memory limit
and a timeout, so that the unfixed behaviour fails the test instead of the machine.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import zarr
from oracle import assert_matches_oracle, exact_stats
from PIL import Image
from reliability_helpers import OWN_PEAK_KB

import normstats
from normstats.results.stats import DatasetStats


def _folder(root: Path, rng: np.random.Generator, count: int = 6) -> list[np.ndarray]:
    images = [rng.integers(0, 256, (8, 8, 3), dtype=np.uint8) for _ in range(count)]
    root.mkdir()
    for i, pixels in enumerate(images):
        Image.fromarray(pixels).save(root / f"{i}.png")
    return images


def _segment(cache: Path) -> tuple[Path, Path]:
    (segment,) = [p for p in cache.glob("*/segments/*") if p.is_dir()]
    return segment, segment.parent.parent / "markers" / f"{segment.name}.json"


def _rewrite_with_a_matching_digest(cache: Path, path: str, field: str,
                                    value: float | int) -> None:
    """Set ``field`` of ``path``'s record (channel 0) to ``value``, then recompute the
    marker's digest as docs/cache.md describes it: BLAKE2b-256 over the marker's other fields
    (JSON, sorted keys), then each array in name order: ``name:dtype:shape`` and bytes."""
    segment, marker_path = _segment(cache)
    group = zarr.open_group(segment, mode="r+")
    paths = np.asarray(group["path_bytes"][...]).tobytes().decode().split("\0")
    values = np.asarray(group[field][...])
    index = (paths.index(path), 0)[:values.ndim]
    values[index] = value
    group[field][...] = values
    marker = json.loads(marker_path.read_text())
    del marker["digest"]
    digest = hashlib.blake2b(json.dumps(marker, sort_keys=True).encode(), digest_size=32)
    for name in sorted(group.array_keys()):
        array = np.ascontiguousarray(group[name][...])
        digest.update(f"{name}:{array.dtype.str}:{array.shape}".encode())
        digest.update(array.tobytes())
    marker_path.write_text(json.dumps({**marker, "digest": "blake2b:" + digest.hexdigest()}))


def _forged(field: str, pixels: np.ndarray) -> tuple[str, int | float]:
    """A value for channel 0 of ``field`` that no 8×8 image with these pixels has, but
    that keeps Σx² ≡ Σx (mod 2), so only the stated bound can refuse it."""
    x = pixels[:, :, 0].astype(np.int64)
    n, total, squares, high = x.size, int(x.sum()), int((x * x).sum()), int(x.max())
    if field == "sums":  # above max·n
        return field, high * n + (2 if (high * n - squares) % 2 == 0 else 1)
    if field == "sums_lowered":  # R mean × 0.6, as in the issue: Σx² > max·Σx then
        low = int(total * 0.6)
        return "sums", low + (low - squares) % 2
    if field == "sums_sq":  # below (Σx)²/n
        floor = total * total // n - 2
        return field, floor - (floor - total) % 2
    if field == "maximum":  # beyond the dtype
        return field, 256.0
    if field == "minimum":  # above the mean
        return field, float(high)
    return "pixels", n // 4  # pixel count: too few for the sum


@pytest.mark.parametrize("field", ["sums", "sums_lowered", "sums_sq", "maximum", "minimum",
                                   "pixels"])
def test_a_record_rewritten_with_its_digest_recomputed_is_decoded_again_and_named(
        tmp_path, rng, caplog, field):
    root, cache = tmp_path / "data", tmp_path / "cache"
    images = _folder(root, rng)
    normstats.compute(root, cache=cache, workers=1)
    name, value = _forged(field, images[3])
    _rewrite_with_a_matching_digest(cache, "3.png", name, value)
    with caplog.at_level(logging.WARNING, logger="normstats.engine.cache"):
        again = normstats.compute(root, cache=cache, workers=1)
    assert_matches_oracle(again, images, 255)
    assert (again.images_cached, again.images_decoded) == (5, 1)
    assert "the cached record of 3.png is impossible" in caplog.text
    assert normstats.compute(root, cache=cache, workers=1).images_cached == 6  # rewritten


def test_a_float_record_rewritten_with_its_digest_recomputed_is_decoded_again(tmp_path, rng,
                                                                              caplog):
    root, cache = tmp_path / "data", tmp_path / "cache"
    root.mkdir()
    images = [(1e4 + rng.normal(0, 1, (7, 9, 1))).astype(np.float32) for _ in range(4)]
    for i, pixels in enumerate(images):
        Image.fromarray(pixels[:, :, 0], mode="F").save(root / f"{i}.tif")
    cold = normstats.compute(root, cache=cache, workers=1, mode="keep")
    for field, value in (("m2s", -1.0), ("means", 2e4), ("m2s", 1e6)):
        _rewrite_with_a_matching_digest(cache, "2.tif", field, value)
        with caplog.at_level(logging.WARNING, logger="normstats.engine.cache"):
            again = normstats.compute(root, cache=cache, workers=1, mode="keep")
        assert again == cold and again.images_decoded == 1, field
        assert "the cached record of 2.tif is impossible" in caplog.text
    expected = exact_stats(images)
    assert list(cold.mean) == expected["mean"]
    assert cold.std == pytest.approx(expected["std"], rel=4e-16, abs=0)


CHILD = textwrap.dedent(f"""
    import json, resource, sys
    # Damage must fail here, not take the machine: unfixed, /dev/zero was read to 23 GB.
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
    import normstats
    stats = normstats.compute(sys.argv[1], cache=sys.argv[2], workers=1)
    print(json.dumps([stats.to_dict(), {OWN_PEAK_KB}]))
""")


def _damage(target: Path, how: str) -> None:
    target.unlink()
    if how == "dev_zero":
        target.symlink_to("/dev/zero")
    elif how == "fifo":
        os.mkfifo(target)
    else:  # a sparse 2 GiB file: read whole before zarr could find it wrong
        with open(target, "wb") as handle:
            handle.truncate(2 << 30)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("what, how", [
    ("sums/c.0.0", "dev_zero"), ("sums/c.0.0", "fifo"), ("sums/c.0.0", "oversized"),
    ("pixels/c.0", "fifo"), ("sums/zarr.json", "dev_zero"), ("marker", "fifo"),
    ("marker", "oversized")])
def test_a_cache_file_that_is_not_what_it_claims_is_refused_unread(tmp_path, rng, what, how):
    root, cache = tmp_path / "data", tmp_path / "cache"
    images = _folder(root, rng)
    normstats.compute(root, cache=cache, workers=1)
    segment, marker = _segment(cache)
    target = marker if what == "marker" else segment / what
    _damage(target, how)
    run = subprocess.run([sys.executable, "-c", CHILD, str(root), str(cache)],
                         capture_output=True, text=True, timeout=25)
    assert run.returncode == 0, run.stderr
    data, peak_kb = json.loads(run.stdout)
    stats = DatasetStats.from_dict(data)
    assert_matches_oracle(stats, images, 255)
    assert (stats.images_cached, stats.images_decoded) == (0, 6)
    named = str(target.relative_to(segment.parent.parent))
    assert f"{named}: " in run.stderr and "decoded again" in run.stderr, run.stderr
    assert peak_kb < 1 << 20  # KiB: well under the 2 GiB a whole read would take
    healed = normstats.compute(root, cache=cache, workers=1)
    assert healed.images_cached == 6 and healed == stats


@pytest.mark.timeout(30)
def test_damaged_group_files_neither_hang_nor_fill_memory(tmp_path, rng):
    """The group's own metadata, read on every run and by ``cache list``: a FIFO and a link
    to /dev/zero are rewritten (they hold nothing that needs keeping), the lock file's
    holder is never read from a FIFO, and the committed segment is still reused."""
    root, cache = tmp_path / "data", tmp_path / "cache"
    images = _folder(root, rng)
    normstats.compute(root, cache=cache, workers=1)
    group = _segment(cache)[0].parent.parent
    _damage(group / "zarr.json", "fifo")
    _damage(group / "normstats-group.json", "dev_zero")
    _damage(group / "segments" / "zarr.json", "fifo")
    run = subprocess.run([sys.executable, "-c", CHILD, str(root), str(cache)],
                         capture_output=True, text=True, timeout=25)
    assert run.returncode == 0, run.stderr
    stats = DatasetStats.from_dict(json.loads(run.stdout)[0])
    assert_matches_oracle(stats, images, 255)
    assert stats.images_cached == 6
    _damage(group / "markers" / _segment(cache)[1].name, "fifo")
    listing = subprocess.run([sys.executable, "-m", "normstats", "cache", "list", "--cache",
                              str(cache)], capture_output=True, text=True, timeout=25)
    assert listing.returncode == 0 and "Traceback" not in listing.stderr, listing.stderr
