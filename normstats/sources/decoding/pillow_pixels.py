"""Pillow's side of decoding: size checks, plain-words reasons, and pixels under a mode.

No policy clips silently: a 16-bit or float image under an 8-bit policy is refused with a
pointer to ``--mode keep``. Pillow's ``LOAD_TRUNCATED_IMAGES`` is never set, so a truncated
file is an error, not an image padded with grey.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

from normstats.errors import UnreadableInputError
from normstats.sources.decoding.policy import (
    ALLOWED_FORMATS,
    NATIVE_NAMES,
    DecodePolicy,
    channel_names_for,
)

__all__ = ["check_size", "bomb_reason", "unidentified_reason", "decoded_channel_names",
           "pixels_under_mode"]

_HIGH_DEPTH_PREFIXES = ("I", "F")  # I;16*, I (int32), F (float32)
_KEEP_AS_IS = {"L", "LA", "RGB", "RGBA", "CMYK"}
_KEEP_AS_IS = {"L", "LA", "RGB", "RGBA", "CMYK"}


def check_size(image: Image.Image, policy: DecodePolicy, name: str) -> None:
    pixels = image.width * image.height
    if pixels > policy.max_pixels:
        raise UnreadableInputError(
            bomb_reason(f"{image.width}x{image.height} = {pixels} pixels", policy.max_pixels),
            name)
    if pixels == 0:
        raise UnreadableInputError("image has no pixels", name)


def bomb_reason(size: str, limit: int) -> str:
    return (f"decompression bomb: {size} exceeds the limit of {limit} pixels; raise it with "
            "--max-pixels if the file is trusted")


#: Signatures of the allowed formats: content that starts like one of them but that
#: Pillow cannot identify is a damaged file of that format, not "not an image" (a
#: truncated compressed TIFF loses its directory, which Pillow writes at the end). BMP's
#: two-byte "BM" is left out: plain text can start with it.
_SIGNATURES = ((b"\x89PNG\r\n\x1a\n", "PNG"), (b"\xff\xd8\xff", "JPEG"), (b"II*\x00", "TIFF"),
               (b"MM\x00*", "TIFF"), (b"GIF87a", "GIF"), (b"GIF89a", "GIF"))


def unidentified_reason(data: bytes) -> str:
    for signature, fmt in _SIGNATURES:
        if data.startswith(signature):
            return f"truncated or corrupt {fmt} file (its header cannot be read)"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "truncated or corrupt WEBP file (its header cannot be read)"
    return f"not an image (content is none of {', '.join(ALLOWED_FORMATS)})"


def decoded_channel_names(image_mode: str, mode: str, channels: int) -> tuple[str, ...]:
    """Names of the channels `decode_bytes` returned for a file of Pillow mode ``image_mode``."""
    if mode == "keep" and image_mode == "CMYK":
        return NATIVE_NAMES["CMYK"]
    return channel_names_for(mode, channels)


def pixels_under_mode(image: Image.Image, data: bytes, mode: str, name: str) -> np.ndarray:
    if mode != "keep":
        if image.mode.startswith(_HIGH_DEPTH_PREFIXES):
            raise UnreadableInputError(
                f"{_describe(image)}: converting it to {mode} would clip it to 8 bits; "
                "use --mode keep to compute it at its native depth", name)
        # convert() to the same mode would only copy the pixels
        return _hwc(np.asarray(image if image.mode == mode else image.convert(mode)))
    return _hwc(_native_pixels(image, data, name))


def _native_pixels(image: Image.Image, data: bytes, name: str) -> np.ndarray:
    if _is_16bit_color_png(data):
        raise UnreadableInputError(
            "16-bit colour PNG: Pillow can only decode it to 8 bits, and --mode keep "
            "never reduces bit depth silently; use --mode RGB for the 8-bit pixels a "
            "Pillow-based loader sees", name)
    if image.mode in _KEEP_AS_IS:
        return np.asarray(image)
    if image.mode.startswith("I;16"):
        return np.asarray(image).astype(np.uint16)
    if image.mode == "I":
        pixels = np.asarray(image)
        if pixels.min() < 0 or pixels.max() > 65535:
            raise UnreadableInputError("32-bit integer image outside the 16-bit range is not "
                                       "supported exactly", name)
        return pixels.astype(np.uint16)
    if image.mode == "F":
        return np.asarray(image, dtype=np.float32)
    if image.mode in ("P", "PA"):
        has_alpha = image.mode == "PA" or "transparency" in image.info
        return np.asarray(image.convert("RGBA" if has_alpha else "RGB"))
    if image.mode == "1":
        return np.asarray(image.convert("L"))
    return np.asarray(image.convert("RGB"))


def _is_16bit_color_png(data: bytes) -> bool:
    """True for a PNG whose IHDR says 16 bits per sample and colour type RGB or RGBA."""
    return (data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 26
            and data[24] == 16 and data[25] in (2, 6))


def _describe(image: Image.Image) -> str:
    depth = {"F": "32-bit float", "I": "32-bit integer"}.get(image.mode, "16-bit")
    return f"{depth} image (Pillow mode {image.mode})"


def _hwc(pixels: np.ndarray) -> np.ndarray:
    return pixels[:, :, None] if pixels.ndim == 2 else pixels
