"""Decoding one image file into pixels, under an explicit mode policy.

The default policy, ``RGB``, is what torchvision's default loader feeds a model
(``Image.open(p).convert("RGB")``). ``L`` and ``RGBA`` convert likewise. ``keep``
keeps native channels and bit depth: 16-bit stays uint16 and float stays float.
No policy clips silently: a 16-bit or float image under an 8-bit policy is refused
with a pointer to ``--mode keep``. Only the first frame of a multi-frame file is used.
Pillow's ``LOAD_TRUNCATED_IMAGES`` is never set, so a truncated file is an error,
not an image padded with grey.

Two fast paths skip Pillow's per-file overhead where their pixels are provably Pillow's:
libjpeg-turbo (simplejpeg) for YCbCr and grey JPEGs, libpng (imagecodecs,
`normstats.sources.decoding.png_fast`) for plain 8-bit PNGs. Every other file, and every file
they are unsure of, is decoded by Pillow, which also words every error.
"""

from __future__ import annotations

import io
import os
import re
import warnings
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from PIL import Image, UnidentifiedImageError

from normstats.errors import OUT_OF_MEMORY_REASON, InvalidOptionError, UnreadableInputError

try:  # libjpeg-turbo without Pillow's per-image overhead: ~2-4x faster JPEG decoding
    import simplejpeg as _simplejpeg
except ImportError:  # pragma: no cover - a dependency, but decoding must work without it
    _simplejpeg = None
from normstats.sources.decoding.png_fast import decode_png_fast
from normstats.sources.decoding.transforms import apply_transforms, parse_size

__all__ = ["DecodePolicy", "MODES", "ALLOWED_FORMATS", "IMAGE_EXTENSIONS", "decode_file",
           "decode_bytes", "read_whole_file", "channel_names_for", "DecodedImage", "Scratch"]

MODES = ("RGB", "L", "RGBA", "keep")
ALLOWED_FORMATS = ("PNG", "JPEG", "BMP", "TIFF", "WEBP", "GIF", "PPM")
IMAGE_EXTENSIONS = frozenset({".png", ".jpg", ".jpeg", ".jpe", ".jfif", ".bmp", ".dib", ".tif",
                              ".tiff", ".webp", ".gif", ".ppm", ".pgm", ".pbm", ".pnm"})
#: Pillow's own default limit, used unless ``--max-pixels`` says otherwise.
DEFAULT_MAX_PIXELS = int(Image.MAX_IMAGE_PIXELS or 89_478_485)

_HIGH_DEPTH_PREFIXES = ("I", "F")  # I;16*, I (int32), F (float32)
_KEEP_AS_IS = {"L", "LA", "RGB", "RGBA", "CMYK"}
_NATIVE_NAMES = {"L": ("L",), "LA": ("L", "A"), "RGB": ("R", "G", "B"),
                 "RGBA": ("R", "G", "B", "A"), "CMYK": ("C", "M", "Y", "K")}


@dataclass(frozen=True)
class DecodePolicy:
    """How files become pixels: the mode policy and the decompression-bomb limit.

    Examples
    --------
    >>> DecodePolicy("RGB").mode
    'RGB'
    """

    mode: str = "RGB"
    max_pixels: int = DEFAULT_MAX_PIXELS
    #: torchvision ``Resize(resize)`` then ``CenterCrop(center_crop)`` after the mode
    #: conversion (`normstats.sources.decoding.transforms`): statistics of what the model sees.
    resize: int | None = None
    center_crop: int | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise InvalidOptionError(f"unknown mode {self.mode!r}; choose one of "
                                     f"{', '.join(MODES)}")
        if int(self.max_pixels) <= 0:
            raise InvalidOptionError(f"max_pixels must be positive, got {self.max_pixels}")
        parse_size(self.resize, "resize")
        parse_size(self.center_crop, "center_crop")

    def describe(self) -> str:
        """The mode and any preprocessing, for reports: ``RGB, Resize(256), CenterCrop(224)``."""
        steps = [self.mode]
        if self.resize is not None:
            steps.append(f"Resize({self.resize})")
        if self.center_crop is not None:
            steps.append(f"CenterCrop({self.center_crop})")
        return ", ".join(steps)


class DecodedImage(NamedTuple):
    """Pixels (H, W, C) of one file and the names of their channels."""

    pixels: np.ndarray
    channel_names: tuple[str, ...]


def channel_names_for(mode: str, channels: int) -> tuple[str, ...]:
    """Channel names of pixels decoded under ``mode`` with ``channels`` channels.

    Examples
    --------
    >>> channel_names_for("keep", 2)
    ('L', 'A')
    """
    if mode != "keep":
        return _NATIVE_NAMES[mode]
    return {1: ("L",), 2: ("L", "A"), 3: ("R", "G", "B"), 4: ("R", "G", "B", "A")}[channels]


class Scratch:
    """A reusable output buffer for decoding: each decode into it overwrites the last.

    Decoding a 256×256 image into fresh memory costs page faults on every call; a reader
    that reduces each image before decoding the next can hand the decoder one buffer.

    Examples
    --------
    >>> scratch = Scratch()
    >>> scratch.take(12).shape
    (12,)
    """

    def __init__(self) -> None:
        self._buffer = np.empty(0, dtype=np.uint8)

    def take(self, nbytes: int) -> np.ndarray:
        """A writable uint8 view of ``nbytes`` bytes (growing the buffer when needed)."""
        if self._buffer.size < nbytes:
            self._buffer = np.empty(nbytes, dtype=np.uint8)
        return self._buffer[:nbytes]


def decode_file(path: str, policy: DecodePolicy, name: str | None = None,
                scratch: Scratch | None = None, size_hint: int | None = None) -> DecodedImage:
    """Read and decode one file to an (H, W, C) array under ``policy``.

    With ``scratch``, the pixels may live in that buffer and stay valid only until the
    next decode into it. ``size_hint`` (the size the folder listing saw) lets the read
    take the whole file in one call; the file is read to its end whatever its size now.

    Raises
    ------
    UnreadableInputError
        With the file name and the reason in plain words.

    Examples
    --------
    >>> import tempfile, os
    >>> from PIL import Image
    >>> p = os.path.join(tempfile.mkdtemp(), "a.png")
    >>> Image.new("L", (3, 2), 7).save(p)
    >>> decoded = decode_file(p, DecodePolicy("RGB"))
    >>> decoded.pixels.shape, decoded.channel_names
    ((2, 3, 3), ('R', 'G', 'B'))
    """
    name = name or path
    try:
        data = read_whole_file(path, size_hint)
    except IsADirectoryError:
        raise UnreadableInputError("is a directory, not an image file", name) from None
    except FileNotFoundError:
        raise UnreadableInputError("file disappeared before it could be read", name) from None
    except PermissionError:
        raise UnreadableInputError("permission denied", name) from None
    except OSError as error:
        raise UnreadableInputError(f"cannot read file: {error.strerror or error}", name) from None
    except MemoryError:
        raise UnreadableInputError(OUT_OF_MEMORY_REASON, name) from None
    return decode_bytes(data, name, policy, scratch)


def read_whole_file(path: str, size_hint: int | None = None) -> bytes:
    """The bytes of ``path``, read to the end with raw ``os.read`` calls.

    For a folder of small files this halves the cost of reading (~4 µs instead of ~8 µs
    a file with ``open().read()``, which builds a buffered file object and asks for the
    size first); with the right ``size_hint`` it takes two system calls.

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "a.bin")
    >>> with open(path, "wb") as handle:
    ...     _ = handle.write(b"abc")
    >>> read_whole_file(path, size_hint=1)
    b'abc'
    """
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        parts, request = [], (1 << 16 if size_hint is None else size_hint + 1)
        while part := os.read(descriptor, request):
            parts.append(part)
            request = max(request, 1 << 16)
    finally:
        os.close(descriptor)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def decode_bytes(data: bytes, name: str, policy: DecodePolicy,
                 scratch: Scratch | None = None) -> DecodedImage:
    """Decode image bytes to (H, W, C) under ``policy``; errors name ``name``.

    Running out of memory is reported as what it is (`OUT_OF_MEMORY_REASON`), never as
    damage: the reason is transient, so the record cache does not keep it as the file's
    verdict and the next run decodes the file again.

    Examples
    --------
    >>> decode_bytes(b"", "a.png", DecodePolicy())
    Traceback (most recent call last):
    ...
    normstats.errors.UnreadableInputError: a.png: zero-byte file
    """
    try:
        return _decode_bytes(data, name, policy, scratch)
    except MemoryError:
        raise UnreadableInputError(OUT_OF_MEMORY_REASON, name) from None


def _decode_bytes(data: bytes, name: str, policy: DecodePolicy,
                  scratch: Scratch | None) -> DecodedImage:
    if not data:
        raise UnreadableInputError("zero-byte file", name)
    fast = decode_jpeg_fast(data, policy, scratch)
    if fast is None:
        fast = decode_png_fast(data, policy, scratch)
    if fast is not None:
        names = channel_names_for(policy.mode, fast.shape[2])
        return DecodedImage(_transformed(fast, names, policy, name), names)
    # Pillow reads its limit from a module global: set it for this decode and put the
    # caller's value back, so compute(max_pixels=...) never changes the limit the user's own
    # Image.open calls get afterwards. (_check_size enforces the policy whatever the global.)
    previous_limit = Image.MAX_IMAGE_PIXELS
    Image.MAX_IMAGE_PIXELS = int(policy.max_pixels)
    with warnings.catch_warnings():
        # Pillow's UserWarnings ("Corrupt EXIF data", "Truncated File Read") are multi-line
        # noise on stderr for every damaged file; the skip reason already says what failed.
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            image = Image.open(io.BytesIO(data), formats=ALLOWED_FORMATS)
            _check_size(image, policy, name)
            image.load()
        except UnreadableInputError:
            raise
        except UnidentifiedImageError:
            raise UnreadableInputError(_unidentified_reason(data), name) from None
        except MemoryError:
            raise  # the machine's limit, not the file's fault: worded by decode_bytes
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as error:
            # Pillow warns above the limit and errors above twice it, naming 2x the limit
            # in the second case; both are refused, with the limit the user can change.
            found = re.search(r"\((\d+) pixels\)", str(error))
            size = f"{found.group(1)} pixels" if found else "the image"
            raise UnreadableInputError(_bomb_reason(size, policy.max_pixels), name) from None
        except Exception as error:  # noqa: BLE001 - any decoder failure is this file's fault
            raise UnreadableInputError(f"truncated or corrupt image data ({error})",
                                       name) from None
        finally:
            Image.MAX_IMAGE_PIXELS = previous_limit
    pixels = _to_array(image, data, policy.mode, name)
    names = decoded_channel_names(image.mode, policy.mode, pixels.shape[2])
    return DecodedImage(_transformed(pixels, names, policy, name), names)


def _transformed(pixels: np.ndarray, names: tuple[str, ...], policy: DecodePolicy,
                 name: str) -> np.ndarray:
    """The pixels after the policy's resize and center crop (what the model sees)."""
    if policy.resize is None and policy.center_crop is None:
        return pixels
    return apply_transforms(pixels, names, policy.resize, policy.center_crop, name)


def decode_jpeg_fast(data: bytes, policy: DecodePolicy,
                     scratch: Scratch | None = None) -> np.ndarray | None:
    """Decode a JPEG with libjpeg-turbo (simplejpeg) where the pixels equal Pillow's.

    Both use libjpeg-turbo with the accurate integer IDCT and fancy upsampling, which
    gives identical pixels for YCbCr and grayscale JPEGs (tests check a corpus of
    subsamplings, progressive and odd sizes). Anything else returns None and goes
    through Pillow: CMYK/YCCK files, colour files under mode L (Pillow's luma
    conversion differs from the JPEG's Y channel), oversized or damaged files (so their
    errors come from Pillow, with its reasons).
    """
    if _simplejpeg is None or policy.mode not in ("RGB", "L") or data[:3] != b"\xff\xd8\xff":
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


def _check_size(image: Image.Image, policy: DecodePolicy, name: str) -> None:
    pixels = image.width * image.height
    if pixels > policy.max_pixels:
        raise UnreadableInputError(
            _bomb_reason(f"{image.width}x{image.height} = {pixels} pixels", policy.max_pixels),
            name)
    if pixels == 0:
        raise UnreadableInputError("image has no pixels", name)


def _bomb_reason(size: str, limit: int) -> str:
    return (f"decompression bomb: {size} exceeds the limit of {limit} pixels; raise it with "
            "--max-pixels if the file is trusted")


#: Signatures of the allowed formats: content that starts like one of them but that
#: Pillow cannot identify is a damaged file of that format, not "not an image" (a
#: truncated compressed TIFF loses its directory, which Pillow writes at the end). BMP's
#: two-byte "BM" is left out: plain text can start with it.
_SIGNATURES = ((b"\x89PNG\r\n\x1a\n", "PNG"), (b"\xff\xd8\xff", "JPEG"), (b"II*\x00", "TIFF"),
               (b"MM\x00*", "TIFF"), (b"GIF87a", "GIF"), (b"GIF89a", "GIF"))


def _unidentified_reason(data: bytes) -> str:
    for signature, fmt in _SIGNATURES:
        if data.startswith(signature):
            return f"truncated or corrupt {fmt} file (its header cannot be read)"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "truncated or corrupt WEBP file (its header cannot be read)"
    return f"not an image (content is none of {', '.join(ALLOWED_FORMATS)})"


def decoded_channel_names(image_mode: str, mode: str, channels: int) -> tuple[str, ...]:
    """Names of the channels `decode_bytes` returned for a file of Pillow mode ``image_mode``."""
    if mode == "keep" and image_mode == "CMYK":
        return _NATIVE_NAMES["CMYK"]
    return channel_names_for(mode, channels)


def _to_array(image: Image.Image, data: bytes, mode: str, name: str) -> np.ndarray:
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
