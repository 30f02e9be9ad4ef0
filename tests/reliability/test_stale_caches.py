"""Reliability matrix, part 7: stale cache entries (docs/reliability.md).

A cached record must never outlive the bytes it was computed from. Files here are
uncompressed BMPs: a rewrite with other pixels keeps the size exactly, and the mtime is
set back with ``os.utime``, as ``tar --mtime`` or ``rsync -t`` would leave it.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from oracle import assert_matches_oracle
from PIL import Image

import normstats
import normstats.sources.file_list as file_list_module
from normstats.engine.cache import store as cache_module
from normstats_cli import main


def _bmp_folder(root: Path, rng: np.random.Generator, count: int = 6) -> list[np.ndarray]:
    images = [rng.integers(0, 256, (8, 8, 3), dtype=np.uint8) for _ in range(count)]
    root.mkdir()
    for i, pixels in enumerate(images):
        Image.fromarray(pixels).save(root / f"{i}.bmp")
    return images


def _rewrite_keeping_size_and_mtime(path: Path, pixels: np.ndarray, new_inode: bool) -> None:
    """New pixels in ``path``: same byte size, mtime set back to the old one."""
    before = path.stat()
    target = path.with_name(path.name + ".new") if new_inode else path
    Image.fromarray(pixels).save(target, format="BMP")
    if new_inode:
        os.replace(target, path)  # what an extraction or `cp` over the file does
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


@pytest.mark.parametrize("new_inode", [False, True], ids=["in_place", "replaced"])
def test_content_rewritten_with_the_same_size_and_mtime_is_decoded_again(tmp_path, rng,
                                                                         new_inode):
    root, cache = tmp_path / "data", tmp_path / "cache"
    images = _bmp_folder(root, rng)
    normstats.compute(root, cache=cache, workers=1)
    images[2] = 255 - images[2]
    _rewrite_keeping_size_and_mtime(root / "2.bmp", images[2], new_inode)
    again = normstats.compute(root, cache=cache, workers=1)
    assert (again.images_cached, again.images_decoded) == (5, 1)
    assert_matches_oracle(again, images, 255)
    assert again == normstats.compute(root, cache=False, workers=1)


def test_a_decoder_upgrade_starts_a_new_cache_group(tmp_path, rng, monkeypatch):
    """Pillow, simplejpeg (libjpeg-turbo) and imagecodecs (libpng) may each produce the
    pixels of a file: a new version of any of them means nothing cached is reused."""
    root, cache = tmp_path / "data", tmp_path / "cache"
    _bmp_folder(root, rng)
    normstats.compute(root, cache=cache, workers=1)
    for decoder in ("pillow", "simplejpeg", "imagecodecs", "tifffile"):
        versions = {**cache_module.decoder_versions(), decoder: "999.0"}
        monkeypatch.setattr(cache_module, "decoder_versions", lambda v=versions: v)
        stats = normstats.compute(root, cache=cache, workers=1)
        assert (stats.images_cached, stats.images_decoded) == (0, 6), decoder
    assert len([p for p in cache.iterdir() if p.is_dir()]) == 5


def test_new_raster_reading_rules_start_a_new_cache_group(tmp_path, rng, monkeypatch):
    """Records of rasters cached before mask pages were read hold values a mask now leaves
    out: a change of `raster.READING_RULES` means nothing cached is reused."""
    from normstats.sources.decoding import raster

    root, cache = tmp_path / "data", tmp_path / "cache"
    _bmp_folder(root, rng)
    normstats.compute(root, cache=cache, workers=1)
    assert normstats.compute(root, cache=cache, workers=1).images_cached == 6
    monkeypatch.setattr(raster, "READING_RULES", "1")
    stats = normstats.compute(root, cache=cache, workers=1)
    assert (stats.images_cached, stats.images_decoded) == (0, 6)


def test_verify_cache_finds_what_the_file_system_could_not_show(tmp_path, rng, monkeypatch):
    """Where the file system keeps no inode or ctime that changes (simulated: every
    stamp is 0), a same-size, same-mtime rewrite is served stale: the documented limit.
    ``verify_cache`` decodes cached files again, names the one that changed, and the
    result and the cache then hold its fresh record."""
    monkeypatch.setattr(file_list_module, "change_stamps", lambda inodes, ctimes: np.zeros(
        len(inodes), np.int64))
    root, cache = tmp_path / "data", tmp_path / "cache"
    images = _bmp_folder(root, rng)
    cold = normstats.compute(root, cache=cache, workers=1)
    changed = images.copy()
    changed[4] = 255 - images[4]
    _rewrite_keeping_size_and_mtime(root / "4.bmp", changed[4], new_inode=False)
    stale = normstats.compute(root, cache=cache, workers=1)
    assert stale == cold and stale.images_cached == 6  # the limit --verify-cache exists for

    checked = normstats.compute(root, cache=cache, workers=1, verify_cache="all")
    assert (checked.cache_checked, checked.cache_changed) == (6, ("4.bmp",))
    assert_matches_oracle(checked, changed, 255)
    sampled = normstats.compute(root, cache=cache, workers=1, verify_cache=2)
    assert (sampled.cache_checked, sampled.cache_changed) == (2, ())
    assert sampled == checked and sampled.images_cached == 4
    later = normstats.compute(root, cache=cache, workers=1)
    assert later == checked and later.images_cached == 6


def test_verify_cache_on_the_command_line(tmp_path, rng):
    root, cache = tmp_path / "data", str(tmp_path / "cache")
    _bmp_folder(root, rng)
    (root / "broken.bmp").write_bytes(b"BM" + bytes(10))
    runner = CliRunner()
    runner.invoke(main, ["compute", str(root), "--cache", cache, "--workers", "1"])
    result = runner.invoke(main, ["compute", str(root), "--cache", cache, "--workers", "1",
                                  "--verify-cache", "all"])
    assert result.exit_code == 0, result.output
    assert "cache verified: 7 cached files decoded again, all identical" in result.output
    for bad in (["--verify-cache", "0"], ["--verify-cache", "some"],
                ["--verify-cache", "3", "--no-cache"]):
        refused = runner.invoke(main, ["compute", str(root), "--cache", cache, *bad])
        assert refused.exit_code in (1, 2) and "Traceback" not in refused.output
        assert "verify" in refused.output.lower(), refused.output
