"""TIFF rasters written with tifffile for the tests: any band count, dtype and layout."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import tifffile

#: The layouts a raster is written in: (planar, tiled).
LAYOUTS = {"interleaved-strips": (False, False), "planar-strips": (True, False),
           "interleaved-tiles": (False, True), "planar-tiles": (True, True)}
COMPRESSIONS = (None, "deflate", "lzw", "zstd")
DTYPES = ("uint8", "uint16", "int16", "uint32", "int32", "float32", "float64")


def raster_bytes(pixels: np.ndarray, *, planar: bool = False, tiled: bool = False,
                 compression: str | None = None, nodata: float | str | None = None,
                 names: tuple[str, ...] | None = None, bigtiff: bool = False,
                 photometric: str = "minisblack") -> bytes:
    """One (H, W, C) raster as a TIFF: band-sequential when ``planar``, in 16×16 tiles when
    ``tiled``, with a GDAL_NODATA tag and GDAL band descriptions when given."""
    height, width, bands = pixels.shape
    extratags = []
    if nodata is not None:
        value = float(nodata) if not isinstance(nodata, str) else None
        text = nodata if value is None else (
            str(int(value)) if value.is_integer() else repr(value))
        extratags.append((42113, "s", 0, text, False))
    if names is not None:
        items = "".join(f'<Item name="DESCRIPTION" sample="{i}" role="description">{n}</Item>'
                        for i, n in enumerate(names))
        extratags.append((42112, "s", 0, f"<GDALMetadata>{items}</GDALMetadata>", False))
    data = pixels[:, :, 0] if bands == 1 else (
        np.moveaxis(pixels, -1, 0) if planar else pixels)
    options = {"photometric": photometric, "compression": compression,
               "extratags": extratags, "bigtiff": bigtiff}
    if bands > 1:
        options["planarconfig"] = "separate" if planar else "contig"
    if tiled:
        options["tile"] = (16, 16)
    if compression is not None and pixels.dtype.kind in "iu" and compression != "zstd":
        options["predictor"] = True  # horizontal differencing, as GDAL's PREDICTOR=2
    buffer = io.BytesIO()
    tifffile.imwrite(buffer, data, **options)
    return buffer.getvalue()


def write_raster(path: Path, pixels: np.ndarray, **options) -> Path:
    """`raster_bytes` written to ``path`` (its folder made)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(raster_bytes(pixels, **options))
    return path


def random_raster(rng: np.random.Generator, shape: tuple[int, int, int], dtype: str,
                  nodata: float | None = None, holes: float = 0.1) -> np.ndarray:
    """Pixels over most of ``dtype``'s range (floats: a wide signed spread), with a share
    ``holes`` of values set to ``nodata`` (NaN for floats when ``nodata`` is None)."""
    kind = np.dtype(dtype)
    if kind.kind == "f":
        pixels = rng.normal(-20.0, 1e3, shape).astype(dtype)
    else:
        info = np.iinfo(kind)
        pixels = rng.integers(info.min, info.max, shape, endpoint=True, dtype=kind)
    hole = rng.random(shape) < holes
    if nodata is not None:
        pixels[hole] = nodata
    elif kind.kind == "f":
        pixels[hole] = np.nan
    return pixels
