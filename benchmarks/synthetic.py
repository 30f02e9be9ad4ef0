"""The benchmark datasets, generated deterministically once under ``benchmarks/data/``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parent / "data"


def make_jpeg_folder(count: int, size: int) -> list[Path]:
    """``count`` photo-like JPEGs (quality 90): a smooth scene plus full-resolution texture.

    The texture matters: a JPEG of a smooth upscaled image decodes about twice as fast as a
    photo, which would flatter every tool's decode-bound figures.
    """
    folder = DATA / f"photo_{size}_{count}"
    files = sorted(folder.glob("*.jpg"))
    if len(files) == count:
        return files
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    for i in range(count):
        cast = rng.uniform(40, 215, size=3)
        coarse = rng.normal(0, 30, size=(size // 16, size // 16, 3))
        scene = np.asarray(Image.fromarray(np.clip(cast + coarse, 0, 255).astype(np.uint8))
                           .resize((size, size), Image.BICUBIC), dtype=np.float64)
        texture = rng.normal(0, 12, size=(size, size, 3))
        pixels = np.clip(scene + texture, 0, 255).astype(np.uint8)
        Image.fromarray(pixels).save(folder / f"{i:06d}.jpg", quality=90)
    return sorted(folder.glob("*.jpg"))


def make_png_folder(count: int, size: int) -> list[Path]:
    """``count`` lossless PNGs of size² in 10 class folders (an ImageFolder layout)."""
    folder = DATA / f"png_{size}_{count}"
    files = sorted(folder.rglob("*.png"))
    if len(files) == count:
        return files
    from PIL import Image

    rng = np.random.default_rng(2)
    for i in range(count):
        sub = folder / f"class_{i % 10}"
        sub.mkdir(parents=True, exist_ok=True)
        pixels = np.clip(rng.uniform(30, 220, 3) + rng.normal(0, 25, (size, size, 3)), 0, 255)
        Image.fromarray(pixels.astype(np.uint8)).save(sub / f"{i:06d}.png")
    return sorted(folder.rglob("*.png"))


def make_photo_png_folder(count: int, size: int) -> list[Path]:
    """``count`` photo-like PNGs of size² in 10 class folders, 4 in 7 carrying an ICC profile.

    Each is a crop-sized photo-like scene (a smooth coloured scene plus texture, as
    `make_jpeg_folder`), never uniform noise; 57% embed an sRGB ICC profile (iCCP), the
    share found among crops of real photographs saved by cameras and editors.
    """
    folder = DATA / f"png_photo_{size}_{count}"
    files = sorted(folder.rglob("*.png"))
    if len(files) == count:
        return files
    from PIL import Image, ImageCms

    profile = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    rng = np.random.default_rng(7)
    for i in range(count):
        sub = folder / f"class_{i % 10}"
        sub.mkdir(parents=True, exist_ok=True)
        cast = rng.uniform(40, 215, size=3)
        coarse = rng.normal(0, 30, size=(max(2, size // 8), max(2, size // 8), 3))
        scene = np.asarray(Image.fromarray(np.clip(cast + coarse, 0, 255).astype(np.uint8))
                           .resize((size, size), Image.BICUBIC), dtype=np.float64)
        pixels = np.clip(scene + rng.normal(0, 6, size=(size, size, 3)), 0, 255)
        options = {"icc_profile": profile} if i % 7 < 4 else {}
        Image.fromarray(pixels.astype(np.uint8)).save(sub / f"{i:06d}.png", **options)
    return sorted(folder.rglob("*.png"))
