"""Reliability matrix, part 1: damaged image files (docs/reliability.md, section 1)."""

from __future__ import annotations

import importlib
import json
import threading
import warnings

import numpy as np
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
        "warning_level.png": f"decompression bomb: 9500x9500 = {warning_side} pixels {limit}; "
                             "raise it "
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


def test_threads_decoding_under_different_limits_leave_the_callers_pillow_and_warnings(
        tmp_path, rng, monkeypatch):
    """Runs with the threads scheduler and different --max-pixels, four at once, while the
    caller's thread watches Pillow's limit and the warning filters: both stay the caller's,
    every run refuses exactly the images over its own limit, and a UserWarning the caller
    raises afterwards is still shown."""
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 123_456_789)  # the caller's own limit
    filters = list(warnings.filters)
    for i in range(16):  # TIFF and BMP go through Pillow (no fast path)
        size, fmt = ((20, 20) if i % 2 else (10, 10)), ("TIFF", "BMP")[i % 4 // 2]
        (tmp_path / f"{i:02d}.{fmt.lower()}").write_bytes(encode(photo(rng, *size), fmt))
    expected = {100: 8, 399: 8, 400: 16, 10**6: 16}  # images of 100 and 400 pixels
    outcomes: list[tuple[int, int, int]] = []

    def runs(limit: int) -> None:
        for _ in range(5):
            stats = normstats.compute(tmp_path, scheduler="threads", workers=3, task_size=1,
                                      max_pixels=limit, cache=False)
            outcomes.append((limit, stats.images, len(stats.skipped)))

    callers = [threading.Thread(target=runs, args=(limit,)) for limit in expected]
    for thread in callers:
        thread.start()
    seen_limits, seen_filters = set(), 0
    while any(thread.is_alive() for thread in callers):
        seen_limits.add(Image.MAX_IMAGE_PIXELS)
        seen_filters += warnings.filters != filters
    seen_limits.add(Image.MAX_IMAGE_PIXELS)
    seen_filters += warnings.filters != filters
    assert seen_limits == {123_456_789} and seen_filters == 0
    assert sorted(set(outcomes)) == [(limit, count, 16 - count)
                                     for limit, count in expected.items()]
    assert len(outcomes) == 20
    shown: list[str] = []
    monkeypatch.setattr(warnings, "showwarning", lambda message, *rest: shown.append(
        str(message)))
    warnings.warn("the caller's own warning", UserWarning, stacklevel=1)
    assert shown == ["the caller's own warning"]


def test_max_pixels_above_the_callers_pillow_limit(tmp_path, rng, monkeypatch):
    """Pillow errors above twice its own limit, which normstats never changes in the
    caller's process: sync runs name that limit; the process pool's workers, processes
    of normstats, enforce --max-pixels alone and decode the file exactly."""
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
    images = [photo(rng, 50, 50), photo(rng, 10, 10)]  # 2500 > 2 x 1000 pixels, and 100
    for i, image in enumerate(images):
        (tmp_path / f"{i}.bmp").write_bytes(encode(image, "BMP"))
        (tmp_path / f"{i}_copy.bmp").write_bytes(encode(image, "BMP"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning either: the caller sees a skip reason
        stats = compute_sync(tmp_path, max_pixels=10**6)
    assert reasons(stats) == {name: (
        "2500 pixels is within --max-pixels but over the limit of Pillow in this process "
        "(PIL.Image.MAX_IMAGE_PIXELS = 1000), which normstats never changes in the caller's "
        "process; raise it there, or run with the processes scheduler")
        for name in ("0.bmp", "0_copy.bmp")}
    pooled = normstats.compute(tmp_path, scheduler="processes", workers=2, task_size=1,
                               max_pixels=10**6, cache=False)
    assert pooled.skipped == ()
    assert_matches_oracle(pooled, [np.asarray(image) for image in images for _ in range(2)],
                          255)
    assert Image.MAX_IMAGE_PIXELS == 1000
