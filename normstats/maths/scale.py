"""The reported scale: what pixel values are divided by before they are reported.

Integer images are reported in [0, 1] (pixel value / the dtype's maximum), float images
and bool masks in raw units; a user-given scale overrides either. Rasters read through the
TIFF raster path (`normstats.sources.decoding.raster`) with more than 4 bands or samples
other than 8-bit are measurements, not colours: they are reported in raw units too (their
records say so, ``raw_units``). 8-bit rasters of up to 4 bands, 16-bit PNGs and arrays keep
the dtype rule.

Examples
--------
>>> default_scale("uint16"), parse_scale("255")
(65535.0, 255.0)
"""

from __future__ import annotations

import math

import numpy as np

from normstats.errors import InvalidOptionError

__all__ = ["default_scale", "parse_scale"]

def default_scale(dtype: str, raw_units: bool = False) -> float:
    """The divisor that maps pixel values to the [0, 1] scale: the dtype's maximum.

    Integer images use their dtype maximum (255 for uint8, 65535 for uint16); float
    images, bool masks and data in ``raw_units`` (rasters of measurements) are reported in
    raw units (1.0).

    Examples
    --------
    >>> default_scale("uint8"), default_scale("uint16"), default_scale("float32")
    (255.0, 65535.0, 1.0)
    >>> default_scale("uint16", raw_units=True)
    1.0
    """
    if raw_units:
        return 1.0
    kind = np.dtype(dtype)
    if kind != np.bool_ and np.issubdtype(kind, np.integer):
        return float(np.iinfo(kind).max)
    return 1.0



def parse_scale(scale: float | str) -> float:
    """Validate a user-given scale: a positive, finite number.

    Examples
    --------
    >>> parse_scale(255)
    255.0
    """
    try:
        value = float(scale)
    except (TypeError, ValueError):
        raise InvalidOptionError(f"scale must be a number, got {scale!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise InvalidOptionError(f"scale must be positive and finite, got {scale!r}")
    return value
