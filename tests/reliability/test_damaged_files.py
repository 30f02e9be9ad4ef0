"""Reliability matrix, part 1: damaged image files (docs/reliability.md, section 1)."""

from __future__ import annotations

import importlib
import json

from click.testing import CliRunner
from oracle import assert_matches_oracle
from PIL import Image
from reliability_helpers import (
    compute_sync,
    encode,
    photo,
    pillow,
    png_header_only,
    reasons,
)

import normstats
from normstats.sources.decoding.decode import DEFAULT_MAX_PIXELS
from normstats_cli import main

fw = importlib.import_module("format_writers")



TRUNCATED = {"half.jpg": ("JPEG", {}), "half.png": ("PNG", {}), "half.tif": ("TIFF", {}),
             "half_deflate.tif": ("TIFF", {"compression": "tiff_deflate"}),
             "half.gif": ("GIF", {}), "half.webp": ("WEBP", {}),
             "half_lossless.webp": ("WEBP", {"lossless": True})}


def test_truncated_jpeg_png_tiff_gif_webp_are_skipped_and_named(png_folder, rng):
    root, images = png_folder
    for name, (fmt, options) in TRUNCATED.items():
        data = encode(photo(rng), fmt, **options)
        (root / name).write_bytes(data[: len(data) // 2])
    # A PNG cut inside its final IEND chunk still holds every pixel: Pillow decodes it
    # completely, so it counts, with exactly those pixels (nothing is filled in).
    whole = encode(photo(rng), "PNG")
    (root / "no_iend.png").write_bytes(whole[:-6])
    stats = compute_sync(root)
    found = reasons(stats)
    assert set(found) == set(TRUNCATED)
    for name, reason in found.items():
        assert reason.startswith("truncated or corrupt"), (name, reason)
    # a compressed TIFF keeps its directory at the end: the reason says TIFF, not "not an image"
    assert found["half_deflate.tif"] == "truncated or corrupt TIFF file (its header cannot be read)"
    assert_matches_oracle(stats, images + [pillow(whole)], 255)


def test_jpeg_cut_after_its_signature_is_named_a_damaged_jpeg(png_folder):
    root, images = png_folder
    (root / "stub.jpg").write_bytes(encode(Image.new("RGB", (8, 8)), "JPEG")[:20])
    stats = compute_sync(root)
    assert reasons(stats) == {"stub.jpg": "truncated or corrupt JPEG file (its header cannot "
                                          "be read)"}
    assert_matches_oracle(stats, images, 255)


def test_decompression_bomb_warning_and_error_levels_are_both_refused(png_folder):
    """Pillow warns above MAX_IMAGE_PIXELS and raises above twice it: both are skipped."""
    root, images = png_folder
    warning_side, error_side = 9_500 * 9_500, 14_000 * 14_000
    assert DEFAULT_MAX_PIXELS < warning_side <= 2 * DEFAULT_MAX_PIXELS < error_side
    # headers only: the check runs on the header, before a byte of pixels is allocated
    (root / "warning_level.png").write_bytes(png_header_only(9_500, 9_500))
    (root / "error_level.png").write_bytes(png_header_only(14_000, 14_000))
    stats = compute_sync(root)
    found = reasons(stats)
    limit = f"exceeds the limit of {DEFAULT_MAX_PIXELS} pixels"  # never Pillow's 2x figure
    assert found == {
        "warning_level.png": f"decompression bomb: {warning_side} pixels {limit}; raise it "
                             "with --max-pixels if the file is trusted",
        "error_level.png": f"decompression bomb: {error_side} pixels {limit}; raise it "
                           "with --max-pixels if the file is trusted"}
    assert_matches_oracle(stats, images, 255)
    assert Image.MAX_IMAGE_PIXELS == DEFAULT_MAX_PIXELS  # the caller's Pillow is untouched


def test_max_pixels_sets_the_limit_for_both_levels_and_every_decoder(tmp_path, rng):
    """`--max-pixels` lowers the limit (PNG at 1.1x and 2.1x; JPEG on the fast path) and
    raises it again; the caller's own Pillow limit is left as it was."""
    files = {"warn.png": ("PNG", (110, 100)), "error.png": ("PNG", (210, 100)),
             "fast.jpg": ("JPEG", (110, 100)), "small.png": ("PNG", (50, 50))}
    data = {}
    for name, (fmt, (w, h)) in files.items():
        data[name] = encode(photo(rng, h, w), fmt, **({"quality": 95} if fmt == "JPEG" else {}))
        (tmp_path / name).write_bytes(data[name])
    args = ["compute", str(tmp_path), "--json", "--no-cache", "--scheduler", "sync"]
    low = CliRunner().invoke(main, args + ["--max-pixels", "10000"])
    assert low.exit_code == 0, low.output
    skipped = {s["path"]: s["reason"] for s in json.loads(low.output)["skipped"]}
    assert sorted(skipped) == ["error.png", "fast.jpg", "warn.png"]
    assert all("exceeds the limit of 10000 pixels" in r and "--max-pixels" in r
               for r in skipped.values())
    assert_matches_oracle(normstats.DatasetStats.from_json(low.output),
                          [pillow(data["small.png"])], 255)
    high = CliRunner().invoke(main, args + ["--max-pixels", "30000"])
    assert high.exit_code == 0, high.output
    stats = normstats.DatasetStats.from_json(high.output)
    assert stats.skipped == ()
    assert_matches_oracle(stats, [pillow(data[n]) for n in sorted(files)], 255)
    assert Image.MAX_IMAGE_PIXELS == DEFAULT_MAX_PIXELS
