"""Which failures the record cache keeps: decided by their kind, never by their wording.

A failure is kept (and answered from the cache while the file is unchanged) when it is a
verdict on the file: its content (`SkipKind.UNREADABLE`) or a refusal (`SkipKind.REFUSED`).
A failure of the moment (`SkipKind.TRANSIENT`) is tried again on the next run.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from reliability_helpers import lock_for_decoder

import normstats
import normstats.sources.folder as folder_module
from normstats import SkipKind, Skipped, UnreadableInputError


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

    monkeypatch.setattr(folder_module, "decode_file", decode)
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
