"""The peers normstats is measured against, each computing the same statistics.

Every peer returns (mean, pooled std, per-image std) per channel for uint8 NHWC images
(the raster peer: of the bands of GeoTIFF tiles), so the benchmark can check that they
agree before it compares their speed.
"""

from __future__ import annotations

import os
from multiprocessing import get_context
from pathlib import Path

import numpy as np
from PIL import Image


def numpy_float64(x: np.ndarray) -> tuple:
    """The textbook version: convert to float64, then mean/std over axes (one thread, a
    float64 copy of the whole array). Shown as what is commonly written, not as numpy's
    best: that is `numpy_blocked`."""
    xf = x.astype(np.float64) / 255
    return xf.mean(axis=(0, 1, 2)), xf.std(axis=(0, 1, 2)), xf.std(axis=(1, 2)).mean(axis=0)


def torch_cpu(x: np.ndarray) -> tuple:
    """The textbook PyTorch CPU version: ``float()`` then mean/std pooled and per image
    (2 threads). Commonly written; torch's best is `torch_blocked`."""
    import torch

    torch.set_num_threads(2)
    t = torch.from_numpy(x).float().div(255)
    per_image = t.std(dim=(1, 2), unbiased=False).mean(dim=0)
    return (t.mean(dim=(0, 1, 2)).numpy(), t.std(dim=(0, 1, 2), unbiased=False).numpy(),
            per_image.numpy())


def _blocked_sums(x: np.ndarray, start: int, stop: int, block: int) -> tuple:
    """Per-image Σx and Σx² (float64) of images ``start:stop``, ``block`` images at a time."""
    n, channels = stop - start, x.shape[-1]
    sums, squares = np.empty((n, channels)), np.empty((n, channels))
    pixels = x.shape[1] * x.shape[2]
    ones = np.ones(pixels)
    for a in range(start, stop, block):
        b = min(a + block, stop)
        xf = x[a:b].reshape(b - a, pixels, channels).astype(np.float64)
        sums[a - start:b - start] = ones @ xf            # (pixels,) @ (k, pixels, C): BLAS
        squares[a - start:b - start] = ones @ (xf * xf)
    return sums, squares


def _from_image_sums(sums: np.ndarray, squares: np.ndarray, pixels: int) -> tuple:
    """Pooled mean and std and the mean per-image std, in [0, 1], from per-image sums."""
    n = len(sums)
    mean = sums.sum(axis=0) / (n * pixels)
    pooled = np.sqrt(squares.sum(axis=0) / (n * pixels) - mean**2)
    image_mean = sums / pixels
    per_image = np.sqrt(np.maximum(squares / pixels - image_mean**2, 0)).mean(axis=0)
    return mean / 255, pooled / 255, per_image / 255


def numpy_blocked(x: np.ndarray, threads: int = 2, block: int = 256) -> tuple:
    """A competent numpy peer: float64 blocks of 256 images, Σx and Σx² per image as one
    matrix product each (``ones @ x``), the halves of the array on two threads (numpy
    releases the GIL). What a numpy user who cares about speed writes: no float64 copy of
    the whole array, BLAS for the reductions, both cores; exact on this data (every sum is
    an integer below 2**53)."""
    from concurrent.futures import ThreadPoolExecutor

    bounds = np.linspace(0, len(x), threads + 1).astype(int)
    with ThreadPoolExecutor(threads) as pool:
        parts = list(pool.map(lambda ab: _blocked_sums(x, ab[0], ab[1], block),
                              zip(bounds[:-1], bounds[1:])))
    sums = np.concatenate([p[0] for p in parts])
    squares = np.concatenate([p[1] for p in parts])
    return _from_image_sums(sums, squares, x.shape[1] * x.shape[2])


def torch_blocked(x: np.ndarray, threads: int = 2, block: int = 256) -> tuple:
    """A competent PyTorch CPU peer: float64 blocks of 256 images, Σx and Σx² per image as
    batched matrix products (``ones @ x``) on torch's own two intra-op threads."""
    import torch

    torch.set_num_threads(threads)
    pixels, channels = x.shape[1] * x.shape[2], x.shape[-1]
    t = torch.from_numpy(x).reshape(len(x), pixels, channels)
    ones = torch.ones(pixels, dtype=torch.float64)
    sums, squares = [], []
    for a in range(0, len(x), block):  # (k·C, pixels) rows, contiguous: one matrix-vector
        xf = t[a:a + block].to(torch.float64).transpose(1, 2).reshape(-1, pixels)
        sums.append((xf @ ones).reshape(-1, channels))
        squares.append(((xf * xf) @ ones).reshape(-1, channels))
    return _from_image_sums(torch.cat(sums).numpy(), torch.cat(squares).numpy(), pixels)


def dask_array(x: np.ndarray) -> tuple:
    """dask.array mean/std on the same array, chunked by images (threads)."""
    import dask
    import dask.array as da

    d = da.from_array(x, chunks=(5000, -1, -1, -1), name=False).astype(np.float64) / 255
    return dask.compute(d.mean(axis=(0, 1, 2)), d.std(axis=(0, 1, 2)),
                        d.std(axis=(1, 2)).mean(axis=0), scheduler="threads", num_workers=2)


def sklearn_scaler(x: np.ndarray) -> tuple:
    """scikit-learn StandardScaler.partial_fit on (N·H·W, C) batches (pooled only)."""
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler()
    pixels = x.reshape(-1, x.shape[-1])
    for start in range(0, len(pixels), 1 << 20):
        scaler.partial_fit(pixels[start:start + (1 << 20)] / 255.0)
    return scaler.mean_, scaler.scale_, None


def forum_recipe(files: list[Path]) -> tuple:
    """The common PyTorch-forum loop: PIL open, float in [0, 1], sum and sum of squares.

    One process and one torch thread: intra-op threads on tiny per-image tensors only
    contend with each other (on a loaded 2-core machine they made it 100x slower).
    """
    import torch

    torch.set_num_threads(1)
    total = torch.zeros(3, dtype=torch.float64)
    total_sq = torch.zeros(3, dtype=torch.float64)
    count = 0
    for path in files:
        with Image.open(path) as image:
            t = torch.from_numpy(np.array(image.convert("RGB"))).float().div(255)
        total += t.sum(dim=(0, 1)).double()
        total_sq += (t * t).sum(dim=(0, 1)).double()
        count += t.shape[0] * t.shape[1]
    mean = total / count
    return mean.numpy(), (total_sq / count - mean**2).sqrt().numpy(), None


def _pool_chunk(paths: list[str]) -> tuple:
    total = np.zeros(3)
    total_sq = np.zeros(3)
    count = 0
    for path in paths:
        with Image.open(path) as image:
            x = np.asarray(image.convert("RGB"), dtype=np.float64) / 255
        total += x.sum(axis=(0, 1))
        total_sq += (x * x).sum(axis=(0, 1))
        count += x.shape[0] * x.shape[1]
    return total, total_sq, count


def _decode_chunk(paths: list[str]) -> int:
    pixels = 0
    for path in paths:
        with Image.open(path) as image:
            pixels += np.asarray(image.convert("RGB")).shape[0]
    return pixels


def _decode_chunk_normstats(paths: list[str]) -> int:
    from normstats.sources.decoding.decode import Scratch, decode_file
    from normstats.sources.decoding.policy import DecodePolicy

    policy, scratch = DecodePolicy("RGB"), Scratch()  # one reused buffer, as normstats does
    return sum(decode_file(path, policy, scratch=scratch).pixels.shape[0] for path in paths)


def _chunks(files: list[Path], size: int) -> list[list[str]]:
    """Tasks of ``size`` files, handed to the pool one at a time (``imap_unordered``):
    ``Pool.map`` batches len/4·workers tasks together and can leave a worker idle at the
    end."""
    return [[os.fspath(p) for p in files[i:i + size]] for i in range(0, len(files), size)]


def pool_pillow_numpy(files: list[Path], workers: int = 2) -> tuple:
    """multiprocessing.Pool of Pillow decode + numpy float64 sums, 100 files a task."""
    with get_context("fork").Pool(workers) as pool:
        parts = list(pool.imap_unordered(_pool_chunk, _chunks(files, 100)))
    total = sum(p[0] for p in parts)
    total_sq = sum(p[1] for p in parts)
    count = sum(p[2] for p in parts)
    mean = total / count
    return mean, np.sqrt(total_sq / count - mean**2), None


def pool_decode_only(files: list[Path], workers: int = 2) -> tuple:
    """The same pool decoding with Pillow and computing nothing: the speed of decoding."""
    with get_context("fork").Pool(workers) as pool:
        list(pool.imap_unordered(_decode_chunk, _chunks(files, 100)))
    return None, None, None


def pool_decode_only_normstats(files: list[Path], workers: int = 2) -> tuple:
    """Pool decoding with normstats' own decoder (libjpeg-turbo where Pillow-identical)."""
    with get_context("fork").Pool(workers) as pool:
        list(pool.imap_unordered(_decode_chunk_normstats, _chunks(files, 200)))
    return None, None, None


def torchgeo_style(folder: str | Path) -> tuple:
    """What the statistics scripts of remote-sensing projects do with a folder of GeoTIFF
    tiles (torchgeo's own is a rasterio loop "about 10 hrs to run on 1M images"): per file,
    read the bands (bands, H, W), mask the nodata as a numpy masked array, as rasterio's
    ``read(masked=True)`` gives them, and add float64 sums, sums of squares and valid
    counts per band; one process. A fair representative: the same reads of the same files
    with tifffile (no GDAL here; rasterio adds its own overhead per file), the idiom those
    scripts use, and on 256×256×13 tiles its time per tile matches that estimate (~36 ms).
    Returns (mean, pooled std, None) per band.
    """
    import tifffile

    total = total_sq = count = 0.0
    for path in sorted(Path(folder).glob("*.tif")):
        with tifffile.TiffFile(path) as tiff:
            page = tiff.pages.first
            tag = page.tags.get(42113)
            bands = np.moveaxis(page.asarray(), -1, 0).astype(np.float64)
        masked = np.ma.masked_equal(bands, float(tag.value)) if tag is not None else \
            np.ma.masked_invalid(bands)
        total = total + masked.sum(axis=(1, 2)).filled(0.0)
        total_sq = total_sq + (masked * masked).sum(axis=(1, 2)).filled(0.0)
        count = count + masked.count(axis=(1, 2))
    mean = total / count
    return mean, np.sqrt(total_sq / count - mean**2), None
