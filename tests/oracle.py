"""Exact oracles written with Python ints and fractions.Fraction, independent of normstats."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np


def exact_stats(images: list[np.ndarray], scale: int | float = 1) -> dict[str, list[float]]:
    """Every DatasetStats variant of (H, W, C) images, from exact rational arithmetic.

    Pooled mean and variance are exact fractions rounded once (normstats must match them
    bit for bit); per-image stds go through math.sqrt of the exactly rounded variance.
    """
    channels = images[0].shape[2]
    scale = Fraction(scale)
    out: dict[str, list[float]] = {k: [] for k in (
        "mean", "std", "std_ddof1", "per_image_std", "per_image_std_ddof1",
        "rms_per_image_std", "min", "max")}
    for c in range(channels):
        values = [[Fraction(int(v)) if np.issubdtype(img.dtype, np.integer) else Fraction(float(v))
                   for v in img[:, :, c].ravel().tolist()] for img in images]
        everything = [v for image in values for v in image]
        n = len(everything)
        mean = sum(everything) / n
        m2 = sum((v - mean) ** 2 for v in everything)
        out["mean"].append(float(mean / scale))
        out["std"].append(math.sqrt(float(m2 / n / scale**2)))
        out["std_ddof1"].append(math.sqrt(float(m2 / (n - 1) / scale**2)))
        variances = [_variance(image) for image in values]
        out["per_image_std"].append(
            float(sum(Fraction(math.sqrt(float(v / scale**2))) for v, _ in variances)
                  / len(values)))
        sample = [(m / (k - 1)) for (m, k) in ((v * k, k) for v, k in variances) if k > 1]
        out["per_image_std_ddof1"].append(
            float(sum(Fraction(math.sqrt(float(s / scale**2))) for s in sample) / len(sample)))
        out["rms_per_image_std"].append(
            math.sqrt(float(sum(v for v, _ in variances) / len(values) / scale**2)))
        out["min"].append(float(min(everything) / scale))
        out["max"].append(float(max(everything) / scale))
    return out


def integer_mean_std(images: list[np.ndarray], scale: int) -> tuple[list[float], list[float]]:
    """Pooled mean and std per channel of integer (H, W, C) images from Python-int sums of x
    and x² over every pixel: mean = Σx / n, variance = (n·Σx² − (Σx)²) / n², each rounded
    once (what normstats must give bit for bit)."""
    means, stds = [], []
    for c in range(images[0].shape[2]):
        values = [v for image in images for v in image[:, :, c].ravel().tolist()]
        n, total, squares = len(values), sum(values), sum(v * v for v in values)
        means.append(float(Fraction(total, n * scale)))
        stds.append(math.sqrt(float(Fraction(n * squares - total * total, n * n * scale**2))))
    return means, stds


def _variance(values: list[Fraction]) -> tuple[Fraction, int]:
    n = len(values)
    mean = sum(values) / n
    return sum((v - mean) ** 2 for v in values) / n, n


def assert_matches_oracle(stats, images, scale, per_image_rtol: float = 4e-16) -> None:
    """Pooled values and extremes bit-exact; per-image averages to a few ulps."""
    expected = exact_stats(images, scale)
    for name in ("mean", "std", "std_ddof1", "min", "max"):
        assert list(getattr(stats, name)) == expected[name], name
    for name in ("per_image_std", "per_image_std_ddof1", "rms_per_image_std"):
        np.testing.assert_allclose(getattr(stats, name), expected[name], rtol=per_image_rtol,
                                   atol=0, err_msg=name)
    assert stats.images == len(images)
    assert stats.pixels_per_channel == sum(img.shape[0] * img.shape[1] for img in images)


NUMERIC_FIELDS = ("channels", "mean", "std", "std_ddof1", "per_image_std", "per_image_std_ddof1",
                  "rms_per_image_std", "min", "max", "images", "pixels_per_channel", "dtype",
                  "scale", "skipped")


def numbers(stats) -> dict:
    """The statistics of a DatasetStats, without where they came from (source, mode)."""
    return {name: getattr(stats, name) for name in NUMERIC_FIELDS}


def exact_mean_image(images: np.ndarray, scale: int | float = 1) -> tuple[np.ndarray, np.ndarray]:
    """The mean image and per-position population std of (N, H, W, C) images, from exact
    rational arithmetic: the mean is the exact fraction rounded once, the std the square
    root of the exactly rounded variance (as the pooled std)."""
    scale = Fraction(scale)
    count = len(images)
    values = images.reshape(count, -1)
    means, stds = [], []
    for column in values.T:
        exact = [Fraction(v) for v in column.tolist()]
        total = sum(exact, Fraction(0))
        mean = total / count
        variance = sum(((v - mean) ** 2 for v in exact), Fraction(0)) / count
        means.append(float(mean / scale))
        stds.append(math.sqrt(float(variance / (scale * scale))))
    shape = images.shape[1:]
    return np.array(means).reshape(shape), np.array(stds).reshape(shape)


def exact_covariance(images: list[np.ndarray], scale: int | float = 1,
                     ddof: int = 0) -> list[list[float]]:
    """The pooled C×C channel covariance of (H, W, C) images over every pixel, from exact
    fractions of the pixel values, each entry rounded once."""
    channels = images[0].shape[2]
    pixels = np.concatenate([image.reshape(-1, channels) for image in images])
    columns = [[Fraction(v) for v in pixels[:, c].tolist()] for c in range(channels)]
    n = len(columns[0])
    means = [sum(column) / n for column in columns]
    factor = Fraction(scale) ** 2
    return [[float(sum((a - means[c]) * (b - means[d]) for a, b in zip(columns[c], columns[d]))
                   / (n - ddof) / factor) for d in range(channels)] for c in range(channels)]


def exact_histogram(columns: list[list[int]], dtype: str) -> tuple[int, list[list[int]], str]:
    """(offset, counts, dtype) of a histogram of each channel's values, in Python ints:
    bins from the smallest to the largest value of any channel."""
    seen = [v for column in columns for v in column]
    low, high = (min(seen), max(seen)) if seen else (0, 0)
    return low, [[column.count(v) for v in range(low, high + 1)] for column in columns], dtype
