"""TIFF rasters written with tifffile for the tests: any band count, dtype and layout, with
masks as GDAL keeps them (a mask page in the file, a ``.msk`` sidecar)."""

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
                 photometric: str = "minisblack", valid: np.ndarray | None = None,
                 mask_bits: int = 1, overviews: bool = False) -> bytes:
    """One (H, W, C) raster as a TIFF: band-sequential when ``planar``, in 16×16 tiles when
    ``tiled``, with a GDAL_NODATA tag and GDAL band descriptions when given. With ``valid``
    (bool (H, W) or (H, W, k), True where there is data), a mask page follows the image as
    ``GDAL_TIFF_INTERNAL_MASK=YES`` writes it (`mask_page`); with ``overviews``, a half-size
    overview and its mask come between them, as in a cloud-optimized layout."""
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
               "extratags": extratags}
    if bands > 1:
        options["planarconfig"] = "separate" if planar else "contig"
    if tiled:
        options["tile"] = (16, 16)
    if compression is not None and pixels.dtype.kind in "iu" and compression != "zstd":
        options["predictor"] = True  # horizontal differencing, as GDAL's PREDICTOR=2
    buffer = io.BytesIO()
    with tifffile.TiffWriter(buffer, bigtiff=bigtiff) as writer:
        writer.write(data, **options)
        if overviews:
            writer.write(data[:, ::2, ::2] if planar and bands > 1 else data[::2, ::2],
                         **(options | {"extratags": [], "subfiletype": 1}))
            if valid is not None:
                mask, mask_options = mask_page(valid[::2, ::2], mask_bits, subfiletype=5)
                writer.write(mask, **mask_options)
        if valid is not None:
            mask, mask_options = mask_page(valid, mask_bits, compression=compression)
            writer.write(mask, **mask_options)
    return buffer.getvalue()


def mask_page(valid: np.ndarray, bits: int = 1, subfiletype: int = 4,
              compression: str | None = "deflate") -> tuple[np.ndarray, dict]:
    """The data and `tifffile.TiffWriter.write` options of a mask page as GDAL writes one:
    1-bit (photometric MASK) or 8-bit (0 or 255), band-sequential when it has several bands,
    NewSubfileType 4 (5 for an overview's mask; 0 for a sidecar's page)."""
    valid = np.asarray(valid, bool)
    data = valid if bits == 1 else valid.astype(np.uint8) * 255
    options = {"photometric": "mask" if bits == 1 and valid.ndim == 2 else "minisblack",
               "subfiletype": subfiletype, "compression": compression}
    if subfiletype & 4 and (bits != 1 or valid.ndim == 3):  # tifffile writes 1-bit ones only
        del options["subfiletype"]
        options["extratags"] = [(254, 4, 1, subfiletype, True)]
    if valid.ndim == 3:
        data = np.moveaxis(data, -1, 0)
        options["planarconfig"] = "separate"
    return data, options


def write_sidecar(image: Path, valid: np.ndarray, bits: int = 8, suffix: str = ".msk") -> Path:
    """GDAL's external mask of the file ``image``: ``<image>.msk``, one page of one band per
    band of ``valid`` (bool (H, W) or (H, W, k), True where there is data)."""
    data, options = mask_page(valid, bits, subfiletype=0)
    path = image.with_name(image.name + suffix)
    tifffile.imwrite(path, data, **options)
    return path


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
