"""Reliability matrix, part 2: modes and bit depths (docs/reliability.md, section 2)."""

from __future__ import annotations

import importlib
import io
from pathlib import Path

import numpy as np
import pytest
from oracle import assert_matches_oracle
from PIL import Image, ImageOps
from reliability_helpers import (
    compute_sync,
    encode,
    pillow,
    png_16bit_rgb,
    reasons,
)

from normstats import EmptyDatasetError

fw = importlib.import_module("format_writers")



def mode_zoo(root: Path, rng: np.random.Generator) -> dict[str, bytes]:
    """One file of every Pillow mode the matrix lists, written to ``root``."""
    base = Image.fromarray(rng.integers(0, 256, (6, 7, 3), dtype=np.uint8))
    palette = base.convert("P")
    files = {
        "cmyk.tif": encode(base.convert("CMYK"), "TIFF"),
        "cmyk.jpg": encode(base.convert("CMYK"), "JPEG"),
        "p_transparent.png": encode(palette, "PNG", transparency=3),
        "la.png": encode(base.convert("LA"), "PNG"),
        "rgba.png": encode(base.convert("RGBA"), "PNG"),
        "mode1.png": encode(base.convert("1"), "PNG"),
        "float.tif": encode(Image.fromarray(rng.random((6, 7)).astype(np.float32)), "TIFF"),
        "gray16.png": encode(Image.fromarray(rng.integers(0, 65536, (6, 7)).astype(np.uint16)),
                             "PNG"),
        "rgb16.png": png_16bit_rgb(rng.integers(0, 65536, (6, 7, 3)).astype(np.uint16)),
    }
    root.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (root / name).write_bytes(data)
    return files


@pytest.mark.parametrize("mode", ["RGB", "L", "RGBA"])
def test_every_pillow_mode_under_an_8_bit_policy(tmp_path, rng, mode):
    """8-bit files are exactly Pillow's ``convert(mode)``; 16-bit gray and float are refused
    with a pointer to ``--mode keep``; a 16-bit RGB PNG gives the 8 bits Pillow decodes."""
    files = mode_zoo(tmp_path / "zoo", rng)
    stats = compute_sync(tmp_path / "zoo", mode=mode)
    found = reasons(stats)
    assert set(found) == {"float.tif", "gray16.png"}
    assert all("would clip it to 8 bits; use --mode keep" in r for r in found.values())
    used = sorted(set(files) - set(found))
    assert stats.channels == {"RGB": ("R", "G", "B"), "L": ("L",),
                              "RGBA": ("R", "G", "B", "A")}[mode]
    assert_matches_oracle(stats, [pillow(files[name], mode) for name in used], 255)


KEEP = {"cmyk.tif": ("C", "M", "Y", "K"), "cmyk.jpg": ("C", "M", "Y", "K"),
        "p_transparent.png": ("R", "G", "B", "A"), "la.png": ("L", "A"),
        "rgba.png": ("R", "G", "B", "A"), "mode1.png": ("L",), "float.tif": ("L",),
        "gray16.png": ("L",)}


def native(data: bytes, name: str) -> tuple[np.ndarray, float]:
    """The pixels ``--mode keep`` must give, written without normstats, and their scale."""
    with Image.open(io.BytesIO(data)) as image:
        if name == "p_transparent.png":
            return pillow(data, "RGBA"), 255
        if name == "mode1.png":
            return pillow(data, "L"), 255
        pixels = np.asarray(image)
    pixels = pixels[:, :, None] if pixels.ndim == 2 else pixels
    if pixels.dtype.kind == "f":
        return pixels, 1
    if pixels.dtype.itemsize == 2 or image.mode.startswith("I;16"):
        return pixels.astype(np.uint16), 65535
    return pixels, 255


def test_every_pillow_mode_under_keep(tmp_path, rng):
    """Native channels and depth per file (each alone: keep refuses to pool mixed kinds)."""
    files = mode_zoo(tmp_path / "zoo", rng)
    for name, channels in KEEP.items():
        alone = tmp_path / name.replace(".", "_")
        alone.mkdir()
        (alone / name).write_bytes(files[name])
        stats = compute_sync(alone, mode="keep")
        assert stats.channels == channels, name
        pixels, scale = native(files[name], name)
        assert stats.dtype == str(pixels.dtype) and stats.scale == scale, name
        assert_matches_oracle(stats, [pixels], scale)
    alone = tmp_path / "rgb16"
    alone.mkdir()
    (alone / "rgb16.png").write_bytes(files["rgb16.png"])
    with pytest.raises(EmptyDatasetError, match="rgb16.png: 16-bit colour PNG.*use --mode RGB"):
        compute_sync(alone, mode="keep")


@pytest.mark.parametrize("fmt", ["WEBP", "TIFF"])  # GIF: tests/sources/test_folder.py
def test_multi_frame_webp_and_tiff_contribute_their_first_frame(tmp_path, fmt):
    frames = [Image.new("RGB", (4, 3), (v, v // 2, 255 - v)) for v in (10, 200, 90)]
    options = {"lossless": True} if fmt == "WEBP" else {}
    data = encode(frames[0], fmt, save_all=True, append_images=frames[1:], **options)
    assert Image.open(io.BytesIO(data)).n_frames == 3
    (tmp_path / f"anim.{fmt.lower()}").write_bytes(data)
    stats = compute_sync(tmp_path)
    assert_matches_oracle(stats, [np.asarray(frames[0])], 255)


def test_exif_orientation_leaves_the_statistics_unchanged(tmp_path, rng):
    """The stored pixels are used, as torchvision's loader does; a rotation would only
    permute them, so every per-channel statistic is the same either way."""
    pixels = rng.integers(0, 256, (5, 9, 3), dtype=np.uint8)
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees on display
    data = encode(Image.fromarray(pixels), "PNG", exif=exif.tobytes())
    (tmp_path / "rotated.png").write_bytes(data)
    stats = compute_sync(tmp_path)
    assert_matches_oracle(stats, [pixels], 255)
    upright = np.asarray(ImageOps.exif_transpose(Image.open(io.BytesIO(data))))
    assert upright.shape == (9, 5, 3)
    assert_matches_oracle(stats, [upright], 255)
