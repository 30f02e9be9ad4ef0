"""Reliability matrix, part 3: the file system (docs/reliability.md, section 3)."""

from __future__ import annotations

import importlib
import json
import os

import pytest
from click.testing import CliRunner
from conftest import random_images
from oracle import assert_matches_oracle
from PIL import Image
from reliability_helpers import (
    compute_sync,
    lock_for_decoder,
    reasons,
)

import normstats
from normstats import NormstatsError
from normstats.sources.folder import FolderSource
from normstats_cli import main

fw = importlib.import_module("format_writers")



def test_permission_denied_is_skipped_with_its_reason(png_folder, monkeypatch):
    """The decoder's open() fails as it would for another user (`lock_for_decoder`); the
    sync scheduler keeps the patch in-process."""
    root, images = png_folder
    Image.new("RGB", (4, 4)).save(root / "locked.png")
    lock_for_decoder(monkeypatch, "locked.png")
    stats = compute_sync(root)
    assert reasons(stats) == {"locked.png": "permission denied"}
    assert [s.kind for s in stats.skipped] == [normstats.SkipKind.TRANSIENT]
    assert_matches_oracle(stats, images, 255)


def test_file_deleted_between_listing_and_reading(png_folder):
    root, images = png_folder
    Image.new("RGB", (4, 4)).save(root / "fleeting.png")
    source = FolderSource(root)  # lists the folder, fleeting.png included
    (root / "fleeting.png").unlink()
    stats = compute_sync(source)
    assert reasons(stats) == {"fleeting.png": "file disappeared before it could be read"}
    assert [s.kind for s in stats.skipped] == [normstats.SkipKind.TRANSIENT]
    assert_matches_oracle(stats, images, 255)


def test_non_utf8_file_names_are_used_and_reported(tmp_path, rng):
    """Names that are not UTF-8 (Latin-1 here) are decoded and, when bad, named in the
    report as Python spells them (surrogate escapes), JSON included."""
    pixels = random_images(rng, 2)
    root = os.fsencode(tmp_path)
    for i, name in enumerate((b"caf\xe9.png", b"\xff\xfe.png")):
        with open(os.path.join(root, name), "wb") as handle:
            handle.write(fw.png_bytes(pixels[i]))
    with open(os.path.join(root, b"bad\xe9.jpg"), "wb") as handle:
        handle.write(b"not a jpeg")
    result = CliRunner().invoke(main, ["compute", str(tmp_path), "--json", "--no-cache",
                                       "--scheduler", "sync"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["skipped"] == [{"path": os.fsdecode(b"bad\xe9.jpg"), "reason":
                                "not an image (content is none of PNG, JPEG, BMP, TIFF, WEBP, "
                                "GIF, PPM)", "kind": "unreadable"}]
    assert_matches_oracle(normstats.DatasetStats.from_dict(data), pixels, 255)


def test_longest_file_name_and_a_folder_beyond_path_max(tmp_path, rng):
    """A 255-byte name is an ordinary file; a folder nested past PATH_MAX (4096) cannot be
    opened by path: it is named with the system's reason, not a crash of the walk."""
    pixels = random_images(rng, 2)
    longest = "n" * 251 + ".png"
    Image.fromarray(pixels[0]).save(tmp_path / longest)
    parent = os.open(tmp_path, os.O_RDONLY)
    for _ in range(20):  # 20 x 251 characters: created relative to a descriptor
        os.mkdir("d" * 250, dir_fd=parent)
        child = os.open("d" * 250, os.O_RDONLY, dir_fd=parent)
        os.close(parent)
        parent = child
    deep = os.open("deep.png", os.O_WRONLY | os.O_CREAT, dir_fd=parent)
    os.write(deep, fw.png_bytes(pixels[1]))
    os.close(deep)
    os.close(parent)
    stats = compute_sync(tmp_path)
    ((path, reason),) = reasons(stats).items()
    assert path.startswith("d" * 250 + "/") and path.endswith("/")
    assert len(os.path.join(str(tmp_path), path)) > 4096
    assert reason == "cannot open folder: File name too long"
    assert_matches_oracle(stats, pixels[:1], 255)


def test_dangling_symlink_is_named(png_folder):
    root, images = png_folder
    os.symlink(root / "nowhere.png", root / "ghost.png")
    stats = compute_sync(root)
    assert reasons(stats) == {"ghost.png": "cannot stat file: No such file or directory"}
    assert_matches_oracle(stats, images, 255)


def test_on_error_fail_stops_for_what_the_listing_cannot_use(png_folder):
    """A dangling link is skipped by default; with --on-error fail it stops the run."""
    root, _ = png_folder
    (root / "cat" / "gone.png").symlink_to(root / "nowhere.png")
    assert any(s.path == "cat/gone.png" for s in compute_sync(root).skipped)
    with pytest.raises(NormstatsError, match="cat/gone.png: cannot stat file"):
        compute_sync(root, on_error="fail")
    (root / "cat" / "gone.png").unlink()
    (root / "cat" / "again.png").symlink_to(root / "cat" / "001.png")  # a second link: fine
    stats = compute_sync(root, on_error="fail")
    assert [s.path for s in stats.skipped] == ["cat/again.png"]
