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
