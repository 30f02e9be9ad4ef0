"""The embedded demo dataset: small synthetic photos, generated offline in a second.

Each image has its own colour cast, a lighting gradient and sensor noise, the way
photos of different scenes differ. That makes the two std variants disagree as they
do on real data: the pooled std includes how image colours differ from each other,
the averaged per-image std does not.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

__all__ = ["write_demo_dataset"]

_SIZES = ((32, 32), (48, 40), (64, 64))


def _photo(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    cast = rng.uniform(0.15, 0.85, size=3)
    ramp = np.linspace(-1, 1, width)[None, :, None] * rng.uniform(0.05, 0.2)
    noise = rng.normal(0, 0.06, size=(height, width, 3))
    pixels = (cast[None, None, :] + ramp + noise) * 255
    return np.clip(np.rint(pixels), 0, 255).astype(np.uint8)


def write_demo_dataset(folder: str | Path, images: int = 120, seed: int = 0) -> Path:
    """Write ``images`` synthetic photos (PNG, JPEG, a few grayscale) and one broken file.

    The broken file (a JPEG cut short) shows how a bad download is named and skipped.

    Parameters
    ----------
    folder : str or Path
        Where to write; created if missing.
    images : int
        Number of good images.
    seed : int
        Seed of the `numpy.random.Generator`, so the dataset is the same every time.

    Examples
    --------
    >>> import tempfile
    >>> root = write_demo_dataset(tempfile.mkdtemp(), images=4)
    >>> sorted(p.name for p in root.rglob("*"))[:2]
    ['broken.jpg', 'class_a']
    """
    root = Path(folder)
    rng = np.random.default_rng(seed)
    for index in range(images):
        height, width = _SIZES[index % len(_SIZES)]
        image = Image.fromarray(_photo(rng, height, width))
        if index % 10 == 9:
            image = image.convert("L")
        subfolder = root / ("class_a" if index % 2 == 0 else "class_b")
        subfolder.mkdir(parents=True, exist_ok=True)
        if index % 3 == 0:
            image.save(subfolder / f"img_{index:04d}.jpg", quality=92)
        else:
            image.save(subfolder / f"img_{index:04d}.png")
    good = (root / "class_a" / "img_0000.jpg").read_bytes()
    (root / "broken.jpg").write_bytes(good[: len(good) // 2])
    return root
