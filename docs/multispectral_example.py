"""Make the tiny GeoTIFF dataset of docs/multispectral.md and README.md, offline:

    python docs/multispectral_example.py [FOLDER]    # writes FOLDER (default: s2_tiles)

Forty Sentinel-2-like tiles of 32×32 pixels and 13 bands of uint16 (B01 … B12 and B8A,
named in GDAL's band descriptions), deflate-compressed, in two sub-folders (``farmland``,
``forest``): each band a level of its own with a smooth field and noise, a block of nodata
(value 0, named by the GDAL_NODATA tag) in some tiles, and one tile off the edge of the
swath, without a single valid pixel.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import tifffile

BANDS = ("B01", "B02", "B03", "B04", "B05", "B06", "B07", "B08", "B8A", "B09", "B10",
         "B11", "B12")
#: Typical Sentinel-2 L1C levels per band (reflectance × 10,000), farmland and forest.
LEVELS = {"farmland": (1400, 1150, 1050, 1000, 1350, 2100, 2400, 2550, 2650, 900, 20, 2000,
                       1300),
          "forest": (1300, 950, 800, 600, 1000, 2300, 2800, 2900, 3050, 800, 15, 1400, 700)}


def tile(rng: np.random.Generator, levels: tuple[int, ...], size: int = 32) -> np.ndarray:
    """(size, size, 13) uint16: each band's level times a smooth field, plus noise."""
    ramp = np.linspace(-1.0, 1.0, size)
    field = 1 + 0.15 * np.outer(ramp, rng.uniform(-1, 1, size // 4).repeat(4))[..., None]
    pixels = np.asarray(levels) * field + rng.normal(0, 25, (size, size, len(levels)))
    return np.clip(np.rint(pixels), 1, 65535).astype(np.uint16)


def write_tiles(root: Path, seed: int = 0) -> Path:
    """The forty tiles under ``root``: 20 per sub-folder, every fourth with a nodata block."""
    rng = np.random.default_rng(seed)
    descriptions = "".join(f'<Item name="DESCRIPTION" sample="{i}" role="description">{b}'
                           "</Item>" for i, b in enumerate(BANDS))
    tags = [(42113, "s", 0, "0", False),
            (42112, "s", 0, f"<GDALMetadata>{descriptions}</GDALMetadata>", False)]
    for kind, levels in LEVELS.items():
        (root / kind).mkdir(parents=True, exist_ok=True)
        for index in range(20):
            pixels = tile(rng, levels)
            if index % 4 == 3:  # a block of nodata
                pixels[: rng.integers(4, 16), : rng.integers(8, 32)] = 0
            if kind == "forest" and index == 19:  # off the swath: nodata everywhere
                pixels[...] = 0
            tifffile.imwrite(root / kind / f"{kind}_{index:02d}.tif", pixels,
                             photometric="minisblack", planarconfig="contig",
                             compression="deflate", predictor=True, extratags=tags)
    return root


if __name__ == "__main__":
    print(write_tiles(Path(sys.argv[1] if len(sys.argv) > 1 else "s2_tiles")))
