"""JPEG decoding with libjpeg-turbo (simplejpeg) where the pixels are exactly Pillow's."""

from __future__ import annotations

import numpy as np

from normstats.sources.decoding.policy import DecodePolicy, OutputBuffer

try:  # libjpeg-turbo without Pillow's per-image overhead: ~2-4x faster JPEG decoding
    import simplejpeg as _simplejpeg
except ImportError:  # pragma: no cover - a dependency, but decoding must work without it
    _simplejpeg = None

__all__ = ["decode_jpeg_fast"]


def decode_jpeg_fast(data: bytes, policy: DecodePolicy,
                     scratch: OutputBuffer | None = None) -> np.ndarray | None:
    """Decode a JPEG with libjpeg-turbo (simplejpeg) where the pixels equal Pillow's.

    Both use libjpeg-turbo with the accurate integer IDCT and fancy upsampling, which
    gives identical pixels for YCbCr and grayscale JPEGs (tests check a corpus of
    subsamplings, progressive and odd sizes). Anything else returns None and goes
    through Pillow: CMYK/YCCK files, colour files under mode L (Pillow's luma
    conversion differs from the JPEG's Y channel), oversized or damaged files (so their
    errors come from Pillow, with its reasons).
    """
    if (_simplejpeg is None or policy.mode not in ("RGB", "L")
            or not data.startswith(b"\xff\xd8\xff")):
        return None
    try:
        height, width, colorspace, _ = _simplejpeg.decode_jpeg_header(data)
        if height * width > policy.max_pixels or height * width == 0:
            return None
        if colorspace == "Gray":
            gray = _simplejpeg.decode_jpeg(data, colorspace="GRAY")
            return np.repeat(gray, 3, axis=2) if policy.mode == "RGB" else gray
        if colorspace == "YCbCr" and policy.mode == "RGB":
            buffer = None if scratch is None else scratch.take(height * width * 3)
            return _simplejpeg.decode_jpeg(data, colorspace="RGB", buffer=buffer)
    except Exception:  # noqa: BLE001 - Pillow decodes it again and names the problem
        return None
    return None
