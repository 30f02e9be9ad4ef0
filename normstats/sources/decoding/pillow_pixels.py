"""Pillow's side of decoding: size checks, plain-words reasons, and pixels under a mode.

No policy clips silently: a 16-bit or float image under an 8-bit policy is refused with a
pointer to ``--mode keep``. Pillow's ``LOAD_TRUNCATED_IMAGES`` is never set, so a truncated
file is an error, not an image padded with grey.
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING

import numpy as np

from normstats.errors import RefusedInputError, TransientInputError, UnreadableInputError
from normstats.sources.decoding.policy import (
    ALLOWED_FORMATS,
    NATIVE_NAMES,
    DecodePolicy,
    channel_names_for,
)
from normstats.sources.decoding.tiff_header import describe_layout, tiff_layout

if TYPE_CHECKING:  # the images come opened: a raster or a cached run never loads Pillow's
    from PIL import Image

__all__ = ["check_size", "memory_reason", "machine_memory", "bomb_reason",
           "unidentified_reason", "decoded_channel_names", "pixels_under_mode"]

_HIGH_DEPTH_PREFIXES = ("I", "F")  # I;16*, I (int32), F (float32)
_KEEP_AS_IS = {"L", "LA", "RGB", "RGBA", "CMYK"}


def check_size(image: Image.Image, policy: DecodePolicy, name: str) -> None:
    """Refuse, from the header, an image over the pixel limit, without pixels, or larger
    than this machine's memory (an image under a raised ``--max-pixels`` can still claim
    2³¹ x 2³¹ pixels: Pillow and numpy would fail on it in ways that name no file)."""
    pixels = image.width * image.height
    if pixels > policy.max_pixels:
        raise RefusedInputError(
            bomb_reason(f"{image.width}x{image.height} = {pixels} pixels", policy.max_pixels),
            name)
    if pixels == 0:
        raise UnreadableInputError("image has no pixels", name)
    reason = memory_reason(f"{image.width}x{image.height} = {pixels} pixels",
                           pixels * len(image.getbands()))
    if reason is not None:
        raise TransientInputError(reason, name)


def memory_reason(size: str, needed: int) -> str | None:
    """Why an image of ``size`` needing ``needed`` bytes is not decoded here, or None.

    Raised as a `TransientInputError`: the cache does not keep it, as the same file may
    be decoded on a larger machine.

    Examples
    --------
    >>> memory_reason("3x2 = 6 pixels", 18) is None
    True
    """
    memory = machine_memory()
    if memory is None or needed <= memory:
        return None
    return (f"out of memory: its {size} need at least {needed:,} bytes, more than this "
            f"machine's {memory:,} bytes of memory (the image is within --max-pixels, but "
            "cannot be decoded here)")


@functools.cache
def machine_memory() -> int | None:
    """Bytes of physical memory, or None where the system does not say.

    Examples
    --------
    >>> machine_memory() is None or machine_memory() > 0
    True
    """
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # not POSIX, or not known
        return None


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
    """Why Pillow could not identify ``data``: damage, a TIFF layout it lacks, or no image.

    Examples
    --------
    >>> unidentified_reason(b"\\x89PNG\\r\\n\\x1a\\n")
    'truncated or corrupt PNG file (its header cannot be read)'
    """
    for signature, fmt in _SIGNATURES:
        if data.startswith(signature):
            layout = tiff_layout(data) if fmt == "TIFF" else None
            if layout is not None:  # its directory reads well: a layout Pillow lacks
                return f"a TIFF Pillow cannot decode ({describe_layout(layout)})"
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
        return _hwc(np.asarray(image if image.mode == mode else _converted(image, mode)))
    return _hwc(_native_pixels(image, data, name))


def _converted(image: Image.Image, mode: str) -> Image.Image:
    """``image.convert(mode)``, without Pillow's warning about palette transparency.

    Converting a palette image whose transparency is a byte per entry to L or RGB,
    Pillow warns ("Palette images with Transparency expressed in bytes should be
    converted to RGBA images") and drops the transparency: its pixels are those of the
    same image without it, so it is dropped first and the warning, which names no file,
    is never raised (the pixels stay exactly ``convert``'s, what torchvision's loader sees).
    """
    if (image.mode == "P" and mode in ("L", "RGB")
            and isinstance(image.info.get("transparency"), bytes)):
        del image.info["transparency"]
    return image.convert(mode)


def _native_pixels(image: Image.Image, data: bytes, name: str) -> np.ndarray:
    reduced = _reduced_depth(image, data)
    if reduced is not None:
        raise UnreadableInputError(
            f"{reduced}: Pillow can only decode it to 8 bits, and --mode keep "
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


def _reduced_depth(image: Image.Image, data: bytes) -> str | None:
    """What the file is, when Pillow opened it as 8-bit pixels of deeper samples: a PNG
    whose IHDR says 16 bits and colour type RGB or RGBA, or a TIFF of more than 8 bits
    per sample that Pillow opened in an 8-bit mode (16-bit RGB becomes mode RGB)."""
    if (data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 26
            and data[24] == 16 and data[25] in (2, 6)):
        return "16-bit colour PNG"
    if image.format == "TIFF" and image.mode in _KEEP_AS_IS:
        layout = tiff_layout(data)
        if layout is not None and max(layout[1]) > 8:
            return f"{max(layout[1])}-bit colour TIFF"
    return None


def _describe(image: Image.Image) -> str:
    depth = {"F": "32-bit float", "I": "32-bit integer"}.get(image.mode, "16-bit")
    return f"{depth} image (Pillow mode {image.mode})"


def _hwc(pixels: np.ndarray) -> np.ndarray:
    return pixels[:, :, None] if pixels.ndim == 2 else pixels
